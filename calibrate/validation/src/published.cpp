#include "headroom/validation/published.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "headroom/core/error.hpp"
#include "headroom/core/units.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/flops.hpp"
#include "headroom/estimator/memory.hpp"

namespace headroom::validate {
namespace {

using Record = std::vector<std::string>;

// A positive number of the table (a whole one where `whole`); anything else is an Error naming file, column and text.
double positive(const ReferenceTable& t, const Record& row, const std::string& column, bool whole = false) {
  const std::string& text = t.at(row, column);
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !(v > 0) || !std::isfinite(v) || (whole && v != std::floor(v)))
    throw Error(t.path.string() + ": " + column + " '" + text + "' is not a positive " +
                (whole ? "integer" : "number"));
  return v;
}

std::int64_t integer(const ReferenceTable& t, const Record& row, const std::string& column) {
  return static_cast<std::int64_t>(positive(t, row, column, true));
}

bool truth(const ReferenceTable& t, const Record& row, const std::string& column) {
  const std::string& text = t.at(row, column);
  if (text == "True") return true;
  if (text == "False") return false;
  throw Error(t.path.string() + ": " + column + " '" + text + "' is not True or False");
}

// "Korthikanti et al. 2022 Tables 3 and 5 (also ...)" → "Korthikanti et al. 2022": up to the first " (", ";" or "
// Table".
std::string short_source(const std::string& citation) {
  return citation.substr(0, std::min({citation.find(" ("), citation.find(';'), citation.find(" Table")}));
}

bool has(const ReferenceTable& t, const std::string& column) {
  return std::find(t.header.begin(), t.header.end(), column) != t.header.end();
}

// Megatron-LM as the row ran it: FP16 (or BF16) weights and gradients, FP32 master weights and Adam states, no
// distributed optimizer (it came in 2022, after these runs), unless the row says distributed_optimizer True (then the
// framework's precision and sharding: BF16 weights, FP32 main gradients, Adam sharded over DP) or gives a sharding
// code (another framework's run: its precision, that sharding). Rows of models with experts give ep and etp.
Layout row_layout(const ReferenceTable& t, const Record& row, const FrameworkProfile& framework) {
  Layout l = default_layout(framework);
  l.tp = integer(t, row, "tp");
  l.pp = integer(t, row, "pp");
  if (has(t, "cp")) l.cp = integer(t, row, "cp");
  // Megatron-LM's --account-for-embedding/loss-in-pipeline-split (optional columns).
  if (has(t, "account_for_embedding_in_pipeline_split"))
    l.split.embedding_in_split = truth(t, row, "account_for_embedding_in_pipeline_split");
  if (has(t, "account_for_loss_in_pipeline_split"))
    l.split.loss_in_split = truth(t, row, "account_for_loss_in_pipeline_split");
  l.vpp = integer(t, row, "vpp");
  l.dp = integer(t, row, "dp");
  l.mbs = integer(t, row, "mbs");
  l.gbs = integer(t, row, "gbs");
  l.seq = integer(t, row, "seq");
  l.recompute = parse_recompute(t.at(row, "recompute"));
  // Selective recompute's modules where the row names them (optional column; Megatron-LM's --recompute-modules).
  if (has(t, "recompute_modules") && !t.at(row, "recompute_modules").empty())
    l.recompute_modules = parse_recompute_modules(t.at(row, "recompute_modules"));
  l.schedule = l.vpp > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
  l.sequence_parallel = truth(t, row, "sequence_parallel");
  l.flash_attention = truth(t, row, "flash_attention");
  if (has(t, "ep")) l.ep = integer(t, row, "ep");
  if (has(t, "etp") && !t.at(row, "etp").empty()) l.etp = integer(t, row, "etp");  // empty: a dense model's
  if (has(t, "dispatcher") && t.at(row, "dispatcher") == "flex") l.dispatcher = ExpertDispatcher::flex;
  // fp8-<recipe> (Transformer Engine's: Megatron-LM and NeMo); anything else (bf16, fp16) is 16-bit GEMMs.
  if (has(t, "precision") && t.at(row, "precision").rfind("fp8", 0) == 0) {
    const std::string& p = t.at(row, "precision");
    if (p.rfind("fp8-", 0) != 0)
      throw Error(t.path.string() + ": precision '" + p + "' is not fp8-delayed or fp8-tensorwise");
    l.fp8 = parse_fp8_recipe(p.substr(4));
  }
  // Megatron-LM before 2023 waited for each pipeline send (megatron/p2p_communication.py at de7dc40f88:
  // batch_isend_irecv, then wait; overlap_p2p_comm came with f9283c5a8a, 2023).
  if (has(t, "p2p_overlap")) l.overlap_p2p_comm = truth(t, row, "p2p_overlap");
  // TransformerEngine userbuffers (Megatron-LM --tp-comm-overlap, NeMo ub_tp_comm_overlap): as the row's recipe says.
  if (has(t, "tp_comm_overlap")) l.tp_comm_overlap = truth(t, row, "tp_comm_overlap");
  // torch.compile of the blocks (torchtitan's runs) and the stages' layer counts where torchtitan's generated split
  // is uneven (optional columns; an empty count is an even split).
  if (has(t, "compile")) l.compile = truth(t, row, "compile");
  // The attention kernels the row's software ran (optional column; empty: the framework's curve).
  if (has(t, "attention_backend") && !t.at(row, "attention_backend").empty()) {
    const std::string& b = t.at(row, "attention_backend");
    const auto backend = attention_backend_from_string(b);
    if (!backend) throw Error(t.path.string() + ": attention_backend '" + b + "' is not cudnn or flash2");
    l.attention_backend = *backend;
  }
  if (has(t, "decoder_first_pipeline_num_layers") && !t.at(row, "decoder_first_pipeline_num_layers").empty())
    l.split.first_stage_layers = integer(t, row, "decoder_first_pipeline_num_layers");
  if (has(t, "decoder_last_pipeline_num_layers") && !t.at(row, "decoder_last_pipeline_num_layers").empty())
    l.split.last_stage_layers = integer(t, row, "decoder_last_pipeline_num_layers");
  // FP8 weights all-gathered in FP8 (Megatron-Bridge's FP8 recipes set fp8_param_gather) and the optimizer-state and
  // gradient formats (optional columns, as the knobs name them): NeMo 1.x's Apex distributed Adam keeps the FP32
  // master weight as a 16-bit remainder beside the BF16 weight with FP32 moments, as Megatron-LM's precision-aware
  // optimizer does, and reduces gradients in its optim.grad_sync_dtype.
  if (has(t, "fp8_param_gather")) l.fp8_param_gather = truth(t, row, "fp8_param_gather");
  if (has(t, "distributed_optimizer") && truth(t, row, "distributed_optimizer")) {
    OptimizerPrecision o;
    if (has(t, "use_precision_aware_optimizer")) o.precision_aware = truth(t, row, "use_precision_aware_optimizer");
    if (has(t, "grad_reduce_in_bf16")) o.grad_reduce_in_bf16 = truth(t, row, "grad_reduce_in_bf16");
    set_optimizer_precision(framework, o, l);
    return l;
  }
  // Another framework's run (PyTorch FSDP, DeepSpeed): the framework's precision, the row's sharding code (III: HSDP;
  // GGG: ZeRO-3) and, under DeepSpeed, its ZeRO defaults for that stage (overlap_comm on at stage 3).
  if (has(t, "sharding")) {
    l.sharding = parse_sharding_code(t.at(row, "sharding"));
    set_zero_settings(framework, LayoutRequest{}, l);
    return l;
  }
  l.precision = Precision{2, 2, 12};
  l.sharding = StateSharding{Shard::none, Shard::none, Shard::none};
  return l;
}

double measured_step_seconds(const ReferenceTable& t, const Record& row, const ModelSpec& m, const Layout& l) {
  const std::string& unit = t.at(row, "measured_unit");
  const double value = positive(t, row, "measured");
  if (unit.rfind("TFLOP/s per GPU, Narayanan et al. 2021 Eq. 3", 0) == 0)
    return narayanan_recompute_flops_per_step(m, l.seq, static_cast<double>(l.gbs)) /
           (value * 1e12 * static_cast<double>(l.gpus()));
  // Megatron-LM's training.py before its causal halving (2025): headroom's model FLOPs (flops.hpp).
  if (unit == "TFLOP/s per GPU, Megatron-LM num_floating_point_operations (non-causal)")
    return model_flops_per_step(m, l.seq, static_cast<double>(l.gbs)) / (value * 1e12 * static_cast<double>(l.gpus()));
  if (unit.rfind("iteration time, seconds", 0) == 0) return value;
  if (unit == "tokens/s per GPU")
    return static_cast<double>(l.gbs) * static_cast<double>(l.seq) / (value * static_cast<double>(l.gpus()));
  throw Error(t.path.string() + ": measured_unit '" + unit + "' is not one headroom converts");
}

void add(PublishedSourceScore& s, const PublishedRunScore& r) {
  s.runs += 1;
  s.mean_abs_error += std::abs(r.error);
  s.mean_error += r.error;
  s.worst_abs_error = std::max(s.worst_abs_error, std::abs(r.error));
  s.inside_band += r.inside_band ? 1 : 0;
  s.banded += r.banded ? 1 : 0;
  if (r.run->calculon_step_s > 0) {
    s.calculon_runs += 1;
    s.calculon_mean_abs_error += std::abs(r.run->calculon_step_s / r.run->measured_step_s - 1.0);
  }
}

void finish(PublishedSourceScore& s) {
  if (s.runs > 0) s.mean_abs_error /= s.runs, s.mean_error /= s.runs;
  if (s.calculon_runs > 0) s.calculon_mean_abs_error /= s.calculon_runs;
}

}  // namespace

