// The GPU backend's internals, shared by its kernel files (one per microkernel). Internal to kernels/.
#pragma once

#include <memory>
#include <vector>

#include "headroom/kernels/backend.hpp"
#include "headroom/kernels/gpu.hpp"
#include "headroom/kernels/microkernel.hpp"

namespace headroom::kernels::gpu {

// `ranks` devices of this node, one stream each; kernels other than collectives run on device 0.
class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(int ranks);
  ~GpuBackend() override;
  GpuBackend(const GpuBackend&) = delete;
  GpuBackend& operator=(const GpuBackend&) = delete;
  [[nodiscard]] std::string_view name() const override { return HEADROOM_GPU_VENDOR; }
  [[nodiscard]] DeviceInfo device() const override;
  [[nodiscard]] int ranks() const override { return static_cast<int>(streams_.size()); }
  [[nodiscard]] void* alloc(std::size_t bytes) override;
  void release(void* p) override;
  void to_device(void* dst, const void* src, std::size_t bytes) override;
  void to_host(void* dst, const void* src, std::size_t bytes) override;
  void sync() override;
  void timer_start() override;
  [[nodiscard]] double timer_stop() override;
  [[nodiscard]] std::span<const KernelEntry> kernels() const override;
  [[nodiscard]] cudaStream_t stream(int rank = 0) const { return streams_[static_cast<std::size_t>(rank)]; }

 private:
  std::vector<cudaStream_t> streams_;
  cudaEvent_t start_{}, stop_{};
};

std::unique_ptr<Microkernel> make_gemm(Backend& b, const Case& c);
std::unique_ptr<Microkernel> make_attention(Backend& b, const Case& c);
std::unique_ptr<Microkernel> make_collective(Backend& b, const Case& c);
std::unique_ptr<Microkernel> make_copy(Backend& b, const Case& c);

inline unsigned blocks_for(std::size_t n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

}  // namespace headroom::kernels::gpu
