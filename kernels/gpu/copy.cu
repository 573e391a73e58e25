// Device-to-device copy on device 0. bytes() counts read + write traffic (the HBM bandwidth it measures).
#include <vector>

#include "gpu_backend.hpp"

namespace headroom::kernels::gpu {
namespace {

class Copy final : public Microkernel {
 public:
  Copy(Backend& b, const CopyCase& c) : b_(static_cast<GpuBackend&>(b)), c_(c) {}
  [[nodiscard]] std::string_view name() const override { return "copy/memcpy-d2d"; }
  void setup() override {
    src_ = DeviceBuffer(b_, static_cast<std::size_t>(c_.bytes));
    dst_ = DeviceBuffer(b_, static_cast<std::size_t>(c_.bytes));
    host_.resize(static_cast<std::size_t>(c_.bytes));
    for (std::size_t i = 0; i < host_.size(); ++i) host_[i] = static_cast<unsigned char>(i * 31 + 7);
    b_.to_device(src_.as<void>(), host_.data(), host_.size());
  }
  [[nodiscard]] Check check() override {
    run();
    b_.sync();
    std::vector<unsigned char> out(host_.size());
    b_.to_host(out.data(), dst_.as<void>(), out.size());
    Check ch{0, 0, "mismatched bytes"};
    for (std::size_t i = 0; i < out.size(); ++i) ch.error += out[i] != host_[i] ? 1 : 0;
    return ch;
  }
  void run() override {
    GPU_CHECK(cudaMemcpyAsync(dst_.as<void>(), src_.as<void>(), static_cast<std::size_t>(c_.bytes),
                              cudaMemcpyDeviceToDevice, b_.stream()));
  }
  [[nodiscard]] double flops() const override { return 0; }
  [[nodiscard]] double bytes() const override { return 2.0 * static_cast<double>(c_.bytes); }

 private:
  GpuBackend& b_;
  CopyCase c_;
  DeviceBuffer src_, dst_;
  std::vector<unsigned char> host_;
};

}  // namespace

std::unique_ptr<Microkernel> make_copy(Backend& b, const Case& c) {
  return std::make_unique<Copy>(b, std::get<CopyCase>(c));
}

}  // namespace headroom::kernels::gpu