std::vector<PublishedRun> published_runs(const SpecLibrary& lib, const FrameworkProfile& framework,
                                         const std::filesystem::path& runs_csv,
                                         const std::filesystem::path& calculon_csv) {
  const ReferenceTable t = read_reference_table(runs_csv);
  std::map<std::string, double> calculon;
  if (std::filesystem::exists(calculon_csv)) {
    const ReferenceTable c = read_reference_table(calculon_csv);
    for (const auto& row : c.rows)
      if (!c.at(row, "calculon_step_time_s").empty())
        calculon[c.at(row, "id")] = positive(c, row, "calculon_step_time_s");
  }
  std::vector<PublishedRun> runs;
  for (const auto& row : t.rows) {
    PublishedRun r;
    r.source = short_source(t.at(row, "source"));
    r.id = t.at(row, "id");
    r.model = lib.model(t.at(row, "model"));
    r.cluster = lib.cluster(t.at(row, "cluster"));
    r.layout = row_layout(t, row, framework);
    if (r.layout.gpus() != integer(t, row, "gpus"))
      throw Error(runs_csv.string() + ": " + r.id + ": tp·pp·dp is not the row's GPU count");
    validate_layout(r.model, r.layout);
    // Local DDP (2021) all-reduces after the backward, as Megatron-LM without --overlap-grad-reduce does.
    r.layout.overlap_grad_reduce = r.layout.overlap_param_gather = truth(t, row, "grad_overlap");
    // A run that ran out of memory (optional column outcome: ok or oom) has no step time.
    if (has(t, "outcome") && t.at(row, "outcome") != "ok") {
      if (t.at(row, "outcome") != "oom")
        throw Error(runs_csv.string() + ": " + r.id + ": outcome '" + t.at(row, "outcome") + "' is not ok or oom");
      r.out_of_memory = true;
    } else {
      r.measured_step_s = measured_step_seconds(t, row, r.model, r.layout);
    }
    if (has(t, "peak_memory_gib") && !t.at(row, "peak_memory_gib").empty())
      r.measured_peak_gib = positive(t, row, "peak_memory_gib");
    if (const auto it = calculon.find(r.id); it != calculon.end()) r.calculon_step_s = it->second;
    runs.push_back(std::move(r));
  }
  return runs;
}

