// GEMM C = A·B (row-major) on device 0: cuBLASLt in BF16 with FP32 accumulation where CUDA has it, else our
// shared-memory tiled FP32 kernel (HIP here has neither hipBLASLt nor rocBLAS). Checked on 64 entries
// against the double-precision reference over the same (rounded) inputs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gpu_backend.hpp"
#include "headroom/kernels/reference.hpp"

namespace headroom::kernels::gpu {
namespace {

#if !defined(HEADROOM_HAVE_CUBLASLT)
constexpr int kTile = 16;

// One 16×16 output tile per block, K walked in 16-wide slabs through shared memory.
__global__ void tiled_gemm(const float* a, const float* b, float* c, int m, int n, int k) {
  __shared__ float as[kTile][kTile];
  __shared__ float bs[kTile][kTile];
  const int row = static_cast<int>(blockIdx.y) * kTile + static_cast<int>(threadIdx.y);
  const int col = static_cast<int>(blockIdx.x) * kTile + static_cast<int>(threadIdx.x);
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += kTile) {
    const int ka = k0 + static_cast<int>(threadIdx.x), kb = k0 + static_cast<int>(threadIdx.y);
    as[threadIdx.y][threadIdx.x] = row < m && ka < k ? a[static_cast<std::int64_t>(row) * k + ka] : 0.0f;
    bs[threadIdx.y][threadIdx.x] = kb < k && col < n ? b[static_cast<std::int64_t>(kb) * n + col] : 0.0f;
    __syncthreads();
    for (int p = 0; p < kTile; ++p) acc += as[threadIdx.y][p] * bs[p][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[static_cast<std::int64_t>(row) * n + col] = acc;
}
#endif  // !HEADROOM_HAVE_CUBLASLT

// Round-to-nearest-even FP32 → BF16 bits, and back (host side; the reference sees the rounded values).
std::uint16_t to_bf16(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  u += 0x7fffU + ((u >> 16) & 1U);
  return static_cast<std::uint16_t>(u >> 16);
}
float from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float x = 0;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

class Gemm final : public Microkernel {
 public:
  Gemm(Backend& b, const GemmCase& c) : b_(static_cast<GpuBackend&>(b)), c_(c) {}
#if defined(HEADROOM_HAVE_CUBLASLT)
  ~Gemm() override {
    if (layout_c_ != nullptr) cublasLtMatrixLayoutDestroy(layout_c_);
    if (layout_b_ != nullptr) cublasLtMatrixLayoutDestroy(layout_b_);
    if (layout_a_ != nullptr) cublasLtMatrixLayoutDestroy(layout_a_);
    if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
    if (lt_ != nullptr) cublasLtDestroy(lt_);
  }
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
#endif  // HEADROOM_HAVE_CUBLASLT
  [[nodiscard]] std::string_view name() const override { return "gemm"; }
  void setup() override {
    a_.resize(static_cast<std::size_t>(c_.m * c_.k));
    bm_.resize(static_cast<std::size_t>(c_.k * c_.n));
    reference::fill_uniform(a_, 1);
    reference::fill_uniform(bm_, 2);
    const auto out = static_cast<std::size_t>(c_.m * c_.n) * sizeof(float);
#if defined(HEADROOM_HAVE_CUBLASLT)
    std::vector<std::uint16_t> ah(a_.size()), bh(bm_.size());
    for (std::size_t i = 0; i < a_.size(); ++i) a_[i] = from_bf16(ah[i] = to_bf16(a_[i]));
    for (std::size_t i = 0; i < bm_.size(); ++i) bm_[i] = from_bf16(bh[i] = to_bf16(bm_[i]));
    da_ = DeviceBuffer(b_, ah.size() * 2);
    db_ = DeviceBuffer(b_, bh.size() * 2);
    b_.to_device(da_.as<void>(), ah.data(), ah.size() * 2);
    b_.to_device(db_.as<void>(), bh.data(), bh.size() * 2);
    dc_ = DeviceBuffer(b_, out);
    workspace_ = DeviceBuffer(b_, kWorkspace);
    // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLASLt's "A" is our B (n×k, ld n), its "B" our A.
    lt_check(cublasLtCreate(&lt_));
    lt_check(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    lt_check(cublasLtMatrixLayoutCreate(&layout_a_, CUDA_R_16BF, static_cast<std::uint64_t>(c_.n),
                                        static_cast<std::uint64_t>(c_.k), c_.n));
    lt_check(cublasLtMatrixLayoutCreate(&layout_b_, CUDA_R_16BF, static_cast<std::uint64_t>(c_.k),
                                        static_cast<std::uint64_t>(c_.m), c_.k));
    lt_check(cublasLtMatrixLayoutCreate(&layout_c_, CUDA_R_32F, static_cast<std::uint64_t>(c_.n),
                                        static_cast<std::uint64_t>(c_.m), c_.n));
#else   // !HEADROOM_HAVE_CUBLASLT
    da_ = DeviceBuffer(b_, a_.size() * sizeof(float));
    db_ = DeviceBuffer(b_, bm_.size() * sizeof(float));
    b_.to_device(da_.as<void>(), a_.data(), a_.size() * sizeof(float));
    b_.to_device(db_.as<void>(), bm_.data(), bm_.size() * sizeof(float));
    dc_ = DeviceBuffer(b_, out);
#endif  // HEADROOM_HAVE_CUBLASLT
  }
  // FP32 accumulation over k products (inputs exact in BF16 or FP32): Higham's γ_k bound, k·2⁻²⁴ of Σ|a||b|,
  // doubled for split-K or blocked summation orders.
  [[nodiscard]] Check check() override {
    run();
    b_.sync();
    std::vector<float> c(static_cast<std::size_t>(c_.m * c_.n));
    b_.to_host(c.data(), dc_.as<void>(), c.size() * sizeof(float));
    Check ch{0, 2.0 * static_cast<double>(c_.k) * std::ldexp(1.0, -24), "max |c − ref| / Σ|a||b|"};
    for (std::int64_t t = 0; t < 64; ++t) {
      const std::int64_t i = t < 2 ? t * (c_.m - 1) : (t * 7919) % c_.m;
      const std::int64_t j = t < 2 ? t * (c_.n - 1) : (t * 104729) % c_.n;
      const auto ref = reference::gemm_element(a_, bm_, c_.n, c_.k, i, j);
      if (ref.magnitude > 0)
        ch.error = std::max(ch.error, std::abs(c[static_cast<std::size_t>(i * c_.n + j)] - ref.value) / ref.magnitude);
    }
    return ch;
  }
  void run() override {
#if defined(HEADROOM_HAVE_CUBLASLT)
    const float alpha = 1.0f, beta = 0.0f;
    lt_check(cublasLtMatmul(lt_, op_, &alpha, db_.as<void>(), layout_a_, da_.as<void>(), layout_b_, &beta,
                            dc_.as<void>(), layout_c_, dc_.as<void>(), layout_c_, nullptr, workspace_.as<void>(),
                            kWorkspace, b_.stream()));
#else   // !HEADROOM_HAVE_CUBLASLT
    const dim3 block(kTile, kTile);
    const dim3 grid(blocks_for(static_cast<std::size_t>(c_.n), kTile),
                    blocks_for(static_cast<std::size_t>(c_.m), kTile));
    // clang-format 14 splits the closing >>> of a launch inside an #if branch into > > >.
    // clang-format off
    tiled_gemm<<<grid, block, 0, b_.stream()>>>(da_.as<float>(), db_.as<float>(), dc_.as<float>(),
                                                static_cast<int>(c_.m), static_cast<int>(c_.n), static_cast<int>(c_.k));
    // clang-format on
    GPU_CHECK(cudaGetLastError());
#endif  // HEADROOM_HAVE_CUBLASLT
  }
  [[nodiscard]] double flops() const override {
    return 2.0 * static_cast<double>(c_.m) * static_cast<double>(c_.n) * static_cast<double>(c_.k);
  }
  [[nodiscard]] double bytes() const override {
#if defined(HEADROOM_HAVE_CUBLASLT)
    const double in = 2.0;
#else   // !HEADROOM_HAVE_CUBLASLT
    const double in = 4.0;
#endif  // HEADROOM_HAVE_CUBLASLT
    return in * static_cast<double>(c_.m * c_.k + c_.k * c_.n) + 4.0 * static_cast<double>(c_.m * c_.n);
  }

 private:
#if defined(HEADROOM_HAVE_CUBLASLT)
  static constexpr std::size_t kWorkspace = 32u << 20;
  static void lt_check(cublasStatus_t s) {
    if (s != CUBLAS_STATUS_SUCCESS)
      throw Error(std::string("cuBLASLt call failed with status ") + std::to_string(static_cast<int>(s)));
  }
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr, layout_b_ = nullptr, layout_c_ = nullptr;
  DeviceBuffer workspace_;
#endif  // HEADROOM_HAVE_CUBLASLT
  GpuBackend& b_;
  GemmCase c_;
  std::vector<float> a_, bm_;
  DeviceBuffer da_, db_, dc_;
};

}  // namespace

std::unique_ptr<Microkernel> make_gemm(Backend& b, const Case& c) {
  return std::make_unique<Gemm>(b, std::get<GemmCase>(c));
}

}  // namespace headroom::kernels::gpu
