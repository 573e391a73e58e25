#include "headroom/calibration/fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "headroom/core/error.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom::calibrate {
namespace {

double r_squared(const std::vector<double>& y, const std::vector<double>& fitted) {
  const double mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
  double sse = 0, sst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    sse += (y[i] - fitted[i]) * (y[i] - fitted[i]);
    sst += (y[i] - mean) * (y[i] - mean);
  }
  if (sst <= 0) return sse <= 1e-24 ? 1.0 : 0.0;
  return 1.0 - sse / sst;
}

// R² of log time and the relative residuals measured/predicted − 1.
void time_quality(const std::vector<double>& measured, const std::vector<double>& predicted, double& r2,
                  std::vector<double>& residuals) {
  std::vector<double> lm, lp;
  residuals.clear();
  for (std::size_t i = 0; i < measured.size(); ++i) {
    lm.push_back(std::log(measured[i]));
    lp.push_back(std::log(predicted[i]));
    residuals.push_back(measured[i] / predicted[i] - 1.0);
  }
  r2 = r_squared(lm, lp);
}

// Weighted least squares for y ≈ X·c, weights w (rows scaled by w).
Eigen::VectorXd solve(const Eigen::MatrixXd& x, const Eigen::VectorXd& y, const Eigen::VectorXd& w) {
  const Eigen::MatrixXd xw = w.asDiagonal() * x;
  const Eigen::VectorXd yw = w.asDiagonal() * y;
  return xw.colPivHouseholderQr().solve(yw);
}

void need_points(std::string_view what, std::size_t have, std::size_t need) {
  if (have < need)
    throw Error(std::string(what) + ": " + std::to_string(have) + " measurements, the fit needs at least " +
                std::to_string(need));
}

}  // namespace

// For a fixed h the best log e is the mean of log(eff / shape); h itself by golden-section search on log h.
GemmFit fit_gemm(const std::vector<GemmPoint>& points, double peak_flops, int wave_units, int tile) {
  need_points("GEMM fit", points.size(), 3);
  GemmFit f;
  f.peak_flops = peak_flops;
  f.wave_units = wave_units;
  f.tile = tile;
  std::vector<double> eff;
  eff.reserve(points.size());
  for (const auto& p : points) eff.push_back(2.0 * p.m * p.n * p.k / (p.seconds * peak_flops));
  const auto best_log_e = [&](double h) {
    double s = 0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const auto& p = points[i];
      s += std::log(eff[i] / (gemm_shape_factor(p.m, p.n, p.k, h) * gemm_wave_factor(p.m, p.n, wave_units, tile)));
    }
    return s / static_cast<double>(points.size());
  };
  const auto sse = [&](double log_h) {
    const double h = std::exp(log_h), le = best_log_e(h);
    double s = 0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const auto& p = points[i];
      const double r = std::log(eff[i]) - le -
                       std::log(gemm_shape_factor(p.m, p.n, p.k, h) * gemm_wave_factor(p.m, p.n, wave_units, tile));
      s += r * r;
    }
    return s;
  };
  double lo = std::log(1e-3), hi = std::log(1e5);
  const double g = (std::sqrt(5.0) - 1.0) / 2.0;
  for (int it = 0; it < 100; ++it) {
    const double a = hi - g * (hi - lo), b = lo + g * (hi - lo);
    if (sse(a) < sse(b))
      hi = b;
    else
      lo = a;
  }
  f.half_dim = std::exp((lo + hi) / 2.0);
  f.efficiency = std::exp(best_log_e(f.half_dim));
  std::vector<double> measured, predicted, eff_fit;
  for (const auto& p : points) {
    const double e = f.predict_efficiency(p.m, p.n, p.k);
    eff_fit.push_back(e);
    measured.push_back(p.seconds);
    predicted.push_back(2.0 * p.m * p.n * p.k / (peak_flops * e));
  }
  time_quality(measured, predicted, f.r2, f.residuals);
  f.r2_efficiency = r_squared(eff, eff_fit);
  return f;
}