PublishedMemoryValidation validate_published_memory(const std::vector<PublishedRun>& runs,
                                                    const FrameworkProfile& framework) {
  PublishedMemoryValidation v;
  for (const auto& run : runs) {
    const double peak = peak_memory_bytes(run.model, run.cluster, run.layout, framework.residual);
    PublishedMemoryScore s{&run, peak / kGiB,
                           memory_verdict(peak, run.cluster.gpu.usable_memory_bytes, framework.memory_band), 0.0};
    if (run.out_of_memory) {
      v.out_of_memory += 1;
      v.oom_predicted_fits += s.verdict == MemoryVerdict::fits ? 1 : 0;
    } else {
      v.trained += 1;
      v.trained_predicted_oom += s.verdict == MemoryVerdict::oom ? 1 : 0;
    }
    if (run.measured_peak_gib > 0) {
      s.error = s.predicted_peak_gib / run.measured_peak_gib - 1.0;
      v.printed += 1;
      v.mean_error += s.error;
      v.mean_abs_error += std::abs(s.error);
    }
    v.runs.push_back(s);
  }
  if (v.printed > 0) v.mean_error /= v.printed, v.mean_abs_error /= v.printed;
  return v;
}

PublishedValidation validate_published(const std::vector<PublishedRun>& runs, const PerfCoefficients& coefficients) {
  PublishedValidation v;
  for (const auto& run : runs) {
    if (run.out_of_memory) continue;
    const double predicted = estimate_perf(run.model, run.cluster, run.layout, coefficients).step_time_s;
    const ErrorBand& band = step_time_band_for(coefficients, run.layout.gpus());
    const bool inside =
        band.known && band.lower(predicted) <= run.measured_step_s && run.measured_step_s <= band.upper(predicted);
    v.runs.push_back({&run, predicted, predicted / run.measured_step_s - 1.0, inside, band.known});
  }
  for (const auto& r : v.runs) {
    auto it =
        std::find_if(v.sources.begin(), v.sources.end(), [&](const auto& s) { return s.source == r.run->source; });
    if (it == v.sources.end()) it = v.sources.insert(v.sources.end(), PublishedSourceScore{r.run->source});
    add(*it, r);
    add(v.all, r);
  }
  for (auto& s : v.sources) finish(s);
  v.all.source = "all";
  finish(v.all);
  return v;
}

