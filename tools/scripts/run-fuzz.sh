#!/usr/bin/env bash
# Runs every libFuzzer target of a HEADROOM_FUZZ build (the asan preset) for a bounded time, with seed corpora
# made from data/ and tests/data/, prints per target the executions run and the crashes found, and fails on
# any crash, leak, timeout or out-of-memory.
#
#   tools/scripts/run-fuzz.sh [BUILD_DIR [TARGET...]]     BUILD_DIR defaults to build-asan, TARGET to all of them
#
# FUZZ_SECONDS  time per target (default 30)       FUZZ_JOBS     targets run at once (default 2)
# FUZZ_TIMEOUT  seconds one input may take (30)    FUZZ_WORK     corpora, logs, crash files (BUILD_DIR/fuzz)
# A crash leaves its input in FUZZ_WORK/TARGET/; `BUILD_DIR/bin/TARGET FILE` replays it.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build-asan}" && pwd)
shift $(($# > 0 ? 1 : 0))
targets=("$@")
((${#targets[@]})) || targets=(fuzz_model_spec fuzz_gpu_spec fuzz_kernel_curves fuzz_cluster_spec fuzz_profile fuzz_nccl_tests_log fuzz_measured_runs fuzz_launch_script fuzz_nemo_config fuzz_nemo_recipe fuzz_torchtitan_registry fuzz_tokenizer_file fuzz_cli)
seconds=${FUZZ_SECONDS:-30}
jobs=${FUZZ_JOBS:-2}
timeout=${FUZZ_TIMEOUT:-30}
work=${FUZZ_WORK:-$build/fuzz}
data=$root/data

# Seeds: the shipped specs, profiles and sample logs, copied fresh on every run (the corpus beside them grows).
seed() {
  local t=$1 dir=$work/$1/seeds
  rm -rf "$dir" && mkdir -p "$dir"
  case $t in
    fuzz_model_spec)
      cp "$data"/models/*.json "$dir"/
      # Hugging Face config.json shapes (SpecLibrary::model's other branch): a Llama and a GPT-2.
      printf '%s\n' '{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,' \
        '"num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072,' \
        '"hidden_act": "silu", "tie_word_embeddings": false, "_name_or_path": "meta-llama/Llama-3.1-8B"}' >"$dir"/hf-llama.json
      printf '%s\n' '{"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,' \
        '"n_positions": 1024, "activation_function": "gelu_new"}' >"$dir"/hf-gpt2.json
      # GPT-NeoX's parallel residual (Pythia-6.9B) and group-limited routing (DeepSeek-V3's n_group, topk_group).
      printf '%s\n' '{"model_type": "gpt_neox", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,' \
        '"intermediate_size": 16384, "vocab_size": 50432, "max_position_embeddings": 2048, "hidden_act": "gelu",' \
        '"rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": true, "tie_word_embeddings": false}' \
        >"$dir"/hf-gpt-neox.json
      printf '%s\n' '{"model_type": "deepseek_v3", "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,' \
        '"intermediate_size": 2048, "moe_intermediate_size": 256, "n_routed_experts": 64, "num_experts_per_tok": 8,' \
        '"n_group": 8, "topk_group": 4, "topk_method": "noaux_tc", "vocab_size": 32000}' >"$dir"/hf-grouped.json
      # Falcon-7B (one KV head, one norm shared by its parallel attention and MLP), Falcon-40B's new architecture, phi-1.5.
      printf '%s\n' '{"model_type": "falcon", "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,' \
        '"vocab_size": 65024, "multi_query": true, "parallel_attn": true, "bias": false}' >"$dir"/hf-falcon.json
      printf '%s\n' '{"model_type": "falcon", "hidden_size": 8192, "num_hidden_layers": 60, "num_attention_heads": 128,' \
        '"vocab_size": 65024, "new_decoder_architecture": true, "num_kv_heads": 8, "alibi": false}' >"$dir"/hf-falcon40.json
      printf '%s\n' '{"model_type": "phi", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 32,' \
        '"intermediate_size": 8192, "vocab_size": 51200, "hidden_act": "gelu_new", "partial_rotary_factor": 0.5,' \
        '"qk_layernorm": false, "resid_pdrop": 0.0, "tie_word_embeddings": false}' >"$dir"/hf-phi.json
      # Refused: a model type headroom does not model (BLOOM), none, and top-2 routing over no experts.
      printf '%s\n' '{"model_type": "bloom", "hidden_size": 14336, "n_layer": 70, "n_head": 112,' \
        '"vocab_size": 250880, "apply_residual_connection_post_layernorm": false}' >"$dir"/hf-bloom.json
      printf '%s\n' '{"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000,' \
        '"intermediate_size": 11008}' >"$dir"/hf-no-type.json
      printf '%s\n' '{"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,' \
        '"num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 0,' \
        '"num_experts_per_tok": 2}' >"$dir"/hf-no-experts.json ;;
    fuzz_gpu_spec) cp "$data"/gpus/*.json "$dir"/ ;;
    fuzz_launch_script) find "$root"/tests/data/launch -name '*.sh' -exec cp {} "$dir"/ \; ;;
    fuzz_nemo_config)
      # NeMo's configs whole, and without their long data list: short inputs mutate faster.
      local f
      for f in "$root"/tests/data/launch/nemo-launcher/*.yaml; do
        cp "$f" "$dir"/
        grep -v '^ *- ' "$f" | grep -v 'data_prefix' >"$dir/short-${f##*/}"
      done
      # The 175B config with its launcher script's Hydra overrides (the target reads the lines after "#overrides").
      f="$root"/tests/data/launch/nemo-launcher/175b.yaml
      { grep -v '^ *- ' "$f" | grep -v 'data_prefix'; echo '#overrides'
        grep -E '^\+?training\.' "$root"/tests/data/launch/nemo-launcher/175b_bf16_16node.sh | sed 's/ \\$//'
      } >"$dir/overrides-175b.yaml" ;;
    fuzz_torchtitan_registry)
      # torchtitan main's Llama 3 registry whole, and cut to the functions the 8B and 70B configs run, with overrides.
      local f="$root"/tests/data/launch/torchtitan-registry/torchtitan/models/llama3/config_registry.py
      { cat "$f"; printf '%s\n' '#overrides' --config llama3_8b; } >"$dir/llama3_8b.py"
      { cat "$f"; printf '%s\n' '#overrides' --config llama3_debugmodel_varlen_attn; } >"$dir/derived.py"
      awk '/^def llama3_70b\(/{on=1; print; next} /^def /{on=0} on' "$f" >"$dir/short.py"
      { cat "$dir/short.py"; printf '%s\n' '#overrides' --config llama3_70b --parallelism.tensor_parallel_degree 4 \
          activation_checkpoint:selective --compile.enable --parallelism.pipeline_parallel_degree 2 \
          --parallelism.num_pp_microbatches 4; } >"$dir/overrides.py" ;;
    fuzz_nemo_recipe)
      # NeMo 2.0's recipes whole, and cut to the three functions read (model, trainer, pretrain_recipe) without their
      # docstrings: short inputs mutate faster; one with NeMo-Run overrides after "#overrides".
      local f
      for f in "$root"/tests/data/launch/nemo-recipes/*.py; do
        cp "$f" "$dir"/
        awk '/^def (model|trainer|pretrain_recipe)\(/{on=1} /^(def|@)/ && !/^def (model|trainer|pretrain_recipe)\(/{on=0}
             /"""/{doc=!doc; next} on && !doc' "$f" >"$dir/short-${f##*/}"
      done
      { cat "$dir/short-llama3_70b.py"; echo '#overrides'
        printf '%s\n' num_nodes=4 trainer.strategy.tensor_model_parallel_size=8 data.micro_batch_size=2 \
          model.config.recompute_granularity=full optim.config.use_distributed_optimizer=False
      } >"$dir/overrides-llama3_70b.py"
      # A Megatron-Bridge recipe in one file (the target gives the input as each megatron.bridge module): the imports,
      # _pretrain_common(), the optimizer factory and a recipe renamed pretrain_recipe.
      local b="$root"/tests/data/launch/megatron-bridge/src/megatron/bridge/recipes
      {
        grep -hE '^(from|import) |^[A-Z0-9_]+(: int)? = ' "$b"/common.py "$b"/utils/optimizer_utils.py \
          "$b"/llama/h100/llama3.py
        awk '/^def _pretrain_common\(/{on=1; print; next} /^(def|@)/{on=0} on' "$b"/common.py
        awk '/^def distributed_fused_adam_with_cosine_annealing\(/{on=1; print; next} /^(def|@)/{on=0} on' \
          "$b"/utils/optimizer_utils.py
        awk '/^def llama3_8b_pretrain_16gpu_h100_bf16_16k_config\(/{on=1; print "def pretrain_recipe():"; next}
             /^(def|@)/{on=0} on' "$b"/llama/h100/llama3.py
      } >"$dir/bridge.py"
      # A performance recipe the same way: the canonical recipe it starts from, then helpers called for what they set
      # on the config, under conditions the evaluator runs both ways.
      local q="$root"/tests/data/launch/megatron-bridge/src/megatron/bridge/perf_recipes
      {
        echo 'from megatron.bridge.recipes.llama.h100.llama3 import llama3_8b_pretrain_2gpu_h100_bf16_config as llama3_8b_pretrain_config'
        sed -n '/^def _pretrain_common(/,$p' "$dir/bridge.py" | sed '/^def pretrain_recipe(/,$d'
        awk '/^def llama3_8b_pretrain_2gpu_h100_bf16_config\(/{on=1; print; next} /^(def|@)/{on=0} on' "$b"/llama/h100/llama3.py
        awk '/^def _(benchmark_common|perf_precision)\(/{on=1; print; next} /^(def|@)/{on=0} on' "$q"/_common.py
        awk '/^def _llama_benchmark_common\(/{on=1; print; next} /^(def|@)/{on=0} on' "$q"/llama/common.py
        awk '/^def llama3_8b_pretrain_8gpu_h100_bf16_config\(/{on=1; print "def pretrain_recipe():"; next}
             /^(def|@)/{on=0} on' "$q"/llama/h100/llama3.py
      } >"$dir/bridge-perf.py" ;;
    fuzz_kernel_curves)
      # Each file whole where small (a measured sweep of thousands of rows would set the inputs' length and slow every
      # run), and each cut to three GEMM rows of each precision and two attention rows: short inputs mutate faster.
      find "$data"/kernels -name '*.json' -size -100k -exec cp {} "$dir"/ \;
      python3 - "$dir" "$data"/kernels/*.json <<'EOF'
import json, os, sys
for path in sys.argv[2:]:
    doc = json.load(open(path))
    bf16 = [r for r in doc["gemm"] if r.get("dtype") == "bf16"]
    doc["gemm"] = bf16[:3] + [r for r in doc["gemm"] if r.get("dtype") != "bf16"][:3]
    doc["attention"] = doc["attention"][:2]
    with open(os.path.join(sys.argv[1], "short-" + os.path.basename(path)), "w") as out:
        json.dump(doc, out, indent=1)
EOF
      ;;
    fuzz_cluster_spec) cp "$data"/clusters/*.json "$dir"/ ;;
    fuzz_tokenizer_file) cp "$root"/tests/data/tokenizers/*.model "$root"/tests/data/tokenizers/*/tokenizer.json "$dir"/ ;;
    fuzz_profile)
      cp "$data"/profiles/*.json "$data"/perf/*.json "$dir"/
      # Each profile also with two raw measurements of each kind: short inputs mutate faster.
      python3 - "$dir" "$data"/profiles/*.json <<'EOF'
import json, os, sys
for path in sys.argv[2:]:
    doc = json.load(open(path))
    for kind in doc.get("raw", {}):
        doc["raw"][kind] = doc["raw"][kind][:2]
    with open(os.path.join(sys.argv[1], "short-" + os.path.basename(path)), "w") as out:
        json.dump(doc, out, indent=1)
EOF
      ;;
    fuzz_nccl_tests_log)
      # Each sample log whole, and cut to its header and first six sizes: short inputs mutate faster.
      local f
      for f in "$root"/tests/data/nccl-tests/*; do
        cp "$f" "$dir"/
        { grep '^#' "$f"; grep -v '^#' "$f" | head -6; } >"$dir/short-${f##*/}"
      done ;;
    fuzz_measured_runs)
      # The run fixtures (tables, logs, traces), logs and traces cut to their first 60 lines: short inputs
      # mutate faster.
      local f
      for f in "$root"/tests/data/runs/*.{csv,jsonl,log,toml,json}; do
        cp "$f" "$dir"/
        head -60 "$f" >"$dir/short-${f##*/}"
      done ;;
    fuzz_cli)
      local n=0 line
      while IFS= read -r line; do
        [[ -z $line || $line == \#* ]] && continue
        tr ' ' '\n' <<<"$line" >"$dir/cmd-$((n += 1))"
      done <"$root"/tests/fuzz/cli_seeds.txt ;;
    *) echo "run-fuzz: unknown target $t" >&2; return 1 ;;
  esac
}

