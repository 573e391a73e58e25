#include "headroom/simulator/collectives.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "headroom/core/error.hpp"

namespace headroom::sim {
namespace {

using Frontier = std::vector<std::vector<TaskId>>;  // per member: what its next phase waits for

std::string normalised(std::string_view s) {
  std::string out;
  for (const char c : s)
    if (c != '-' && c != '_') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

class Builder {
 public:
  Builder(const std::vector<std::int64_t>& members, TaskGraph& graph, std::size_t group = 0)
      : graph_(graph), members_(members), group_(group) {}

  // Rings over member indices, all at once, each `steps` steps of `chunk` bytes. Returns the frontier after.
  // serial_sends: a member's sends go out one at a time (its send on ring r waits for its previous send, the
  // last of the previous step for r = 0).
  Frontier rings(const std::vector<std::vector<std::size_t>>& rings, double chunk, std::int64_t steps,
                 const Frontier& entry, bool serial_sends = false) {
    Frontier out = entry;
    if (steps <= 0) return out;
    std::vector<std::vector<TaskId>> sent(rings.size()), received(rings.size());
    for (std::size_t r = 0; r < rings.size(); ++r) {
      sent[r].resize(rings[r].size());
      received[r].resize(rings[r].size());
    }
    const bool serial = serial_sends && rings.size() > 1;
    // Serial sends go out across groups (nodes) first, so that members sharing a NIC cross at the same time.
    const auto crosses = [&](std::size_t src, std::size_t dst) { return group_ > 0 && src / group_ != dst / group_; };
    std::vector<std::vector<TaskId>> previous_send(serial ? members_.size() : 0);  // a member's last send so far
    for (std::int64_t k = 0; k < steps; ++k) {
      std::vector<std::vector<TaskId>> now(rings.size());
      std::vector<bool> sent_in_step(serial ? members_.size() : 0, false);
      for (int pass = serial ? 0 : 1; pass < 2; ++pass) {
        for (std::size_t r = 0; r < rings.size(); ++r) {
          const auto& ring = rings[r];
          const std::size_t n = ring.size();
          if (n <= 1) continue;
          now[r].resize(n);
          for (std::size_t i = 0; i < n; ++i) {
            const std::size_t src = ring[i], dst = ring[(i + 1) % n];
            if (serial && crosses(src, dst) != (pass == 0)) continue;
            std::vector<TaskId> deps;
            if (k == 0) {
              deps = entry[src];
              deps.insert(deps.end(), entry[dst].begin(), entry[dst].end());
            } else {
              deps = {sent[r][i], received[r][i]};
            }
            // A member's later sends of the step stream behind its first: one start-up latency a step, as the
            // analytical ring's (n − 1)·α has it.
            if (serial) deps.insert(deps.end(), previous_send[src].begin(), previous_send[src].end());
            now[r][i] = transfer(src, dst, chunk, deps);
            if (serial) {
              graph_[now[r][i]].pipelined = sent_in_step[src];
              sent_in_step[src] = true;
              previous_send[src] = {now[r][i]};
            }
          }
        }
      }
      for (std::size_t r = 0; r < rings.size(); ++r) {
        const std::size_t n = rings[r].size();
        if (n <= 1) continue;
        for (std::size_t i = 0; i < n; ++i) {
          sent[r][i] = now[r][i];
          received[r][(i + 1) % n] = now[r][i];
        }
      }
    }
    for (std::size_t r = 0; r < rings.size(); ++r)
      for (std::size_t i = 0; i < rings[r].size() && rings[r].size() > 1; ++i)
        out[rings[r][i]] = {sent[r][i], received[r][i]};
    return out;
  }

  TaskId transfer(std::size_t src, std::size_t dst, double bytes, const std::vector<TaskId>& deps) {
    Task t;
    t.kind = TaskKind::flow;
    t.src_gpu = members_[src];
    t.dst_gpu = members_[dst];
    t.bytes = bytes;
    t.op = OpKind::transfer;
    ++transfers_;
    return add_task(graph_, t, deps);
  }

  TaskGraph& graph_;
  std::int64_t transfers_ = 0;

 private:
  const std::vector<std::int64_t>& members_;
  std::size_t group_ = 0;  // members per group (node), 0 = not known
};

Frontier merge(Frontier a, const Frontier& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i].insert(a[i].end(), b[i].begin(), b[i].end());
  return a;
}

// Pipelined tree all-reduce: chain inside each group to its leader, binary tree over the leaders.
void tree_all_reduce(Builder& b, std::size_t n, std::size_t group, double bytes) {
  std::vector<std::int64_t> parent(n, -1);
  std::vector<std::vector<std::size_t>> children(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t gi = i / group, l = i % group;
    if (l > 0)
      parent[i] = static_cast<std::int64_t>(i - 1);
    else if (gi > 0)
      parent[i] = static_cast<std::int64_t>(((gi - 1) / 2) * group);
    if (parent[i] >= 0) children[static_cast<std::size_t>(parent[i])].push_back(i);
  }
  // NCCL pipelines a tree in chunks; 4 MiB chunks, at least 1 and at most 128 of them.
  const auto chunks = static_cast<std::size_t>(std::clamp(bytes / (4.0 * 1024 * 1024), 1.0, 128.0));
  const double chunk = bytes / static_cast<double>(chunks);
  std::vector<std::vector<TaskId>> up(n, std::vector<TaskId>(chunks));
  // Reduce: a member sends chunk j up once every child's chunk j has arrived and its chunk j − 1 is gone.
  // Members in reverse order so that children exist before their parent's sends are built.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::vector<std::size_t> depth(n, 0);
  for (std::size_t i = 0; i < n; ++i) depth[i] = parent[i] < 0 ? 0 : depth[static_cast<std::size_t>(parent[i])] + 1;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t c) { return depth[a] > depth[c]; });
  for (const std::size_t v : order) {
    if (parent[v] < 0) continue;
    for (std::size_t j = 0; j < chunks; ++j) {
      std::vector<TaskId> deps;
      for (const std::size_t c : children[v]) deps.push_back(up[c][j]);
      if (j > 0) deps.push_back(up[v][j - 1]);
      up[v][j] = b.transfer(v, static_cast<std::size_t>(parent[v]), chunk, deps);
    }
  }
  // Broadcast: chunk j goes down once the parent has it (the root: once its children's chunk j arrived).
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t c) { return depth[a] < depth[c]; });
  std::vector<std::vector<TaskId>> got(n, std::vector<TaskId>(chunks));
  for (const std::size_t v : order) {
    for (const std::size_t c : children[v]) {
      for (std::size_t j = 0; j < chunks; ++j) {
        std::vector<TaskId> deps;
        if (parent[v] < 0) {
          for (const std::size_t cc : children[v]) deps.push_back(up[cc][j]);
        } else {
          deps.push_back(got[v][j]);
        }
        if (j > 0) deps.push_back(got[c][j - 1]);
        got[c][j] = b.transfer(v, c, chunk, deps);
      }
    }
  }
}

}  // namespace

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::ring: return "ring";
    case Algorithm::hring: return "hring";
    case Algorithm::horing: return "horing";
    case Algorithm::tree: return "tree";
  }
  return "?";
}