StackFractionFit fit_stack_gemm_fraction(const std::vector<PublishedRun>& runs, const PerfCoefficients& shipped) {
  StackFractionFit f;
  f.attention_backend = shipped.attention_backend;
  f.shipped = shipped.stack_gemm_fraction;
  std::vector<const PublishedRun*> fitted;  // runs of GPUs the shipped coefficients price by their curves
  for (const auto& run : runs)
    if (PerfContext(shipped, run.cluster).device_curves) fitted.push_back(&run);
  f.runs = static_cast<int>(fitted.size());
  if (fitted.empty()) {
    f.fitted = f.shipped, f.shipped_is_fit = true;
    return f;
  }
  constexpr int kSteps = 50;  // 0.50, 0.51, ..., 1.00
  const auto fraction_at = [](int step) { return 0.5 + 0.01 * step; };
  std::vector<std::vector<double>> log_error(kSteps + 1);  // [step][run]
  for (int step = 0; step <= kSteps; ++step) {
    PerfCoefficients c = shipped;
    c.stack_gemm_fraction = fraction_at(step);
    for (const PublishedRun* run : fitted)
      log_error[static_cast<std::size_t>(step)].push_back(
          std::log(estimate_perf(run->model, run->cluster, run->layout, c).step_time_s / run->measured_step_s));
  }
  // The step with the least mean |log error| over the runs `keep` takes (the first of equals).
  const auto best = [&](const auto& keep) {
    int pick = 0;
    double least = std::numeric_limits<double>::infinity();
    for (int step = 0; step <= kSteps; ++step) {
      double sum = 0;
      int n = 0;
      for (std::size_t i = 0; i < fitted.size(); ++i)
        if (keep(*fitted[i])) sum += std::abs(log_error[static_cast<std::size_t>(step)][i]), ++n;
      if (n > 0 && sum / n < least) least = sum / n, pick = step;
    }
    return std::pair{pick, least};
  };
  const auto [step, score] = best([](const PublishedRun&) { return true; });
  f.fitted = fraction_at(step);
  f.mean_abs_log_error = score;
  std::vector<std::string> sources;
  for (const PublishedRun* run : fitted)
    if (std::find(sources.begin(), sources.end(), run->source) == sources.end()) sources.push_back(run->source);
  for (const std::string& held : sources) {
    const int others = best([&](const PublishedRun& r) { return r.source != held; }).first;
    StackFractionFold fold{held, 0, fraction_at(others), 0};
    for (std::size_t i = 0; i < fitted.size(); ++i)
      if (fitted[i]->source == held)
        fold.held_out_mean_abs_error += std::abs(std::expm1(log_error[static_cast<std::size_t>(others)][i])),
            ++fold.runs;
    f.held_out_mean_abs_error += fold.held_out_mean_abs_error;
    fold.held_out_mean_abs_error /= fold.runs;
    f.leave_one_source_out.push_back(fold);
  }
  f.held_out_mean_abs_error /= f.runs;
  f.shipped_is_fit = std::abs(f.fitted - f.shipped) < 1e-9;
  return f;
}

