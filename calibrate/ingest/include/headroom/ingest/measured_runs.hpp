// What users can measure on their own cluster, read into one kind of row: a measured training run (the
// input of `calibrate --from-runs`), from a CSV / JSON Lines table, a Megatron-LM training log or a
// torchtitan log; and kernel timings from a PyTorch profiler (Kineto) Chrome trace.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom::calibrate {

enum class RunOutcome { ok, oom };

// One run. Layout columns are the specs (model, gpu, cluster, framework) and the knobs (knobs.hpp: tp, gpus,
// sequence_parallel, ..., or an older name such as sp); values stay text and are checked by the knobs' grammar
// where they are used, like flags.
struct MeasuredRun {
  std::map<std::string, std::string> layout;
  std::optional<ModelSpec> model;  // the model's shape when the source gave it (a log's arguments)
  RunOutcome outcome = RunOutcome::ok;
  std::optional<double> tflops_per_gpu;   // as the framework reports it (its own FLOP convention)
  std::optional<double> tokens_per_s;     // whole job
  std::optional<double> step_time_s;      // steady state: median over the logged iterations after warm-up
  std::optional<double> peak_memory_gib;  // the framework's max reserved, GiB, largest over the ranks logged
  std::string source;                     // "file:line" or "file"
};

// The layout columns a runs table may have (the specs and every knob's name) and the measured ones.
[[nodiscard]] const std::vector<std::string_view>& run_layout_columns();
[[nodiscard]] const std::vector<std::string_view>& run_measured_columns();

// A CSV (a header row, RFC 4180 quoting) or JSON Lines (one object per line) table of runs; the format is
// told by the first non-blank character ('{' is JSON Lines). Throws Error naming `where`, the line and the
// column on an unknown column, a duplicate column (a key twice in a JSON object), a measurement that is not a
// positive number, a JSON value of the wrong type for its column (a quoted "4" for tp), an outcome other than ok/oom,
// an `ok` run without a measurement, or a step_time_s and tokens_per_s that contradict the row's gbs and seq.
[[nodiscard]] std::vector<MeasuredRun> parse_runs_table(std::string_view text, std::string_view where);

// How far two measurements of one run may disagree (relative): a table's tokens_per_s and step_time_s, both given,
// are one measurement twice; rounding in a log or a spreadsheet stays well inside 1%.
inline constexpr double kMeasuredTolerance = 0.01;

// A run that gives both step_time_s and tokens_per_s: tokens_per_s must be tokens_per_step / step_time_s (gbs x
// seq tokens a step) within kMeasuredTolerance; otherwise an Error naming `where` and both values.
void check_step_and_tokens(double step_time_s, double tokens_per_s, double tokens_per_step, std::string_view where);

// What a run's resolved layout and GPU allow its measurements to be.
struct RunBounds {
  std::string gpu;                  // the GPU's name, for the message
  double memory_gib = 0;            // the GPU's nominal memory
  double peak_flops = 0;            // the GPU's highest dense peak (FP8 where it has one), per GPU
  double model_flops_per_step = 0;  // the model FLOPs of one step, whole job (headroom's convention)
  double tokens_per_step = 0;       // gbs x seq
  double gpus = 0;
};
// Refuses, naming the run's source, measurements no run can have: a peak above the GPU's memory, TFLOP/s per GPU or
// a step time implying more than the GPU's peak (MFU above 100%), a step time and tokens/s that contradict.
void check_run_bounds(const MeasuredRun& r, const RunBounds& b);

// A Megatron-LM training log (stdout of pretrain_gpt.py): the arguments block printed by
// megatron/training/arguments.py (_print_args: "  name ..... value"), the iteration lines of
// megatron/training/training.py (training_log: "elapsed time per iteration (ms)", "throughput per GPU
// (TFLOP/s/GPU)"), the "[Rank r] (after k iterations) memory (MB) | ... | max reserved: x" lines of
// megatron/training/utils.py (report_memory, MiB), and a CUDA/HIP out-of-memory error. Throws Error naming
// `where` when the text has no arguments block, or neither an iteration line nor an out-of-memory error.
[[nodiscard]] MeasuredRun parse_megatron_log(std::string_view text, std::string_view where);

