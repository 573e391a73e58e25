#include "validate_memory_forms.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "headroom/estimator/memory.hpp"

namespace headroom::validate {
namespace {

double num(std::int64_t v) { return static_cast<double>(v); }

// The runs of one table (or all, table 0) as the capacity-share form sees them, priced by `peak`.
template <class Peak>
std::vector<PeakOutcome> peak_outcomes(const std::vector<ResidualObservation>& runs, Peak peak) {
  std::vector<PeakOutcome> out;
  out.reserve(runs.size());
  for (const auto& r : runs) out.push_back({peak(r), r.cluster.gpu.usable_memory_bytes, r.oom});
  return out;
}

// Fitted on all tables but each one in turn, scored on it; and fitted and scored on all.
template <class Fit, class Score>
MemoryFormScore score_form(MemoryForm form, int parameters, bool shippable, const std::vector<int>& tables,
                           const std::map<int, std::vector<ResidualObservation>>& by_table, Fit fit, Score score) {
  MemoryFormScore s{form, parameters, shippable, {}, {}};
  std::vector<ResidualObservation> all;
  for (const auto& [t, runs] : by_table) all.insert(all.end(), runs.begin(), runs.end());
  s.in_sample = score(fit(all), all);
  for (const int held : tables) {
    std::vector<ResidualObservation> train;
    for (const auto& [t, runs] : by_table)
      if (t != held) train.insert(train.end(), runs.begin(), runs.end());
    s.held_out.add(score(fit(train), by_table.at(held)));
  }
  return s;
}

}  // namespace

double megatron_theoretical_memory_bytes(const ModelSpec& m, const Layout& l) {
  const double h = num(m.hidden_size), ffn = num(m.ffn_hidden_size), t = num(l.tp), p = num(l.pp);
  const double s = num(l.seq), b = num(l.mbs), layers = num(m.num_layers);
  const double divisible = 128.0 * t;  // --make-vocab-size-divisible-by 128, times t
  const double vocab = std::ceil(num(m.vocab_size) / divisible) * divisible;
  // compute_weight_and_optimizer_memory, dense.
  const double norm_size = m.norm == Norm::rmsnorm ? 1 : 2;
  const double attention = 2 * h * h * (1 + num(m.num_kv_heads) / num(m.num_heads));
  const double mlp = 2 * h * ffn * (m.mlp == Mlp::swiglu ? 1.5 : 1.0);
  const double layernorms = 2 * h * norm_size;
  const double embedding = h * vocab;
  double tp_sharded = (attention + mlp) * layers / p + embedding;
  if (!m.tied_embeddings && l.pp == 1) tp_sharded += embedding;
  const double replicated = (layernorms * layers + norm_size * h) / p;  // with the final norm
  const double on_most_loaded = tp_sharded / t + replicated;
  const bool distributed_optimizer = l.sharding.optimizer != Shard::none;
  const double bytes_per_param = distributed_optimizer ? 6 + 12 / num(l.dp) : 18;
  // compute_activation_memory (the sequence-parallel path).
  double act = s * b * h * (18 + 4 * ffn / h) * layers;
  act += 8 * s * b * p + s * b * h * p;  // embedding input and its dropout, p micro-batches in flight
  if (l.vpp > 1) act *= 1 + (p - 1) / (p * num(l.vpp));
  if (l.vpp == 1 && l.pp > 1) act *= std::min(1.0, num(l.microbatches()) / p);
  if (l.pp == 1) act += s * b * h * 4 * (1 + vocab / h);  // inputs to the output layer and the loss
  return on_most_loaded * bytes_per_param + act / (t * num(l.cp));
}

std::string_view to_string(MemoryForm f) {
  switch (f) {
    case MemoryForm::residual_terms: return "Eq. 18 + residual terms";
    case MemoryForm::eq18_capacity_share: return "Eq. 18 + share of capacity";
    case MemoryForm::megatron_capacity_share: return "Megatron-LM formula + share of capacity";
  }
  return "?";
}

MemoryForm form_of(const ResidualModel& r) {
  const bool terms = r.fixed_bytes != 0 || r.logits_bytes_per_element != 0 || r.optimizer_shard_bytes_per_param != 0 ||
                     r.cp_communicator_bytes != 0;
  return r.capacity_share > 0 && !terms ? MemoryForm::eq18_capacity_share : MemoryForm::residual_terms;
}

std::vector<MemoryFormScore> compare_memory_forms(const SpecLibrary& lib, const std::vector<MeasuredRun>& measured,
                                                  const FrameworkProfile& framework) {
  std::map<int, std::vector<ResidualObservation>> by_table;
  std::vector<int> tables;
  for (const auto& r : measured)
    if (!by_table.contains(r.run.table)) {
      tables.push_back(r.run.table);
      by_table[r.run.table] = observations(lib, measured, framework, r.run.table);
    }
  const ResidualFitOptions options;
  const double margin = options.margin_gib * kGiB;
  const auto eq18 = [](const ResidualObservation& r) {
    return peak_memory_bytes(r.model, r.cluster, r.layout, ResidualModel{});
  };
  const auto megatron = [](const ResidualObservation& r) { return megatron_theoretical_memory_bytes(r.model, r.layout); };
  const auto share_of = [&](auto peak) {
    return [=](const std::vector<ResidualObservation>& train) {
      return fit_capacity_share(peak_outcomes(train, peak), margin).share;
    };
  };
  const auto share_score = [&](auto peak) {
    return [=](double share, const std::vector<ResidualObservation>& runs) {
      return score_capacity_share(peak_outcomes(runs, peak), share);
    };
  };
  return {
      score_form(MemoryForm::residual_terms, 4, true, tables, by_table,
                 [&](const std::vector<ResidualObservation>& train) { return fit_residual(train, options).model; },
                 [](const ResidualModel& model, const std::vector<ResidualObservation>& runs) {
                   return score_verdicts(runs, model);
                 }),
      score_form(MemoryForm::eq18_capacity_share, 1, true, tables, by_table, share_of(eq18), share_score(eq18)),
      score_form(MemoryForm::megatron_capacity_share, 1, false, tables, by_table, share_of(megatron),
                 share_score(megatron)),
  };
}

const MemoryFormScore& best_memory_form(const std::vector<MemoryFormScore>& scores) {
  const MemoryFormScore* best = nullptr;
  const auto key = [](const MemoryFormScore& s) {
    return std::make_tuple(-s.held_out.right, s.held_out.false_fits, s.parameters);
  };
  for (const auto& s : scores)
    if (s.shippable && (best == nullptr || key(s) < key(*best))) best = &s;
  return *best;
}

}  // namespace headroom::validate
