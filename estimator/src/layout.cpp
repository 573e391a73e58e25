#include "headroom/estimator/layout.hpp"

#include <string>

#include "headroom/estimator/error.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom {
namespace {

void require_positive(std::int64_t value, const char* name) {
  if (value <= 0) throw Error(std::string(name) + " must be a positive integer (got " + std::to_string(value) + ")");
}

std::string s(std::int64_t v) { return std::to_string(v); }

}  // namespace

void validate_model_split(const ModelSpec& m, const Layout& l) {
  require_positive(l.tp, "tensor parallel size --tp");
  require_positive(l.cp, "context parallel size --cp");
  require_positive(l.pp, "pipeline parallel size --pp");
  require_positive(l.vpp, "virtual pipeline stages --vpp");
  require_positive(l.seq, "sequence length --seq");
  if (m.num_heads % l.tp != 0)
    throw Error("--tp " + s(l.tp) + " does not divide the " + s(m.num_heads) + " attention heads of " + m.name);
  if (m.num_kv_heads % l.tp != 0)
    throw Error("--tp " + s(l.tp) + " does not divide the " + s(m.num_kv_heads) + " KV heads of " + m.name);
  if (m.num_layers % l.pp != 0)
    throw Error("--pp " + s(l.pp) + " does not divide the " + s(m.num_layers) + " layers of " + m.name);
  if (l.vpp > 1) {
    if (l.pp == 1) throw Error("--vpp " + s(l.vpp) + " needs --pp > 1 (interleaving splits pipeline stages)");
    if ((m.num_layers / l.pp) % l.vpp != 0)
      throw Error("--vpp " + s(l.vpp) + " does not divide the " + s(m.num_layers / l.pp) + " layers per stage");
  }
  if (l.seq % l.cp != 0) throw Error("--cp " + s(l.cp) + " does not divide --seq " + s(l.seq));
  if (l.cp > 1 && l.seq % (2 * l.cp) != 0)
    throw Error("--seq " + s(l.seq) + " must be a multiple of 2·cp = " + s(2 * l.cp) +
                " (load-balanced context parallelism splits it into 2·cp chunks)");
}

void validate_layout(const ModelSpec& m, const Layout& l) {
  validate_model_split(m, l);
  require_positive(l.dp, "data parallel size");
  require_positive(l.mbs, "micro-batch size --mbs");
  require_positive(l.gbs, "global batch size --gbs");
  if (l.gbs % (l.dp * l.mbs) != 0)
    throw Error("--gbs " + s(l.gbs) + " is not a multiple of dp·mbs = " + s(l.dp) + "·" + s(l.mbs) + " = " +
                s(l.dp * l.mbs));
  if (!interleaving_runs(l))
    throw Error("the interleaved schedule needs the micro-batches per pipeline (gbs/(dp·mbs) = " + s(l.microbatches()) +
                ") to be a multiple of pp = " + s(l.pp) + " (Megatron-LM and PyTorch refuse it otherwise)");
}

bool interleaving_runs(const Layout& l) {
  // megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving: "number of
  // microbatches (m) is not divisible by pipeline-model-parallel-size (p) when using interleaved schedule".
  return l.schedule != Schedule::interleaved || l.microbatches() % l.pp == 0;
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

std::string_view to_string(Schedule s) {
  switch (s) {
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::interleaved: return "interleaved";
    case Schedule::gpipe: return "gpipe";
  }
  return "?";
}

std::string_view to_string(Shard s) {
  switch (s) {
    case Shard::none: return "N";
    case Shard::intra: return "I";
    case Shard::global: return "G";
  }
  return "?";
}

}  // namespace headroom
