#include "headroom/calibration/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "headroom/calibration/fit.hpp"
#include "headroom/estimator/flops.hpp"
#include "headroom/estimator/layout.hpp"

namespace headroom::calibrate {
namespace {

using kernels::AttentionCase;
using kernels::Case;
using kernels::CollectiveCase;
using kernels::CopyCase;
using kernels::GemmCase;

constexpr std::int64_t kMiB = 1 << 20;

std::vector<int> group_sizes(int ranks) {
  std::vector<int> g;
  for (int n = 2; n <= ranks; n *= 2) g.push_back(n);
  if (ranks >= 2 && g.back() != ranks) g.push_back(ranks);
  return g;
}

}  // namespace

std::vector<Case> plan_sweep(const SweepOptions& o) {
  std::vector<Case> plan;
  std::set<std::string> seen;
  const auto add = [&](const Case& c) {
    if (seen.insert(kernels::label(c)).second) plan.push_back(c);
  };

  // GEMM: a grid over (m, n, k), odd sizes included for wave quantization, then the models' layer GEMMs.
  std::vector<std::int64_t> dims;
  if (o.quick)
    dims = {32, 128, 512};
  else if (o.cpu)
    dims = {64, 200, 512, 1024};
  else
    dims = {256, 1000, 2048, 4096, 8192};
  for (auto m : dims)
    for (auto n : dims)
      for (auto k : dims) add(GemmCase{m, n, k});
  // On a CPU a full-size layer GEMM takes seconds: the token dimension m shrinks until one fits the cap.
  const double cap = o.cpu ? (o.quick ? 1e9 : 2e10) : 1e30;
  const std::vector<std::int64_t> tokens =
      o.quick ? std::vector<std::int64_t>{512} : std::vector<std::int64_t>{2048, 8192};
  for (const auto& model : o.models)
    for (std::int64_t t = 1; t <= std::max(1, o.gpus_per_node); t *= 2) {
      if (model.num_heads % t != 0 || model.num_kv_heads % t != 0) continue;
      for (auto tok : tokens) {
        Layout l;
        l.tp = t;
        l.seq = tok;
        const LayerGemms g = layer_gemms(model, l);
        for (const GemmShape& s : {g.qkv, g.proj, g.fc1, g.fc2}) {
          auto m = static_cast<std::int64_t>(s.m);
          const auto n = static_cast<std::int64_t>(s.n), k = static_cast<std::int64_t>(s.k);
          if (2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) > cap)
            m = std::max<std::int64_t>(16,
                                       static_cast<std::int64_t>(cap / (2.0 * static_cast<double>(n * k))) / 16 * 16);
          add(GemmCase{m, n, k});
        }
      }
    }

  // Attention: sequence lengths × head dims 64/128, causal (and full unless quick), forward and backward.
  std::vector<std::int64_t> seqs;
  if (o.cpu)
    seqs = o.quick ? std::vector<std::int64_t>{128, 256, 512} : std::vector<std::int64_t>{128, 256, 512, 1024, 2048};
  else
    seqs = o.quick ? std::vector<std::int64_t>{512, 1024, 2048, 4096}
                   : std::vector<std::int64_t>{512, 1024, 2048, 4096, 8192, 16384};
  const std::int64_t heads = o.cpu ? 2 : 16;
  for (bool causal : {true, false}) {
    if (!causal && o.quick) continue;
    for (std::int64_t d : {64, 128})
      for (auto s : seqs)
        for (bool bwd : {false, true}) add(AttentionCase{s, d, heads, causal, bwd});
  }

  // Device-to-device copies: the memory bandwidth the elementwise terms use.
  for (std::int64_t mib : o.cpu ? std::vector<std::int64_t>{1, 16, 64} : std::vector<std::int64_t>{16, 256, 1024})
    add(CopyCase{mib * kMiB});

  // Collectives from 8 B up: ×4 steps when quick, ×2 otherwise (nccl-tests -f 2); 1 GiB on GPUs.
  const std::int64_t max_bytes = o.cpu ? (o.quick ? 16 : 64) * kMiB : (o.quick ? 256 : 1024) * kMiB;
  for (int n : group_sizes(o.ranks))
    for (const auto& info : kCollectives)
      for (std::int64_t b = 8; b <= max_bytes; b *= o.quick ? 4 : 2) add(CollectiveCase{info.op, b, n});
  return plan;
}

void run_sweep(kernels::Backend& b, const std::vector<Case>& plan, const kernels::TimingOptions& timing,
               std::vector<kernels::Measurement>& have, const std::function<void(const Progress&)>& progress,
               const std::function<void(const std::vector<kernels::Measurement>&)>& checkpoint) {
  std::set<std::string> done;
  for (const auto& m : have) done.insert(kernels::label(m.c));
  Progress p;
  p.total = plan.size();
  for (const auto& c : plan) {
    p.label = kernels::label(c);
    p.resumed = done.count(p.label) != 0;
    if (!p.resumed) {
      have.push_back(kernels::measure(b, c, timing));
      if (checkpoint) checkpoint(have);
    }
    ++p.done;
    if (progress) progress(p);
  }
}

int sweep_until_fitted(kernels::Backend& b, const std::vector<Case>& plan, const kernels::TimingOptions& timing,
                       std::vector<kernels::Measurement>& have, const std::function<void(const Progress&)>& progress,
                       const std::function<void(const std::vector<kernels::Measurement>&)>& checkpoint, int rounds,
                       const std::function<Refit(const std::vector<kernels::Measurement>&, int round)>& refit) {
  for (int round = 0;; ++round) {
    run_sweep(b, plan, timing, have, progress, checkpoint);
    const Refit r = refit(have, round);
    if (r.cases.empty()) return round;
    const std::set<std::string> redo(r.cases.begin(), r.cases.end());
    std::erase_if(have, [&](const kernels::Measurement& m) { return redo.count(kernels::label(m.c)) != 0; });
    if (round < rounds) continue;
    if (checkpoint) checkpoint(have);
    std::string names;
    for (const auto& c : r.cases) names += (names.empty() ? "" : ", ") + c;
    throw NoisyFit(r.why + "; " + names + " measured " + std::to_string(rounds + 1) +
                       " times and still off the fit: left out of the partial file, so that the next run measures it "
                       "again (or run with --fresh to measure everything again)",
                   r.cases);
  }
}

}  // namespace headroom::calibrate
