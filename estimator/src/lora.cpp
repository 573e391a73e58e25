#include "headroom/estimator/lora.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <string>

#include "headroom/core/error.hpp"
#include "headroom/core/units.hpp"

namespace headroom {
namespace {

using units::d;

struct TargetName {
  LoraTarget target;
  std::string_view name;
};
constexpr std::array<TargetName, 7> kTargets{{{LoraTarget::q, "q"},
                                              {LoraTarget::k, "k"},
                                              {LoraTarget::v, "v"},
                                              {LoraTarget::o, "o"},
                                              {LoraTarget::gate, "gate"},
                                              {LoraTarget::up, "up"},
                                              {LoraTarget::down, "down"}}};

}  // namespace

// Thesis Sec. 3.1.1: Q, K, V and the first MLP projections are column-parallel, the output projections
// row-parallel; Q projects to a·d_h (h when d_h = h/a), K and V to the k KV heads (GQA), k·d_h wide.
ProjectionShape projection_shape(const ModelSpec& m, LoraTarget target) {
  const double h = d(m.hidden_size), f = d(m.ffn_hidden_size), q = query_width(m), kv = kv_width(m);
  switch (target) {
    case LoraTarget::q: return {h, q, true};
    case LoraTarget::k:
    case LoraTarget::v: return {h, kv, true};
    case LoraTarget::o: return {q, h, false};
    case LoraTarget::gate:
    case LoraTarget::up: return {h, f, true};
    case LoraTarget::down: return {f, h, false};
  }
  return {};
}

// The update A·B of a projection has rank at most min(in, out): a larger r only adds parameters (A is in × r, B is
// r × out), more than W itself holds once r·(in + out) > in·out. The targeted projection with the lowest bound is
// named.
void validate_lora_rank(const ModelSpec& m, const Lora& lora) {
  if (!lora.enabled()) return;
  std::optional<TargetName> binding;
  ProjectionShape bound;
  for (const TargetName& t : kTargets) {
    if (!lora.targets_module(t.target)) continue;
    const ProjectionShape p = projection_shape(m, t.target);
    if (!binding || std::min(p.in, p.out) < std::min(bound.in, bound.out)) binding = t, bound = p;
  }
  const auto limit = static_cast<std::int64_t>(std::min(bound.in, bound.out));
  if (!binding || lora.rank <= limit) return;
  throw Error(field("lora_rank") + " " + std::to_string(lora.rank) + " is larger than the " +
              std::string(binding->name) + " projection of " + m.name + " (" +
              std::to_string(static_cast<std::int64_t>(bound.in)) + " -> " +
              std::to_string(static_cast<std::int64_t>(bound.out)) +
              "): a LoRA rank is at most min(in, out) = " + std::to_string(limit) + " of every targeted projection (" +
              field("lora_targets") + " " + lora_targets_to_string(lora.targets) + ")");
}

// Thesis Eq. 3.3: A is in × r, B is r × out, so r·(in + out) per adapted projection.
double lora_parameters_per_layer(const ModelSpec& m, const Lora& lora) {
  return lora_layer_split(m, lora, 1).per_rank();
}

double lora_trainable_parameters(const ModelSpec& m, const Lora& lora) {
  return d(m.num_layers) * lora_parameters_per_layer(m, lora);
}

// Thesis Sec. 3.2, Eq. 3.4–3.5: column-parallel W → B sharded (r × out/t), A replicated (in × r);
// row-parallel W → A sharded (in/t × r), B replicated (r × out).
LoraSplit lora_layer_split(const ModelSpec& m, const Lora& lora, std::int64_t tp) {
  LoraSplit s;
  if (!lora.enabled()) return s;
  const double r = d(lora.rank), t = d(tp);
  for (const auto& [target, name] : kTargets) {
    if (!lora.targets_module(target)) continue;
    const ProjectionShape p = projection_shape(m, target);
    s.replicated += r * (p.column_parallel ? p.in : p.out);
    s.sharded += r * (p.column_parallel ? p.out : p.in) / t;
  }
  return s;
}

LoraSplit lora_stage_parameters_per_rank(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  const LoraSplit layer = lora_layer_split(m, l.lora, l.tp);
  const double layers = d(stage_layers(m, l, stage));  // adapters live in the decoder layers only
  return {layer.replicated * layers, layer.sharded * layers};
}

unsigned parse_lora_targets(std::string_view text) {
  unsigned bits = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item == "all") {
      bits |= kAllLoraTargets;
    } else if (item == "attn") {
      bits |= 1u | 2u | 4u | 8u;
    } else if (item == "mlp") {
      bits |= 16u | 32u | 64u;
    } else {
      bool found = false;
      for (const auto& [target, name] : kTargets) {
        if (item == name) {
          bits |= static_cast<unsigned>(target);
          found = true;
        }
      }
      if (!found)
        throw Error("unknown LoRA target '" + std::string(item) +
                    "' in --lora-targets (valid: q, k, v, o, gate, up, down, attn, mlp, all; comma separated)");
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return bits;
}

std::string lora_targets_to_string(unsigned targets) {
  std::string out;
  for (const auto& [target, name] : kTargets) {
    if ((targets & static_cast<unsigned>(target)) == 0) continue;
    if (!out.empty()) out += ",";
    out += name;
  }
  return out;
}

}  // namespace headroom
