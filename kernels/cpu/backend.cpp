// The CPU backend: host memory, steady_clock timing, and its explicit list of kernels.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include <Eigen/Core>

#include "cpu.hpp"
#include "headroom/core/error.hpp"

namespace headroom::kernels {
namespace cpu {

ThreadTeam::ThreadTeam(int n) {
  if (n < 1) throw Error("the CPU backend needs at least one rank (got " + std::to_string(n) + ")");
  for (int r = 1; r < n; ++r) workers_.emplace_back([this, r] { loop(r); });
}

ThreadTeam::~ThreadTeam() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadTeam::run(const std::function<void(int)>& job) {
  {
    std::lock_guard lock(mu_);
    job_ = &job;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  job(0);
  std::unique_lock lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadTeam::loop(int rank) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    (*job)(rank);
    std::lock_guard lock(mu_);
    if (--pending_ == 0) done_.notify_one();
  }
}

DeviceInfo CpuBackend::device() const {
  DeviceInfo d;
  d.name = "CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) d.name = line.substr(line.find_first_not_of(' ', colon + 1));
    break;
  }
  d.multiprocessors = static_cast<int>(std::thread::hardware_concurrency());
  d.software = "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
               std::to_string(EIGEN_MINOR_VERSION) + ", " +
#if defined(__clang__)
               __VERSION__;  // "Debian Clang 14.0.6"
#else
               "g++ " __VERSION__;
#endif
  return d;
}

void* CpuBackend::alloc(std::size_t bytes) {
  void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void CpuBackend::release(void* p) { std::free(p); }
void CpuBackend::to_device(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::to_host(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }

namespace {
constexpr KernelEntry kKernels[] = {
    {"gemm/eigen", KernelKind::gemm, &make_gemm},
    {"attention/blocked", KernelKind::attention, &make_attention},
    {"collective/threads", KernelKind::collective, &make_collective},
    {"copy/memcpy", KernelKind::copy, &make_copy},
};
}  // namespace

std::span<const KernelEntry> CpuBackend::kernels() const { return kKernels; }

}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend(int ranks) { return std::make_unique<cpu::CpuBackend>(ranks); }

}  // namespace headroom::kernels