Algorithm parse_algorithm(std::string_view s) {
  const std::string n = normalised(s);
  if (n == "ring") return Algorithm::ring;
  if (n == "hring") return Algorithm::hring;
  if (n == "horing") return Algorithm::horing;
  if (n == "tree") return Algorithm::tree;
  throw Error("unknown algorithm '" + std::string(s) + "' (valid: ring, hring, horing, tree)");
}

Collective parse_collective(std::string_view s) {
  const std::string n = normalised(s);
  if (n == "allgather") return Collective::all_gather;
  if (n == "reducescatter") return Collective::reduce_scatter;
  if (n == "allreduce") return Collective::all_reduce;
  throw Error("unknown collective '" + std::string(s) + "' (valid: all-gather, reduce-scatter, all-reduce)");
}

TaskGraph collective_graph(Collective op, Algorithm a, double bytes, const std::vector<std::int64_t>& members,
                           std::int64_t group_size, std::int64_t channels) {
  TaskGraph graph;
  append_collective(graph, op, a, bytes, members, group_size, channels);
  return graph;
}

void append_collective(TaskGraph& graph, Collective op, Algorithm a, double bytes,
                       const std::vector<std::int64_t>& members, std::int64_t group_size, std::int64_t channels,
                       bool serial_sends) {
  const auto n = members.size();
  if (n == 0) throw Error("collective: no members");
  if (!(bytes > 0)) throw Error("collective: --bytes must be positive");
  if (op != Collective::all_gather && op != Collective::reduce_scatter && op != Collective::all_reduce)
    throw Error("collective: the simulator decomposes all-gather, reduce-scatter and all-reduce only (got " +
                std::string(to_string(op)) + ")");
  if (group_size < 1 || n % static_cast<std::size_t>(group_size) != 0)
    throw Error("collective: group size " + std::to_string(group_size) + " must divide the " + std::to_string(n) +
                " members");
  if (channels < 1 || channels > group_size)
    throw Error("collective: --channels " + std::to_string(channels) + " must be between 1 and the group size " +
                std::to_string(group_size));
  if (a == Algorithm::tree && op != Collective::all_reduce)
    throw Error("collective: the tree algorithm is for all-reduce only (got " + std::string(to_string(op)) + ")");
  const auto M = static_cast<std::size_t>(group_size), g = n / M;
  const double N = static_cast<double>(n), shard = bytes / N;

  Builder b(members, graph, static_cast<std::size_t>(group_size));
  const Frontier start(n);
  std::vector<std::vector<std::size_t>> intra(g), inter(M);
  for (std::size_t i = 0; i < n; ++i) {
    intra[i / M].push_back(i);
    inter[i % M].push_back(i);
  }
  const auto steps = [](std::size_t k) { return static_cast<std::int64_t>(k) - 1; };
  const double gd = static_cast<double>(g), Md = static_cast<double>(M);

  switch (a) {
    case Algorithm::ring: {
      const std::int64_t s = op == Collective::all_reduce ? 2 * steps(n) : steps(n);
      const auto k = static_cast<std::size_t>(channels);
      std::vector<std::vector<std::size_t>> rings(k);
      for (std::size_t c = 0; c < k; ++c)
        for (std::size_t gi = 0; gi < g; ++gi)
          for (std::size_t l = 0; l < M; ++l) rings[c].push_back(gi * M + (l + c) % M);
      (void)b.rings(rings, shard / static_cast<double>(k), s, start, serial_sends);
      break;
    }
    case Algorithm::hring: {
      if (op == Collective::all_gather) {
        const Frontier f = b.rings(inter, shard, steps(g), start);
        (void)b.rings(intra, gd * shard, steps(M), f);
      } else if (op == Collective::reduce_scatter) {
        const Frontier f = b.rings(intra, bytes / Md, steps(M), start);
        (void)b.rings(inter, shard, steps(g), f);
      } else {
        Frontier f = b.rings(intra, bytes / Md, steps(M), start);
        f = b.rings(inter, shard, 2 * steps(g), f);
        (void)b.rings(intra, bytes / Md, steps(M), f);
      }
      break;
    }
    case Algorithm::horing: {
      // All-gather: own shard around the inter ring and the intra ring at once, then the (g − 1) shards
      // that came over the inter ring around the intra ring.
      const auto all_gather = [&](const Frontier& entry) {
        const Frontier f = merge(b.rings(inter, shard, steps(g), entry), b.rings(intra, shard, steps(M), entry));
        return b.rings(intra, (gd - 1.0) * shard, steps(M), f);
      };
      // Reduce-scatter, mirrored: first reduce the other groups' parts inside the group, then the inter ring
      // and the intra ring of the own group's part at once.
      const auto reduce_scatter = [&](const Frontier& entry) {
        const Frontier f = b.rings(intra, (gd - 1.0) * shard, steps(M), entry);
        return merge(b.rings(inter, shard, steps(g), f), b.rings(intra, shard, steps(M), f));
      };
      if (op == Collective::all_gather)
        (void)all_gather(start);
      else if (op == Collective::reduce_scatter)
        (void)reduce_scatter(start);
      else
        (void)all_gather(reduce_scatter(start));
      break;
    }
    case Algorithm::tree: tree_all_reduce(b, n, M, bytes); break;
  }
}

