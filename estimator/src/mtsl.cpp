#include "headroom/estimator/mtsl.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"

namespace headroom {
namespace {

struct Peak {
  double bytes = 0;
  std::int64_t stage = 0;
};

// The first or the last stage binds (memory.hpp peak_memory_bytes); no allocation.
Peak peak_at(const ModelSpec& m, const ClusterSpec& c, Layout& l, const ResidualModel& r, std::int64_t seq) {
  l.seq = seq;
  const double first = stage_memory(m, c, l, r, 0).total();
  if (l.pp == 1) return {first, 0};
  const double last = stage_memory(m, c, l, r, l.pp - 1).total();
  return last > first ? Peak{last, l.pp - 1} : Peak{first, 0};
}

std::string_view largest_term(const StageMemory& s) {
  std::string_view name = "params";
  double best = s.params;
  const auto consider = [&](double v, std::string_view n) {
    if (v > best) best = v, name = n;
  };
  consider(s.grads, "grads");
  consider(s.optimizer, "optimizer");
  consider(s.activations, "activations");
  consider(s.residual, "residual");
  return name;
}

}  // namespace

std::int64_t sequence_granularity(const Layout& l) { return l.cp > 1 ? 2 * l.cp : 1; }

// Memory is a + b·s when attention is FlashAttention (4D paper Eq. 17; the residual's logits term is linear
// too) at each moment of the step (memory.hpp StepMoment): the closed form is taken per stage and moment and the
// smallest wins. Without FlashAttention the stored softmax adds s² (Korthikanti et al. 2023, Sec. 4.1): bisect.
MtslResult max_trainable_seq(const ModelSpec& m, const ClusterSpec& c, const Layout& layout, const ResidualModel& r,
                             double peak_scale) {
  if (!(peak_scale > 0.0 && std::isfinite(peak_scale)))
    throw Error("the peak's scale " + std::to_string(peak_scale) + " must be a positive number");
  Layout l = layout;
  MtslResult res;
  res.granularity = sequence_granularity(l);
  res.capacity_bytes = c.gpu.usable_memory_bytes;
  const std::int64_t g = res.granularity, k_max = kMaxMtslTokens / g;
  const double cap = res.capacity_bytes / peak_scale;  // peak_scale·peak <= capacity
  const auto at = [&](std::int64_t k) { return peak_at(m, c, l, r, k * g); };

  std::int64_t k = 0;  // largest multiple of g that fits
  const Peak p1 = at(1);
  if (p1.bytes <= cap) {
    res.closed_form = l.flash_attention;
    if (res.closed_form) {
      double guess = static_cast<double>(k_max);
      const auto moment_bytes = [&](std::int64_t kk, std::int64_t stage, StepMoment mo) {
        l.seq = kk * g;
        return stage_memory_at(m, c, l, r, stage, mo).total();
      };
      for (const std::int64_t stage : {std::int64_t{0}, l.pp - 1}) {
        for (const StepMoment mo : {StepMoment::activations, StepMoment::gradients}) {
          const double v1 = moment_bytes(1, stage, mo), slope = moment_bytes(2, stage, mo) - v1;
          if (slope > 0) guess = std::min(guess, std::floor((cap - v1) / slope) + 1.0);
        }
      }
      k = std::max<std::int64_t>(1, static_cast<std::int64_t>(guess));
      // Floating-point rounding can put the closed form one step off: confirm both sides.
      while (k > 1 && at(k).bytes > cap) --k;
      while (k < k_max && at(k + 1).bytes <= cap) ++k;
    } else {
      std::int64_t lo = 1, hi = 2;  // at(lo) fits; find hi that does not
      while (hi < k_max && at(hi).bytes <= cap) lo = hi, hi = std::min(k_max, hi * 2);
      if (hi == k_max && at(hi).bytes <= cap) lo = hi;
      while (hi - lo > 1) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        (at(mid).bytes <= cap ? lo : hi) = mid;
      }
      k = lo;
    }
  }
  res.tokens = k * g;
  res.capped = k >= k_max;
  if (k == 0) {
    res.binding_stage = p1.stage;
    res.peak_bytes = p1.bytes;
    res.next_peak_bytes = p1.bytes;
    l.seq = g;
    const StageMemory s = stage_memory(m, c, l, r, p1.stage);
    res.binding_term = largest_term(s);
    res.binding_moment = s.moment;
    return res;
  }
  res.peak_bytes = at(k).bytes;
  const Peak over = at(k + 1);
  res.next_peak_bytes = over.bytes;
  res.binding_stage = over.stage;
  // The term that grew most between the shortest sequence and the first one that does not fit, at the moment
  // that crosses capacity.
  l.seq = (k + 1) * g;
  const StageMemory long_seq = stage_memory(m, c, l, r, over.stage);
  res.binding_moment = long_seq.moment;
  l.seq = g;
  const StageMemory short_seq = stage_memory_at(m, c, l, r, over.stage, long_seq.moment);
  const double act = long_seq.activations - short_seq.activations, resid = long_seq.residual - short_seq.residual;
  res.binding_term = resid > act ? "residual" : "activations";
  return res;
}

