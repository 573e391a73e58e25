#include "headroom/calibration/profile.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>

#include "headroom/core/atomic_file.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/json_schema.hpp"

namespace headroom::calibrate {
namespace {

using kernels::AttentionCase;
using kernels::CollectiveCase;
using kernels::GemmCase;
using nlohmann::json;

constexpr const char* kIngested = "nccl-tests";  // Measurement::kernel of rows read from nccl-tests logs

}  // namespace

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_json_atomically(const std::filesystem::path& path, const json& doc) {
  // Strings from outside (a device name from an nccl-tests log, a file name) may not be UTF-8: replaced, not thrown.
  write_file_atomically(path, doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

namespace {

// "m=32 n=32 k=32 (measured +83% over the fit)": a point and its residual, for require_quality.
template <class... Args>
std::string point_text(const char* format, double residual, Args... args) {
  char what[96], out[160];
  std::snprintf(what, sizeof what, format, args...);
  std::snprintf(out, sizeof out, "%s (measured %+.0f%% off the fit)", what, 100 * residual);
  return out;
}

}  // namespace

void fit_profile(Profile& p, int gpus_per_node) {
  // Each point with the labels of the measurements behind it (a NoisyFit names them for re-measuring).
  std::vector<GemmPoint> gemm;
  std::vector<std::string> gemm_cases;
  struct AttentionSum {
    AttentionPoint point;
    int passes = 0;  // 1 forward, 2 backward
    std::vector<std::string> cases;
  };
  std::map<std::tuple<std::int64_t, bool, std::int64_t>, AttentionSum> attn;  // (d, causal, s)
  std::map<std::pair<Collective, int>, std::vector<std::pair<CollectivePoint, std::string>>> coll;
  // A measured peak is the fastest compute kernel of the sweep: a noisy run can time an attention pass faster than
  // every GEMM, and a peak below any measured rate would put an efficiency above 1.
  double best_compute = 0, copy_bw = 0;
  for (const auto& m : p.raw) {
    if (const auto* g = std::get_if<GemmCase>(&m.c)) {
      gemm.push_back({static_cast<double>(g->m), static_cast<double>(g->n), static_cast<double>(g->k), m.seconds});
      gemm_cases.push_back(kernels::label(m.c));
      best_compute = std::max(best_compute, m.flops_per_s());
    } else if (const auto* a = std::get_if<AttentionCase>(&m.c)) {
      AttentionSum& sum = attn[{a->head_dim, a->causal, a->seq}];
      sum.point.seq = static_cast<double>(a->seq);
      sum.point.flops += m.flops;
      sum.point.seconds += m.seconds;
      sum.passes |= a->backward ? 2 : 1;
      sum.cases.push_back(kernels::label(m.c));
      best_compute = std::max(best_compute, m.flops_per_s());
    } else if (const auto* c = std::get_if<CollectiveCase>(&m.c)) {
      if (m.kernel != kIngested) coll[{c->op, c->ranks}].push_back({{m.bytes, m.seconds}, kernels::label(m.c)});
    } else {
      copy_bw = std::max(copy_bw, m.bytes / m.seconds);
    }
  }
  if (p.peak_flops <= 0 && best_compute > 0) {
    p.peak_flops = best_compute;
    p.peak_source = "measured: the fastest GEMM or attention pass of the sweep";
  }
  if (copy_bw > 0) p.hbm_bytes_per_s = copy_bw;
  if (!gemm.empty()) {
    const int units = p.machine.backend == "cpu" ? 0 : p.machine.multiprocessors;
    p.gemm = fit_gemm(gemm, p.peak_flops, units);
    const std::size_t i = noisiest(p.gemm->residuals);
    require_quality("GEMM efficiency fit", p.gemm->r2, p.min_r2,
                    point_text("m=%.0f n=%.0f k=%.0f", p.gemm->residuals[i], gemm[i].m, gemm[i].n, gemm[i].k),
                    {gemm_cases[i]});
  }
  p.attention.clear();
  std::map<std::pair<std::int64_t, bool>, std::vector<const AttentionSum*>> by_shape;
  for (const auto& [key, sum] : attn)
    if (sum.passes == 3) by_shape[{std::get<0>(key), std::get<1>(key)}].push_back(&sum);  // forward and backward
  for (const auto& [key, sums] : by_shape) {
    std::vector<AttentionPoint> pts;
    for (const AttentionSum* sum : sums) pts.push_back(sum->point);
    p.attention.push_back(fit_attention(pts, p.peak_flops, key.first, key.second));
    const auto& r = p.attention.back().residuals;
    const std::size_t i = noisiest(r);
    require_quality("attention fit (head dim " + std::to_string(key.first) + (key.second ? ", causal)" : ", full)"),
                    p.attention.back().r2, p.min_r2, point_text("s=%.0f", r[i], pts[i].seq), sums[i]->cases);
  }
  if (!coll.empty()) {
    std::erase_if(p.collectives, [](const CollectiveFit& f) { return f.source != kIngested; });
    for (auto& [key, labelled] : coll) {
      // fit_collective sorts its points by size; sorted the same way here, the residuals name their cases.
      std::sort(labelled.begin(), labelled.end(),
                [](const auto& a, const auto& b) { return a.first.bytes < b.first.bytes; });
      std::vector<CollectivePoint> pts;
      for (const auto& [point, label] : labelled) pts.push_back(point);
      p.collectives.push_back(fit_collective(pts, key.first, key.second, link_level(key.second, gpus_per_node)));
      const auto& r = p.collectives.back().residuals;
      const std::size_t i = noisiest(r);
      require_quality(std::string(to_string(key.first)) + " fit over " + std::to_string(key.second) + " ranks",
                      p.collectives.back().r2, p.min_r2, point_text("%.0f B", r[i], pts[i].bytes),
                      {labelled[i].second});
    }
    p.collectives_source =
        p.collectives_source.find(kIngested) != std::string::npos ? p.collectives_source + " + measured" : "measured";
  }
}

}  // namespace headroom::calibrate
