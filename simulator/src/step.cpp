#include "headroom/simulator/step.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "headroom/core/error.hpp"
#include "headroom/estimator/flops.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/core/units.hpp"
#include "headroom/simulator/collectives.hpp"
#include "headroom/simulator/schedules.hpp"

namespace headroom::sim {
namespace {

using units::d;

// Megatron-LM rank order: TP innermost, then CP, DP, PP.
struct Ranks {
  std::int64_t t, c, dp, p;
  [[nodiscard]] std::int64_t rank(std::int64_t tp, std::int64_t cp, std::int64_t d, std::int64_t stage) const {
    return tp + t * (cp + c * (d + dp * stage));
  }
};

// Virtual stages per GPU (v ≥ 1).
std::int64_t virtual_stages(const Layout& l) { return std::max<std::int64_t>(1, l.vpp); }

// Nodes of a ring simulated transfer by transfer; longer rings are scaled from these (StepBuilder::collective).
constexpr std::int64_t kRepresentativeNodes = 4;

class StepBuilder {
 public:
  StepBuilder(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const PerfCoefficients& k,
              const StepOptions& o)
      : m_(m),
        l_(l),
        perf_(k, c),
        ranks_{l.tp, l.cp, l.dp, l.pp},
        topo_(c, TopologyOptions{(l.gpus() + c.gpus_per_node - 1) / c.gpus_per_node, o.nics_per_node,
                                 perf_.intra_efficiency, perf_.inter_efficiency}),
        opt_(o),
        dp_shares_(dp_overlap_shares(perf_, l)) {
    if (zero_hpz(l.zero, l.sharding))
      throw Error("simulate: ZeRO++'s secondary parameter shard (" + field("zero_hpz_partition_size") +
                  ") is not scheduled by the event simulator yet (estimate prices it)");
    if (dp_shares_.gathers != dp_shares_.reductions && !l.zero.deepspeed)  // Megatron-LM's switches (layout.hpp)
      throw Error("simulate: " + field("overlap_grad_reduce") + " on with " + field("overlap_param_gather") +
                  " off is not scheduled by the event simulator yet (estimate prices it; valid: both on or both off)");
    if (dp_shares_.gathers != dp_shares_.reductions)  // DeepSpeed's streams (Layout::zero)
      throw Error(
          "simulate: DeepSpeed running its parameter gathers and gradient reductions on different streams (" +
          field("overlap_comm") + " " + (l.zero.overlap_comm ? "true" : "false") + " with " + field("sharding") + " " +
          sharding_code(l.sharding) +
          ") is not scheduled by the event simulator yet (estimate prices it; valid: overlap_comm true at ZeRO-3, "
          "false below)");
  }

  StepResult build_and_run() {
    const LayerCosts layer = layer_costs();
    StepResult out;
    out.gpus = l_.gpus();
    out.tp = l_.tp;
    TaskGraph& g = out.graph;
    const std::int64_t p = l_.pp;
    PassEnds pass;
    std::vector<TaskId> last_work(static_cast<std::size_t>(p));  // a stage's last compute or TP task
    std::vector<UpdateComm> update(static_cast<std::size_t>(p));
    last_pass_.assign(static_cast<std::size_t>(p), {});
    // Build each stage's chain first (without cross-stage edges), then link them.
    for (std::int64_t st = 0; st < p; ++st) {
      const auto sti = static_cast<std::size_t>(st);
      update[sti] = update_dp_seconds(st);
      last_work[sti] = add_stage_chain(g, st, layer, update[sti], pass);
    }
    link_pipeline(g, pass);
    for (std::int64_t st = 0; st < p; ++st) {
      const auto sti = static_cast<std::size_t>(st);
      add_update(g, st, last_work[sti], update[sti]);
    }
    out.run = run(g, topo_, opt_.engine);
    out.step_time_s = out.run.makespan_s;
    report(out, activation_bytes_per_layer(m_, l_));  // what one micro-batch leaves on a layer (memory.hpp)
    return out;
  }

 private:
  // A delay of `seconds` on stage `st` (the lane and the pass it belongs to label it for the trace and reports).
  static Task stage_task(OpKind op, std::int64_t st, Lane lane, double seconds, const PassOp* pass = nullptr) {
    Task t;
    t.kind = TaskKind::delay;
    t.op = op;
    t.stage = static_cast<std::int32_t>(st);
    t.lane = lane;
    t.duration_s = seconds;
    if (pass != nullptr) {
      t.microbatch = pass->microbatch;
      t.chunk = pass->chunk;
    }
    return t;
  }

