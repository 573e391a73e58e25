// LoRA adapters in the memory model. Source: the FSDP+TP+LoRA thesis ("Fine-tuning LLMs with long sequences using FSDP,
// TP and LoRA"), Sec. 3.1.2 (Eq. 3.3: y = xW + xAB, A ∈ R^{in×r}, B ∈ R^{r×out}) and Sec. 3.2 (TP paradigm,
// Eq. 3.4–3.5): a column-parallel base weight (q, k, v, gate, up) shards B by columns and replicates A over TP; a
// row-parallel base weight (o, down) shards A by rows and replicates B. FSDP then shards what TP leaves over
// the data-parallel group (thesis Sec. 3.3, Appendix A.2). All counts are elements; none allocates.
#pragma once

#include <string>
#include <string_view>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom {

// The input and output sizes of one target projection of a Llama layer: q, o: h → h; k, v: h → h·k/a;
// gate, up: h → h_ffn; down: h_ffn → h.
struct ProjectionShape {
  double in = 0, out = 0;
  bool column_parallel = true;  // Megatron TP (thesis Sec. 3.1.1): q, k, v, gate, up column; o, down row
};
[[nodiscard]] ProjectionShape projection_shape(const ModelSpec& m, LoraTarget target);

// Throws Error naming lora_rank, the projection and the limit when the rank is above min(in, out) of a targeted
// projection (no rank of A·B is higher). Part of validate_layout.
void validate_lora_rank(const ModelSpec& m, const Lora& lora);

// Adapter elements of one layer, r·(in + out) summed over the targets (thesis Eq. 3.3).
[[nodiscard]] double lora_parameters_per_layer(const ModelSpec& m, const Lora& lora);
// All layers: the trainable parameter count Ψ' of a LoRA run.
[[nodiscard]] double lora_trainable_parameters(const ModelSpec& m, const Lora& lora);

// One layer's adapters on one TP rank, split as the thesis's paradigm puts them (Sec. 3.2): the half that
// TP replicates (A of column-parallel targets, B of row-parallel ones) and the half it shards by t.
struct LoraSplit {
  double replicated = 0;  // per TP rank, the same on every rank of the TP group
  double sharded = 0;     // per TP rank, already divided by t
  [[nodiscard]] double per_rank() const { return replicated + sharded; }
};
[[nodiscard]] LoraSplit lora_layer_split(const ModelSpec& m, const Lora& lora, std::int64_t tp);

// Adapter elements one GPU of pipeline stage `stage` holds after TP, before any DP/FSDP sharding.
[[nodiscard]] LoraSplit lora_stage_parameters_per_rank(const ModelSpec& m, const Layout& l, std::int64_t stage);

// "q,k,v,o,gate,up,down" (also "all", "attn" = q,k,v,o, "mlp" = gate,up,down; case-sensitive, comma
// separated) → bit set; throws Error naming the bad entry and the valid names.
[[nodiscard]] unsigned parse_lora_targets(std::string_view text);
[[nodiscard]] std::string lora_targets_to_string(unsigned targets);

}  // namespace headroom
