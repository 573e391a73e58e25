// The GPU backend (CUDA or HIP from this one source): device memory, streams, event timing, kernel table.
#include <string>

#include "gpu_backend.hpp"

namespace headroom::kernels {
namespace gpu {

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
  return {prop.name, static_cast<double>(prop.totalGlobalMem), prop.multiProcessorCount};
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