  struct MicrobatchComm {
    double forward_s = 0, backward_s = 0;
  };

  // The stage's DP×CP group (TP rank 0), in rank order.
  [[nodiscard]] std::vector<std::int64_t> dp_members(std::int64_t st) const {
    std::vector<std::int64_t> members;
    for (std::int64_t dd = 0; dd < l_.dp; ++dd)
      for (std::int64_t cc = 0; cc < l_.cp; ++cc) members.push_back(ranks_.rank(0, cc, dd, st));
    return members;
  }

  // PaRO's collectives by scope (sharding.cpp, update_grad_sync and scope_change): over the whole DP×CP group, over
  // its node group of M members, or across the groups among the members of the same rank in each (bytes / M).
  struct DpScopes {
    std::vector<std::int64_t> all, intra, across;
    double m = 1;
  };
  [[nodiscard]] DpScopes dp_scopes(std::int64_t st) const {
    DpScopes s;
    s.all = dp_members(st);
    const std::int64_t m = sharding_group_size(l_, perf_.gpus_per_node);
    s.m = d(m);
    s.intra.assign(s.all.begin(), s.all.begin() + m);
    for (std::size_t i = 0; i < s.all.size(); i += static_cast<std::size_t>(m)) s.across.push_back(s.all[i]);
    return s;
  }
  // From `fine` to `coarse` sharding: G → N over all, G → I across groups, I → N inside the group.
  double scope_change_seconds(Collective op, double bytes, Shard fine, Shard coarse, const DpScopes& s) {
    if (shard_level(fine) <= shard_level(coarse)) return 0.0;
    if (fine == Shard::global && coarse == Shard::none) return collective(op, bytes, s.all, Group::dp_cp);
    if (fine == Shard::global) return collective(op, bytes / s.m, s.across, Group::dp_cp);
    return collective(op, bytes, s.intra, Group::dp_cp);
  }

  struct UpdateComm {
    double sync_s = 0, gather_s = 0;
  };

  // Once per step over the stage's DP×CP group: the gradient sync of the gradients the GPUs hold (all of them, the
  // LoRA adapters, or under FSDP1's flat parameters the decoder's too) and, where the optimizer is sharded wider than
  // the parameters, the all-gather of the updated trainable ones.
  UpdateComm update_dp_seconds(std::int64_t st) {
    UpdateComm out;
    const DpScopes s = dp_scopes(st);
    if (s.all.size() <= 1) return out;
    const DpParameters dpp = dp_parameters_per_gpu(m_, l_, st);
    const double trainable = dpp.trainable;
    const double grads = dpp.reduced * l_.precision.grad_bytes;
    const Shard gs = l_.sharding.grads, os = l_.sharding.optimizer;
    const auto across = [&](Collective op) { return collective(op, grads / s.m, s.across, Group::dp_cp); };
    switch (update_grad_sync_kind(l_.sharding)) {
      case GradSync::none: break;
      case GradSync::reduce_scatter:
        if (gs == Shard::intra)
          out.sync_s = across(Collective::reduce_scatter);  // I → G
        else if (os == Shard::global)
          out.sync_s = collective(Collective::reduce_scatter, grads, s.all, Group::dp_cp);
        else
          out.sync_s =
              collective(Collective::reduce_scatter, grads, s.intra, Group::dp_cp) + across(Collective::all_reduce);
        break;
      case GradSync::all_reduce:
        out.sync_s = gs == Shard::intra ? across(Collective::all_reduce)  // MiCS/HSDP: each replication group
                                        : collective(Collective::all_reduce, grads, s.all, Group::dp_cp);
        break;
      case GradSync::all_gather:
        out.sync_s = scope_change_seconds(Collective::all_gather, grads, Shard::global, os, s);
        break;
      case GradSync::reduce_then_all_gather:
        out.sync_s = across(Collective::all_reduce) + collective(Collective::all_gather, grads, s.intra, Group::dp_cp);
        break;
    }
    out.gather_s =
        scope_change_seconds(Collective::all_gather, trainable * l_.precision.weight_bytes, os, l_.sharding.params, s);
    return out;
  }

