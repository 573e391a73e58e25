// Collectives decomposed into GPU-to-GPU transfers (tasks of engine.hpp), then run on the topology.
//   ring   : rings over all members (Patarasuk & Yuan 2009): n − 1 steps of bytes/n (all-reduce: a
//            reduce-scatter then an all-gather, 2(n − 1) steps). With k channels (NCCL's rings), k rings run
//            at once on bytes/k each, ring c entering every group at its c-th member, so that a multi-node
//            ring crosses node boundaries through k different GPUs and NICs; one channel is PaRO's
//            "traditional Ring" (Sec. 3.4), where every byte crosses each boundary through one NIC.
//   hring  : hierarchical ring (PaRO Sec. 3.4; 2D-torus of Mikami et al. 2018 for all-reduce): all-gather =
//            inter-group rings (one per local rank) then intra-group rings; reduce-scatter the reverse;
//            all-reduce = intra reduce-scatter, inter all-reduce, intra all-gather.
//   horing : PaRO's HO-Ring (Sec. 3.4, Fig. 4): the inter-group ring and an intra-group ring of the GPU's own
//            shard run at once, then an intra-group ring gathers the remaining (g − 1) shards per member;
//            reduce-scatter mirrors it; all-reduce = HO reduce-scatter then HO all-gather.
//   tree   : all-reduce only, NCCL-style: a chain inside each group, a binary tree over the group leaders,
//            reduce up then broadcast down, pipelined in chunks.
// A reduction's arithmetic is not timed (it hides behind the transfers on GPUs).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "headroom/core/collectives.hpp"
#include "headroom/simulator/engine.hpp"
#include "headroom/simulator/topology.hpp"

namespace headroom::sim {

enum class Algorithm { ring, hring, horing, tree };
[[nodiscard]] std::string_view to_string(Algorithm a);
// "ring", "hring" (also "h-ring"), "horing" ("ho-ring"), "tree"; Error listing them otherwise.
[[nodiscard]] Algorithm parse_algorithm(std::string_view s);
// "all-gather" / "all_gather", "reduce-scatter", "all-reduce"; Error otherwise.
[[nodiscard]] Collective parse_collective(std::string_view s);

// A collective over `members` (GPU ids, in ring order, group by group: members[i] is in group
// i / group_size). `bytes` is nccl-tests' size: all-gather's output, reduce-scatter's input, all-reduce's
// buffer. `channels` (≥ 1, at most group_size) applies to the ring. Throws Error for an unsupported pair (tree
// is all-reduce only), group_size not dividing the count, or channels out of range.
[[nodiscard]] TaskGraph collective_graph(Collective op, Algorithm a, double bytes,
                                         const std::vector<std::int64_t>& members, std::int64_t group_size,
                                         std::int64_t channels = 1);
// The same, appended to `graph` (its tasks depend on nothing already there): several groups' collectives in one
// graph run at once and share the links they have in common.
// serial_sends: a member's sends of one ring step go out one channel after the other, so that a step of a ring
// spanning nodes costs its intra-node chunks plus its inter-node chunk (throughput.hpp's flat-ring pricing,
// volume_seconds; the step simulator uses it so that both price a ring alike) instead of the slower of the two.
void append_collective(TaskGraph& graph, Collective op, Algorithm a, double bytes,
                       const std::vector<std::int64_t>& members, std::int64_t group_size, std::int64_t channels = 1,
                       bool serial_sends = false);

struct CollectiveResult {
  double time_s = 0;
  double algbw_bytes_per_s = 0;  // nccl-tests: bytes / time
  double busbw_bytes_per_s = 0;  // algbw × bus_bandwidth_factor (estimator/collectives.hpp)
  std::int64_t transfers = 0;
  std::int64_t events = 0;
};

[[nodiscard]] CollectiveResult simulate_collective(const Topology& topo, Collective op, Algorithm a, double bytes,
                                                   const std::vector<std::int64_t>& members, std::int64_t group_size,
                                                   const EngineOptions& options = {}, std::int64_t channels = 1);

// Several disjoint groups run the same collective at once (the other TP ranks' DP groups, say), contending for
// the links they share (a NIC of several GPUs). time_s is when the last group finishes, algbw and busbw are per
// group (the first one's size), transfers and events count every group. Throws Error for no group.
[[nodiscard]] CollectiveResult simulate_concurrent_collectives(const Topology& topo, Collective op, Algorithm a,
                                                               double bytes,
                                                               const std::vector<std::vector<std::int64_t>>& groups,
                                                               std::int64_t group_size,
                                                               const EngineOptions& options = {},
                                                               std::int64_t channels = 1, bool serial_sends = false);

// Every GPU of the topology, groups = nodes.
[[nodiscard]] CollectiveResult simulate_collective(const Topology& topo, Collective op, Algorithm a, double bytes,
                                                   const EngineOptions& options = {}, std::int64_t channels = 1);

}  // namespace headroom::sim
