// Every CPU kernel passes its check against the reference on small cases, and the harness times it.
#include <gtest/gtest.h>

#include "headroom/core/collectives.hpp"
#include "headroom/core/error.hpp"
#include "headroom/kernels/harness.hpp"

namespace headroom::kernels {
namespace {

TimingOptions fast() {
  TimingOptions t;
  t.warmup = 1;
  t.repeats = 1;
  t.min_batch_s = 0;
  return t;
}

// The device names the libraries that ran its kernels, with versions: a profile's curves belong to them.
TEST(CpuKernels, TheDeviceNamesItsSoftware) {
  const DeviceInfo d = make_cpu_backend(1)->device();
  EXPECT_EQ(d.software.rfind("Eigen 3.", 0), 0u) << d.software;
  EXPECT_GE(d.multiprocessors, 1);
}

TEST(CpuKernels, GemmChecksAndTimes) {
  auto b = make_cpu_backend(1);
  for (const GemmCase g : {GemmCase{1, 1, 1}, GemmCase{64, 96, 200}, GemmCase{257, 129, 65}}) {
    const Measurement m = measure(*b, g, fast());
    EXPECT_TRUE(m.check.passed()) << label(g);
    EXPECT_DOUBLE_EQ(m.flops, 2.0 * g.m * g.n * g.k);
    EXPECT_GT(m.seconds, 0);
  }
}

TEST(CpuKernels, AttentionForwardAndBackwardCausalAndNot) {
  auto b = make_cpu_backend(1);
  for (std::int64_t d : {64, 128})
    for (bool causal : {true, false})
      for (bool backward : {false, true})
        for (std::int64_t s : {1, 70, 192}) {
          const AttentionCase a{s, d, 2, causal, backward};
          const Measurement m = measure(*b, a, fast());
          EXPECT_TRUE(m.check.passed()) << label(a) << ": " << m.check.error;
        }
}

TEST(CpuKernels, CollectivesAreExactOnEveryGroupSize) {
  auto b = make_cpu_backend(4);
  for (const auto& info : kCollectives)
    for (int ranks : {1, 2, 3, 4})
      for (std::int64_t bytes : {8, 100, 4096, 1 << 20}) {
        const CollectiveCase c{info.op, bytes, ranks};
        const Measurement m = measure(*b, c, fast());
        EXPECT_EQ(m.check.error, 0) << label(c);
      }
}

TEST(CpuKernels, CollectiveOverMoreRanksThanTheBackendIsAnError) {
  auto b = make_cpu_backend(2);
  EXPECT_THROW((void)measure(*b, CollectiveCase{Collective::all_reduce, 64, 4}, fast()), Error);
}

TEST(CpuKernels, CopyChecks) {
  auto b = make_cpu_backend(1);
  const Measurement m = measure(*b, CopyCase{1 << 16}, fast());
  EXPECT_EQ(m.check.error, 0);
  EXPECT_DOUBLE_EQ(m.bytes, 2.0 * (1 << 16));
}

TEST(CpuKernels, BusBandwidthMatchesNcclTests) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce busbw = algbw · 2(n − 1)/n.
  const BusBandwidth bw = bus_bandwidth(Collective::all_reduce, 8, 1e9, 0.01);
  EXPECT_DOUBLE_EQ(bw.algbw, 1e11);
  EXPECT_DOUBLE_EQ(bw.busbw, 1e11 * 14.0 / 8.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::send_recv, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::all_to_all, 4), 0.75);
  EXPECT_EQ(collective_from_name("alltoall_perf"), Collective::all_to_all);
  EXPECT_EQ(collective_from_name("all_gather"), Collective::all_gather);
  EXPECT_EQ(collective_from_name("all_reduce_perf"), Collective::all_reduce);
}

}  // namespace
}  // namespace headroom::kernels
