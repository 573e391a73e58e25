// The GPU backend (CUDA or HIP from this one source): device memory, streams, event timing, kernel table.
#include <cstddef>
#include <string>

#include "gpu_backend.hpp"

namespace headroom::kernels {
namespace gpu {
namespace {

// A library version as its header encodes it (major·10000 + minor·100 + patch: cuBLASLt, cuDNN 9, NCCL 2.9+).
std::string dotted(std::size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

// The driver and runtime and the libraries this build linked, as they report themselves at run time (a library
// loaded at run time may be newer than its header).
std::string software_versions() {
  int driver = 0, runtime = 0;
  GPU_CHECK(cudaDriverGetVersion(&driver));
  GPU_CHECK(cudaRuntimeGetVersion(&runtime));
#if defined(HEADROOM_HIP)
  std::string s = "HIP driver " + std::to_string(driver) + ", runtime " + std::to_string(runtime);
#else
  const auto major_minor = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  std::string s = "CUDA driver " + major_minor(driver) + ", runtime " + major_minor(runtime);
#endif
#if defined(HEADROOM_HAVE_CUBLASLT)
  s += ", cuBLASLt " + dotted(cublasLtGetVersion());
#endif
#if defined(HEADROOM_HAVE_CUDNN)
  s += ", cuDNN " + dotted(cudnnGetVersion());
#endif
#if defined(HEADROOM_HAVE_NCCL)
  int nccl = 0;
#if defined(HEADROOM_HIP)
  const char* collectives = ", RCCL ";
#else
  const char* collectives = ", NCCL ";
#endif
  if (ncclGetVersion(&nccl) == ncclSuccess) s += collectives + dotted(static_cast<std::size_t>(nccl));
#endif
  return s;
}

}  // namespace

GpuBackend::GpuBackend(int ranks) {
  int count = 0;
  GPU_CHECK(cudaGetDeviceCount(&count));
  if (ranks < 1 || ranks > count)
    throw Error(std::string("--ranks ") + std::to_string(ranks) + ": this node has " + std::to_string(count) + " " +
                HEADROOM_GPU_VENDOR + " devices");
  for (int r = 0; r < ranks; ++r) {
    GPU_CHECK(cudaSetDevice(r));
    cudaStream_t s{};
    GPU_CHECK(cudaStreamCreate(&s));
    streams_.push_back(s);
  }
  GPU_CHECK(cudaSetDevice(0));
  GPU_CHECK(cudaEventCreate(&start_));
  GPU_CHECK(cudaEventCreate(&stop_));
}

GpuBackend::~GpuBackend() {
  (void)cudaSetDevice(0);
  (void)cudaEventDestroy(start_);
  (void)cudaEventDestroy(stop_);
  for (std::size_t r = 0; r < streams_.size(); ++r) {
    (void)cudaSetDevice(static_cast<int>(r));
    (void)cudaStreamDestroy(streams_[r]);
  }
}

DeviceInfo GpuBackend::device() const {
  cudaDeviceProp prop{};
  GPU_CHECK(cudaGetDeviceProperties(&prop, 0));
  return {prop.name, static_cast<double>(prop.totalGlobalMem), prop.multiProcessorCount, software_versions()};
}

void* GpuBackend::alloc(std::size_t bytes) {
  void* p = nullptr;
  GPU_CHECK(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
  return p;
}
void GpuBackend::release(void* p) { (void)cudaFree(p); }
void GpuBackend::to_device(void* dst, const void* src, std::size_t bytes) {
  GPU_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void GpuBackend::to_host(void* dst, const void* src, std::size_t bytes) {
  GPU_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void GpuBackend::sync() {
  for (std::size_t r = 0; r < streams_.size(); ++r) {
    GPU_CHECK(cudaSetDevice(static_cast<int>(r)));
    GPU_CHECK(cudaStreamSynchronize(streams_[r]));
  }
  GPU_CHECK(cudaSetDevice(0));
}
void GpuBackend::timer_start() {
  sync();
  GPU_CHECK(cudaEventRecord(start_, streams_[0]));
}
double GpuBackend::timer_stop() {
  // Collectives run on every stream: wait for all of them before the stop event closes the interval.
  if (streams_.size() > 1) sync();
  GPU_CHECK(cudaEventRecord(stop_, streams_[0]));
  GPU_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  GPU_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return static_cast<double>(ms) * 1e-3;
}

namespace {
constexpr KernelEntry kKernels[] = {
#if defined(HEADROOM_HAVE_CUBLASLT)
    {"gemm/cublaslt-bf16", KernelKind::gemm, &make_gemm},
#else   // !HEADROOM_HAVE_CUBLASLT
    {"gemm/tiled-fp32", KernelKind::gemm, &make_gemm},
#endif  // HEADROOM_HAVE_CUBLASLT
    {"attention/flash-fp32", KernelKind::attention, &make_attention},
    {"collective/nccl", KernelKind::collective, &make_collective},
    {"copy/memcpy-d2d", KernelKind::copy, &make_copy},
};
}  // namespace

std::span<const KernelEntry> GpuBackend::kernels() const { return kKernels; }

}  // namespace gpu

std::string_view gpu_backend_built() { return HEADROOM_GPU_VENDOR; }

std::unique_ptr<Backend> make_gpu_backend(std::string_view vendor, int ranks) {
  if (vendor != HEADROOM_GPU_VENDOR)
    throw Error("--backend " + std::string(vendor) + ": this build's GPU backend is " + HEADROOM_GPU_VENDOR);
  return std::make_unique<gpu::GpuBackend>(ranks);
}

}  // namespace headroom::kernels
