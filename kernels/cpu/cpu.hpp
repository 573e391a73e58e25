// The CPU backend's internals: the backend class, the thread team collectives run on, and the factories of
// its kernels (one file each). Internal to kernels/.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "headroom/kernels/backend.hpp"
#include "headroom/kernels/microkernel.hpp"

namespace headroom::kernels::cpu {

// `n` ranks as threads: rank 0 is the caller, ranks 1..n−1 persistent workers woken for each job, so that a
// collective's timing includes a wake-up (the CPU's "launch latency") but not thread creation.
class ThreadTeam {
 public:
  explicit ThreadTeam(int n);
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;
  ~ThreadTeam();
  [[nodiscard]] int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs job(rank) on every rank and returns when all have finished. The job must not throw.
  void run(const std::function<void(int)>& job);

 private:
  void loop(int rank);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int ranks) : team_(ranks) {}
  [[nodiscard]] std::string_view name() const override { return "cpu"; }
  [[nodiscard]] DeviceInfo device() const override;
  [[nodiscard]] int ranks() const override { return team_.size(); }
  [[nodiscard]] void* alloc(std::size_t bytes) override;
  void release(void* p) override;
  void to_device(void* dst, const void* src, std::size_t bytes) override;
  void to_host(void* dst, const void* src, std::size_t bytes) override;
  void sync() override {}
  void timer_start() override { start_ = std::chrono::steady_clock::now(); }
  [[nodiscard]] double timer_stop() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  [[nodiscard]] std::span<const KernelEntry> kernels() const override;
  [[nodiscard]] ThreadTeam& team() { return team_; }

 private:
  ThreadTeam team_;
  std::chrono::steady_clock::time_point start_;
};

std::unique_ptr<Microkernel> make_gemm(Backend& b, const Case& c);
std::unique_ptr<Microkernel> make_attention(Backend& b, const Case& c);
std::unique_ptr<Microkernel> make_collective(Backend& b, const Case& c);
std::unique_ptr<Microkernel> make_copy(Backend& b, const Case& c);

inline std::size_t sz(std::int64_t x) { return static_cast<std::size_t>(x); }

}  // namespace headroom::kernels::cpu