// The processes a launcher's words start (the tokens before the training script): torchrun's --nproc-per-node x
// --nnodes, DeepSpeed's --num_gpus x --num_nodes (both spellings of each), else `gpus` (> 0), which must agree with
// them when both are given; an Error when neither says.
[[nodiscard]] std::int64_t launcher_world(const std::vector<std::string>& launcher, std::int64_t gpus,
                                          std::string_view where);

// A Megatron-LM launch command: the launcher's tokens (torchrun --nproc-per-node N --nnodes M) then
// pretrain_gpt.py and its flags, read as arguments.py parses them, with its defaults where the model or layout needs
// one (the global batch, the FFN width, the padded vocabulary, attention dropout 0.1). `gpus` is the world size when
// no launcher gives it (0: from the launcher). Every flag is either read (the model, the layout), or ignored with
// the reason (learning rate, data, logging, ...); any other flag, partial recompute, or no --bf16 is an Error naming
// it. The run has no measurement.
// A DeepSpeed launch (the `deepspeed --num_nodes M --num_gpus N` launcher, or --deepspeed among the flags) is read as
// Megatron-DeepSpeed's arguments.py parses it (its spellings: --num-key-value-heads, --normalization rmsnorm,
// --use-rotary-position-embeddings, --checkpoint-activations, --use-flash-attn-v2, --zero-stage, ...; attention
// without a FlashAttention flag is its unfused CoreAttention), under framework deepspeed, and names its ds_config.json
// (`deepspeed_config`), which read_deepspeed_config then applies.
struct MegatronCommand {
  MeasuredRun run;
  std::vector<std::string> read, ignored, notes;
  bool deepspeed = false;
  std::string deepspeed_config;  // --deepspeed_config's path as the command gives it
  std::string zero_stage;        // --zero-stage as given ("": not given)
  bool pipeline_engine = true;   // DeepSpeed's PipelineEngine (Megatron-DeepSpeed's default; --no-pipeline-parallel)
  std::map<std::string, std::string> arguments;  // arguments.py's dests as read, with the defaults it fills in
  // The attention window the command gives (ModelSpec::sliding_window, window_skip_freq; 0: none), known without
  // the vocabulary that makes run.model whole.
  std::int64_t sliding_window = 0, window_skip_freq = 0;
  // Why the job's model is not known from it (a NeMo recipe's config class of no shipped model's shape, named with its
  // line): check prices it as --model, and refuses with this without one. Empty where it is known.
  std::string model_unread;
};
[[nodiscard]] MegatronCommand parse_megatron_command(const std::vector<std::string>& tokens, std::int64_t gpus,
                                                     std::string_view where);
// A DeepSpeed config (ds_config.json) applied to a DeepSpeed launch read by parse_megatron_command: the ZeRO stage
// (0, 1, 2; 3 refused: its prefetching is priced for FSDP, not DeepSpeed's hooks) becomes the sharding, the batch keys
// must agree with the command's (DeepSpeed asserts train_batch_size = micro-batch x accumulation x DP), BF16 must be
// on; every key is read or ignored with why (deepspeed_config.cpp kDeepspeedKeys, the one list), any other key and
// any setting not priced (offloading, partitioned or CPU activation checkpoints, another gradient accumulation or
// communication dtype) an Error naming it.
void read_deepspeed_config(std::string_view text, std::string_view where, MegatronCommand& cmd);
// The command of a launch script that runs `script_name` (pretrain_gpt.py), its words as bash would pass them: the
// script's variable and array assignments, their expansions and its if blocks of string tests followed
// (launch_script.cpp says what is read and what is refused). A value the script does not set reaches the words as
// "${NAME}(not-set-by-the-script)".
// `environment`: values of variables the script reads but does not set (its arguments "1", "2", ..., the
// environment's), as the user gives them. `files`, where given, receives the files the script writes with a
// here-document before that command (cat <<EOF > FILE), by FILE as expanded.
[[nodiscard]] std::vector<std::string> launch_script_command(const std::string& text, std::string_view script_name,
                                                             std::string_view where,
                                                             const std::map<std::string, std::string>& environment = {},
                                                             std::map<std::string, std::string>* files = nullptr);
