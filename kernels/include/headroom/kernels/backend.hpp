// A backend: where microkernels run (CPU, CUDA, HIP). Deliberately small: name, device, memory, copies,
// synchronisation, a timer, and its explicit list of microkernels (microkernel.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "headroom/kernels/device_info.hpp"

namespace headroom::kernels {

struct KernelEntry;

class Backend {
 public:
  virtual ~Backend() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;  // "cpu", "cuda", "hip"
  [[nodiscard]] virtual DeviceInfo device() const = 0;
  [[nodiscard]] virtual int ranks() const = 0;  // devices (GPUs or CPU threads) collectives span
  [[nodiscard]] virtual void* alloc(std::size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void to_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void to_host(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void sync() = 0;
  // Wall time of the work issued between start and stop (device events on GPUs), in seconds.
  virtual void timer_start() = 0;
  [[nodiscard]] virtual double timer_stop() = 0;
  // The microkernels this backend implements: an explicit, fixed list (no self-registration).
  [[nodiscard]] virtual std::span<const KernelEntry> kernels() const = 0;
};

// Device memory owned by a backend, released on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& b, std::size_t bytes) : backend_(&b), ptr_(b.alloc(bytes)), bytes_(bytes) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      backend_ = o.backend_;
      ptr_ = o.ptr_;
      bytes_ = o.bytes_;
      o.ptr_ = nullptr;
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }
  void reset() {
    if (ptr_ != nullptr) backend_->release(ptr_);
    ptr_ = nullptr;
  }
  template <class T>
  [[nodiscard]] T* as() const {
    return static_cast<T*>(ptr_);
  }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }

 private:
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// The CPU backend: Eigen GEMM, blocked attention, collectives between `ranks` threads. Always built.
[[nodiscard]] std::unique_ptr<Backend> make_cpu_backend(int ranks);
// The GPU backend of this build ("cuda" or "hip"), over `ranks` GPUs of this node. Throws Error when the build
// has none, or when no device is usable.
[[nodiscard]] std::unique_ptr<Backend> make_gpu_backend(std::string_view vendor, int ranks);
// "cuda", "hip" or "" : the GPU backend compiled into this build.
[[nodiscard]] std::string_view gpu_backend_built();

}  // namespace headroom::kernels
