// Attention on the CPU, blocked the way FlashAttention-2 is (Dao 2023, Algorithms 1 and 2): the forward walks
// key blocks with an online softmax and keeps the row log-sum-exp; the backward recomputes each block's
// probabilities from it. FP32, Eigen for the block products, heads one after another.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu.hpp"
#include "headroom/kernels/reference.hpp"

namespace headroom::kernels::cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;
using Map = Eigen::Map<RowMat>;
constexpr std::int64_t kBlock = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Entries of a block whose key index exceeds the query index get `fill` (causal mask).
void mask_block(RowMat& s, std::int64_t i0, std::int64_t j0, float fill) {
  for (Eigen::Index r = 0; r < s.rows(); ++r)
    for (Eigen::Index c = std::max<Eigen::Index>(0, i0 + r - j0 + 1); c < s.cols(); ++c) s(r, c) = fill;
}

void forward_head(const float* q, const float* k, const float* v, float* o, float* lse, std::int64_t s, std::int64_t d,
                  bool causal) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (std::int64_t i0 = 0; i0 < s; i0 += kBlock) {
    const std::int64_t bi = std::min(kBlock, s - i0);
    const ConstMap qi(q + i0 * d, bi, d);
    RowMat acc = RowMat::Zero(bi, d);
    std::vector<float> m(sz(bi), kNegInf), l(sz(bi), 0.0f);
    const std::int64_t jend = causal ? i0 + bi : s;
    for (std::int64_t j0 = 0; j0 < jend; j0 += kBlock) {
      const std::int64_t bj = std::min(kBlock, jend - j0);
      RowMat sc = (qi * ConstMap(k + j0 * d, bj, d).transpose()) * scale;
      const bool masked = causal && j0 + bj - 1 > i0;
      if (masked) mask_block(sc, i0, j0, kNegInf);
      for (std::int64_t r = 0; r < bi; ++r) {
        const float mnew = std::max(m[sz(r)], sc.row(r).maxCoeff());
        const float alpha = std::exp(m[sz(r)] - mnew);
        sc.row(r) = (sc.row(r).array() - mnew).exp().matrix();
        // Eigen's vectorised exp clamps its argument near -88, so exp(-inf) comes out as a denormal (about 1e-39), not
        // 0; the P·V product over denormals runs many times slower (most of all at short s, where diagonal blocks are
        // most of the work). The masked entries are zeroed, as the backward does.
        if (masked) {
          const std::int64_t first = std::max<std::int64_t>(0, i0 + r - j0 + 1);
          if (first < bj) sc.row(r).tail(bj - first).setZero();
        }
        l[sz(r)] = l[sz(r)] * alpha + sc.row(r).sum();
        acc.row(r) *= alpha;
        m[sz(r)] = mnew;
      }
      acc.noalias() += sc * ConstMap(v + j0 * d, bj, d);
    }
    Map oi(o + i0 * d, bi, d);
    for (std::int64_t r = 0; r < bi; ++r) {
      oi.row(r) = acc.row(r) / l[sz(r)];
      lse[i0 + r] = m[sz(r)] + std::log(l[sz(r)]);
    }
  }
}

void backward_head(const float* q, const float* k, const float* v, const float* o, const float* dout, const float* lse,
                   float* dq, float* dk, float* dv, std::int64_t s, std::int64_t d, bool causal) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> delta(sz(s));  // D_i = rowsum(dO ∘ O)
  for (std::int64_t i = 0; i < s; ++i) {
    float x = 0;
    for (std::int64_t c = 0; c < d; ++c) x += dout[i * d + c] * o[i * d + c];
    delta[sz(i)] = x;
  }
  Map(dq, s, d).setZero();
  for (std::int64_t j0 = 0; j0 < s; j0 += kBlock) {
    const std::int64_t bj = std::min(kBlock, s - j0);
    const ConstMap kj(k + j0 * d, bj, d), vj(v + j0 * d, bj, d);
    Map dkj(dk + j0 * d, bj, d), dvj(dv + j0 * d, bj, d);
    dkj.setZero();
    dvj.setZero();
    for (std::int64_t i0 = causal ? j0 / kBlock * kBlock : 0; i0 < s; i0 += kBlock) {
      const std::int64_t bi = std::min(kBlock, s - i0);
      if (causal && i0 + bi - 1 < j0) continue;
      const ConstMap qi(q + i0 * d, bi, d), doi(dout + i0 * d, bi, d);
      RowMat p = (qi * kj.transpose()) * scale;
      for (std::int64_t r = 0; r < bi; ++r) p.row(r) = (p.row(r).array() - lse[i0 + r]).exp().matrix();
      if (causal && j0 + bj - 1 > i0) mask_block(p, i0, j0, 0.0f);
      dvj.noalias() += p.transpose() * doi;
      RowMat ds = doi * vj.transpose();
      for (std::int64_t r = 0; r < bi; ++r)
        ds.row(r) = (p.row(r).array() * (ds.row(r).array() - delta[sz(i0 + r)])).matrix();
      Map(dq + i0 * d, bi, d).noalias() += (ds * kj) * scale;
      dkj.noalias() += (ds.transpose() * qi) * scale;
    }
  }
}