// The commands a launch script may run, one for each outcome of the if tests headroom cannot evaluate (a test of a
// variable the environment gives, `[ -n "${WANDB_API_KEY}" ]`), with the files it writes and the outcomes assumed
// (`[ -n ${WANDB_API_KEY} ] false`): at most kMaxLaunchScriptVariants; with more, the one command launch_script_command
// gives (or its refusal). A script whose tests are all evaluated has one.
struct LaunchScriptVariant {
  std::vector<std::string> command;
  std::map<std::string, std::string> files;
  std::vector<std::string> assumed;
};
constexpr std::size_t kMaxLaunchScriptVariants = 16;
[[nodiscard]] std::vector<LaunchScriptVariant> launch_script_variants(
    const std::string& text, std::string_view script_name, std::string_view where,
    const std::map<std::string, std::string>& environment = {});
// A NeMo 1.x training config (YAML; NeMo-Framework-Launcher's conf/training/<family>/<model>.yaml, NeMo's
// megatron_gpt_config.yaml) read as the Megatron-LM arguments NeMo hands to Megatron-core, then as that
// pretrain_gpt.py line (parse_megatron_command): every key read or ignored with why (nemo_config.cpp kNemoKeys, the
// one list), any other key and any setting not priced (NeMo's FSDP, partial checkpointing, FP16, ...) an Error naming
// it. The world is trainer.num_nodes x trainer.devices (`gpus`, where given, must agree). YAML aliases, several
// documents and interpolations other than ${path} are refused. The tokenizer's vocabulary is not in the config: the
// run has no whole model (check takes --model). `overrides` are Hydra's, as a launcher script passes them to main.py
// after training=<family>/<model> (`training.model.tensor_model_parallel_size=4`, `+training.model.optim.x=y`; the
// `training.` prefix optional), applied to the file's keys before they are read.
[[nodiscard]] MegatronCommand read_nemo_config(std::string_view text, std::int64_t gpus, std::string_view where,
                                               const std::vector<std::string>& overrides = {});
// A recipe next to a NeMo 2.0 recipe, by its module's name (`llama3_8b`, `qwen3`): its text, nullopt where there is
// none.
using RecipeSibling = std::function<std::optional<std::string>(const std::string& name)>;
// A NeMo 2.0 pre-training recipe (NVIDIA/NeMo nemo/collections/llm/recipes/<model>.py) read without running it
// (nemo_recipe.cpp): pretrain_recipe() evaluated on NeMo-Run's arguments, following its calls into the recipes
// `sibling` gives, and the run.Partial it returns read: the parallelism of its MegatronStrategy, its DDP config, the
// Trainer's nodes and devices, the data module's sequence and batches, the optimizer and the model's config class
// (kRecipeModels: those of a shipped model's shape; another is named in model_unread) and the Trainer's callbacks
// (kRecipeCallbacks; performance_mode's communication overlaps). Every setting read or ignored with why (kRecipeKeys,
// the one list); any other setting or callback, a statement or condition the evaluation does not follow, or a setting
// not priced an Error naming it and its line. `overrides` are NeMo-Run's: pretrain_recipe's arguments (`num_nodes=2`)
// and settings by path (`trainer.strategy.tensor_model_parallel_size=4`, `data.global_batch_size=256`). The layout
// (with "model", the shipped model) is run.layout; `gpus`, where given, must be the recipe's world.
[[nodiscard]] MegatronCommand read_nemo_recipe(std::string_view text, std::int64_t gpus, std::string_view where,
                                               const std::vector<std::string>& overrides = {},
                                               const RecipeSibling& sibling = {});
