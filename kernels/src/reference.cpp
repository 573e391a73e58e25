#include "headroom/kernels/reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace headroom::kernels::reference {

Dot gemm_element(std::span<const float> a, std::span<const float> b, std::int64_t n, std::int64_t k, std::int64_t i,
                 std::int64_t j) {
  Dot d;
  for (std::int64_t p = 0; p < k; ++p) {
    const double x =
        static_cast<double>(a[static_cast<std::size_t>(i * k + p)]) * b[static_cast<std::size_t>(p * n + j)];
    d.value += x;
    d.magnitude += std::abs(x);
  }
  return d;
}

namespace {

// Softmax probabilities P[s×s] of one head, double precision, masked entries 0.
std::vector<double> probabilities(std::span<const float> q, std::span<const float> k, std::int64_t s, std::int64_t d,
                                  bool causal) {
  std::vector<double> p(static_cast<std::size_t>(s * s), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (std::int64_t i = 0; i < s; ++i) {
    const std::int64_t last = causal ? i : s - 1;
    double mx = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j <= last; ++j) {
      double x = 0;
      for (std::int64_t c = 0; c < d; ++c)
        x += static_cast<double>(q[static_cast<std::size_t>(i * d + c)]) * k[static_cast<std::size_t>(j * d + c)];
      p[static_cast<std::size_t>(i * s + j)] = x * scale;
      mx = std::max(mx, x * scale);
    }
    double sum = 0;
    for (std::int64_t j = 0; j <= last; ++j) {
      double& e = p[static_cast<std::size_t>(i * s + j)];
      e = std::exp(e - mx);
      sum += e;
    }
    for (std::int64_t j = 0; j <= last; ++j) p[static_cast<std::size_t>(i * s + j)] /= sum;
  }
  return p;
}

}  // namespace

void attention_forward(std::span<const float> q, std::span<const float> k, std::span<const float> v, std::int64_t s,
                       std::int64_t d, bool causal, std::vector<double>& out) {
  const std::vector<double> p = probabilities(q, k, s, d, causal);
  out.assign(static_cast<std::size_t>(s * d), 0.0);
  for (std::int64_t i = 0; i < s; ++i)
    for (std::int64_t j = 0; j < s; ++j) {
      const double w = p[static_cast<std::size_t>(i * s + j)];
      if (w == 0) continue;
      for (std::int64_t c = 0; c < d; ++c)
        out[static_cast<std::size_t>(i * d + c)] += w * v[static_cast<std::size_t>(j * d + c)];
    }
}

// dV = Pᵀ·dO; dP = dO·Vᵀ; dS = P ∘ (dP − rowsum(dP ∘ P)); dQ = dS·K·scale; dK = dSᵀ·Q·scale.
void attention_backward(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                        std::span<const float> dout, std::int64_t s, std::int64_t d, bool causal,
                        std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) {
  const std::vector<double> p = probabilities(q, k, s, d, causal);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto n = static_cast<std::size_t>(s * d);
  dq.assign(n, 0.0);
  dk.assign(n, 0.0);
  dv.assign(n, 0.0);
  std::vector<double> dp(static_cast<std::size_t>(s));
  for (std::int64_t i = 0; i < s; ++i) {
    double row = 0;
    for (std::int64_t j = 0; j < s; ++j) {
      double x = 0;
      for (std::int64_t c = 0; c < d; ++c)
        x += static_cast<double>(dout[static_cast<std::size_t>(i * d + c)]) * v[static_cast<std::size_t>(j * d + c)];
      dp[static_cast<std::size_t>(j)] = x;
      row += x * p[static_cast<std::size_t>(i * s + j)];
    }
    for (std::int64_t j = 0; j < s; ++j) {
      const double pij = p[static_cast<std::size_t>(i * s + j)];
      if (pij == 0) continue;
      const double ds = pij * (dp[static_cast<std::size_t>(j)] - row) * scale;
      for (std::int64_t c = 0; c < d; ++c) {
        dv[static_cast<std::size_t>(j * d + c)] += pij * dout[static_cast<std::size_t>(i * d + c)];
        dq[static_cast<std::size_t>(i * d + c)] += ds * k[static_cast<std::size_t>(j * d + c)];
        dk[static_cast<std::size_t>(j * d + c)] += ds * q[static_cast<std::size_t>(i * d + c)];
      }
    }
  }
}

void fill_uniform(std::span<float> x, std::uint64_t seed) {
  std::uint64_t state = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (float& v : x) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    v = static_cast<float>(static_cast<double>(state >> 40) / static_cast<double>(1ULL << 24) * 2.0 - 1.0);
  }
}

float collective_value(int rank, std::int64_t index) { return static_cast<float>(rank + 1 + index % 13); }

float collective_expected(Collective op, int ranks, int rank, std::int64_t count, std::int64_t i) {
  const std::int64_t chunk = count / ranks;
  float sum = 0;
  switch (op) {
    case Collective::all_reduce:
      for (int q = 0; q < ranks; ++q) sum += collective_value(q, i);
      return sum;
    case Collective::reduce_scatter:
      for (int q = 0; q < ranks; ++q) sum += collective_value(q, rank * chunk + i);
      return sum;
    case Collective::all_gather: return collective_value(static_cast<int>(i / chunk), i % chunk);
    case Collective::all_to_all: return collective_value(static_cast<int>(i / chunk), rank * chunk + i % chunk);
    case Collective::send_recv: return collective_value((rank + ranks - 1) % ranks, i);
  }
  return 0;
}

std::int64_t collective_count(Collective op, int ranks, std::int64_t bytes) {
  const std::int64_t count = std::max<std::int64_t>(1, bytes / 4);
  const bool chunked = op != Collective::all_reduce && op != Collective::send_recv;
  return chunked ? std::max<std::int64_t>(ranks, count / ranks * ranks) : count;
}

std::int64_t collective_input_count(Collective op, int ranks, std::int64_t count) {
  return op == Collective::all_gather ? count / ranks : count;
}

double normalised_max_error(std::span<const float> x, std::span<const double> ref) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(x[i]) - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return scale > 0 ? err / scale : err;
}

}  // namespace headroom::kernels::reference
