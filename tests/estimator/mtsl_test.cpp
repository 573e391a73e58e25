#include "headroom/estimator/mtsl.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "../watchdog.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/validation/paper_4d.hpp"

namespace headroom {
namespace {

class MtslTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec m70 = lib.model("llama3.1-70b");
  ModelSpec m8 = lib.model("llama3.1-8b");
  ClusterSpec lumi = lib.cluster("lumi-mi250x");
  ClusterSpec h100 = lib.cluster("h100-94gb-x4");
  FrameworkProfile megatron = lib.framework("megatron");
  FrameworkProfile fsdp = lib.framework("pytorch-fsdp");

  // Exact to one valid step: the MTSL fits and the next valid length does not.
  void expect_exact(const ModelSpec& m, const ClusterSpec& c, Layout l, const ResidualModel& r) {
    const MtslResult res = max_trainable_seq(m, c, l, r);
    ASSERT_GT(res.tokens, 0);
    ASSERT_FALSE(res.capped);
    EXPECT_EQ(res.tokens % res.granularity, 0);
    l.seq = res.tokens;
    EXPECT_LE(peak_memory_bytes(m, c, l, r), c.gpu.usable_memory_bytes);
    l.seq = res.tokens + res.granularity;
    EXPECT_GT(peak_memory_bytes(m, c, l, r), c.gpu.usable_memory_bytes);
  }
};

TEST_F(MtslTest, ExactToOneTokenClosedForm) {
  Layout l = default_layout(fsdp);
  l.tp = 2, l.dp = 4, l.gbs = 4, l.lora.rank = 128;
  expect_exact(m70, lumi, l, fsdp.residual);
  EXPECT_TRUE(max_trainable_seq(m70, lumi, l, fsdp.residual).closed_form);
}

TEST_F(MtslTest, ContextParallelStepsByTwoC) {
  Layout l = default_layout(megatron);
  l.tp = 4, l.cp = 4, l.pp = 1, l.dp = 1, l.gbs = 1;
  const MtslResult r = max_trainable_seq(m8, h100, l, megatron.residual);
  EXPECT_EQ(r.granularity, 8);
  expect_exact(m8, h100, l, megatron.residual);
}

TEST_F(MtslTest, WithoutFlashAttentionBisects) {
  Layout l = default_layout(megatron);
  l.tp = 8, l.pp = 2, l.dp = 1, l.gbs = 8, l.flash_attention = false;
  const MtslResult r = max_trainable_seq(m8, h100, l, megatron.residual);
  EXPECT_FALSE(r.closed_form);
  expect_exact(m8, h100, l, megatron.residual);
  l.flash_attention = true;
  EXPECT_GT(max_trainable_seq(m8, h100, l, megatron.residual).tokens, r.tokens);
}

TEST_F(MtslTest, ZeroWhenStatesAloneOverflow) {
  Layout l = default_layout(megatron);  // 70B on one GPU
  const MtslResult r = max_trainable_seq(m70, lumi, l, megatron.residual);
  EXPECT_EQ(r.tokens, 0);
  EXPECT_EQ(r.binding_term, "optimizer");  // 12 B of Adam per parameter
}

TEST_F(MtslTest, InverseFindsTheSmallestGpuCount) {
  Layout base = default_layout(fsdp);
  base.lora.rank = 128;
  const auto fits = smallest_layouts_for_seq(m70, lumi, base, fsdp.residual, 32768, 64);
  ASSERT_FALSE(fits.empty());
  const std::int64_t n = fits.front().layout.gpus();
  for (const auto& f : fits) {
    EXPECT_EQ(f.layout.gpus(), n);
    EXPECT_GE(max_trainable_seq(m70, lumi, f.layout, fsdp.residual).tokens, 32768);
  }
  // Nothing with one GPU fewer trains it.
  EXPECT_TRUE(smallest_layouts_for_seq(m70, lumi, base, fsdp.residual, 32768, n - 1).empty());
}

// Every GPU count up to the bound, every split and every ep, one after the other: what the inverse search answers,
// counted the slow way (the search bisects each split's d instead).
std::vector<LayoutFit> smallest_layouts_by_every_count(const ModelSpec& m, const ClusterSpec& c, const Layout& base,
                                                       const ResidualModel& r, std::int64_t seq,
                                                       std::int64_t max_gpus) {
  std::vector<LayoutFit> found;
  const std::int64_t heads = std::gcd(m.num_heads, m.num_kv_heads);
  for (std::int64_t n = 1; n <= max_gpus && found.empty(); ++n) {
    if (!whole_nodes(n, c)) continue;
    for (std::int64_t t = 1; t <= n; ++t) {
      if (n % t != 0 || heads % t != 0) continue;
      for (std::int64_t cp = 1; cp <= n / t; ++cp) {
        if ((n / t) % cp != 0 || seq % (cp > 1 ? 2 * cp : 1) != 0 || (cp > 1 && !context_parallel_priced(m, base)))
          continue;
        for (std::int64_t p = 1; p <= n / (t * cp); ++p) {
          if ((n / (t * cp)) % p != 0 || m.num_layers % p != 0) continue;
          Layout l = base;
          l.tp = t, l.cp = cp, l.pp = p, l.dp = n / (t * cp * p), l.seq = seq, l.vpp = 1, l.split = {};
          if (l.schedule == Schedule::interleaved) l.schedule = Schedule::one_f_one_b;
          // The base's micro-batches per pipeline, at least as many as a batch not given has (p with a pipeline).
          l.gbs = std::max({std::int64_t{1}, base.microbatches(), default_microbatches(p)}) * l.dp * l.mbs;
          const std::int64_t stage_gpus = t * cp * l.dp;
          for (std::int64_t ep = 1; ep <= (m.num_experts > 0 ? stage_gpus : 1); ++ep) {
            if (m.num_experts > 0 && (m.num_experts % ep != 0 || stage_gpus % ep != 0)) continue;
            if (m.num_experts > 0) l.ep = ep, l.etp = 1;
            const double peak = peak_memory_bytes(m, c, l, r);
            if (peak <= c.gpu.usable_memory_bytes) found.push_back({l, peak});
          }
        }
      }
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const LayoutFit& a, const LayoutFit& b) { return a.peak_bytes < b.peak_bytes; });
  return found;
}

// The search answers what counting every GPU count would (the same layouts, in the same order, at the same peaks) on
// dense and expert models, Megatron-LM and FSDP with LoRA, context parallelism, without FlashAttention, ZeRO-3, and
// nodes of 3 and of 4; and it scales: 10^6 GPUs for 10^9 tokens is answered within seconds, more is refused.
TEST_F(MtslTest, InverseSearchIsTheEveryCountAnswerAndScales) {
  ClusterSpec three = h100;
  three.name = "three-a-node";
  three.gpus_per_node = 3;
  Layout lora = default_layout(fsdp);
  lora.lora.rank = 128;
  Layout mbs2 = default_layout(megatron);
  mbs2.mbs = 2;
  Layout unfused = default_layout(megatron);
  unfused.flash_attention = false;
  Layout zero3 = default_layout(megatron);
  zero3.sharding = {Shard::global, Shard::global, Shard::global};
  const ModelSpec mixtral = lib.model("mixtral-8x7b"), gemma = lib.model("gemma-2-27b");
  struct Case {
    const ModelSpec& m;
    const ClusterSpec& c;
    Layout base;
    const ResidualModel& r;
    std::int64_t seq, max_gpus;
  };
  const Case cases[] = {{m70, lumi, lora, fsdp.residual, 32768, 64},
                        {m70, lumi, lora, fsdp.residual, 100000, 128},
                        {m8, h100, mbs2, megatron.residual, 500000, 160},
                        {m8, three, default_layout(megatron), megatron.residual, 400000, 120},
                        {m8, lumi, unfused, megatron.residual, 30000, 64},
                        {m70, h100, zero3, megatron.residual, 200000, 160},
                        {mixtral, lumi, default_layout(megatron), megatron.residual, 131072, 96},
                        {gemma, h100, default_layout(megatron), megatron.residual, 65536, 64},
                        {m8, h100, default_layout(megatron), megatron.residual, 100000000, 64}};
  for (const Case& c : cases) {
    const auto fast = smallest_layouts_for_seq(c.m, c.c, c.base, c.r, c.seq, c.max_gpus);
    const auto slow = smallest_layouts_by_every_count(c.m, c.c, c.base, c.r, c.seq, c.max_gpus);
    ASSERT_EQ(fast.size(), slow.size()) << c.m.name << " " << c.seq;
    for (std::size_t i = 0; i < fast.size(); ++i) {
      const Layout &a = fast[i].layout, &b = slow[i].layout;
      EXPECT_EQ(std::vector<std::int64_t>({a.tp, a.cp, a.pp, a.dp, a.ep, a.gbs}),
                std::vector<std::int64_t>({b.tp, b.cp, b.pp, b.dp, b.ep, b.gbs}))
          << c.m.name << " " << c.seq << " #" << i;
      EXPECT_EQ(fast[i].peak_bytes, slow[i].peak_bytes);
    }
  }
  const auto huge = test::within(60, "the search up to 10^6 GPUs", [this] {
    return smallest_layouts_for_seq(m8, h100, default_layout(megatron), megatron.residual, 1'000'000'000, 1'000'000);
  });
  for (const auto& f : huge) EXPECT_LE(f.layout.gpus(), 1'000'000);
  EXPECT_THROW(
      (void)smallest_layouts_for_seq(m8, h100, default_layout(megatron), megatron.residual, 4096, kMaxSearchGpus + 1),
      Error);
}

// MTSL is the longest valid s with peak(s) ≤ capacity, and peak memory does not fall as s grows
// (MemoryTest.MemoryMonotoneInSequenceBatchAndInverseTp), so for every capacity C and valid s:
// MTSL(C) ≥ s exactly when peak(s) ≤ C. Two consequences are checked on layouts that reach both searches
// (closed form, and bisection without FlashAttention), both frameworks, PP, interleaving, CP, LoRA and
// recompute: more memory never shortens the MTSL (a sweep of capacities), and at C = peak(s) the MTSL reaches
// s while the next smaller double keeps it below s.
TEST_F(MtslTest, MonotoneInCapacityAndExactAtEveryCapacity) {
  struct Case {
    const char* name;
    const ModelSpec* model;
    const ClusterSpec* cluster;
    Layout layout;
    ResidualModel residual;
  };
  const ModelSpec gpt2xl = lib.model("gpt2-xl");
  const auto megatron_layout = [&](std::int64_t t, std::int64_t c, std::int64_t p, std::int64_t d, std::int64_t gbs) {
    Layout l = default_layout(megatron);
    l.tp = t, l.cp = c, l.pp = p, l.dp = d, l.gbs = gbs;
    return l;
  };
  const auto fsdp_layout = [&](std::int64_t t, std::int64_t d, std::int64_t lora_rank) {
    Layout l = default_layout(fsdp);
    l.tp = t, l.dp = d, l.gbs = d, l.lora.rank = lora_rank;
    return l;
  };
  std::vector<Case> cases = {
      {"8B megatron t2 p2 d2", &m8, &h100, megatron_layout(2, 1, 2, 2, 16), megatron.residual},
      {"8B megatron t4 c2 (steps of 4)", &m8, &h100, megatron_layout(4, 2, 1, 1, 1), megatron.residual},
      {"8B megatron t8 p2 no flash (bisection)", &m8, &h100, megatron_layout(8, 1, 2, 1, 8), megatron.residual},
      {"70B megatron t8 p4 interleaved v2 selective", &m70, &h100, megatron_layout(8, 1, 4, 1, 8), megatron.residual},
      {"GPT-2 XL megatron b2 full recompute", &gpt2xl, &h100, megatron_layout(1, 1, 1, 1, 2), megatron.residual},
      {"70B fsdp t4 d2 LoRA 128", &m70, &lumi, fsdp_layout(4, 2, 128), fsdp.residual},
      {"70B fsdp t2 d4 full training", &m70, &lumi, fsdp_layout(2, 4, 0), fsdp.residual},
      {"8B fsdp d8 no flash (bisection)", &m8, &lumi, fsdp_layout(1, 8, 0), fsdp.residual},
  };
  cases[2].layout.flash_attention = false;
  cases[3].layout.schedule = Schedule::interleaved, cases[3].layout.vpp = 2;
  cases[3].layout.recompute = Recompute::selective;
  cases[4].layout.mbs = 2, cases[4].layout.recompute = Recompute::full;
  cases[7].layout.flash_attention = false;

  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    ClusterSpec c = *k.cluster;
    // More memory never shortens the MTSL: capacities from 0.25 to 192 GiB in quarter-GiB steps.
    std::int64_t previous = 0;
    std::set<std::int64_t> distinct;
    for (int quarters = 1; quarters <= 4 * 192; ++quarters) {
      c.gpu.usable_memory_bytes = quarters * kGiB / 4;
      const MtslResult r = max_trainable_seq(*k.model, c, k.layout, k.residual);
      ASSERT_GE(r.tokens, previous) << "at " << quarters / 4.0 << " GiB";
      if (r.tokens > 0) {
        EXPECT_EQ(r.closed_form, k.layout.flash_attention);  // both searches are exercised
      }
      previous = r.tokens;
      distinct.insert(r.tokens);
    }
    EXPECT_GT(distinct.size(), 50u);  // the sweep crosses many MTSLs, not one plateau
    // Exact at the capacity where s just fits, from the shortest valid s to long ones.
    const std::int64_t g = sequence_granularity(k.layout);
    for (const std::int64_t s : {g, 1024 * g, 4096 * g, 32768 * g}) {
      Layout at_s = k.layout;
      at_s.seq = s;
      const double peak = peak_memory_bytes(*k.model, c, at_s, k.residual);
      c.gpu.usable_memory_bytes = peak;
      EXPECT_GE(max_trainable_seq(*k.model, c, k.layout, k.residual).tokens, s) << "s = " << s;
      c.gpu.usable_memory_bytes = std::nextafter(peak, 0.0);
      EXPECT_LT(max_trainable_seq(*k.model, c, k.layout, k.residual).tokens, s) << "s = " << s;
    }
  }
}

// 4D paper (Tables 2, 7, 8): the printed Eq. 18 estimate at s is below capacity exactly when the MTSL of
// Eq. 18 alone (no residual, the paper's capacity "40GB"/"94GB" read as GiB) is at least s. Cells within
// 0.02 GiB of capacity or listed as typos are skipped (print rounding).
TEST_F(MtslTest, Paper4DEstimateTablesCrossCapacityAtMtsl) {
  const auto ref = lib.data_dir() / "reference";
  const auto typos = validate::read_typos(ref / "4d_estimates_typos.json");
  int checked = 0, below = 0;
  for (const auto& cell : validate::read_estimates(ref / "4d_estimates.csv")) {
    bool typo = false;
    for (const auto& t : typos)
      typo |= t.table == cell.run.table && t.tp == cell.run.tp && t.cp == cell.run.cp && t.pp == cell.run.pp &&
              t.mbs == cell.run.mbs && t.gpus == cell.run.gpus;
    ClusterSpec c = validate::cluster_for_run(lib, cell.run);
    c.gpu.usable_memory_bytes = c.gpu.memory_bytes;
    const double cap_gib = c.gpu.memory_bytes / kGiB;
    if (typo || std::abs(cell.printed_gib - cap_gib) < 0.02) continue;
    const Layout l = validate::layout_for_run(cell.run, megatron);
    const MtslResult r = max_trainable_seq(lib.model(cell.run.model), c, l, ResidualModel{});
    SCOPED_TRACE("Table " + std::to_string(cell.run.table) + " (" + std::to_string(cell.run.tp) + "," +
                 std::to_string(cell.run.cp) + "," + std::to_string(cell.run.pp) + "," + std::to_string(cell.run.mbs) +
                 ") at " + std::to_string(cell.run.gpus) + " GPUs");
    EXPECT_EQ(cell.printed_gib < cap_gib, r.tokens >= cell.run.seq);
    ++checked;
    below += cell.printed_gib < cap_gib;
  }
  EXPECT_GT(checked, 300);
  EXPECT_GT(below, 100);
}

}  // namespace
}  // namespace headroom
