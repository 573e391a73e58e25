// rank's search space against an independent oracle: with memory no object, every layout that `estimate` accepts
// (build_layout: the framework's lists, then validate_layout) is enumerated by rank_layouts, and no other. The oracle
// walks every field over a range wider than rank's (every v and b up to a bound, every sharding triple, every
// schedule, SP on and off) and knows nothing of how rank prunes.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>

#include "../cli_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/search.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom {
namespace {

// One layout as a comparable key. The schedule means nothing without a pipeline and SP nothing without TP: those
// spellings are one layout (the metamorphic tests check that they price the same).
using Key = std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int,
                       std::string, int, int>;
Key key_of(const Layout& l) {
  return {l.tp,
          l.cp,
          l.pp,
          l.dp,
          l.vpp,
          l.mbs,
          static_cast<int>(l.recompute),
          sharding_code(l.sharding),
          l.pp > 1 ? static_cast<int>(l.schedule) : -1,
          l.tp > 1 ? static_cast<int>(l.sequence_parallel) : -1};
}

struct Job {
  std::string model, framework;
  std::int64_t gpus, gbs, seq;
};

std::set<Key> accepted_by_build_layout(const ModelSpec& m, const FrameworkProfile& f, const Job& job) {
  std::set<Key> out;
  const std::int64_t max_v = m.num_layers / 2, max_b = job.gbs;  // v ≤ L/p with p ≥ 2
  for (std::int64_t t = 1; t <= job.gpus; ++t)
    for (std::int64_t c = 1; t * c <= job.gpus; ++c)
      for (std::int64_t p = 1; t * c * p <= job.gpus; ++p) {
        if (job.gpus % (t * c * p) != 0) continue;  // every GPU in some group: the request names gpus
        for (std::int64_t v = 1; v <= max_v; ++v)
          for (std::int64_t b = 1; b <= max_b; ++b)
            for (const Recompute r : {Recompute::none, Recompute::selective, Recompute::full, Recompute::op})
              for (const Schedule s : {Schedule::one_f_one_b, Schedule::interleaved, Schedule::gpipe,
                                       Schedule::zero_bubble, Schedule::zbv, Schedule::looped_bfs})
                for (const StateSharding& sh : all_shardings())
                  for (const bool sp : {true, false}) {
                    LayoutRequest q;
                    q.tp = t, q.cp = c, q.pp = p, q.vpp = v, q.mbs = b;
                    q.seq = job.seq, q.gpus = job.gpus, q.gbs = job.gbs;
                    q.recompute = r, q.schedule = s, q.sharding = sh, q.sequence_parallel = sp;
                    try {
                      out.insert(key_of(build_layout(m, f, q)));
                    } catch (const Error&) {
                    }
                  }
      }
  return out;
}

std::set<Key> enumerated_by_rank(const SpecLibrary& lib, const ModelSpec& m, const FrameworkProfile& f,
                                 const Job& job) {
  ClusterSpec cluster = lib.cluster("dgx-h100");
  cluster.gpu.usable_memory_bytes = 1e30;  // every layout fits: the search space alone is compared
  SearchOptions o;
  o.gpus = job.gpus, o.gbs = job.gbs, o.seq = job.seq;
  restrict_to_framework(o, f);
  std::set<Key> out;
  std::int64_t calls = 0;
  o.on_enumerated = [&](const Layout& l) {
    ++calls;
    EXPECT_TRUE(out.insert(key_of(l)).second) << "enumerated twice: tp " << l.tp << " pp " << l.pp << " vpp " << l.vpp;
  };
  const SearchResult r =
      rank_layouts(m, cluster, default_layout(f), f.residual, default_perf_coefficients(lib, job.framework), o);
  EXPECT_EQ(r.evaluated, calls);
  EXPECT_EQ(r.fitting, r.evaluated);  // nothing pruned by memory
  return out;
}

class RankCompleteness : public ::testing::TestWithParam<Job> {};

TEST_P(RankCompleteness, RankEnumeratesExactlyTheLayoutsEstimateAccepts) {
  const Job job = GetParam();
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model(job.model);
  const FrameworkProfile f = lib.framework(job.framework);
  const std::set<Key> oracle = accepted_by_build_layout(m, f, job), ranked = enumerated_by_rank(lib, m, f, job);
  ASSERT_FALSE(oracle.empty());
  const auto show = [](const Key& k) {
    const auto& [t, c, p, d, v, b, r, sh, s, sp] = k;
    return "tp " + std::to_string(t) + " cp " + std::to_string(c) + " pp " + std::to_string(p) + " dp " +
           std::to_string(d) + " vpp " + std::to_string(v) + " mbs " + std::to_string(b) + " recompute " +
           std::string(to_string(static_cast<Recompute>(r))) + " sharding " + sh + " schedule " +
           (s < 0 ? "-" : std::string(to_string(static_cast<Schedule>(s)))) + " sp " + std::to_string(sp);
  };
  int shown = 0;
  for (const Key& k : oracle)
    if (!ranked.contains(k) && ++shown <= 10) ADD_FAILURE() << "accepted but not enumerated: " << show(k);
  for (const Key& k : ranked)
    if (!oracle.contains(k) && ++shown <= 20) ADD_FAILURE() << "enumerated but refused: " << show(k);
  EXPECT_EQ(oracle.size(), ranked.size());
  RecordProperty("layouts", static_cast<int>(oracle.size()));
}

// Llama 3.1 8B (32 layers, 8 KV heads): every t, c, p of 8 GPUs, interleaving where p | m; each framework's lists.
// GPT-2 (12 layers) under DeepSpeed: p 8 does not divide L, and DeepSpeed's engine partitions it anyway. MPT-7B's ALiBi
// under FSDP: no context parallelism.
INSTANTIATE_TEST_SUITE_P(
    Jobs, RankCompleteness,
    ::testing::Values(Job{"llama3.1-8b", "megatron", 8, 8, 4096}, Job{"llama3.1-8b", "pytorch-fsdp", 8, 8, 4096},
                      Job{"llama3.1-8b", "torchtitan", 8, 8, 4096}, Job{"llama3.1-8b", "deepspeed", 8, 8, 4096},
                      Job{"gpt2", "deepspeed", 8, 8, 1024}, Job{"mpt-7b", "pytorch-fsdp", 8, 8, 2048}),
    [](const auto& info) {
      std::string name = info.param.framework;
      if (info.param.model != "llama3.1-8b") name += "_" + info.param.model;
      std::erase(name, '-');
      std::erase(name, '.');
      return name;
    });

}  // namespace
}  // namespace headroom