// A module of a Megatron-Bridge checkout by its dotted name (`megatron.bridge.recipes.common`): its text, nullopt where
// there is none.
using BridgeModule = std::function<std::optional<std::string>(const std::string& module)>;
// A Megatron-Bridge pre-training recipe (NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/<family>/...py) read
// without running it (nemo_recipe.cpp): the function `recipe` (what scripts/training/run_recipe.py --recipe runs)
// evaluated, following its calls into the checkout's megatron.bridge modules that `module` gives, and the
// ConfigContainer it returns read: its model (AutoBridge.from_hf_pretrained(<Hugging Face id>), kRecipeModels) and
// the fields set on it, train, dataset, ddp, optimizer, mixed_precision and comm_overlap, each translated to the NeMo
// 2.0 setting of the same Megatron-core value and read as read_nemo_recipe reads it; logging, checkpointing,
// validation, the schedule, the tokenizer, seeds and the environment ignored with why. `gpus` is the world (the
// recipe does not name one). `overrides` are run_recipe.py's (`model.tensor_model_parallel_size=4`,
// `train.global_batch_size=256`).
[[nodiscard]] MegatronCommand read_bridge_recipe(std::string_view text, const std::string& recipe, std::int64_t gpus,
                                                 std::string_view where, const std::vector<std::string>& overrides,
                                                 const BridgeModule& module);
// A layout as the NeMo-Run overrides read_nemo_recipe reads (path and value), and the ones to change from one layout
// to another as "path=new (was old)"; empty when none differs.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> nemo_recipe_layout_keys(const Layout& l);
[[nodiscard]] std::vector<std::string> nemo_recipe_changes(const Layout& from, const Layout& to);
// The same changes under Megatron-Bridge's paths, as run_recipe.py's overrides (`model.tensor_model_parallel_size=2
// (was 1)`).
[[nodiscard]] std::vector<std::string> bridge_recipe_changes(const Layout& from, const Layout& to);
// The keys of a NeMo config to change from one layout to another (tp, pp, vpp, cp, ep, mbs, gbs, sequence parallel,
// checkpointing, userbuffers, p2p overlap), as "key: new (was old)"; empty when none of them differs.
[[nodiscard]] std::vector<std::string> nemo_config_changes(const Layout& from, const Layout& to);
// A torchtitan job config (TOML) as torchtitan reads it: the layout in the knob names (framework torchtitan), every key
// either read or ignored with why (torchtitan_log.cpp kTorchtitanKeys, the one list), any other key and any setting not
// priced (an optimizer other than Adam(W), FP32 compute, the V-shaped zero-bubble schedules, experts,
// MX formats, ...) an Error naming it. data_parallel_shard_degree -1 needs `gpus`.
struct TorchtitanJob {
  std::map<std::string, std::string> layout;
  std::vector<std::string> read, ignored, notes;
  // parallelism.pipeline_parallel_layers_per_stage (0: not given, the schedule's default stages a rank): the
  // stages a rank follow from the model's layers (torchtitan_stages_per_rank).
  std::int64_t layers_per_stage = 0;
};
[[nodiscard]] TorchtitanJob read_torchtitan_job(std::string_view toml, std::int64_t gpus, std::string_view where);
// A torchtitan config registry (torchtitan/models/<module>/config_registry.py, torchtitan main's Python configs) read
// without running it: the function `--config NAME` in `args` names, with the command line's other overrides
// (`--parallelism.tensor_parallel_degree 8`, `--compile.enable`, `activation_checkpoint:full`; torchtitan_registry.cpp
// kRegistryKeys lists every field read or ignored), priced as read_torchtitan_job prices the TOML keys of the same
// meaning. The module is `--module`, else the registry's folder. Any field or statement not followed is an Error
// naming it.
// torchtitan v0.2's command-line overrides (launch's, `--training.local_batch_size 2`, flag -> value) as torchtitan
// main's (`--training.num_tokens_per_microbatch_per_dp_rank 16384`, `activation_checkpoint:` -> full), nullopt when
// main cannot express them (float8's tensorwise recipe, checkpointing every N-th block). `dp`: the layout's DP ranks,
// for num_tokens_per_train_step's default; `sequence_parallel`: the layout's, which v0.2 cannot turn off and main can.
[[nodiscard]] std::optional<std::map<std::string, std::string>> torchtitan_main_flags(
    const std::map<std::string, std::string>& toml_flags, std::int64_t dp, bool sequence_parallel);
