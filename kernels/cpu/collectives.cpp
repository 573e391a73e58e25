// Collectives between threads of one process, ring algorithms over shared memory (Patarasuk & Yuan 2009):
// rank r reads its left neighbour's buffer where NCCL would receive from it. Out-of-place, FP32 sum, sizes
// as nccl-tests counts them (all-gather: the output; reduce-scatter: the input).
#include <barrier>
#include <cstring>
#include <vector>

#include "cpu.hpp"
#include "headroom/core/error.hpp"
#include "headroom/kernels/reference.hpp"

namespace headroom::kernels::cpu {
namespace {

class Collectives final : public Microkernel {
 public:
  Collectives(CpuBackend& b, const CollectiveCase& c) : backend_(b), c_(c), n_(c.ranks), barrier_(c.ranks) {
    if (c.ranks < 1 || c.ranks > b.ranks())
      throw Error("collective over " + std::to_string(c.ranks) + " ranks, but the CPU backend has " +
                  std::to_string(b.ranks()));
  }
  [[nodiscard]] std::string_view name() const override { return "collective/threads"; }

  void setup() override {
    count_ = reference::collective_count(c_.op, n_, c_.bytes);
    const std::int64_t in = reference::collective_input_count(c_.op, n_, count_);
    in_.assign(sz(n_), {});
    out_.assign(sz(n_), std::vector<float>(sz(count_)));
    for (int r = 0; r < n_; ++r) {
      in_[sz(r)].resize(sz(in));
      for (std::int64_t i = 0; i < in; ++i) in_[sz(r)][sz(i)] = reference::collective_value(r, i);
    }
  }

  // Inputs are small integers (reference.hpp), so every correct reduction order gives the exact sum: tolerance 0.
  [[nodiscard]] Check check() override {
    for (auto& o : out_) std::fill(o.begin(), o.end(), -1.0f);
    run();
    Check ch{0, 0, "mismatched elements"};
    const std::int64_t chunk = count_ / n_;
    for (int r = 0; r < n_; ++r) {
      const auto& o = out_[sz(r)];
      const std::int64_t len = c_.op == Collective::reduce_scatter ? chunk : count_;
      const std::int64_t offset = c_.op == Collective::reduce_scatter ? r * chunk : 0;
      for (std::int64_t i = 0; i < len; ++i)
        if (o[sz(offset + i)] != reference::collective_expected(c_.op, n_, r, count_, i)) ch.error += 1;
    }
    return ch;
  }

  void run() override {
    const std::function<void(int)> job = [this](int r) {
      if (r < n_) rank(r);
    };
    backend_.team().run(job);
  }
  [[nodiscard]] double flops() const override { return 0; }
  [[nodiscard]] double bytes() const override { return 4.0 * static_cast<double>(count_); }

 private:
  // Element range of chunk c (mod n) of the full buffer.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> range(int c) const {
    c = ((c % n_) + n_) % n_;
    return {count_ * c / n_, count_ * (c + 1) / n_};
  }
  void rank(int r) {
    const int left = (r + n_ - 1) % n_;
    auto& out = out_[sz(r)];
    if (n_ == 1) {  // every collective over one rank is a copy
      std::memcpy(out.data(), in_[0].data(), in_[0].size() * sizeof(float));
      return;
    }
    switch (c_.op) {
      case Collective::all_reduce: {
        // Reduce-scatter: step j reduces chunk r − 1 − j; rank r ends owning chunk r + 1. Then all-gather.
        for (int j = 0; j < n_ - 1; ++j) {
          const auto [b, e] = range(r - 1 - j);
          const float* theirs = j == 0 ? in_[sz(left)].data() : out_[sz(left)].data();
          for (std::int64_t i = b; i < e; ++i) out[sz(i)] = in_[sz(r)][sz(i)] + theirs[i];
          barrier_.arrive_and_wait();
        }
        for (int j = 0; j < n_ - 1; ++j) {
          const auto [b, e] = range(r - j);
          std::memcpy(out.data() + b, out_[sz(left)].data() + b, sz(e - b) * sizeof(float));
          barrier_.arrive_and_wait();
        }
        break;
      }
      case Collective::reduce_scatter: {
        // Step j reduces chunk r − 2 − j, so that rank r ends owning chunk r.
        for (int j = 0; j < n_ - 1; ++j) {
          const auto [b, e] = range(r - 2 - j);
          const float* theirs = j == 0 ? in_[sz(left)].data() : out_[sz(left)].data();
          for (std::int64_t i = b; i < e; ++i) out[sz(i)] = in_[sz(r)][sz(i)] + theirs[i];
          barrier_.arrive_and_wait();
        }
        break;
      }
      case Collective::all_gather: {
        const auto [b0, e0] = range(r);
        std::memcpy(out.data() + b0, in_[sz(r)].data(), sz(e0 - b0) * sizeof(float));
        barrier_.arrive_and_wait();
        for (int j = 0; j < n_ - 1; ++j) {
          const auto [b, e] = range(r - 1 - j);
          std::memcpy(out.data() + b, out_[sz(left)].data() + b, sz(e - b) * sizeof(float));
          barrier_.arrive_and_wait();
        }
        break;
      }
      case Collective::all_to_all: {
        // Chunk q of rank r's output is chunk r of rank q's input.
        const std::int64_t chunk = count_ / n_;
        for (int q = 0; q < n_; ++q)
          std::memcpy(out.data() + q * chunk, in_[sz(q)].data() + r * chunk, sz(chunk) * sizeof(float));
        break;
      }
      case Collective::send_recv: std::memcpy(out.data(), in_[sz(left)].data(), sz(count_) * sizeof(float)); break;
    }
    // ThreadTeam::run returns only when every rank is done, so the next run cannot overwrite a buffer a
    // neighbour still reads.
  }

  CpuBackend& backend_;
  CollectiveCase c_;
  int n_;
  std::int64_t count_ = 0;
  std::vector<std::vector<float>> in_, out_;
  std::barrier<> barrier_;
};

}  // namespace

std::unique_ptr<Microkernel> make_collective(Backend& b, const Case& c) {
  return std::make_unique<Collectives>(static_cast<CpuBackend&>(b), std::get<CollectiveCase>(c));
}

}  // namespace headroom::kernels::cpu