  // PaRO Sec. 3.1.1 (Table 3's s-fold terms): sharded parameters are all-gathered over their scope before
  // every forward and backward pass of a chunk, sharded gradients reduce-scattered over theirs after every
  // backward. Scope I is the GPUs of the group on one node, G the whole DP×CP group.
  MicrobatchComm microbatch_dp_seconds(std::int64_t st) {
    MicrobatchComm out;
    const DpScopes s = dp_scopes(st);
    if (s.all.size() <= 1) return out;
    const DpParameters dpp = dp_parameters_per_gpu(m_, l_, st);
    const double chunk = 1.0 / d(std::max<std::int64_t>(1, l_.vpp));
    const double gather = scope_change_seconds(Collective::all_gather, dpp.gathered * chunk * l_.precision.weight_bytes,
                                               l_.sharding.params, Shard::none, s);
    out.forward_s += gather;
    out.backward_s +=
        gather + scope_change_seconds(Collective::reduce_scatter, dpp.reduced * chunk * l_.precision.grad_bytes,
                                      l_.sharding.grads, Shard::none, s);
    return out;
  }

  // The axes a group spans; the other axes index the groups of the same kind that run the same collective at once.
  enum class Group { tp, cp, dp_cp };

  // Rank offsets from the simulated GPU's group to every other group of its kind in the stage (Megatron order).
  [[nodiscard]] std::vector<std::int64_t> sibling_offsets(Group k) const {
    const std::int64_t nt = k == Group::tp ? 1 : l_.tp, nc = k == Group::tp ? l_.cp : 1,
                       nd = k == Group::dp_cp ? 1 : l_.dp;
    std::vector<std::int64_t> out;
    for (std::int64_t dd = 0; dd < nd; ++dd)
      for (std::int64_t cc = 0; cc < nc; ++cc)
        for (std::int64_t tt = 0; tt < nt; ++tt)
          if (tt + cc + dd > 0) out.push_back(ranks_.rank(tt, cc, dd, 0));
    return out;
  }

  // A ring collective of `members` (the simulated GPU's group). Every group of its kind runs the same one at
  // once; those sharing a NIC with it (nics_per_node < gpus_per_node) are simulated beside it, so that they
  // share that NIC's bandwidth. With a NIC per GPU no two groups share one and the group runs alone.
  double collective(Collective op, double bytes, const std::vector<std::int64_t>& members, Group kind) {
    if (members.size() <= 1) return 0.0;
    auto key = std::make_tuple(static_cast<int>(op), static_cast<int>(kind), bytes, members);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    std::int64_t per_node = 1;
    while (per_node < static_cast<std::int64_t>(members.size()) &&
           topo_.node_of(members[static_cast<std::size_t>(per_node)]) == topo_.node_of(members[0]))
      ++per_node;
    if (static_cast<std::int64_t>(members.size()) % per_node != 0) per_node = 1;
    // NCCL's rings: one channel per member of a node, so that a ring spanning nodes uses all their NICs; CP's
    // P2P ring has one.
    const bool spans_nodes = topo_.node_of(members.front()) != topo_.node_of(members.back());
    const std::int64_t channels = spans_nodes && kind != Group::cp ? per_node : 1;
    // A ring is symmetric: every step each member moves one chunk (bytes / n) over the same kinds of links, so a
    // ring over more than kRepresentativeNodes nodes runs as its first kRepresentativeNodes nodes with the full
    // Ring's chunk, its time scaled from their n_r − 1 steps to the n − 1 of the whole ring (a DP ring of
    // 2,048 GPUs would be 33 million transfers).
    const auto n = static_cast<std::int64_t>(members.size());
    std::vector<std::int64_t> ring = members;
    double ring_bytes = bytes, scale = 1.0;
    if (spans_nodes && n / per_node > kRepresentativeNodes) {
      const std::int64_t nr = kRepresentativeNodes * per_node;
      ring.resize(static_cast<std::size_t>(nr));
      ring_bytes = bytes * d(nr) / d(n);
      scale = d(n - 1) / d(nr - 1);
    }
    std::vector<std::vector<std::int64_t>> groups{ring};
    if (spans_nodes && topo_.nics_per_node() < topo_.gpus_per_node()) {
      std::set<std::int64_t> nics;
      for (const std::int64_t m : ring) nics.insert(topo_.nic_of(m));
      for (const std::int64_t offset : sibling_offsets(kind)) {
        std::vector<std::int64_t> sibling = ring;
        for (std::int64_t& m : sibling) m += offset;
        if (std::any_of(sibling.begin(), sibling.end(), [&](std::int64_t m) { return nics.contains(topo_.nic_of(m)); }))
          groups.push_back(std::move(sibling));
      }
    }
    // A GPU's channel sends of a ring step one after the other: the analytical model's flat-ring pricing (intra-
    // and inter-node parts add, throughput.cpp volume_seconds), which scores better on held-out data than the
    // Slower-of-the-two form.
    const double t = scale * simulate_concurrent_collectives(topo_, op, Algorithm::ring, ring_bytes, groups, per_node,
                                                             opt_.engine, channels, true)
                                 .time_s;
    cache_.emplace(std::move(key), t);
    return t;
  }

