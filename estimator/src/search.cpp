#include "headroom/estimator/search.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>

#include "headroom/core/error.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

void divisors_of(std::int64_t n, std::vector<std::int64_t>& out) {
  out.clear();
  std::vector<std::int64_t>::size_type small_end = 0;
  for (std::int64_t i = 1; i * i <= n; ++i) {
    if (n % i != 0) continue;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(small_end), i);
    ++small_end;
    if (i * i != n) out.insert(out.begin() + static_cast<std::ptrdiff_t>(small_end), n / i);
  }
}

bool compare(std::int64_t a, Constraint::Op op, std::int64_t b) {
  switch (op) {
    case Constraint::Op::eq: return a == b;
    case Constraint::Op::le: return a <= b;
    case Constraint::Op::ge: return a >= b;
    case Constraint::Op::lt: return a < b;
    case Constraint::Op::gt: return a > b;
  }
  return true;
}

// Keeps `best` sorted by step time, at most `top` long, within its reserved capacity.
void insert_top(std::vector<RankedLayout>& best, std::size_t top, const RankedLayout& r) {
  if (top == 0 || (best.size() == top && r.step_time_s >= best.back().step_time_s)) return;
  auto pos = std::upper_bound(best.begin(), best.end(), r.step_time_s,
                              [](double t, const RankedLayout& x) { return t < x.step_time_s; });
  if (best.size() == top) best.pop_back();
  best.insert(pos, r);
}

// Front sorted by peak memory ascending with step time strictly decreasing. A point is dominated by one before the
// first of no less memory that takes no more time, or by that first one where it needs the same memory.
void insert_pareto(std::vector<RankedLayout>& front, const RankedLayout& r) {
  auto pos = std::lower_bound(front.begin(), front.end(), r.peak_bytes,
                              [](const RankedLayout& x, double p) { return x.peak_bytes < p; });
  if (pos != front.begin() && std::prev(pos)->step_time_s <= r.step_time_s) return;
  if (pos != front.end() && pos->peak_bytes == r.peak_bytes && pos->step_time_s <= r.step_time_s) return;
  auto end = pos;
  while (end != front.end() && end->step_time_s >= r.step_time_s) ++end;
  pos = front.erase(pos, end);
  front.insert(pos, r);
}

}  // namespace

Constraint parse_constraint(std::string_view text) {
  static constexpr std::string_view kValid =
      "(valid: tp, cp, pp, dp, vpp, mbs with =, <=, >=, <, >; recompute=none|selective|full|op; sharding=NAME; "
      "schedule=1f1b|interleaved|gpipe|zero-bubble|zbv)";
  const std::string shown = "--constraint '" + std::string(text) + "'";
  const auto op_at = text.find_first_of("<>=");
  if (op_at == std::string_view::npos || op_at == 0)
    throw Error(shown + " has no field and operator " + std::string(kValid));
  const std::string_view name = text.substr(0, op_at);
  std::string_view rest = text.substr(op_at);
  Constraint c;
  if (rest.starts_with("<=")) {
    c.op = Constraint::Op::le;
    rest.remove_prefix(2);
  } else if (rest.starts_with(">=")) {
    c.op = Constraint::Op::ge;
    rest.remove_prefix(2);
  } else if (rest.starts_with("<")) {
    c.op = Constraint::Op::lt;
    rest.remove_prefix(1);
  } else if (rest.starts_with(">")) {
    c.op = Constraint::Op::gt;
    rest.remove_prefix(1);
  } else if (rest.starts_with("=")) {
    c.op = Constraint::Op::eq;
    rest.remove_prefix(rest.starts_with("==") ? 2 : 1);
  }
  if (rest.empty()) throw Error(shown + " has no value " + std::string(kValid));
  if (name == "recompute" || name == "sharding" || name == "schedule") {
    if (c.op != Constraint::Op::eq) throw Error(shown + ": " + std::string(name) + " takes '=' only");
    try {
      if (name == "recompute") {
        c.field = Constraint::Field::recompute;
        c.recompute = parse_recompute(rest);
      }
      if (name == "sharding") {
        c.field = Constraint::Field::sharding;
        c.sharding = parse_sharding(rest);
      }
      if (name == "schedule") {
        c.field = Constraint::Field::schedule;
        c.schedule = parse_schedule(rest);
      }
    } catch (const Error& e) {
      throw Error(shown + ": " + e.what());
    }
    return c;
  }
  static constexpr std::pair<std::string_view, Constraint::Field> kNumeric[] = {
      {"tp", Constraint::Field::tp}, {"cp", Constraint::Field::cp},   {"pp", Constraint::Field::pp},
      {"dp", Constraint::Field::dp}, {"vpp", Constraint::Field::vpp}, {"mbs", Constraint::Field::mbs}};
  const auto* it =
      std::find_if(std::begin(kNumeric), std::end(kNumeric), [&](const auto& x) { return x.first == name; });
  if (it == std::end(kNumeric))
    throw Error(shown + ": unknown field '" + std::string(name) + "' " + std::string(kValid));
  c.field = it->second;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), c.value);
  if (ec != std::errc() || ptr != rest.data() + rest.size() || c.value < 0)
    throw Error(shown + ": '" + std::string(rest) + "' is not a non-negative integer");
  return c;
}