CollectiveResult simulate_concurrent_collectives(const Topology& topo, Collective op, Algorithm a, double bytes,
                                                 const std::vector<std::vector<std::int64_t>>& groups,
                                                 std::int64_t group_size, const EngineOptions& options,
                                                 std::int64_t channels, bool serial_sends) {
  if (groups.empty()) throw Error("collective: no group");
  TaskGraph g;
  for (const auto& members : groups) append_collective(g, op, a, bytes, members, group_size, channels, serial_sends);
  const RunResult r = run(g, topo, options);
  CollectiveResult out;
  out.time_s = r.makespan_s;
  out.transfers = static_cast<std::int64_t>(boost::num_vertices(g));
  out.events = r.events;
  if (out.time_s > 0) {
    out.algbw_bytes_per_s = bytes / out.time_s;
    out.busbw_bytes_per_s =
        out.algbw_bytes_per_s * bus_bandwidth_factor(op, static_cast<std::int64_t>(groups.front().size()));
  }
  return out;
}

CollectiveResult simulate_collective(const Topology& topo, Collective op, Algorithm a, double bytes,
                                     const std::vector<std::int64_t>& members, std::int64_t group_size,
                                     const EngineOptions& options, std::int64_t channels) {
  return simulate_concurrent_collectives(topo, op, a, bytes, {members}, group_size, options, channels);
}

CollectiveResult simulate_collective(const Topology& topo, Collective op, Algorithm a, double bytes,
                                     const EngineOptions& options, std::int64_t channels) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(topo.gpus()));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  return simulate_collective(topo, op, a, bytes, all, topo.gpus_per_node(), options, channels);
}

}  // namespace headroom::sim
