// The CPU backend across MPI ranks (calibrate --mpi): one process per rank. GEMM, attention and copies are the
// CPU backend's kernels, run on every rank at once; collectives are MPI's over groups of ranks, checked against
// the CPU reference (reference.hpp) before timing like every other kernel.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "cpu.hpp"
#include "headroom/core/error.hpp"
#include "headroom/kernels/mpi.hpp"
#include "headroom/kernels/reference.hpp"

namespace headroom::kernels::mpi {
namespace {

// A backend whose timer spans every rank: timer_start is a barrier (all ranks start together, as nccl-tests
// does before timing), timer_stop the slowest rank's time (nccl-tests' `-a 3`). Every rank therefore gets the
// same time, so the harness picks the same iteration count everywhere and the ranks stay in step.
class MpiCpuBackend final : public Backend {
 public:
  MpiCpuBackend(MPI_Comm world, int position) : world_(world), position_(position) { MPI_Comm_size(world, &size_); }
  [[nodiscard]] std::string_view name() const override { return "cpu"; }
  [[nodiscard]] DeviceInfo device() const override { return local_.device(); }
  [[nodiscard]] int ranks() const override { return size_; }
  [[nodiscard]] void* alloc(std::size_t bytes) override { return local_.alloc(bytes); }
  void release(void* p) override { local_.release(p); }
  void to_device(void* dst, const void* src, std::size_t bytes) override { local_.to_device(dst, src, bytes); }
  void to_host(void* dst, const void* src, std::size_t bytes) override { local_.to_host(dst, src, bytes); }
  void sync() override {}
  void timer_start() override {
    MPI_Barrier(world_);
    start_ = MPI_Wtime();
  }
  [[nodiscard]] double timer_stop() override {
    const double mine = MPI_Wtime() - start_;
    double slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, world_);
    return slowest;
  }
  [[nodiscard]] std::span<const KernelEntry> kernels() const override;
  [[nodiscard]] MPI_Comm world() const { return world_; }
  // This rank's place in the group order (Placement): groups of n ranks are positions 0..n−1.
  [[nodiscard]] int position() const { return position_; }

 private:
  cpu::CpuBackend local_{1};
  MPI_Comm world_;
  int position_;
  int size_ = 1;
  double start_ = 0;
};

// One collective over the first `ranks` positions, FP32 sum, sizes as nccl-tests counts them (all-gather: the
// output; reduce-scatter: the input). send_recv is nccl-tests' sendrecv_perf: every rank sends to the next and
// receives from the previous one around the ring. Ranks outside the group take part in setup and check only.
class MpiCollective final : public Microkernel {
 public:
  MpiCollective(MpiCpuBackend& b, const CollectiveCase& c) : backend_(b), c_(c), n_(c.ranks) {
    if (c.ranks < 1 || c.ranks > b.ranks())
      throw Error("collective over " + std::to_string(c.ranks) + " ranks, but mpirun started " +
                  std::to_string(b.ranks()));
  }
  MpiCollective(const MpiCollective&) = delete;
  MpiCollective& operator=(const MpiCollective&) = delete;
  ~MpiCollective() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  [[nodiscard]] std::string_view name() const override { return "collective/mpi"; }

  void setup() override {
    count_ = reference::collective_count(c_.op, n_, c_.bytes);
    if (count_ > std::numeric_limits<int>::max())
      throw Error("collective of " + std::to_string(c_.bytes) + " B: more elements than MPI counts take");
    rank_ = backend_.position();
    member_ = rank_ < n_;
    // Collective over the world: every rank calls it, members get a communicator ranked by position.
    MPI_Comm_split(backend_.world(), member_ ? 0 : MPI_UNDEFINED, rank_, &comm_);
    if (!member_) return;
    const std::int64_t in = reference::collective_input_count(c_.op, n_, count_);
    in_.resize(cpu::sz(in));
    for (std::int64_t i = 0; i < in; ++i) in_[cpu::sz(i)] = reference::collective_value(rank_, i);
    out_.assign(cpu::sz(count_), 0.0f);
  }

  // Inputs are small integers (reference.hpp), so every correct reduction order gives the exact sum: tolerance 0.
  // The mismatches are summed over all ranks, so that every rank sees the same outcome and a failure stops
  // them all at the same point.
  [[nodiscard]] Check check() override {
    double mine = 0;
    if (member_) {
      std::fill(out_.begin(), out_.end(), -1.0f);
      run();
      const std::int64_t len = c_.op == Collective::reduce_scatter ? count_ / n_ : count_;
      for (std::int64_t i = 0; i < len; ++i)
        if (out_[cpu::sz(i)] != reference::collective_expected(c_.op, n_, rank_, count_, i)) mine += 1;
    }
    Check ch{0, 0, "mismatched elements over all ranks"};
    MPI_Allreduce(&mine, &ch.error, 1, MPI_DOUBLE, MPI_SUM, backend_.world());
    return ch;
  }