bool satisfies(const Layout& l, const Constraint& c) {
  switch (c.field) {
    case Constraint::Field::tp: return compare(l.tp, c.op, c.value);
    case Constraint::Field::cp: return compare(l.cp, c.op, c.value);
    case Constraint::Field::pp: return compare(l.pp, c.op, c.value);
    case Constraint::Field::dp: return compare(l.dp, c.op, c.value);
    case Constraint::Field::vpp: return compare(l.vpp, c.op, c.value);
    case Constraint::Field::mbs: return compare(l.mbs, c.op, c.value);
    case Constraint::Field::recompute: return l.recompute == c.recompute;
    case Constraint::Field::sharding: return l.sharding == c.sharding;
    case Constraint::Field::schedule: return l.schedule == c.schedule;
  }
  return true;
}

void restrict_to_framework(SearchOptions& o, const FrameworkProfile& f, bool megatron_fsdp) {
  const bool sharding_asked = std::any_of(o.constraints.begin(), o.constraints.end(),
                                          [](const Constraint& c) { return c.field == Constraint::Field::sharding; });
  const std::vector<StateSharding>& shardings = launchable_shardings(f, megatron_fsdp);
  if (!sharding_asked && !shardings.empty()) o.shardings = shardings;
  if (!f.supported_recompute.empty()) o.recomputes = f.supported_recompute;
  if (!f.supported_schedules.empty()) o.schedules = f.supported_schedules;
  o.pipeline_shardings = f.pipeline_shardings;
  o.context_parallel = f.context_parallel;
  o.uneven_stages = f.uneven_pipeline_stages;
}

namespace {

// One search's fixed inputs and its result; each price_* call walks one level of the layout space.
struct Search {
  const ModelSpec& m;
  const ClusterSpec& cluster;
  const ResidualModel& residual;
  const SearchOptions& o;
  const Layout& base;
  PerfContext ctx;
  std::vector<StateSharding> shardings;
  SearchResult& result;
  std::vector<RankedLayout> shape_fits;  // the fitting layouts of the shape being priced (insert_undominated)
  std::vector<std::size_t> order;
  std::vector<char> dominated;
  // The micro-batch passes of the shape being priced, by SP, recompute and micro-batch size: priced once for all of
  // the shape's schedules and shardings (throughput.hpp MicrobatchPasses); `priced` marks the slots filled.
  std::vector<MicrobatchPasses> passes;
  std::vector<char> priced;
  PipelineStageCounts stage_counts;  // the shape's first, second and last stages, counted once (memory.hpp)

  static constexpr std::size_t kRecomputes = 4;  // Recompute's values
  static_assert(static_cast<std::size_t>(Recompute::op) + 1 == kRecomputes);
  [[nodiscard]] std::size_t passes_slot(const Layout& l, std::size_t mbs_index, std::size_t mbs_count) const {
    const std::size_t sp = l.sequence_parallel ? 1 : 0;
    return (sp * kRecomputes + static_cast<std::size_t>(l.recompute)) * mbs_count + mbs_index;
  }

