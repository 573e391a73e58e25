// Collectives through NCCL (RCCL on HIP) across the backend's devices in one process (ncclCommInitAll),
// FP32 sum, sizes as nccl-tests counts them. Without NCCL/RCCL in the build, a clear runtime error.
#include <vector>

#include "gpu_backend.hpp"
#include "headroom/kernels/reference.hpp"

namespace headroom::kernels::gpu {

#if defined(HEADROOM_HAVE_NCCL)
namespace {

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(std::string(what) + ": " + ncclGetErrorString(r));
}

class Collectives final : public Microkernel {
 public:
  Collectives(Backend& b, const CollectiveCase& c) : b_(static_cast<GpuBackend&>(b)), c_(c) {
    if (c.ranks < 1 || c.ranks > b.ranks())
      throw Error("collective over " + std::to_string(c.ranks) + " ranks, but the backend has " +
                  std::to_string(b.ranks()));
  }
  ~Collectives() override {
    for (auto comm : comms_) ncclCommDestroy(comm);
  }
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;
  [[nodiscard]] std::string_view name() const override { return "collective/nccl"; }
  void setup() override {
    const int n = c_.ranks;
    count_ = reference::collective_count(c_.op, n, c_.bytes);
    comms_.resize(static_cast<std::size_t>(n));
    std::vector<int> devs(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) devs[static_cast<std::size_t>(r)] = r;
    nccl_check(ncclCommInitAll(comms_.data(), n, devs.data()), "ncclCommInitAll");
    const std::int64_t in = reference::collective_input_count(c_.op, n, count_);
    for (int r = 0; r < n; ++r) {
      GPU_CHECK(cudaSetDevice(r));
      std::vector<float> h(static_cast<std::size_t>(in));
      for (std::int64_t i = 0; i < in; ++i) h[static_cast<std::size_t>(i)] = reference::collective_value(r, i);
      in_.emplace_back(b_, h.size() * sizeof(float));
      out_.emplace_back(b_, static_cast<std::size_t>(count_) * sizeof(float));
      GPU_CHECK(cudaMemcpy(in_.back().as<void>(), h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    GPU_CHECK(cudaSetDevice(0));
  }
  // Small-integer inputs (reference.hpp): exact sums, tolerance 0.
  [[nodiscard]] Check check() override {
    run();
    b_.sync();
    const int n = c_.ranks;
    const std::int64_t chunk = count_ / n;
    Check ch{0, 0, "mismatched elements"};
    std::vector<float> h(static_cast<std::size_t>(count_));
    for (int r = 0; r < n; ++r) {
      GPU_CHECK(cudaSetDevice(r));
      const std::int64_t len = c_.op == Collective::reduce_scatter ? chunk : count_;
      GPU_CHECK(cudaMemcpy(h.data(), out_[static_cast<std::size_t>(r)].as<void>(),
                           static_cast<std::size_t>(len) * sizeof(float), cudaMemcpyDeviceToHost));
      for (std::int64_t i = 0; i < len; ++i) {
        if (h[static_cast<std::size_t>(i)] != reference::collective_expected(c_.op, n, r, count_, i)) ch.error += 1;
      }
    }
    GPU_CHECK(cudaSetDevice(0));
    return ch;
  }
  void run() override {
    const int n = c_.ranks;
    const auto cnt = static_cast<std::size_t>(count_), chunk = cnt / static_cast<std::size_t>(n);
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<std::size_t>(r);
      float* in = in_[i].as<float>();
      float* out = out_[i].as<float>();
      cudaStream_t st = b_.stream(r);
      switch (c_.op) {
        case Collective::all_reduce:
          nccl_check(ncclAllReduce(in, out, cnt, ncclFloat, ncclSum, comms_[i], st), "ncclAllReduce");
          break;
        case Collective::all_gather:
          nccl_check(ncclAllGather(in, out, chunk, ncclFloat, comms_[i], st), "ncclAllGather");
          break;
        case Collective::reduce_scatter:
          nccl_check(ncclReduceScatter(in, out, chunk, ncclFloat, ncclSum, comms_[i], st), "ncclReduceScatter");
          break;
        case Collective::all_to_all:
          for (int q = 0; q < n; ++q) {
            nccl_check(ncclSend(in + static_cast<std::size_t>(q) * chunk, chunk, ncclFloat, q, comms_[i], st),
                       "ncclSend");
            nccl_check(ncclRecv(out + static_cast<std::size_t>(q) * chunk, chunk, ncclFloat, q, comms_[i], st),
                       "ncclRecv");
          }
          break;
        case Collective::send_recv:
          nccl_check(ncclSend(in, cnt, ncclFloat, (r + 1) % n, comms_[i], st), "ncclSend");
          nccl_check(ncclRecv(out, cnt, ncclFloat, (r + n - 1) % n, comms_[i], st), "ncclRecv");
          break;
      }
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  }
  [[nodiscard]] double flops() const override { return 0; }
  [[nodiscard]] double bytes() const override { return 4.0 * static_cast<double>(count_); }

 private:
  GpuBackend& b_;
  CollectiveCase c_;
  std::int64_t count_ = 0;
  std::vector<ncclComm_t> comms_;
  std::vector<DeviceBuffer> in_, out_;
};

}  // namespace

std::unique_ptr<Microkernel> make_collective(Backend& b, const Case& c) {
  return std::make_unique<Collectives>(b, std::get<CollectiveCase>(c));
}
#else   // !HEADROOM_HAVE_NCCL
std::unique_ptr<Microkernel> make_collective(Backend&, const Case&) {
  throw Error(std::string("collectives on the ") + HEADROOM_GPU_VENDOR +
              " backend need NCCL (CUDA) or RCCL (HIP), which this build did not find; measure them with nccl-tests/"
              "rccl-tests and pass the logs to headroom calibrate --ingest");
}
#endif  // HEADROOM_HAVE_NCCL

}  // namespace headroom::kernels::gpu