MtslInterval mtsl_interval(const ModelSpec& m, const ClusterSpec& c, const Layout& layout, const ResidualModel& r,
                           const ErrorBand& peak_band) {
  if (!peak_band.known) return {};
  const double lower_scale = 1.0 - peak_band.low;  // the band's lower end of the peak
  return {max_trainable_seq(m, c, layout, r, peak_band.upper(1.0)).tokens,
          lower_scale > 0.0 ? max_trainable_seq(m, c, layout, r, lower_scale).tokens : kMaxMtslTokens, true};
}

std::vector<LongestLayout> longest_sequence_layouts(const ModelSpec& m, const ClusterSpec& c, const Layout& base,
                                                    const ResidualModel& r, const PerfCoefficients& coefficients,
                                                    SearchOptions o, double peak_scale, const ErrorBand& peak_band) {
  if (o.gpus <= 0) throw Error(field("gpus") + " must be a positive integer (got " + std::to_string(o.gpus) + ")");
  if (o.gpus > kMaxSearchGpus)
    throw Error(field("gpus") + " " + std::to_string(o.gpus) + " is more than the search takes (at most " +
                std::to_string(kMaxSearchGpus) + ")");
  const bool batch_given = o.gbs > 0;
  o.seq = 2 * o.gpus;                           // 2c divides 2N for every c | N: each CP size is walked
  if (!batch_given) o.gbs = o.gpus * base.mbs;  // each d divides it; the layout then holds the default batch
  Constraint mbs;
  mbs.field = Constraint::Field::mbs, mbs.value = base.mbs;
  o.constraints.push_back(mbs);
  std::vector<Layout> layouts;
  o.on_enumerated = [&](const Layout& l) { layouts.push_back(l); };
  o.enumerate_only = true;
  (void)rank_layouts(m, c, base, r, coefficients, o);
  const PerfContext context(coefficients, c);
  std::vector<LongestLayout> out;
  out.reserve(layouts.size());
  for (Layout& l : layouts) {
    if (!batch_given) l.gbs = l.dp * l.mbs * default_microbatches(l.pp);
    LongestLayout x{l, max_trainable_seq(m, c, l, r, peak_scale), mtsl_interval(m, c, l, r, peak_band), 0};
    x.layout.seq = x.result.tokens;
    if (x.result.tokens > 0) x.step_time_s = estimate_perf(m, context, x.layout).step_time_s;
    out.push_back(x);
  }
  std::stable_sort(out.begin(), out.end(), [](const LongestLayout& a, const LongestLayout& b) {
    return a.result.tokens != b.result.tokens ? a.result.tokens > b.result.tokens : a.step_time_s < b.step_time_s;
  });
  return out;
}

