// Our flash-style attention (Dao 2023, FlashAttention-2 Algorithms 1–2), FP32, one source for CUDA and HIP.
// Forward: a thread per query row, key/value tiles staged in shared memory, online softmax, the row's
// log-sum-exp kept. Backward: D = rowsum(dO∘O); per query row dQ, per key row dK and dV, each recomputing
// P from the log-sum-exp. Layout [heads][s][d], head dims 64 and 128. Heads 0 and h − 1 are checked
// against the double-precision reference.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu_backend.hpp"
#include "headroom/kernels/reference.hpp"

namespace headroom::kernels::gpu {
namespace {

constexpr int kRows = 64;  // query (or key) rows per block, one per thread
constexpr int kKeys = 32;  // keys per shared-memory tile

template <int D>
__global__ void attention_forward(const float* q, const float* k, const float* v, float* o, float* lse, int s,
                                  bool causal, float scale) {
  __shared__ float ks[kKeys][D];
  __shared__ float vs[kKeys][D];
  const int head = static_cast<int>(blockIdx.y);
  const int row = static_cast<int>(blockIdx.x) * kRows + static_cast<int>(threadIdx.x);
  const long base = static_cast<long>(head) * s * D;
  float qr[D], acc[D];
  for (int c = 0; c < D; ++c) {
    qr[c] = row < s ? q[base + static_cast<long>(row) * D + c] * scale : 0.0f;
    acc[c] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int last_row = min(s, static_cast<int>(blockIdx.x) * kRows + kRows) - 1;
  const int end = causal ? last_row + 1 : s;
  for (int j0 = 0; j0 < end; j0 += kKeys) {
    for (int t = static_cast<int>(threadIdx.x); t < kKeys * D; t += kRows) {
      const int j = j0 + t / D, c = t % D;
      ks[t / D][c] = j < s ? k[base + static_cast<long>(j) * D + c] : 0.0f;
      vs[t / D][c] = j < s ? v[base + static_cast<long>(j) * D + c] : 0.0f;
    }
    __syncthreads();
    if (row < s) {
      for (int jj = 0; jj < kKeys; ++jj) {
        const int j = j0 + jj;
        if (j >= s || (causal && j > row)) break;
        float x = 0.0f;
        for (int c = 0; c < D; ++c) x += qr[c] * ks[jj][c];
        const float mnew = fmaxf(m, x);
        const float alpha = expf(m - mnew), p = expf(x - mnew);
        l = l * alpha + p;
        for (int c = 0; c < D; ++c) acc[c] = acc[c] * alpha + p * vs[jj][c];
        m = mnew;
      }
    }
    __syncthreads();
  }
  if (row < s) {
    for (int c = 0; c < D; ++c) o[base + static_cast<long>(row) * D + c] = acc[c] / l;
    lse[static_cast<long>(head) * s + row] = m + logf(l);
  }
}

// Per query row i: D_i = dO_i·O_i, and dQ_i = scale · Σ_j P_ij (dO_i·V_j − D_i) K_j.
template <int D>
__global__ void attention_backward_dq(const float* q, const float* k, const float* v, const float* o, const float* dout,
                                      const float* lse, float* delta, float* dq, int s, bool causal, float scale) {
  const int head = static_cast<int>(blockIdx.y);
  const int i = static_cast<int>(blockIdx.x) * kRows + static_cast<int>(threadIdx.x);
  if (i >= s) return;
  const long base = static_cast<long>(head) * s * D, r = base + static_cast<long>(i) * D;
  float di = 0.0f, acc[D];
  for (int c = 0; c < D; ++c) {
    di += dout[r + c] * o[r + c];
    acc[c] = 0.0f;
  }
  delta[static_cast<long>(head) * s + i] = di;
  const float li = lse[static_cast<long>(head) * s + i];
  for (int j = 0; j < (causal ? i + 1 : s); ++j) {
    const long kj = base + static_cast<long>(j) * D;
    float x = 0.0f, dp = 0.0f;
    for (int c = 0; c < D; ++c) {
      x += q[r + c] * k[kj + c];
      dp += dout[r + c] * v[kj + c];
    }
    const float ds = expf(x * scale - li) * (dp - di) * scale;
    for (int c = 0; c < D; ++c) acc[c] += ds * k[kj + c];
  }
  for (int c = 0; c < D; ++c) dq[r + c] = acc[c];
}

// Per key row j: dV_j = Σ_i P_ij dO_i and dK_j = scale · Σ_i P_ij (dO_i·V_j − D_i) Q_i.
template <int D>
__global__ void attention_backward_dkv(const float* q, const float* k, const float* v, const float* dout,
                                       const float* lse, const float* delta, float* dk, float* dv, int s, bool causal,
                                       float scale) {
  const int head = static_cast<int>(blockIdx.y);
  const int j = static_cast<int>(blockIdx.x) * kRows + static_cast<int>(threadIdx.x);
  if (j >= s) return;
  const long base = static_cast<long>(head) * s * D, r = base + static_cast<long>(j) * D;
  float ak[D], av[D];
  for (int c = 0; c < D; ++c) ak[c] = av[c] = 0.0f;
  for (int i = causal ? j : 0; i < s; ++i) {
    const long qi = base + static_cast<long>(i) * D;
    float x = 0.0f, dp = 0.0f;
    for (int c = 0; c < D; ++c) {
      x += q[qi + c] * k[r + c];
      dp += dout[qi + c] * v[r + c];
    }
    const float p = expf(x * scale - lse[static_cast<long>(head) * s + i]);
    const float ds = p * (dp - delta[static_cast<long>(head) * s + i]) * scale;
    for (int c = 0; c < D; ++c) {
      av[c] += p * dout[qi + c];
      ak[c] += ds * q[qi + c];
    }
  }
  for (int c = 0; c < D; ++c) {
    dk[r + c] = ak[c];
    dv[r + c] = av[c];
  }
}

class Attention final : public Microkernel {
 public:
  Attention(Backend& b, const AttentionCase& c) : b_(static_cast<GpuBackend&>(b)), c_(c) {
    if (c.head_dim != 64 && c.head_dim != 128)
      throw Error("attention/flash-fp32: head dim " + std::to_string(c.head_dim) + " (64 and 128 are built)");
  }
  [[nodiscard]] std::string_view name() const override { return "attention/flash-fp32"; }
  void setup() override {
    const auto n = static_cast<std::size_t>(c_.heads * c_.seq * c_.head_dim);
    for (auto* h : {&q_, &k_, &v_, &do_}) h->resize(n);
    reference::fill_uniform(q_, 11);
    reference::fill_uniform(k_, 12);
    reference::fill_uniform(v_, 13);
    reference::fill_uniform(do_, 14);
    for (auto* d : {&dq_buf_, &dk_buf_, &dv_buf_, &q_buf_, &k_buf_, &v_buf_, &o_buf_, &do_buf_})
      *d = DeviceBuffer(b_, n * sizeof(float));
    lse_buf_ = DeviceBuffer(b_, static_cast<std::size_t>(c_.heads * c_.seq) * sizeof(float));
    delta_buf_ = DeviceBuffer(b_, static_cast<std::size_t>(c_.heads * c_.seq) * sizeof(float));
    b_.to_device(q_buf_.as<void>(), q_.data(), n * sizeof(float));
    b_.to_device(k_buf_.as<void>(), k_.data(), n * sizeof(float));
    b_.to_device(v_buf_.as<void>(), v_.data(), n * sizeof(float));
    b_.to_device(do_buf_.as<void>(), do_.data(), n * sizeof(float));
    forward();
  }
  // FP32 against double: forward normalised max error ≤ 1e-4, backward ≤ 1e-3.
  [[nodiscard]] Check check() override {
    run();
    b_.sync();
    const std::int64_t n = c_.seq * c_.head_dim;
    Check ch{0, c_.backward ? 1e-3 : 1e-4, "max |x − ref| / max |ref|"};
    std::vector<float> got(static_cast<std::size_t>(c_.heads * n));
    const auto fetch = [&](const DeviceBuffer& d) {
      b_.to_host(got.data(), d.as<void>(), got.size() * sizeof(float));
      return got;
    };
    const std::vector<float> o = fetch(o_buf_);
    std::vector<float> dq, dk, dv;
    if (c_.backward) {
      dq = fetch(dq_buf_);
      dk = fetch(dk_buf_);
      dv = fetch(dv_buf_);
    }
    std::vector<double> ref, rq, rk, rv;
    for (std::int64_t h : {std::int64_t{0}, c_.heads - 1}) {
      const auto at = [&](const std::vector<float>& x) {
        return std::span<const float>(x).subspan(static_cast<std::size_t>(h * n), static_cast<std::size_t>(n));
      };
      if (!c_.backward) {
        reference::attention_forward(at(q_), at(k_), at(v_), c_.seq, c_.head_dim, c_.causal, ref);
        ch.error = std::max(ch.error, reference::normalised_max_error(at(o), ref));
        continue;
      }
      reference::attention_backward(at(q_), at(k_), at(v_), at(do_), c_.seq, c_.head_dim, c_.causal, rq, rk, rv);
      ch.error = std::max({ch.error, reference::normalised_max_error(at(dq), rq),
                           reference::normalised_max_error(at(dk), rk), reference::normalised_max_error(at(dv), rv)});
    }
    return ch;
  }
  void run() override {
    if (c_.backward)
      backward();
    else
      forward();
  }
  [[nodiscard]] double flops() const override {
    const double s = static_cast<double>(c_.seq);
    const double f = 4.0 * s * s * static_cast<double>(c_.head_dim * c_.heads) * (c_.causal ? 0.5 : 1.0);
    return c_.backward ? 2.5 * f : f;
  }
  [[nodiscard]] double bytes() const override {
    return 4.0 * static_cast<double>(c_.heads * c_.seq * c_.head_dim) * (c_.backward ? 8.0 : 4.0);
  }

 private:
  [[nodiscard]] dim3 grid() const {
    return dim3(blocks_for(static_cast<std::size_t>(c_.seq), kRows), static_cast<unsigned>(c_.heads));
  }
  [[nodiscard]] float scale() const { return 1.0f / std::sqrt(static_cast<float>(c_.head_dim)); }
  void forward() {
    const int s = static_cast<int>(c_.seq);
    if (c_.head_dim == 64)
      attention_forward<64><<<grid(), kRows, 0, b_.stream()>>>(q_buf_.as<float>(), k_buf_.as<float>(),
                                                               v_buf_.as<float>(), o_buf_.as<float>(),
                                                               lse_buf_.as<float>(), s, c_.causal, scale());
    else
      attention_forward<128><<<grid(), kRows, 0, b_.stream()>>>(q_buf_.as<float>(), k_buf_.as<float>(),
                                                                v_buf_.as<float>(), o_buf_.as<float>(),
                                                                lse_buf_.as<float>(), s, c_.causal, scale());
    GPU_CHECK(cudaGetLastError());
  }
  template <int D>
  void backward_d() {
    const int s = static_cast<int>(c_.seq);
    attention_backward_dq<D><<<grid(), kRows, 0, b_.stream()>>>(
        q_buf_.as<float>(), k_buf_.as<float>(), v_buf_.as<float>(), o_buf_.as<float>(), do_buf_.as<float>(),
        lse_buf_.as<float>(), delta_buf_.as<float>(), dq_buf_.as<float>(), s, c_.causal, scale());
    attention_backward_dkv<D><<<grid(), kRows, 0, b_.stream()>>>(
        q_buf_.as<float>(), k_buf_.as<float>(), v_buf_.as<float>(), do_buf_.as<float>(), lse_buf_.as<float>(),
        delta_buf_.as<float>(), dk_buf_.as<float>(), dv_buf_.as<float>(), s, c_.causal, scale());
    GPU_CHECK(cudaGetLastError());
  }
  void backward() {
    if (c_.head_dim == 64)
      backward_d<64>();
    else
      backward_d<128>();
  }
  GpuBackend& b_;
  AttentionCase c_;
  std::vector<float> q_, k_, v_, do_;
  DeviceBuffer q_buf_, k_buf_, v_buf_, o_buf_, do_buf_, lse_buf_, delta_buf_, dq_buf_, dk_buf_, dv_buf_;
};

}  // namespace

std::unique_ptr<Microkernel> make_attention(Backend& b, const Case& c) {
  return std::make_unique<Attention>(b, std::get<AttentionCase>(c));
}

}  // namespace headroom::kernels::gpu