# Dictionaries: JSON tokens plus every quoted word of the schemas (keys and enum values); nccl-tests words; the
# NeMo config keys; the CLI's subcommands, flags and shipped spec names.
dictionary() {
  local t=$1 out=$work/$1/dict
  case $t in
    fuzz_torchtitan_registry)
      # Every field path the registry reader knows, and the Python torchtitan's config functions are written in.
      {
        grep -ohE '^    \{"[a-zA-Z0-9_.*]+"' "$root"/calibrate/ingest/src/torchtitan_registry.cpp | sed -E 's/^    \{//' | sort -u
        printf '"%s"\n' 'def ' 'Trainer.Config(' 'model_registry(' 'default_adamw(' 'config = ' 'config.' 'return ' \
          'SelectiveAC.Config()' 'FullAC.Config()' 'ParallelismConfig(' 'TrainingConfig(' 'CompileConfig(' \
          'Float8LinearConverter.Config(' 'None' 'True' 'False' '#overrides' '--config' 'activation_checkpoint:' ' * '
      } >"$out" ;;
    fuzz_nccl_tests_log) cp "$root"/tests/fuzz/nccl_tests.dict "$out" ;;
    fuzz_nemo_config)
      # The last word of every key the NeMo reader knows, YAML's punctuation, and NeMo's interpolation.
      {
        grep -ohE 'NemoKey\{"[a-zA-Z0-9_.]+"' "$root"/calibrate/ingest/src/nemo_config.cpp | sed -E 's/.*[{."]([a-zA-Z0-9_]+)"$/"\1:"/' | sort -u
        printf '"%s"\n' ': ' '- ' '{}' '[]' '${' '${multiply:' '${training.model.' '*a' '&a' '---' 'null' 'true' 'false' \
          '#overrides' 'training.model.' '+training.model.' '++model.' '~model.' '='
      } >"$out" ;;
    fuzz_nemo_recipe)
      # Every setting path the recipe reader knows, its parts, and the Python that recipes are written in.
      {
        grep -ohE '^    \{"[a-zA-Z0-9_.*]+"' "$root"/calibrate/ingest/src/nemo_recipe.cpp | sed -E 's/^    \{//' | sort -u
        printf '"%s"\n' 'def ' 'run.Config(' 'run.Partial(' 'nl.MegatronStrategy' 'nl.Trainer' 'MockDataModule' \
          'DistributedDataParallelConfig' 'bf16_mixed()' 'distributed_fused_adam_with_cosine_annealing(' 'return ' \
          'if performance_mode:' 'None' 'True' 'False' '\"\"\"' '#overrides' ' = ' '(' ')' ',' ':' 'Llama31Config405B' \
          'elif ' 'else:' ' == ' ' != ' ' is None' ' is not None' 'not ' 'raise ' 'from nemo.collections.llm.recipes import ' \
          'from nemo.collections.llm.recipes.fuzz import ' 'recipe.trainer.strategy.' 'recipe.model.config.' '**kwargs' \
          'recipe.trainer.callbacks.append(' '.extend([' 'run.Config(MegatronCommOverlapCallback, tp_comm_overlap=True)' \
          'recipe.optim.config.' 'torch.bfloat16' 'grad_reduce_in_fp32' 'def pretrain_recipe():' 'ConfigContainer(' \
          'AutoBridge.from_hf_pretrained("meta-llama/Meta-Llama-3-8B").get_model_config()' 'cfg.model.' 'cfg.train.' \
          'cfg.ddp.' 'cfg.optimizer.' 'cfg.comm_overlap = CommOverlapConfig(' 'a, b = ' 'return a, b' \
          'from megatron.bridge.recipes.fuzz import ' 'SEQ: int = 4096' 'mixed_precision="bf16_mixed"'
      } >"$out" ;;
    fuzz_cli)
      {
        printf '"%s"\n' calibrate comm estimate launch mtsl rank simulate --help model.json config.json profile.json perf.json
        grep -ohE -- '--[a-z][a-z0-9-]+' "$root"/tools/cli/cmd_*.cpp "$root"/tools/cli/cli*.cpp | sort -u | sed 's/.*/"&"/'
        for f in "$data"/{models,gpus,clusters,frameworks}/*.json; do f=${f##*/}; printf '"%s"\n' "${f%.json}"; done
      } >"$out" ;;
    *)
      {
        cat "$root"/tests/fuzz/json.dict
        grep -ohE '"[A-Za-z_$][A-Za-z0-9_$.-]*"' "$data"/schema/*.json | sort -u | sed 's/"/\\"/g; s/.*/"&"/'
      } >"$out" ;;
  esac
}

