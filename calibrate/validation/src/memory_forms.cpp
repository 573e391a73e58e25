#include "headroom/validation/memory_forms.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
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
  const double attention = 2 * h * h * (1 + num(m.num_kv_heads) / num(m.num_heads)) * query_width(m) / h;
  const double mlp = 2 * h * ffn * (gated_mlp(m) ? 1.5 : 1.0);
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
  const auto megatron = [](const ResidualObservation& r) {
    return megatron_theoretical_memory_bytes(r.model, r.layout);
  };
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
      score_form(
          MemoryForm::residual_terms, 4, true, tables, by_table,
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

std::vector<ThesisMtslCell> thesis_mtsl_cells(const SpecLibrary& lib, const FrameworkProfile& fsdp) {
  const auto j = read_json_file(lib.data_dir() / "reference" / "thesis.json");
  std::vector<ThesisMtslCell> cells;
  for (const auto& [rank, row] : j.at("table_B4_mtsl").items())
    for (const auto& [config, value] : row.items()) {  // "fsdp4_tp2"
      Layout l = default_layout(fsdp);
      l.tp = std::stoll(config.substr(config.find("_tp") + 3));
      l.dp = 8 / l.tp;
      l.mbs = 1;
      l.gbs = l.dp;  // one sample per FSDP rank
      l.lora.rank = std::stoll(rank);
      cells.push_back({l.lora.rank, {l, value.get<std::int64_t>()}});
    }
  return cells;
}

std::vector<MtslFormScore> compare_mtsl_forms(const ModelSpec& m, const ClusterSpec& c,
                                              const std::vector<ThesisMtslCell>& cells, const ResidualModel& base) {
  std::vector<MtslFormScore> forms;
  forms.push_back({"unit buffers fitted (2-6)", MtslFitOptions{}, 0, 0, 0});
  for (std::int64_t units = 2; units <= 6; ++units) {
    MtslFitOptions o;
    o.unit_buffers_min = o.unit_buffers_max = units;
    forms.push_back({"unit buffers = " + std::to_string(units), o, 0, 0, 0});
  }
  std::vector<std::int64_t> ranks;
  for (const auto& cell : cells)
    if (std::find(ranks.begin(), ranks.end(), cell.rank) == ranks.end()) ranks.push_back(cell.rank);
  for (auto& f : forms) {
    int nonzero = 0;
    for (const std::int64_t held : ranks) {
      std::vector<MtslObservation> train;
      for (const auto& cell : cells)
        if (cell.rank != held) train.push_back(cell.observation);
      const MtslFit fit = fit_residual_to_mtsl(m, c, train, base, f.options);
      for (const auto& cell : cells) {
        if (cell.rank != held) continue;
        Layout l = cell.observation.layout;
        l.fsdp_unit_buffers = fit.fsdp_unit_buffers;
        const std::int64_t predicted = max_trainable_seq(m, c, l, fit.model).tokens;
        if (cell.observation.measured_tokens == 0) {
          f.zeros_wrong += predicted > 0;
          continue;
        }
        const double e = mtsl_relative_error(predicted, cell.observation.measured_tokens);
        f.mean_error += e;
        f.worst_error = std::max(f.worst_error, e);
        ++nonzero;
      }
    }
    if (nonzero > 0) f.mean_error /= nonzero;
  }
  return forms;
}

ThesisMtslValidation validate_thesis_mtsl(const SpecLibrary& lib, const FrameworkProfile& fsdp) {
  const ModelSpec m = lib.model("llama3.1-70b");
  const ClusterSpec c = lib.cluster("lumi-mi250x");
  const auto cells = thesis_mtsl_cells(lib, fsdp);
  ThesisMtslValidation v;
  v.forms = compare_mtsl_forms(m, c, cells, fsdp.residual);
  const std::string derived = "unit buffers = " + std::to_string(fsdp.fsdp_unit_buffers);
  const auto shipped = std::find_if(v.forms.begin(), v.forms.end(), [&](const auto& f) { return f.form == derived; });
  if (shipped == v.forms.end())
    throw Error(fsdp.name + ": fsdp_unit_buffers " + std::to_string(fsdp.fsdp_unit_buffers) +
                " is not one of the candidates scored on Table B.4 (valid: 2 to 6)");
  v.shipped = static_cast<std::size_t>(shipped - v.forms.begin());
  std::vector<MtslObservation> all;
  all.reserve(cells.size());
  for (const auto& cell : cells) all.push_back(cell.observation);
  v.refit = fit_residual_to_mtsl(m, c, all, fsdp.residual, v.forms[v.shipped].options);
  const auto close = [](double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); };
  v.shipped_is_fit = v.refit.fsdp_unit_buffers == fsdp.fsdp_unit_buffers &&
                     close(v.refit.model.fixed_bytes, fsdp.residual.fixed_bytes) &&
                     close(v.refit.model.logits_bytes_per_element, fsdp.residual.logits_bytes_per_element);
  return v;
}

}  // namespace headroom::validate