[[nodiscard]] TorchtitanJob read_torchtitan_registry(std::string_view text, std::int64_t gpus, std::string_view where,
                                                     const std::vector<std::string>& args);
// The virtual stages a rank runs with layers_per_stage given (> 0), as torchtitan counts them
// (torchtitan/distributed/pipeline_parallel.py, v0.2): ceil((L + first_less + last_less)/layers_per_stage) stages,
// a multiple of pp, 1 a rank for 1F1B and GPipe and at least 2 for the looped schedules. A count that leaves the
// stages uneven beyond the first's and last's layer fewer is refused naming the key. Writes the job layout's vpp.
void set_torchtitan_stages_per_rank(std::map<std::string, std::string>& layout, std::int64_t layers_per_stage,
                                    std::int64_t num_layers, std::string_view where);
// A torchtitan log (torchtitan/components/metrics.py: "step: n  loss: ...  memory: x GiB(p%)  tps: t
// tflops: f  mfu: m%", tps per GPU, memory the max reserved since the last log) with the job's TOML config
// (torchtitan/config/job_config.py sections [model], [training], [parallelism], [activation_checkpoint]).
// `gpus` is the world size (torchtitan's log does not print it; 0 = from the TOML's degrees when they are
// all given). Throws Error naming `where` as parse_megatron_log does.
[[nodiscard]] MeasuredRun parse_torchtitan_log(std::string_view log, std::string_view toml, std::int64_t gpus,
                                               std::string_view where);

// Kernel timings read from a PyTorch profiler trace (torch.profiler's export_chrome_trace; Kineto JSON).
struct GemmSample {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  std::string dtype;  // as the trace names it: "c10::BFloat16", "float", ...
  double seconds = 0;
  [[nodiscard]] double flops() const { return 2.0 * static_cast<double>(batch * m) * static_cast<double>(n * k); }
};
struct AttentionSample {
  std::int64_t batch = 0, heads = 0, seq_q = 0, seq_k = 0, head_dim = 0;
  bool causal = false, backward = false;
  double seconds = 0;
};
struct CollectiveSample {
  std::string collective;  // "allreduce", "allgather", "reduce_scatter", "all_to_all", "send", "recv", ...
  std::int64_t in_elements = 0, out_elements = 0, group_size = 0;
  std::string dtype;
  double seconds = 0;
};
struct TraceKernels {
  std::vector<GemmSample> gemms;
  std::vector<AttentionSample> attention;
  std::vector<CollectiveSample> collectives;
  std::string device;  // deviceProperties[0].name when present
};

// GEMMs: aten::mm / addmm / bmm / baddbmm / matmul CPU ops with "Input Dims" (record_shapes=True), timed by
// the GPU kernels that carry the op's "External id". Attention: aten::_scaled_dot_product_flash_attention /
// _efficient_attention / _cudnn_attention and their backward ops ([b, heads, s, d] inputs). Collectives:
// NCCL/RCCL kernels with the "Collective name", "In msg nelems", "Group size" arguments PyTorch's
// ProcessGroupNCCL records (torch >= 2.1). Throws Error naming `where` when the JSON has no traceEvents.
[[nodiscard]] TraceKernels parse_profiler_trace(const nlohmann::json& trace, std::string_view where);

// The records of an RFC 4180 CSV text (quoted fields may hold commas, "" and newlines); blank lines skipped.
// Throws Error naming `where` and the line of an unclosed quote.
[[nodiscard]] std::vector<std::vector<std::string>> read_csv_records(std::string_view text, std::string_view where);

}  // namespace headroom::calibrate