  [[nodiscard]] bool wanted(const Layout& l) const {
    return std::all_of(o.constraints.begin(), o.constraints.end(),
                       [&](const Constraint& c) { return satisfies(l, c); });
  }
  [[nodiscard]] bool schedule_wanted(Schedule x) const {
    return o.schedules.empty() || std::find(o.schedules.begin(), o.schedules.end(), x) != o.schedules.end();
  }

  // Every micro-batch size of a layout whose other fields are set. Memory grows with b (activations, logits):
  // the first b that does not fit ends the row.
  void price_microbatches(Layout& l, const std::vector<std::int64_t>& mbss) {
    const double capacity = cluster.gpu.usable_memory_bytes;
    bool full = false;
    for (std::size_t i = 0; i < mbss.size(); ++i) {
      l.mbs = mbss[i];
      if (!wanted(l) || !interleaving_runs(l)) continue;
      if (zero_hpz_off_node(l, cluster.gpus_per_node)) continue;  // hpZ over the node's DP ranks only
      ++result.evaluated;
      if (o.on_enumerated) o.on_enumerated(l);
      if (full || o.enumerate_only) continue;
      ++result.memory_checked;
      const double peak = peak_memory_bytes(m, cluster, l, residual, stage_counts);
      if (o.peak_band.known ? o.peak_band.upper(peak) > capacity : peak > capacity) {
        full = true;
        continue;
      }
      ++result.fitting;
      const std::size_t slot = passes_slot(l, i, mbss.size());
      if (priced[slot] == 0) passes[slot] = microbatch_passes(m, ctx, l), priced[slot] = 1;
      const PerfEstimate e = estimate_perf(m, ctx, l, passes[slot]);
      const RankedLayout ranked{l, e.step_time_s, e.tokens_per_s, e.tflops_per_gpu, e.mfu, peak, capacity};
      shape_fits.push_back(ranked);
      insert_pareto(result.pareto, ranked);
    }
  }

