// The execution strategy: how one training job is laid out over the GPUs. Immutable once validated.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace headroom {

struct ModelSpec;
struct ClusterSpec;

enum class Recompute { none, selective, full };
enum class Schedule { one_f_one_b, interleaved, gpipe };
// How one of parameters, gradients or optimizer states is sharded over the data-parallel (DP×CP) group:
// not at all, inside a group of GPUs (a node), or over the whole group (PaRO's N / I / G).
enum class Shard { none, intra, global };

struct StateSharding {
  Shard params = Shard::none;
  Shard grads = Shard::none;
  Shard optimizer = Shard::global;  // Megatron-LM's distributed optimizer (ZeRO-1 over DP×CP)
};

// Numeric formats and optimizer of the training run, bytes per parameter.
struct Precision {
  double weight_bytes = 2;      // BF16 weights
  double grad_bytes = 4;        // FP32 gradient accumulation (Megatron main_grad)
  double optimizer_bytes = 12;  // Adam: FP32 master weight, momentum, variance
};

struct Layout {
  std::int64_t tp = 1;   // t
  std::int64_t cp = 1;   // c
  std::int64_t pp = 1;   // p
  std::int64_t dp = 1;   // d
  std::int64_t vpp = 1;  // virtual pipeline stages per GPU (interleaved 1F1B)
  std::int64_t mbs = 1;  // b
  std::int64_t gbs = 1;  // global batch in sequences
  std::int64_t seq = 1;  // s
  Recompute recompute = Recompute::none;
  Schedule schedule = Schedule::one_f_one_b;
  bool sequence_parallel = true;
  bool flash_attention = true;
  StateSharding sharding;
  Precision precision;

  [[nodiscard]] std::int64_t gpus() const { return tp * cp * pp * dp; }
  [[nodiscard]] std::int64_t microbatches() const { return gbs / (dp * mbs); }  // m, per pipeline
};

// Throws Error naming the first violated constraint of how the model is split: sizes positive, t | a,
// t | k, p | L, vpp | L/p, 2c | s. Needs no DP size or batch.
void validate_model_split(const ModelSpec& model, const Layout& layout);
// validate_model_split, then the batch: d > 0, gbs a multiple of d·b.
void validate_layout(const ModelSpec& model, const Layout& layout);

[[nodiscard]] std::string_view to_string(Recompute r);
[[nodiscard]] std::string_view to_string(Schedule s);
[[nodiscard]] std::string_view to_string(Shard s);

}  // namespace headroom
