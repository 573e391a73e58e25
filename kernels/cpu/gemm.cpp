// GEMM on the CPU: Eigen's blocked FP32 product, C = A·B, row-major.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu.hpp"
#include "headroom/kernels/reference.hpp"

namespace headroom::kernels::cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

class Gemm final : public Microkernel {
 public:
  explicit Gemm(const GemmCase& c) : c_(c) {}
  [[nodiscard]] std::string_view name() const override { return "gemm/eigen"; }
  void setup() override {
    a_.resize(c_.m, c_.k);
    b_.resize(c_.k, c_.n);
    c_out_.resize(c_.m, c_.n);
    reference::fill_uniform({a_.data(), sz(a_.size())}, 1);
    reference::fill_uniform({b_.data(), sz(b_.size())}, 2);
  }
  // Higham's bound for a length-k dot product in FP32: |ĉ − c| ≤ γ_k·Σ|a||b|, γ_k ≈ k·2⁻²⁴; checked on 64
  // entries (corners and a fixed scatter), each normalised by its own Σ|a||b|.
  [[nodiscard]] Check check() override {
    run();
    Check ch{0, static_cast<double>(c_.k) * std::ldexp(1.0, -24), "max |c − ref| / Σ|a||b|"};
    for (std::int64_t t = 0; t < 64; ++t) {
      const std::int64_t i = t < 2 ? t * (c_.m - 1) : (t * 7919) % c_.m;
      const std::int64_t j = t < 2 ? t * (c_.n - 1) : (t * 104729) % c_.n;
      const auto ref =
          reference::gemm_element({a_.data(), sz(a_.size())}, {b_.data(), sz(b_.size())}, c_.n, c_.k, i, j);
      if (ref.magnitude > 0) ch.error = std::max(ch.error, std::abs(c_out_(i, j) - ref.value) / ref.magnitude);
    }
    return ch;
  }
  void run() override { c_out_.noalias() = a_ * b_; }
  [[nodiscard]] double flops() const override {
    return 2.0 * static_cast<double>(c_.m) * static_cast<double>(c_.n) * static_cast<double>(c_.k);
  }
  [[nodiscard]] double bytes() const override {
    return 4.0 * static_cast<double>(c_.m * c_.k + c_.k * c_.n + c_.m * c_.n);
  }

 private:
  GemmCase c_;
  RowMat a_, b_, c_out_;
};

}  // namespace

std::unique_ptr<Microkernel> make_gemm(Backend&, const Case& c) {
  return std::make_unique<Gemm>(std::get<GemmCase>(c));
}

}  // namespace headroom::kernels::cpu