run_one() {
  local t=$1 dir=$work/$1
  mkdir -p "$dir/corpus"
  rm -f "$dir"/{crash,leak,timeout,oom,slow-unit}-*
  local rc=0
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$build/bin/$t" -max_total_time="$seconds" -timeout="$timeout" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/" -dict="$dir/dict" \
    "$dir/corpus" "$dir/seeds" >"$dir/log" 2>&1 || rc=$?
  echo "$rc" >"$dir/rc"
}

for t in "${targets[@]}"; do
  [[ -x $build/bin/$t ]] || { echo "run-fuzz: $build/bin/$t is missing (configure with HEADROOM_FUZZ=ON: the asan preset)" >&2; exit 1; }
  seed "$t"
  dictionary "$t"
done
start=$SECONDS
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then wait -n || true; running=$((running - 1)); fi
  run_one "$t" &
  running=$((running + 1))
done
wait

failed=0
printf '%-22s %12s %8s %8s  %s\n' target executions crashes corpus result
for t in "${targets[@]}"; do
  dir=$work/$t
  rc=$(cat "$dir/rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  [[ -n $execs ]] || execs=$(grep -oE '^#[0-9]+' "$dir/log" | tail -1 | tr -d '#')
  artifacts=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  crashes=$(grep -c . <<<"$artifacts" || true)
  ((rc == 0 || crashes > 0)) || crashes=1  # died without leaving an input: still a failure
  corpus=$(find "$dir/corpus" -type f | wc -l)
  if ((rc == 0)); then result=ok; else result="FAILED (exit $rc)"; failed=1; fi
  printf '%-22s %12s %8s %8s  %s\n' "$t" "${execs:-0}" "$crashes" "$corpus" "$result"
done
echo "run-fuzz: ${#targets[@]} targets x ${seconds}s, $jobs at a time, in $((SECONDS - start))s; logs in $work"
if ((failed)); then
  for t in "${targets[@]}"; do
    dir=$work/$t
    [[ $(cat "$dir/rc") == 0 ]] && continue
    echo "---- $t: $dir/log (tail)"
    grep -v '^#[0-9]' "$dir/log" | tail -40
    find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) \
      -printf "input: %p (replay: $build/bin/$t %p)\n"
  done
  exit 1
fi
