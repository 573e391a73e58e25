// For the tests of work that must finish (no hang, no work that grows without bound): a watchdog.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <thread>
#include <utility>

namespace headroom::test {

// Runs `work` and returns its result, or ends the test process with a failure if it runs past `seconds`: a hang
// fails its test at once instead of holding the suite until ctest's timeout. ctest runs each TEST in its own
// process, so ending the process ends that test only.
template <class F>
auto within(double seconds, const char* what, F&& work) {
  using R = decltype(work());
  auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(work));
  std::future<R> done = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (done.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: %s did not finish within %.0f s\n", what, seconds);
    std::fflush(stderr);
    std::_Exit(1);
  }
  return done.get();
}

}  // namespace headroom::test
