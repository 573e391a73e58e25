#include "headroom/estimator/residual.hpp"

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom {

// 4D paper Eq. 14 counts 4 bytes per logit; Megatron-LM's vocab-parallel cross-entropy keeps the BF16
// logits alive next to their FP32 copy and casts the FP32 gradient back (≥ 6 bytes per element).
double logits_elements(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  if (stage != head_stage(l)) return 0.0;
  return static_cast<double>(l.seq) * static_cast<double>(l.mbs) * static_cast<double>(m.vocab_size) /
         (static_cast<double>(l.tp) * static_cast<double>(l.cp));
}

double cp_extra_communicators(const Layout& l) { return (l.cp > 1 ? 1.0 : 0.0) + (l.cp > 2 ? 2.0 : 0.0); }

double tp_comm_buffer_bytes(const ModelSpec& m, const Layout& l) {
  if (!l.tp_comm_overlap) return 0.0;
  const double elements = static_cast<double>(l.seq) * static_cast<double>(l.mbs) / static_cast<double>(l.cp) *
                          static_cast<double>(m.hidden_size);
  // torch's workspace: two BF16 chunks of a reduce-scatter's output (an all-gather's shard, ≤ 2 B, is smaller).
  if (l.tp_comm_buffers == TpCommBuffers::symmetric_memory) return 2.0 * 2.0 * elements / static_cast<double>(l.tp);
  const double all_gather_bytes = l.fp8 != Fp8Recipe::none ? 1.0 : 2.0;
  const double buffers = elements * (8.0 * all_gather_bytes + 4.0 * 2.0);
  // An FP8 run with BF16 layers initialises a second, BF16 set (megatron/training/initialize.py passes both
  // quantization modes; transformer_engine/pytorch/module/base.py initialize_ub builds every buffer for each).
  const bool bf16_layers = l.fp8 != Fp8Recipe::none && (l.bf16_layers_at_start > 0 || l.bf16_layers_at_end > 0);
  return bf16_layers ? buffers + elements * (8.0 * 2.0 + 4.0 * 2.0) : buffers;
}

double residual_bytes(const ModelSpec& m, const Layout& l, const ResidualModel& r, std::int64_t stage,
                      double optimizer_shard_params, double usable_memory_bytes, bool with_logits) {
  return r.fixed_bytes + (with_logits ? r.logits_bytes_per_element * logits_elements(m, l, stage) : 0.0) +
         r.optimizer_shard_bytes_per_param * optimizer_shard_params +
         r.cp_communicator_bytes * cp_extra_communicators(l) + tp_comm_buffer_bytes(m, l) +
         r.capacity_share * usable_memory_bytes;
}

}  // namespace headroom