namespace {

// The divisors of x up to `limit`, ascending.
std::vector<std::int64_t> divisors(std::int64_t x, std::int64_t limit) {
  std::vector<std::int64_t> low, high;
  for (std::int64_t i = 1; i <= x / i; ++i) {
    if (x % i != 0) continue;
    if (i <= limit) low.push_back(i);
    if (x / i != i && x / i <= limit) high.push_back(x / i);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// A t × c × p split of the search; d = N / (t·c·p).
struct Split {
  std::int64_t t = 1, cp = 1, p = 1;
  [[nodiscard]] std::int64_t gpus() const { return t * cp * p; }
};

class SeqSearch {
 public:
  SeqSearch(const ModelSpec& m, const ClusterSpec& c, const Layout& base, const ResidualModel& r, std::int64_t seq)
      : m_(m), c_(c), base_(base), r_(r), seq_(seq), per_pipeline_(std::max<std::int64_t>(1, base.microbatches())) {}

  // The split's layout at d = dp (the search keeps p | L, no looped chunks, the base's micro-batches per pipeline but
  // at least default_microbatches(p), as a batch not given would be).
  [[nodiscard]] Layout layout(const Split& s, std::int64_t dp) const {
    Layout l = base_;
    l.tp = s.t, l.cp = s.cp, l.pp = s.p, l.dp = dp, l.seq = seq_;
    l.vpp = 1;
    l.split = {};
    if (multi_chunk_schedule(l.schedule)) l.schedule = Schedule::one_f_one_b;
    l.gbs = std::max(per_pipeline_, default_microbatches(s.p)) * l.dp * l.mbs;
    return l;
  }

  // Whether the split fits at d for some ep (every ep dividing E and, unless `relaxed`, the stage's t·c·d GPUs; each
  // expert whole on its GPU, etp 1); appends each layout that fits to `found` when given.
  bool fits(const Split& s, std::int64_t dp, bool relaxed, std::vector<LayoutFit>* found = nullptr) const {
    Layout l = layout(s, dp);
    const std::int64_t stage_gpus = s.t * s.cp * dp;
    bool any = false;
    for (std::int64_t ep = 1; ep <= (m_.num_experts > 0 ? (relaxed ? m_.num_experts : stage_gpus) : 1); ++ep) {
      if (m_.num_experts > 0 && (m_.num_experts % ep != 0 || (!relaxed && stage_gpus % ep != 0))) continue;
      if (m_.num_experts > 0) l.ep = ep, l.etp = 1;
      const double peak = peak_memory_bytes(m_, c_, l, r_);
      if (peak > c_.gpu.usable_memory_bytes) continue;
      any = true;
      if (found == nullptr) return true;
      found->push_back({l, peak});
    }
    return any;
  }

  // The smallest d ≤ d_max at which the split fits on whole nodes, 0 if none. Memory does not grow with d once the
  // DP×CP group has two members (every d-dependence is a divisor that grows with d: the states' shards, the
  // optimizer's residual share; FSDP gathers from two members on), so the relaxed fit (any ep dividing E) is monotone
  // in d from there and is bisected; the first d from its threshold that fits with its ep dividing t·c·d is the answer.
  [[nodiscard]] std::int64_t smallest_dp(const Split& s, std::int64_t d_max) const {
    std::int64_t lo = 1;
    if (s.cp == 1) {
      if (whole_nodes(s.gpus(), c_) && fits(s, 1, false)) return 1;
      lo = 2;
    }
    if (lo > d_max || !fits(s, d_max, true)) return 0;
    std::int64_t hi = d_max;  // fits, relaxed
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (fits(s, mid, true))
        hi = mid;
      else
        lo = mid + 1;
    }
    for (std::int64_t d = next_whole(s, lo); d <= d_max; d = next_whole(s, d + 1))
      if (fits(s, d, false)) return d;
    return 0;
  }

 private:
  // The smallest d' ≥ d whose t·c·p·d' GPUs are whole nodes (whole_nodes): d itself, or the next multiple of
  // gpus_per_node / gcd(t·c·p, gpus_per_node).
  [[nodiscard]] std::int64_t next_whole(const Split& s, std::int64_t d) const {
    if (whole_nodes(s.gpus() * d, c_)) return d;
    const std::int64_t step = c_.gpus_per_node / std::gcd(s.gpus(), c_.gpus_per_node);
    return (d + step - 1) / step * step;
  }

  const ModelSpec& m_;
  const ClusterSpec& c_;
  const Layout& base_;
  const ResidualModel& r_;
  std::int64_t seq_;
  std::int64_t per_pipeline_;
};

}  // namespace

std::vector<LayoutFit> smallest_layouts_for_seq(const ModelSpec& m, const ClusterSpec& c, const Layout& base,
                                                const ResidualModel& r, std::int64_t seq, std::int64_t max_gpus) {
  if (max_gpus < 1 || max_gpus > kMaxSearchGpus)
    throw Error(field("max_gpus") + " " + std::to_string(max_gpus) + " is not from 1 to " +
                std::to_string(kMaxSearchGpus) + " (the largest GPU count the search considers)");
  // The splits the search may take: t | gcd(a, k), c = 1 or 2c | s (where context parallelism is priced), p | L.
  const std::vector<std::int64_t> ts = divisors(std::gcd(m.num_heads, m.num_kv_heads), max_gpus),
                                  ps = divisors(m.num_layers, max_gpus);
  std::vector<std::int64_t> cps = {1};
  if (seq % 2 == 0 && context_parallel_priced(m, base))
    for (const std::int64_t cp : divisors(seq / 2, max_gpus))
      if (cp > 1) cps.push_back(cp);
  const SeqSearch search(m, c, base, r, seq);
  // The fewest GPUs: each split's smallest d, below the best found so far.
  std::int64_t best = max_gpus + 1;
  for (const std::int64_t t : ts)
    for (const std::int64_t cp : cps)
      for (const std::int64_t p : ps) {
        const Split s{t, cp, p};
        if (t * cp > max_gpus || s.gpus() >= best) continue;
        if (const std::int64_t d = search.smallest_dp(s, (best - 1) / s.gpus()); d > 0) best = s.gpus() * d;
      }
  std::vector<LayoutFit> found;
  if (best > max_gpus) return found;
  // Every layout of that count that fits, in the order t, c, p, ep ascending, then by peak memory.
  const std::int64_t n = best;
  for (const std::int64_t t : ts)
    for (const std::int64_t cp : cps)
      for (const std::int64_t p : ps)
        if (n % (t * cp * p) == 0) (void)search.fits({t, cp, p}, n / (t * cp * p), false, &found);
  std::stable_sort(found.begin(), found.end(),
                   [](const LayoutFit& a, const LayoutFit& b) { return a.peak_bytes < b.peak_bytes; });
  return found;
}

double mtsl_relative_error(std::int64_t predicted, std::int64_t measured) {
  return std::abs(static_cast<double>(predicted - measured)) / static_cast<double>(measured);
}

MtslFit fit_residual_to_mtsl(const ModelSpec& m, const ClusterSpec& c, std::span<const MtslObservation> cells,
                             const ResidualModel& base, const MtslFitOptions& o) {
  MtslFit best;
  bool have = false;
  const auto steps = [](double lo, double hi, double step) {
    return static_cast<int>(std::floor((hi - lo) / step + 1e-9)) + 1;
  };
  const auto key = [](const MtslFit& x) {
    return std::tuple(x.zero_misses, std::round(x.max_rel_error * 1e9), std::round(x.mean_rel_error * 1e9));
  };
  const int nf = steps(o.fixed_min_gib, o.fixed_max_gib, o.fixed_step_gib);
  const int nl = steps(o.logits_min, o.logits_max, o.logits_step);
  std::vector<MtslObservation> work(cells.begin(), cells.end());
  for (std::int64_t units = o.unit_buffers_min; units <= o.unit_buffers_max; ++units) {
    for (auto& cell : work) cell.layout.fsdp_unit_buffers = units;
    for (int jf = 0; jf < nf; ++jf) {
      for (int il = 0; il < nl; ++il) {
        ResidualModel cand = base;
        cand.fixed_bytes = (o.fixed_min_gib + jf * o.fixed_step_gib) * kGiB;
        cand.logits_bytes_per_element = o.logits_min + il * o.logits_step;
        MtslFit f{cand, units, 0, 0.0, 0.0};
        int nonzero = 0;
        for (const auto& cell : work) {
          const std::int64_t pred = max_trainable_seq(m, c, cell.layout, cand).tokens;
          if (cell.measured_tokens == 0) {
            f.zero_misses += pred > 0;
            continue;
          }
          const double e = mtsl_relative_error(pred, cell.measured_tokens);
          f.max_rel_error = std::max(f.max_rel_error, e);
          f.mean_rel_error += e;
          ++nonzero;
        }
        if (nonzero > 0) f.mean_rel_error /= nonzero;
        if (!have || key(f) < key(best)) best = f, have = true;
      }
    }
  }
  return best;
}

}  // namespace headroom