  void link_stages(TaskGraph& g, TaskId from, TaskId to, std::int64_t vs_from, std::int64_t vs_to, std::int64_t mb,
                   double bytes) {
    const std::int64_t p = l_.pp, s_from = vs_from % p, s_to = vs_to % p;
    if (s_from == s_to) {
      boost::add_edge(from, to, g);
      return;
    }
    Task join;
    join.op = OpKind::pp_send;
    join.stage = static_cast<std::int32_t>(s_from);
    join.microbatch = static_cast<std::int32_t>(mb);
    join.chunk = static_cast<std::int32_t>(vs_from / p);
    join.lane = Lane::pp_send;
    std::vector<TaskId> flows;
    for (std::int64_t cc = 0; cc < l_.cp; ++cc)
      for (std::int64_t tt = 0; tt < l_.tp; ++tt) {
        Task f = join;
        f.kind = TaskKind::flow;
        f.src_gpu = ranks_.rank(tt, cc, 0, s_from);
        f.dst_gpu = ranks_.rank(tt, cc, 0, s_to);
        f.bytes = bytes;
        flows.push_back(add_task(g, f, {from}));
      }
    join.op = OpKind::join;
    const TaskId j = add_task(g, join, flows);
    boost::add_edge(j, to, g);
  }

  void report(StepResult& out, double act_layer) const {
    const TaskGraph& g = out.graph;
    const std::int64_t p = l_.pp, v = std::max<std::int64_t>(1, l_.vpp);
    const double embed_act = embedding_activation_bytes(m_, l_), head_act = lm_head_activation_bytes(m_, l_);
    out.stages.assign(static_cast<std::size_t>(p), {});
    std::vector<std::vector<std::tuple<double, int, double>>> changes(static_cast<std::size_t>(p));
    std::vector<double> last_bwd_end(static_cast<std::size_t>(p), 0.0);
    std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::pair<double, double>>
        span;  // first start, last end
    for (std::size_t i = 0; i < boost::num_vertices(g); ++i) {
      const Task& t = g[i];
      const TaskTiming& tm = out.run.timing[i];
      if (t.kind != TaskKind::delay || t.stage < 0) continue;
      if (t.op == OpKind::compute_fwd || t.op == OpKind::compute_bwd || t.op == OpKind::tp_comm) {
        out.stages[static_cast<std::size_t>(t.stage)].busy_s += tm.end_s - tm.start_s;
        if (t.op != OpKind::compute_fwd)
          last_bwd_end[static_cast<std::size_t>(t.stage)] =
              std::max(last_bwd_end[static_cast<std::size_t>(t.stage)], tm.end_s);
      }
      if (t.op == OpKind::compute_fwd || t.op == OpKind::compute_bwd) {
        auto key = std::make_tuple(t.stage, t.microbatch, t.chunk * 2 + (t.op == OpKind::compute_bwd ? 1 : 0));
        auto [it, inserted] = span.try_emplace(key, tm.start_s, tm.end_s);
        if (!inserted) {
          it->second.first = std::min(it->second.first, tm.start_s);
          it->second.second = std::max(it->second.second, tm.end_s);
        }
      }
    }
    for (const auto& [key, se] : span) {
      const auto [stage, mb, kind] = key;
      const std::int64_t vs = (kind / 2) * p + stage;
      double bytes = act_layer * d(chunk_layers(m_, l_, stage, kind / 2));
      if (vs == 0) bytes += embed_act;
      if (vs == p * v - 1) bytes += head_act;
      auto& ch = changes[static_cast<std::size_t>(stage)];
      if (kind % 2 == 0)
        ch.emplace_back(se.first, +1, bytes);
      else
        ch.emplace_back(se.second, -1, -bytes);
      (void)mb;
    }
    double best_busy = -1;
    for (std::int64_t st = 0; st < p; ++st) {
      StageReport& sr = out.stages[static_cast<std::size_t>(st)];
      sr.stage = st;
      sr.idle_s = out.step_time_s - sr.busy_s;
      auto& ch = changes[static_cast<std::size_t>(st)];
      std::sort(ch.begin(), ch.end(), [](const auto& a, const auto& b) {
        return std::get<0>(a) < std::get<0>(b) || (std::get<0>(a) == std::get<0>(b) && std::get<1>(a) < std::get<1>(b));
      });
      double bytes = 0;
      std::int32_t count = 0;
      sr.memory.push_back({0.0, 0.0, 0});
      for (const auto& [time, delta, db] : ch) {
        bytes += db;
        count += delta;
        sr.memory.push_back({time, std::max(0.0, bytes), count});
        sr.peak_activation_bytes = std::max(sr.peak_activation_bytes, bytes);
        sr.peak_microbatches = std::max(sr.peak_microbatches, count);
      }
      best_busy = std::max(best_busy, sr.busy_s);
    }
    // Bubble: how long the pipeline (until the last backward anywhere) runs beyond the busiest stage's work.
    const double pipeline_end = *std::max_element(last_bwd_end.begin(), last_bwd_end.end());
    out.bubble_s = std::max(0.0, pipeline_end - best_busy);
    out.bubble_fraction = best_busy > 0 ? out.bubble_s / best_busy : 0.0;
  }