  // The layouts of one shape (t, c, p, d, v, ep, etp) that fit, into the top list, but none that a twin dominates: a
  // layout of the same shape and micro-batch that differs only in its choices (SP, sharding, recompute, schedule)
  // and is no slower and needs no more memory (the earlier of two equal ones stays). Kept in enumeration order.
  // Sorted by (mbs, step time, peak, position), a layout is dominated exactly when one before it of its micro-batch
  // size needs no more memory: one sweep with the least peak so far.
  void insert_undominated() {
    order.clear();
    for (std::size_t i = 0; i < shape_fits.size(); ++i) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const RankedLayout &x = shape_fits[a], &y = shape_fits[b];
      if (x.layout.mbs != y.layout.mbs) return x.layout.mbs < y.layout.mbs;
      if (x.step_time_s != y.step_time_s) return x.step_time_s < y.step_time_s;
      if (x.peak_bytes != y.peak_bytes) return x.peak_bytes < y.peak_bytes;
      return a < b;
    });
    dominated.assign(shape_fits.size(), 0);
    double least_peak = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const RankedLayout& x = shape_fits[order[k]];
      const bool first_of_mbs = k == 0 || shape_fits[order[k - 1]].layout.mbs != x.layout.mbs;
      if (!first_of_mbs && least_peak <= x.peak_bytes) dominated[order[k]] = 1;
      least_peak = first_of_mbs ? x.peak_bytes : std::min(least_peak, x.peak_bytes);
    }
    for (std::size_t i = 0; i < shape_fits.size(); ++i) {
      if (dominated[i] != 0) {
        ++result.dominated;
        continue;
      }
      insert_top(result.best, o.top, shape_fits[i]);
    }
    shape_fits.clear();
  }

  // The expert splits of one (t, c, p, d, v) shape (a dense model has one): etp = t (Megatron-LM's default) or 1,
  // ep dividing the experts with etp·ep dividing t·c·d (and, under the flex dispatcher, spanning nodes the model's
  // routing groups divide or are divided by: validate_on_cluster); then price_choices for each.
  void price_expert_splits(Layout& l, std::int64_t v, const std::vector<std::int64_t>& mbss,
                           const std::vector<std::int64_t>& eps) {
    if (m.num_experts == 0) {
      price_choices(l, v, mbss);
      insert_undominated();
      return;
    }
    const std::int64_t stage_gpus = l.tp * l.cp * l.dp;
    for (const std::int64_t etp : {l.tp, std::int64_t{1}}) {
      if (m.moe_ffn_hidden_size % etp != 0) continue;
      l.etp = etp;
      for (const std::int64_t ep : eps) {
        if (stage_gpus % (etp * ep) != 0) continue;
        l.ep = ep;
        if (l.dispatcher == ExpertDispatcher::flex && !group_routing_priced(m, expert_nodes(l, cluster.gpus_per_node)))
          continue;
        price_choices(l, v, mbss);
        insert_undominated();
      }
      if (l.tp == 1) break;  // etp = t = 1: one split
    }
  }

  // The schedules, SP, shardings and recompute modes of one (t, c, p, d, v) shape, then its micro-batch sizes.
  void price_choices(Layout& l, std::int64_t v, const std::vector<std::int64_t>& mbss) {
    const std::int64_t p = l.pp;
    passes.resize(std::max(passes.size(), 2 * kRecomputes * mbss.size()));
    priced.assign(2 * kRecomputes * mbss.size(), 0);
    l.vpp = v;
    // Stage counts with the LM head on the last stage, for every schedule but zbv, which puts it on the first
    // (layout.hpp head_stage): its counts and micro-batch passes are priced anew.
    l.schedule = Schedule::one_f_one_b;
    stage_counts = pipeline_stage_counts(m, l);
    // 1F1B/interleaved, GPipe (v = 1, p > 1), zero-bubble and looped-bfs (v > 1), zbv (v = 2; layout.cpp
    // validate_layout), zbv last
    for (int sched = 0; sched < 5; ++sched) {
      if ((sched == 1 && (v > 1 || p == 1)) || ((sched == 2 || sched == 3) && v == 1)) continue;
      if (sched == 4 && (v != 2 || l.split.uneven() || m.num_experts > 0)) continue;
      l.schedule = sched == 4   ? Schedule::zbv
                   : sched == 3 ? Schedule::looped_bfs
                   : sched == 2 ? Schedule::zero_bubble
                   : sched == 1 ? Schedule::gpipe
                   : v > 1      ? Schedule::interleaved
                                : Schedule::one_f_one_b;
      // p = 1 runs no pipeline: any framework launches it whatever schedules it lists.
      if (p > 1 && !schedule_wanted(l.schedule)) continue;
      if (!bf16_layers_priced(m, l)) continue;  // an FP8 run's BF16 layers past the end chunks (validate_layout)
      if (l.schedule == Schedule::zbv) {
        stage_counts = pipeline_stage_counts(m, l);
        std::fill(priced.begin(), priced.end(), 0);
      }
      for (int sp = 0; sp < 2; ++sp) {  // the framework's default, then the other (off, or on where it is off)
        if (sp == 1 && (l.tp == 1 || !o.try_without_sp)) continue;
        // Sequence parallelism splits across the tensor-parallel group: none at t = 1 (Megatron-LM's arguments.py
        // turns it off there, Megatron-core's ModelParallelConfig refuses it).
        l.sequence_parallel = l.tp > 1 && (sp == 0 ? base.sequence_parallel : !base.sequence_parallel);
        // --tp-comm-overlap: wherever Megatron-LM runs it (t ≥ 2 with SP; layout.cpp).
        l.tp_comm_overlap = base.tp_comm_overlap && l.tp > 1 && l.sequence_parallel;
        if (m.num_experts > 0 && l.tp > 1 && !l.sequence_parallel) continue;  // Megatron-LM requires SP with experts
        for (const StateSharding& s : shardings) {
          // Megatron-LM's precision-aware optimizer runs only as the distributed optimizer (layout.cpp).
          if (base.optimizer_precision.precision_aware && s.optimizer == Shard::none) continue;
          // DeepSpeed's pipeline engine runs ZeRO-0 and ZeRO-1 only (framework.hpp pipeline_shardings).
          if (p > 1 && !o.pipeline_shardings.empty() &&
              std::find(o.pipeline_shardings.begin(), o.pipeline_shardings.end(), s) == o.pipeline_shardings.end())
            continue;
          l.sharding = s;
          if (l.zero.deepspeed) l.zero.overlap_comm = zero_overlap_comm_default(s);  // DeepSpeed's default per stage
          for (Recompute r : o.recomputes) {
            if (r == Recompute::op && !op_recompute_priced(m, l)) continue;
            l.recompute = r;
            price_microbatches(l, mbss);
          }
        }
      }
    }
  }
};

}  // namespace