std::vector<StackFractionFit> stack_fraction_by_attention_backend(const std::vector<PublishedRun>& runs,
                                                                  const PerfCoefficients& shipped) {
  std::vector<StackFractionFit> fits = {fit_stack_gemm_fraction(runs, shipped)};
  fits.front().attention_backend = kEachRunsAttention;
  for (const std::string_view backend : kAttentionBackends) {
    std::vector<PublishedRun> every = runs;
    for (PublishedRun& run : every)
      if (PerfContext(shipped, run.cluster).device_curves)
        run.layout.attention_backend = *attention_backend_from_string(backend);  // kAttentionBackends' names
    fits.push_back(fit_stack_gemm_fraction(every, shipped));
    fits.back().attention_backend = backend;
  }
  return fits;
}

std::vector<PublishedCollective> published_collectives(const SpecLibrary& lib, const std::filesystem::path& csv) {
  const ReferenceTable t = read_reference_table(csv);
  std::vector<PublishedCollective> out;
  for (const auto& row : t.rows) {
    PublishedCollective c;
    c.source = short_source(t.at(row, "source"));
    c.id = t.at(row, "id");
    c.cluster = lib.cluster(t.at(row, "cluster"));
    const auto op = collective_from_name(t.at(row, "collective"));
    if (!op) throw Error(csv.string() + ": " + c.id + ": unknown collective '" + t.at(row, "collective") + "'");
    c.op = *op;
    c.gpus = integer(t, row, "gpus");
    c.gpus_per_node = integer(t, row, "gpus_per_node");
    if (c.gpus_per_node > c.cluster.gpus_per_node || c.gpus % c.gpus_per_node != 0)
      throw Error(csv.string() + ": " + c.id + ": gpus_per_node must divide gpus and fit the cluster's nodes");
    c.bytes = positive(t, row, "bytes");
    c.busbw_bytes_per_s = positive(t, row, "busbw_GBps") * 1e9;
    out.push_back(std::move(c));
  }
  return out;
}

double intra_node_busbw_fraction(const std::vector<PublishedCollective>& rows, int* used) {
  double sum = 0;
  int n = 0;
  for (const auto& c : rows) {
    if (c.gpus > c.gpus_per_node || c.bytes < 1024.0 * 1024 * 1024) continue;
    sum += c.busbw_bytes_per_s / c.cluster.intra_node.bytes_per_s;
    ++n;
  }
  if (used) *used = n;
  return n > 0 ? sum / n : 0;
}

CollectiveValidation validate_collectives(const std::vector<PublishedCollective>& rows,
                                          const PerfCoefficients& coefficients) {
  CollectiveValidation v;
  // Latency-bound, bandwidth-bound, across nodes: the three regimes the link model has to get right.
  const auto group_of = [](const PublishedCollective& c) {
    if (c.gpus > c.gpus_per_node) return std::string("across nodes");
    return std::string(c.bytes <= 64.0 * 1024 * 1024 ? "one node, up to 64 MiB" : "one node, over 64 MiB");
  };
  for (const auto& c : rows) {
    const PerfContext p(coefficients, c.cluster);
    const double t = ring_collective_seconds(c.op, c.bytes, c.gpus, c.gpus_per_node, p.intra, p.inter);
    const double busbw = c.bytes * bus_bandwidth_factor(c.op, c.gpus) / t;
    v.rows.push_back({&c, busbw, busbw / c.busbw_bytes_per_s - 1.0});
    const std::string g = group_of(c);
    auto it = std::find_if(v.groups.begin(), v.groups.end(), [&](const auto& x) { return x.group == g; });
    if (it == v.groups.end()) it = v.groups.insert(v.groups.end(), CollectiveGroupScore{g});
    ++it->rows;
    it->mean_abs_error += std::abs(v.rows.back().error);
    it->mean_error += v.rows.back().error;
  }
  for (auto& g : v.groups) {
    g.mean_abs_error /= g.rows;
    g.mean_error /= g.rows;
  }
  v.intra_node_busbw_fraction = intra_node_busbw_fraction(rows, &v.intra_node_rows);
  v.shipped_is_measured = v.intra_node_rows > 0 &&
                          std::abs(v.intra_node_busbw_fraction - kMeasuredIntraNodeEfficiency) <= 0.005 &&
                          coefficients.intra_efficiency == kMeasuredIntraNodeEfficiency;
  return v;
}

}  // namespace headroom::validate