  // Virtual stages per GPU (v ≥ 1) and the share of a pass that DP traffic may overlap.
  [[nodiscard]] std::int64_t virtual_stages() const { return std::max<std::int64_t>(1, l_.vpp); }
  // One share for gathers and reductions alike (the constructor refuses a layout whose shares differ).
  [[nodiscard]] double dp_overlap() const { return std::clamp(dp_shares_.gathers, 0.0, 1.0); }

  // One decoder layer's compute per pass (the throughput model's) and its exposed TP/SP and CP time; the
  // pipeline's ends (embedding on the first stage, LM head and FP32 loss on the last).
  struct LayerCosts {
    LayerPasses compute;
    double tp_fwd = 0, tp_bwd = 0, cp_fwd = 0, cp_bwd = 0;
    PipelineEnds ends;
  };
  // First and last task of each (virtual stage, micro-batch, forward) pass.
  using PassEnds = std::map<std::tuple<std::int64_t, std::int64_t, bool>, std::pair<TaskId, TaskId>>;
  // What a stage's chain carries from one pass to the next.
  struct Chain {
    std::vector<TaskId> prev;           // what the next task waits for
    std::vector<TaskId> update_gather;  // the step's parameter gather, until the first forward waits for it
  };

  LayerCosts layer_costs() {
    LayerCosts x;
    x.compute = layer_compute_seconds(m_, perf_, l_);
    x.ends = pipeline_end_seconds(m_, perf_, l_);
    const RecomputeFactors rc = recompute_factors(m_, l_, false);
    // TP/SP (Korthikanti et al. 2023): 2 all-gathers + 2 reduce-scatters of s·b·h/c per layer and pass.
    if (l_.tp > 1) {
      std::vector<std::int64_t> g;
      for (std::int64_t i = 0; i < l_.tp; ++i) g.push_back(ranks_.rank(i, 0, 0, 0));
      x.tp_fwd = 4.0 * collective(Collective::all_gather, activation_tensor_bytes(m_, l_) * d(l_.tp), g, Group::tp) *
                 (1.0 - perf_.coef.tp_overlap);
    }
    x.tp_bwd = (1.0 + rc.tp_collectives) * x.tp_fwd;
    if (l_.tp_comm_overlap) {
      x.tp_fwd = tp_overlapped_comm_seconds(x.tp_fwd, x.compute.forward.gemm, l_.tp);
      x.tp_bwd = tp_overlapped_comm_seconds(x.tp_bwd, x.compute.backward.gemm, l_.tp);
    }
    // CP ring attention: c − 1 exchanges of the local K, V (backward: K, V, dK, dV), behind attention. The
    // exchanges are P2P sends to the ring neighbour (TransformerEngine's CP), so a ring across nodes crosses each
    // boundary through one NIC (one channel, collective() below) at cp_inter_efficiency of it where collectives
    // reach inter_efficiency (throughput.hpp); the topology has one rate per link, so such a ring moves its bytes
    // scaled by inter_efficiency / cp_inter_efficiency.
    if (l_.cp > 1) {
      std::vector<std::int64_t> g;
      for (std::int64_t i = 0; i < l_.cp; ++i) g.push_back(ranks_.rank(0, i, 0, 0));
      const bool across_nodes = topo_.node_of(g.front()) != topo_.node_of(g.back());
      const double p2p = across_nodes ? perf_.inter_efficiency / perf_.cp_inter_efficiency : 1.0;
      const double kv = cp_kv_bytes(m_, l_);
      const double ring_f = collective(Collective::all_gather, p2p * kv * d(l_.cp), g, Group::cp);
      const double ring_b = collective(Collective::all_gather, p2p * 2.0 * kv * d(l_.cp), g, Group::cp);
      const CpExposed cp = exposed_cp_seconds(l_, {ring_f, ring_b, 0.0}, x.compute.forward.attention, perf_.cp_overlap);
      x.cp_fwd = cp.forward;
      x.cp_bwd = cp.backward + rc.attention * cp.forward;
    }
    return x;
  }