SearchResult rank_layouts(const ModelSpec& m, const ClusterSpec& cluster, const Layout& base,
                          const ResidualModel& residual, const PerfCoefficients& coefficients, const SearchOptions& o) {
  if (o.gpus <= 0) throw Error(field("gpus") + " must be a positive integer (got " + std::to_string(o.gpus) + ")");
  if (o.seq <= 0) throw Error(field("seq") + " must be a positive integer (got " + std::to_string(o.seq) + ")");
  if (o.gbs <= 0) throw Error(field("gbs") + " must be a positive integer (got " + std::to_string(o.gbs) + ")");
  refuse_unpriced_experts(m, base);
  refuse_unpriced_precision(base);
  validate_on_cluster(m, base, cluster);
  require_whole_nodes(o.gpus, cluster);
  SearchResult result;
  Search search{m,  cluster, residual, o,  base, PerfContext(coefficients, cluster), o.shardings, result, {},
                {}, {},      {},       {}, {}};
  search.shape_fits.reserve(4096);
  search.order.reserve(4096);
  search.dominated.reserve(4096);
  search.passes.reserve(2 * Search::kRecomputes * 64);
  search.priced.reserve(2 * Search::kRecomputes * 64);
  if (search.shardings.empty())
    for (const auto& s : all_shardings())
      if (satisfies_principle1(s)) search.shardings.push_back(s);
  result.best.reserve(o.top + 1);
  result.pareto.reserve(4096);
  std::vector<std::int64_t> tps, cps, pps, vpps, mbss, eps;
  tps.reserve(4096);
  cps.reserve(4096);
  pps.reserve(4096);
  vpps.reserve(4096);
  mbss.reserve(8192);

  Layout l = base;
  l.seq = o.seq;
  l.gbs = o.gbs;
  divisors_of(o.gpus, tps);
  if (m.num_experts > 0) divisors_of(std::gcd(m.num_experts, o.gpus), eps);  // ep divides E and N
  for (std::int64_t t : tps) {
    if (m.num_heads % t != 0 || m.num_kv_heads % t != 0) continue;
    divisors_of(o.gpus / t, cps);
    for (std::int64_t c : cps) {
      if (c > 1 && !o.context_parallel) break;  // divisors ascend: 1 first
      if (c > 1 && (o.seq % (2 * c) != 0 || !context_parallel_priced(m, l))) continue;
      divisors_of(o.gpus / (t * c), pps);
      for (std::int64_t p : pps) {
        // p | L: L/p layers a stage; otherwise Megatron-LM's uneven first/last stages, where the framework has them,
        // or DeepSpeed's balanced partition, which takes any p up to L.
        PipelineSplit split;
        split.partition_balanced = base.split.partition_balanced;
        if (split.partition_balanced && p > m.num_layers) continue;
        if (m.num_layers % p != 0 && !split.partition_balanced) {
          const auto uneven = o.uneven_stages ? balanced_uneven_split(m.num_layers, p) : std::nullopt;
          if (!uneven) continue;
          split = *uneven;
        }
        const std::int64_t d = o.gpus / (t * c * p);
        if (o.gbs % d != 0) continue;
        divisors_of(o.gbs / d, mbss);
        l.tp = t, l.cp = c, l.pp = p, l.dp = d;
        l.split = split;
        divisors_of(split.partition_balanced ? 1 : chunkable_layers(m, l),
                    vpps);  // DeepSpeed's engine does not interleave
        for (std::int64_t v : vpps)
          if ((o.max_vpp <= 0 || v <= o.max_vpp) && (p > 1 || v == 1)) search.price_expert_splits(l, v, mbss, eps);
      }
    }
  }
  // Points that buy memory at more than pareto_slowdown × the fastest step (CP 1024 at 0.0% MFU) are no choice
  // anyone makes: the front keeps the trade-offs within that factor.
  if (!result.pareto.empty()) {
    const double fastest = result.pareto.back().step_time_s;
    std::erase_if(result.pareto, [&](const RankedLayout& x) { return x.step_time_s > o.pareto_slowdown * fastest; });
  }
  return result;
}

}  // namespace headroom