  void run() override {
    if (!member_) return;
    const auto count = static_cast<int>(count_), chunk = static_cast<int>(count_ / n_);
    switch (c_.op) {
      case Collective::all_reduce: MPI_Allreduce(in_.data(), out_.data(), count, MPI_FLOAT, MPI_SUM, comm_); break;
      case Collective::all_gather:
        MPI_Allgather(in_.data(), chunk, MPI_FLOAT, out_.data(), chunk, MPI_FLOAT, comm_);
        break;
      case Collective::reduce_scatter:
        MPI_Reduce_scatter_block(in_.data(), out_.data(), chunk, MPI_FLOAT, MPI_SUM, comm_);
        break;
      case Collective::all_to_all:
        MPI_Alltoall(in_.data(), chunk, MPI_FLOAT, out_.data(), chunk, MPI_FLOAT, comm_);
        break;
      case Collective::send_recv:
        MPI_Sendrecv(in_.data(), count, MPI_FLOAT, (rank_ + 1) % n_, 0, out_.data(), count, MPI_FLOAT,
                     (rank_ + n_ - 1) % n_, 0, comm_, MPI_STATUS_IGNORE);
        break;
    }
  }
  [[nodiscard]] double flops() const override { return 0; }
  [[nodiscard]] double bytes() const override { return 4.0 * static_cast<double>(count_); }

 private:
  MpiCpuBackend& backend_;
  CollectiveCase c_;
  int n_;
  int rank_ = 0;
  bool member_ = false;
  std::int64_t count_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<float> in_, out_;
};

std::unique_ptr<Microkernel> make_collective(Backend& b, const Case& c) {
  return std::make_unique<MpiCollective>(static_cast<MpiCpuBackend&>(b), std::get<CollectiveCase>(c));
}

constexpr KernelEntry kKernels[] = {
    {"gemm/eigen", KernelKind::gemm, &cpu::make_gemm},
    {"attention/blocked", KernelKind::attention, &cpu::make_attention},
    {"collective/mpi", KernelKind::collective, &make_collective},
    {"copy/memcpy", KernelKind::copy, &cpu::make_copy},
};

std::span<const KernelEntry> MpiCpuBackend::kernels() const { return kKernels; }

}  // namespace

bool built() { return true; }

struct Session::Impl {
  bool finalize = false;            // this session initialised MPI
  MPI_Comm world = MPI_COMM_NULL;   // the work: every collective and timer
  MPI_Comm errors = MPI_COMM_NULL;  // only all_failed(), so that it cannot match a collective of the work
  Placement placement;
};

Session::Session() : impl_(std::make_unique<Impl>()) {
  int initialised = 0, finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised != 0) throw Error("MPI was already finalized in this process: one --mpi run per process");
  MPI_Initialized(&initialised);
  if (initialised == 0) {
    MPI_Init(nullptr, nullptr);
    impl_->finalize = true;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &impl_->world);
  MPI_Comm_dup(MPI_COMM_WORLD, &impl_->errors);
  Placement& p = impl_->placement;
  MPI_Comm_rank(impl_->world, &p.rank);
  MPI_Comm_size(impl_->world, &p.size);

  // Nodes: ranks that share memory, each named by its lowest world rank.
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(impl_->world, MPI_COMM_TYPE_SHARED, p.rank, MPI_INFO_NULL, &node);
  Slot mine;
  MPI_Comm_rank(node, &mine.local);
  MPI_Allreduce(&p.rank, &mine.node, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
  std::vector<int> all(static_cast<std::size_t>(2 * p.size));
  const int pair[2] = {mine.node, mine.local};
  MPI_Allgather(pair, 2, MPI_INT, all.data(), 2, MPI_INT, impl_->world);
  std::vector<Slot> slots;
  for (std::size_t r = 0; r < static_cast<std::size_t>(p.size); ++r) slots.push_back({all[2 * r], all[2 * r + 1]});
  p = place(slots, p.rank);
}

Session::~Session() {
  MPI_Comm_free(&impl_->errors);
  MPI_Comm_free(&impl_->world);
  if (impl_->finalize) MPI_Finalize();
}

const Placement& Session::placement() const { return impl_->placement; }

std::string Session::broadcast(const std::string& text) const {
  std::uint64_t size = text.size();
  MPI_Bcast(&size, 1, MPI_UINT64_T, 0, impl_->world);
  std::string out = root() ? text : std::string(size, '\0');
  if (size > 0) MPI_Bcast(out.data(), static_cast<int>(size), MPI_CHAR, 0, impl_->world);
  return out;
}

bool Session::everywhere(bool ok) const {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, impl_->world);
  return all != 0;
}

void Session::on_root(const std::function<void()>& f) const {
  std::string failure;
  if (root()) {
    try {
      f();
    } catch (const Error& e) {
      failure = std::string("!") + e.what();
    }
  }
  failure = broadcast(failure);
  if (!failure.empty()) throw Error(failure.substr(1));
}

bool Session::all_failed(double timeout_s) const {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Ibarrier(impl_->errors, &request);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done != 0) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void Session::abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return
}

std::unique_ptr<Backend> Session::cpu_backend() const {
  return std::make_unique<MpiCpuBackend>(impl_->world, impl_->placement.position);
}

}  // namespace headroom::kernels::mpi
