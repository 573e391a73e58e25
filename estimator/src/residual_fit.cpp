#include "headroom/estimator/residual_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "headroom/estimator/memory.hpp"

namespace headroom {
namespace {

// The carriers of one stage, in GiB (fixed, per GiB of logits, per Gi-parameter, per communicator).
struct StageCarriers {
  double eq18 = 0;       // stage memory without residual
  double logits = 0;     // logit elements / 2^30
  double optimizer = 0;  // optimizer-shard parameters / 2^30
  double comms = 0;      // extra CP communicators
};

struct RunCarriers {
  StageCarriers first, last;
  bool has_last = false;
  double capacity_gib = 0;
  bool oom = false;
};

StageCarriers carriers(const ResidualObservation& o, std::int64_t stage) {
  const ResidualModel none;
  const Layout& l = o.layout;
  StageCarriers c;
  c.eq18 = stage_memory(o.model, o.cluster, l, none, stage).total() / kGiB;
  c.logits = logits_elements(o.model, l, stage) / kGiB;
  c.optimizer = stage_parameters_per_gpu(o.model, l, stage) /
                shard_divisor(l.sharding.optimizer, l, o.cluster.gpus_per_node) / kGiB;
  c.comms = cp_extra_communicators(l);
  return c;
}

double without_fixed(const StageCarriers& c, double lg, double opt, double cp) {
  return c.eq18 + lg * c.logits + opt * c.optimizer + cp * c.comms;
}

int steps(double lo, double hi, double step) { return static_cast<int>(std::floor((hi - lo) / step + 1e-9)) + 1; }

}  // namespace

ResidualFit fit_residual(std::span<const ResidualObservation> runs, const ResidualFitOptions& opt) {
  std::vector<RunCarriers> rc;
  rc.reserve(runs.size());
  for (const auto& o : runs) {
    RunCarriers r{carriers(o, 0), {}, o.layout.pp > 1, o.cluster.gpu.usable_memory_bytes / kGiB, o.oom};
    if (r.has_last) r.last = carriers(o, o.layout.pp - 1);
    rc.push_back(r);
  }
  double sum_logits = 0, sum_optimizer = 0, sum_comms = 0;
  for (const auto& r : rc) {
    sum_logits += r.first.logits;
    sum_optimizer += r.first.optimizer;
    sum_comms += r.first.comms;
  }

  ResidualFit best;
  std::tuple<int, double, double, double, double> best_score{std::numeric_limits<int>::max(), 0, 0, 0, 0};
  std::vector<double> ok_slack;
  ok_slack.reserve(rc.size());
  for (int i = 0; i < steps(opt.logits_min, opt.logits_max, opt.logits_step); ++i) {
    const double lg = opt.logits_min + i * opt.logits_step;
    for (int j = 0; j < steps(opt.optimizer_min, opt.optimizer_max, opt.optimizer_step); ++j) {
      const double op = opt.optimizer_min + j * opt.optimizer_step;
      for (int k = 0; k < steps(opt.cp_min_gib, opt.cp_max_gib, opt.cp_step_gib); ++k) {
        const double cp = opt.cp_min_gib + k * opt.cp_step_gib;
        // Slack of each run before the fixed term: it is predicted to fit iff fixed ≤ slack.
        double worst_oom = -std::numeric_limits<double>::infinity();
        ok_slack.clear();
        for (const auto& r : rc) {
          double peak = without_fixed(r.first, lg, op, cp);
          if (r.has_last) peak = std::max(peak, without_fixed(r.last, lg, op, cp));
          const double slack = r.capacity_gib - peak;
          if (r.oom) {
            worst_oom = std::max(worst_oom, slack);
          } else {
            ok_slack.push_back(slack);
          }
        }
        const double lo = std::max(opt.fixed_min_gib, worst_oom + opt.margin_gib);
        if (lo > opt.fixed_max_gib) continue;
        int misses = 0;
        double next = std::numeric_limits<double>::infinity();
        for (const double s : ok_slack) {
          if (s < lo + opt.margin_gib) {
            ++misses;
          } else {
            next = std::min(next, s);
          }
        }
        const double fixed = std::min(opt.fixed_max_gib, next - opt.margin_gib);
        const double total =
            fixed * static_cast<double>(rc.size()) + lg * sum_logits + op * sum_optimizer + cp * sum_comms;
        const auto score = std::make_tuple(misses, -total, lg, op, cp);
        if (!best.feasible || score < best_score) {
          best_score = score;
          best.feasible = true;
          best.training_misses = misses;
          best.model.fixed_bytes = fixed * kGiB;
          best.model.logits_bytes_per_element = lg;
          best.model.optimizer_shard_bytes_per_param = op;
          best.model.cp_communicator_bytes = cp * kGiB;
        }
      }
    }
  }
  return best;
}

VerdictScore score_verdicts(std::span<const ResidualObservation> runs, const ResidualModel& model) {
  VerdictScore v;
  for (const auto& o : runs) {
    v.add(peak_memory_bytes(o.model, o.cluster, o.layout, model) <= o.cluster.gpu.usable_memory_bytes, o.oom);
  }
  return v;
}

ShareFit fit_capacity_share(std::span<const PeakOutcome> runs, double margin_bytes, double max_share) {
  // A trained run stays decided while share ≤ (C − margin − peak)/C; an OOM run needs share ≥ (C + margin − peak)/C.
  double lo = 0;
  for (const auto& r : runs)
    if (r.oom) lo = std::max(lo, (r.capacity_bytes + margin_bytes - r.peak_bytes) / r.capacity_bytes);
  ShareFit f;
  if (lo > max_share) return f;
  f.feasible = true;
  f.share = max_share;
  for (const auto& r : runs) {
    if (r.oom) continue;
    const double highest = (r.capacity_bytes - margin_bytes - r.peak_bytes) / r.capacity_bytes;
    if (highest < lo) {
      ++f.training_misses;
    } else {
      f.share = std::min(f.share, highest);
    }
  }
  return f;
}

VerdictScore score_capacity_share(std::span<const PeakOutcome> runs, double share) {
  VerdictScore v;
  for (const auto& r : runs) {
    v.add(r.peak_bytes <= (1.0 - share) * r.capacity_bytes, r.oom);
  }
  return v;
}

}  // namespace headroom
