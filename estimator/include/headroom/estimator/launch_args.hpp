// Launch export: one layout as Megatron-LM arguments, a torchtitan TOML job-config fragment, a PyTorch
// FSDP2/DeviceMesh snippet and DeepSpeed's ds_config.json with its launcher line. Shared by `headroom launch` and
// `headroom rank` (launch of the fastest layout).
//
// Versions targeted (flag and field names checked against the sources):
//   Megatron-LM  core_r0.8.0 .. main (megatron/training/arguments.py); --num-distributed-optimizer-instances
//                needs core_r0.10.0+, --window-size and --window-attn-skip-freq (sliding windows) core_v0.15.0+;
//                experts: --expert-tensor-parallel-size and --moe-layer-freq core_r0.10.0+, --moe-shared-expert-gate
//                core_v0.16.0+; FP8: --fp8-format and --fp8-param-gather core_r0.9.0+, --fp8-recipe core_v0.12.0+;
//                offloading: --optimizer-cpu-offload core_v0.12.0+, --cpu-offloading-num-layers core_v0.16.0+.
//   torchtitan   v0.1.0 .. v0.2.2 TOML job config (torchtitan/config_manager.py in v0.1.0,
//                torchtitan/config/job_config.py in v0.2.x); torchtitan main has moved to Python configs, which
//                check reads. FP8 is written with v0.2.x names (converter "quantize.linear.float8",
//                [quantize.linear.float8], [compile]); v0.1.0 calls them "float8", [float8] and [training] compile.
//   PyTorch      2.6+ (torch.distributed.fsdp.fully_shard, init_device_mesh; FSDP1 ShardingStrategy named too).
//   NeMo         1.x training configs as NeMo-Framework-Launcher runs them (launcher_scripts/main.py
//                training=<family>/<model> with Hydra overrides; `++` adds or changes a key, Hydra 1.1+).
//   DeepSpeed    0.10+ with Megatron-DeepSpeed's pretrain_gpt.py (deepspeedai/Megatron-DeepSpeed: Megatron-LM's
//                arguments plus --deepspeed, --deepspeed_config, --zero-stage, --no-pipeline-parallel,
//                --use-flash-attn-v2); ds_config.json keys of deepspeed/runtime/config.py and zero/config.py.
//
// What a framework cannot express (a sharding code, GPipe on Megatron-LM, LoRA, TP without SP on torchtitan)
// is listed in the `*_issues` vectors and printed as "UNSUPPORTED" comments; nothing is silently approximated.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom {

// The pipeline schedules torchtitan runs, as its pipeline_parallel_schedule names them (torch.distributed.pipelining's
// class is "Schedule" + the name): written by launch, read back by the TOML and log reader, listed in this order.
inline constexpr std::array<Schedule, 6> kTorchtitanSchedules = {Schedule::one_f_one_b, Schedule::interleaved,
                                                                 Schedule::zero_bubble, Schedule::zbv,
                                                                 Schedule::gpipe,       Schedule::looped_bfs};
[[nodiscard]] std::string_view torchtitan_schedule_name(Schedule s);

inline constexpr const char* kMegatronVersions = "Megatron-LM core_r0.8.0 .. main (pretrain_gpt.py arguments)";
inline constexpr const char* kTorchtitanVersions = "torchtitan v0.1.0 .. v0.2.2 (TOML job config)";
inline constexpr const char* kPytorchVersions = "PyTorch 2.6+ (FSDP2 fully_shard, DeviceMesh)";
inline constexpr const char* kDeepspeedVersions = "DeepSpeed 0.10+ with Megatron-DeepSpeed's pretrain_gpt.py";
inline constexpr const char* kNemoVersions =
    "NeMo 1.x training config (NeMo-Framework-Launcher main.py training=<family>/<model>, Hydra 1.1+ overrides)";

// The keys of a NeMo 1.x training config that set a layout (model.tensor_model_parallel_size, ...), with their YAML
// values, in the config's order: launch writes them as overrides, check gives a faster layout's changes in them.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> nemo_layout_keys(const Layout& l);

struct LaunchExport {
  std::vector<std::string> megatron;         // argv tokens for pretrain_gpt.py
  std::vector<std::string> megatron_issues;  // what Megatron-LM cannot express; empty = exact
  std::string torchtitan_toml;
  std::vector<std::string> torchtitan_overrides;  // the same settings as --section.key value tokens
  std::vector<std::string> torchtitan_issues;
  std::string fsdp_python;
  std::vector<std::string> fsdp_issues;
  std::vector<std::string> deepspeed;  // Megatron-DeepSpeed's pretrain_gpt.py arguments (parallelism, batch, ZeRO)
  std::string deepspeed_config;        // ds_config.json
  std::vector<std::string> deepspeed_issues;
  std::vector<std::string> nemo;  // ++training.<key>=<value> overrides of the model's NeMo training config
  std::vector<std::string> nemo_issues;
  std::int64_t nodes = 1, gpus_per_node = 1;  // for the torchrun line
};

[[nodiscard]] LaunchExport launch_export(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout);

// A token as a POSIX shell reads it back: as it is where every character is plain (letters, digits, -_./:=,+@%),
// else in single quotes ('Et*2|(t*2|)*34,t*3|(t*2|)*3,tL').
[[nodiscard]] std::string shell_word(std::string_view token);
// One line each, as `rank` prints them: the tokens (shell_word) joined by spaces, issues appended as
// "  # UNSUPPORTED: ...".
[[nodiscard]] std::string megatron_line(const LaunchExport& e);
[[nodiscard]] std::string torchtitan_line(const LaunchExport& e);
[[nodiscard]] std::string deepspeed_line(const LaunchExport& e);  // its flags; ds_config.json is launch's

// {"megatron": [...], "torchtitan_toml": "...", "fsdp_python": "...", "deepspeed": [...], "deepspeed_config": {...},
//  "issues": {...}, "versions": {...}}
[[nodiscard]] nlohmann::json launch_to_json(const LaunchExport& e);

}  // namespace headroom