  // Stage st's passes in its schedule's order, chained; returns its last compute or TP task.
  TaskId add_stage_chain(TaskGraph& g, std::int64_t st, const LayerCosts& layer, const UpdateComm& update,
                         PassEnds& pass) {
    const std::int64_t p = l_.pp, v = virtual_stages();
    const std::vector<PassOp> ops = stage_schedule(l_.schedule, st, p, l_.microbatches(), v);
    const MicrobatchComm mbc = microbatch_dp_seconds(st);
    const double pp_send_s = pipeline_send_seconds(m_, perf_, l_);
    Chain chain;
    // The once-per-step parameter all-gather of sharded optimizer states (PaRO Sec. 3.1.1) belongs to the
    // previous step's update; frameworks overlap it with the next forward (Megatron-LM's overlap-param-gather):
    // it runs from the step's start and the first forward waits for it after dp_overlap of its layers, as
    // the analytical model's max(0, gather − dp_overlap·forward) has it.
    if (update.gather_s > 0)
      chain.update_gather.push_back(add_task(g, stage_task(OpKind::dp_comm, st, Lane::dp, update.gather_s), {}));
    TaskId last_work{};
    std::vector<TaskId> in_flight;  // an overlapped send (pipeline_sends_overlap), running beside the next pass
    for (std::size_t index = 0; index < ops.size(); ++index) {
      const PassOp& op = ops[index];
      // The stage's last v passes (backward, one per chunk with interleaving): one stage-backward of one
      // micro-batch, over which the gradient sync overlaps (the analytical model's dp_overlap · backward).
      const std::size_t from_end = ops.size() - index;
      const auto [first, last] =
          add_pass(g, st, op, layer, op.forward ? mbc.forward_s : mbc.backward_s,
                   from_end <= static_cast<std::size_t>(v), from_end == static_cast<std::size_t>(v), chain);
      last_work = last;
      pass[{op.chunk * p + st, op.microbatch, op.forward}] = {first, last};
      // The stage is held while its pipeline send (or receive) of the pass runs, less what the framework
      // overlaps (throughput.hpp's pipeline_send_seconds, as the analytical model charges every stage and pass);
      // an overlapped send runs beside the next pass, and the pass after that waits for both.
      chain.prev.insert(chain.prev.end(), in_flight.begin(), in_flight.end());
      in_flight.clear();
      if (pp_send_s > 0) {
        const TaskId send = add_task(g, stage_task(OpKind::pp_send, st, Lane::pp_send, pp_send_s, &op), chain.prev);
        if (pipeline_sends_overlap(l_))
          in_flight = {send};
        else
          chain.prev = {send};
      }
    }
    return last_work;
  }