class Attention final : public Microkernel {
 public:
  explicit Attention(const AttentionCase& c) : c_(c) {}
  [[nodiscard]] std::string_view name() const override { return "attention/blocked"; }
  void setup() override {
    const std::size_t n = sz(c_.heads * c_.seq * c_.head_dim);
    for (auto* x : {&q_, &k_, &v_, &o_, &do_, &dq_, &dk_, &dv_}) x->assign(n, 0.0f);
    lse_.assign(sz(c_.heads * c_.seq), 0.0f);
    reference::fill_uniform(q_, 11);
    reference::fill_uniform(k_, 12);
    reference::fill_uniform(v_, 13);
    reference::fill_uniform(do_, 14);
    forward();
  }
  // FP32 against double: forward normalised max error ≤ 1e-4, backward ≤ 1e-3 (the online softmax and the
  // recomputed probabilities add a few ulps per block), every head.
  [[nodiscard]] Check check() override {
    run();
    Check ch{0, c_.backward ? 1e-3 : 1e-4, "max |x − ref| / max |ref|"};
    const std::int64_t n = c_.seq * c_.head_dim;
    std::vector<double> ref, rq, rk, rv;
    for (std::int64_t h = 0; h < c_.heads; ++h) {
      const auto at = [&](const std::vector<float>& x) { return std::span<const float>(x).subspan(sz(h * n), sz(n)); };
      if (!c_.backward) {
        reference::attention_forward(at(q_), at(k_), at(v_), c_.seq, c_.head_dim, c_.causal, ref);
        ch.error = std::max(ch.error, reference::normalised_max_error(at(o_), ref));
        continue;
      }
      reference::attention_backward(at(q_), at(k_), at(v_), at(do_), c_.seq, c_.head_dim, c_.causal, rq, rk, rv);
      ch.error = std::max({ch.error, reference::normalised_max_error(at(dq_), rq),
                           reference::normalised_max_error(at(dk_), rk), reference::normalised_max_error(at(dv_), rv)});
    }
    return ch;
  }
  void run() override {
    if (c_.backward)
      backward();
    else
      forward();
  }
  // FlashAttention-2's count (Dao 2023 Sec. 4): 4·s²·d per head forward, half with a causal mask; backward 2.5×.
  [[nodiscard]] double flops() const override {
    const double s = static_cast<double>(c_.seq);
    const double f =
        4.0 * s * s * static_cast<double>(c_.head_dim) * static_cast<double>(c_.heads) * (c_.causal ? 0.5 : 1.0);
    return c_.backward ? 2.5 * f : f;
  }
  [[nodiscard]] double bytes() const override {
    return 4.0 * static_cast<double>(c_.heads * c_.seq * c_.head_dim) * (c_.backward ? 8.0 : 4.0);
  }

 private:
  void forward() {
    const std::int64_t n = c_.seq * c_.head_dim;
    for (std::int64_t h = 0; h < c_.heads; ++h)
      forward_head(q_.data() + h * n, k_.data() + h * n, v_.data() + h * n, o_.data() + h * n, lse_.data() + h * c_.seq,
                   c_.seq, c_.head_dim, c_.causal);
  }
  void backward() {
    const std::int64_t n = c_.seq * c_.head_dim;
    for (std::int64_t h = 0; h < c_.heads; ++h)
      backward_head(q_.data() + h * n, k_.data() + h * n, v_.data() + h * n, o_.data() + h * n, do_.data() + h * n,
                    lse_.data() + h * c_.seq, dq_.data() + h * n, dk_.data() + h * n, dv_.data() + h * n, c_.seq,
                    c_.head_dim, c_.causal);
  }
  AttentionCase c_;
  std::vector<float> q_, k_, v_, o_, do_, dq_, dk_, dv_, lse_;
};

}  // namespace

std::unique_ptr<Microkernel> make_attention(Backend&, const Case& c) {
  return std::make_unique<Attention>(std::get<AttentionCase>(c));
}

}  // namespace headroom::kernels::cpu