AttentionFit fit_attention(const std::vector<AttentionPoint>& points, double peak_flops, std::int64_t head_dim,
                           bool causal) {
  need_points("attention fit (head dim " + std::to_string(head_dim) + ")", points.size(), 2);
  AttentionFit f;
  f.head_dim = head_dim;
  f.causal = causal;
  const auto n = static_cast<Eigen::Index>(points.size());
  Eigen::MatrixXd x(n, 2);
  Eigen::VectorXd y(n), w(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& p = points[static_cast<std::size_t>(i)];
    const double eff = p.flops / (p.seconds * peak_flops);
    x(i, 0) = 1.0;
    x(i, 1) = 1.0 / p.seq;
    y(i) = 1.0 / eff;
    w(i) = eff;  // relative error in 1/eff
  }
  const Eigen::VectorXd c = solve(x, y, w);
  double max_seq = 0;
  for (const auto& p : points) max_seq = std::max(max_seq, p.seq);
  // The saturating form only where the data support it: an asymptote above the peak, or a half-point far past
  // the longest measured sequence, is an extrapolation (a quick run fitted e = 1.48, s½ = 2,467 from s ≤ 512,
  // and 0.49, 0.23, 1.48 on three runs). There, and where efficiency does not saturate (or falls), a constant
  // is all the data support.
  if (c(0) > 0 && c(1) >= 0 && 1.0 / c(0) <= 1.0 && c(1) / c(0) <= kMaxAttentionHalfOverRange * max_seq) {
    f.efficiency = 1.0 / c(0);
    f.half_tokens = c(1) / c(0);
  } else {
    f.half_tokens = 0;
    f.efficiency = 1.0 / (y.cwiseProduct(w).sum() / w.sum());
  }
  if (f.efficiency > 1.0)
    throw Error("attention fit (head dim " + std::to_string(head_dim) + "): efficiency " +
                std::to_string(f.efficiency) + " of the peak is above 1: the datasheet peak is too low (check --gpu)");
  std::vector<double> measured, predicted;
  for (const auto& p : points) {
    measured.push_back(p.seconds);
    predicted.push_back(p.flops / (peak_flops * f.efficiency * p.seq / (p.seq + f.half_tokens)));
  }
  time_quality(measured, predicted, f.r2, f.residuals);
  return f;
}

namespace {

// Relative least squares of t = α + β·S over points[b, e), α and β kept non-negative.
Regime fit_regime(const std::vector<CollectivePoint>& p, std::size_t b, std::size_t e, double& sse) {
  const auto n = static_cast<Eigen::Index>(e - b);
  Eigen::MatrixXd x(n, 2);
  Eigen::VectorXd y(n), w(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& q = p[b + static_cast<std::size_t>(i)];
    x(i, 0) = 1.0;
    x(i, 1) = q.bytes;
    y(i) = q.seconds;
    w(i) = 1.0 / q.seconds;
  }
  Eigen::VectorXd c = solve(x, y, w);
  if (c(0) < 0 || c(1) < 0 || n < 2) {  // refit the one parameter that stays positive
    const double beta = (y.cwiseProduct(w).cwiseProduct(w).dot(x.col(1))) / x.col(1).cwiseProduct(w).squaredNorm();
    const double alpha = y.cwiseProduct(w).cwiseProduct(w).sum() / w.squaredNorm();
    const auto err = [&](double a, double bt) {
      return (w.asDiagonal() * (y - (a + bt * x.col(1).array()).matrix())).squaredNorm();
    };
    c = err(0, beta) < err(alpha, 0) ? Eigen::Vector2d(0, beta) : Eigen::Vector2d(alpha, 0);
  }
  sse = (w.asDiagonal() * (y - x * c)).squaredNorm();
  return {c(0), c(1), p[b].bytes, p[e - 1].bytes};
}

}  // namespace

CollectiveFit fit_collective(std::vector<CollectivePoint> points, Collective op, int ranks, std::string level) {
  need_points(std::string(to_string(op)) + " fit over " + std::to_string(ranks) + " ranks", points.size(), 3);
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  CollectiveFit f;
  f.op = op;
  f.ranks = ranks;
  f.level = std::move(level);
  double best = std::numeric_limits<double>::infinity();
  const std::size_t n = points.size();
  // Each regime needs 3 points; with fewer than 6 the large regime covers everything.
  for (std::size_t b = n < 6 ? 0 : 3; b + 3 <= n; ++b) {
    double s1 = 0, s2 = 0;
    const Regime small = b == 0 ? Regime{} : fit_regime(points, 0, b, s1);
    const Regime large = fit_regime(points, b, n, s2);
    if (s1 + s2 < best) {
      best = s1 + s2;
      f.small = b == 0 ? large : small;
      f.large = large;
      f.breakpoint_bytes = points[b].bytes;
    }
    if (n < 6) break;
  }
  std::vector<double> measured, predicted;
  for (const auto& p : points) {
    measured.push_back(p.seconds);
    predicted.push_back(std::max(f.predict_seconds(p.bytes), 1e-12));
  }
  time_quality(measured, predicted, f.r2, f.residuals);
  return f;
}

void require_quality(std::string_view what, double r2, double min_r2, std::string_view noisiest,
                     std::vector<std::string> cases) {
  if (min_r2 <= 0 || r2 >= min_r2) return;  // 0 turns the gate off
  char buf[160];
  std::snprintf(buf, sizeof buf, ": R² %.3f is below the threshold %.2f", r2, min_r2);
  throw NoisyFit(std::string(what) + buf + (noisiest.empty() ? "" : ", the noisiest point " + std::string(noisiest)) +
                     " (noisy or too few measurements: rerun on an idle machine, widen the sweep, or lower --min-r2)",
                 std::move(cases));
}

std::string link_level(int ranks, int gpus_per_node) { return ranks <= gpus_per_node ? "intra" : "inter"; }

std::size_t noisiest(const std::vector<double>& residuals) {
  std::size_t worst = 0;
  for (std::size_t i = 1; i < residuals.size(); ++i)
    if (std::fabs(residuals[i]) > std::fabs(residuals[worst])) worst = i;
  return worst;
}

}  // namespace headroom::calibrate