  // One pass (a chunk's layers, forward or backward, of one micro-batch) on the stage's chain, with its FSDP
  // traffic (fsdp_s). `tail`: one of the stage's last v passes (their tasks are kept for the gradient sync);
  // `marker`: the first of them. Returns the pass's first and last compute or TP task.
  std::pair<TaskId, TaskId> add_pass(TaskGraph& g, std::int64_t st, const PassOp& op, const LayerCosts& layer,
                                     double fsdp_s, bool tail, bool marker, Chain& chain) {
    const std::int64_t vs = op.chunk * l_.pp + st, vs_count = l_.pp * virtual_stages();
    const double f = dp_overlap();
    // The chunk's decoder layers (layout.hpp). A chunk with none (Megatron-LM's
    // --account-for-embedding-in-pipeline-split at one layer per chunk) still runs its embedding or head: one task.
    const std::int64_t layers = chunk_layers(m_, l_, st, op.chunk);
    const std::int64_t tasks = std::max<std::int64_t>(1, layers);
    const double layer_share = layers > 0 ? 1.0 : 0.0;
    // Per-micro-batch gathers are waited for dp_overlap of the way through the chunk's layers: the layer at that
    // point is split there, as the analytical model's max(0, gather − dp_overlap·pass) has it.
    const std::int64_t wait_layer = std::min(tasks - 1, static_cast<std::int64_t>(f * d(layers)));
    const double wait_fraction = std::clamp(f * d(layers) - d(wait_layer), 0.0, 1.0);
    std::vector<TaskId> ignored;
    std::vector<TaskId>& pass_tasks = tail ? last_pass_[static_cast<std::size_t>(st)] : ignored;
    std::optional<TaskId> first;
    const auto next = [&](const Task& t) {  // next on the stage's chain, after what chain.prev holds
      const TaskId id = add_task(g, t, chain.prev);
      if (!first) first = id;
      chain.prev = {id};
      pass_tasks.push_back(id);
    };
    // Per micro-batch FSDP traffic starts with the pass; the layer after dp_overlap of the pass waits for it.
    std::vector<TaskId> fsdp;
    if (fsdp_s > 0) fsdp.push_back(add_task(g, stage_task(OpKind::dp_comm, st, Lane::dp, fsdp_s, &op), chain.prev));
    // The last passes start with a zero-length marker: the gradient sync may start with them (dp_overlap 1), not
    // before while the stage idles in the pipeline's drain.
    if (marker) next(stage_task(OpKind::join, st, Lane::compute, 0.0, &op));
    const PipelineEnds& ends = layer.ends;
    const OpKind kind = op.forward ? OpKind::compute_fwd : OpKind::compute_bwd;
    for (std::int64_t i = 0; i < tasks; ++i) {
      double seconds = layer_share * (op.forward ? layer.compute.forward.total() + layer.cp_fwd
                                                 : layer.compute.backward.total() + layer.cp_bwd);
      if (i == 0 && vs == 0) seconds += ends.embedding_s;
      if (i == tasks - 1 && vs == vs_count - 1)
        seconds += (op.forward ? ends.head_forward_s : ends.head_backward_s) + ends.loss_s;
      if (i == wait_layer) {
        if (wait_fraction > 0) next(stage_task(kind, st, Lane::compute, wait_fraction * seconds, &op));  // before it
        seconds -= wait_fraction * seconds;
        chain.prev.insert(chain.prev.end(), fsdp.begin(), fsdp.end());
        chain.prev.insert(chain.prev.end(), chain.update_gather.begin(), chain.update_gather.end());
        chain.update_gather.clear();
      }
      next(stage_task(kind, st, Lane::compute, seconds, &op));
      if (layer.tp_fwd > 0 && layers > 0)
        next(stage_task(OpKind::tp_comm, st, Lane::tp_cp, op.forward ? layer.tp_fwd : layer.tp_bwd, &op));
    }
    return {*first, chain.prev.front()};
  }

  // Pipeline edges: forward vs−1 → vs, backward vs+1 → vs, the last virtual stage's forward → its backward.
  // Crossing GPUs, the t·c GPUs of the replica each send s·b·h/(t·c) BF16 (Narayanan et al. 2021 Sec. 4.1).
  void link_pipeline(TaskGraph& g, const PassEnds& pass) {
    const std::int64_t vs_count = l_.pp * virtual_stages();
    const double act_bytes = activation_tensor_bytes(m_, l_);
    for (std::int64_t vs = 0; vs < vs_count; ++vs) {
      for (std::int64_t mb = 0; mb < l_.microbatches(); ++mb) {
        if (vs > 0)
          link_stages(g, pass.at({vs - 1, mb, true}).second, pass.at({vs, mb, true}).first, vs - 1, vs, mb, act_bytes);
        if (vs + 1 < vs_count)
          link_stages(g, pass.at({vs + 1, mb, false}).second, pass.at({vs, mb, false}).first, vs + 1, vs, mb,
                      act_bytes);
        else
          boost::add_edge(pass.at({vs, mb, true}).second, pass.at({vs, mb, false}).first, g);
      }
    }
  }

  // DP: after stage st's last backward, the once-per-step gradient sync (PaRO Sec. 3.1.1) over the DP×CP group,
  // starting dp_overlap of the last backward early; then the optimizer.
  void add_update(TaskGraph& g, std::int64_t st, TaskId last_work, const UpdateComm& update) {
    const double f = dp_overlap();
    std::vector<TaskId> deps{last_work};
    if (update.sync_s > 0) {
      // Start it when (1 − dp_overlap) of the stage's last backward passes have run (their compute and TP tasks,
      // after the marker); k = 0 (fully overlapped): with the marker.
      const std::vector<TaskId>& last_bwd = last_pass_[static_cast<std::size_t>(st)];
      const auto n = static_cast<std::int64_t>(last_bwd.size()) - 1;
      const auto k = static_cast<std::size_t>(std::clamp((1.0 - f) * d(n), 0.0, d(n)));
      deps.push_back(add_task(g, stage_task(OpKind::dp_comm, st, Lane::dp, update.sync_s), {last_bwd[k]}));
    }
    const double shard_params =
        dp_parameters_per_gpu(m_, l_, st).trainable / shard_divisor(l_.sharding.optimizer, l_, perf_.gpus_per_node);
    (void)add_task(g,
                   stage_task(OpKind::optimizer, st, Lane::optimizer,
                              optimizer_step_seconds(perf_, l_, shard_params) + perf_.coef.step_overhead_s),
                   deps);
  }

  const ModelSpec& m_;
  const Layout& l_;
  PerfContext perf_;
  Ranks ranks_;
  Topology topo_;
  StepOptions opt_;
  DpOverlap dp_shares_;                         // throughput.hpp dp_overlap_shares of the layout
  std::vector<std::vector<TaskId>> last_pass_;  // per stage, the tasks of its last pass (a backward)
  std::map<std::tuple<int, int, double, std::vector<std::int64_t>>, double> cache_;
};

// The step's graph is built and run in memory: past max_tasks it would take gigabytes and minutes, so it is refused
// before anything is allocated, naming the global batch that sets the micro-batches.
void require_step_work(const ModelSpec& m, const Layout& l, double max_tasks) {
  const double tasks = step_task_bound(m, l);
  if (tasks <= max_tasks) return;
  char text[200];
  std::snprintf(text, sizeof text,
                " micro-batches a pipeline (pp·vpp = %lld): a step of up to %.3g tasks, more than the %.3g the "
                "simulator builds%s",
                static_cast<long long>(l.pp) * static_cast<long long>(virtual_stages(l)), tasks, max_tasks,
                max_tasks < kMaxStepTasks ? " with a trace" : "");
  throw Error("simulate: " + field("gbs") + " " + std::to_string(l.gbs) + " makes " + std::to_string(l.microbatches()) +
              text + " (fewer micro-batches: a smaller " + field("gbs") + " or more " + field("dp") + ")");
}

}  // namespace

double step_task_bound(const ModelSpec& m, const Layout& l) {
  const double mb = d(l.microbatches()), v = d(virtual_stages(l)), p = d(l.pp), stages = p * v;
  const double per_layer = l.tp > 1 ? 2.0 : 1.0;  // compute, and a TP task when there is TP
  const double passes = 2.0 * mb * (per_layer * (d(m.num_layers) + stages) + 4.0 * stages);
  const double links = l.pp > 1 ? 2.0 * mb * (stages - 1.0) * (d(l.tp) * d(l.cp) + 1.0) : 0.0;
  return passes + links + 3.0 * p;
}

StepResult simulate_step(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const PerfCoefficients& k,
                         const StepOptions& o) {
  validate_layout(m, l);
  if (l.microbatches() < 1) throw Error("simulate: the layout has no micro-batch per pipeline");
  require_step_work(m, l, o.max_tasks);
  if (m.num_experts > 0)
    throw Error("simulate: " + m.name +
                " has experts, whose all-to-alls the event simulator does not schedule yet (estimate prices them)");
  if (l.cp > 1 && (l.cp_exchange == CpExchange::all_gather || l.cp_exchange == CpExchange::a2a))
    throw Error("simulate: " + field("cp_comm_type") + " " + std::string(to_string(l.cp_exchange)) +
                " is not scheduled by the event simulator yet (estimate prices it)");
  if (l.mtp_layers > 0)
    throw Error("simulate: " + field("mtp_num_layers") + " " + std::to_string(l.mtp_layers) +
                " (multi-token-prediction layers) is not scheduled by the event simulator yet (estimate prices it)");
  if (splits_backward(l.schedule) && l.pp > 1)
    throw Error("simulate: " + field("schedule") + " " + std::string(to_string(l.schedule)) +
                " (backwards split into input- and weight-gradient passes) is not scheduled by the event simulator "
                "yet (estimate prices it)");
  if (recompute_by_layers(l))
    throw Error("simulate: full recompute by layers (" + field("recompute_method") + " " +
                std::string(to_string(l.recompute_method)) +
                ") is not scheduled by the event simulator yet (estimate prices it)");
  if (l.fp8 != Fp8Recipe::none || l.optimizer_offload > 0 || l.activation_offload_layers > 0)
    throw Error(std::string("simulate: ") +
                (l.fp8 != Fp8Recipe::none ? "FP8 training (its per-step weight casts and FP8 "
                                            "gathers)"
                                          : "offloading (its host copies)") +
                " is not scheduled by the event simulator yet (estimate prices it)");
  return StepBuilder(m, c, l, k, o).build_and_run();
}

}  // namespace headroom::sim
