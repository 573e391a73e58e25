#include "headroom/simulator/step.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "headroom/estimator/error.hpp"
#include "headroom/estimator/flops.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/simulator/collectives.hpp"
#include "headroom/simulator/schedules.hpp"

namespace headroom::sim {
namespace {

double d(std::int64_t v) { return static_cast<double>(v); }

// Per layer and micro-batch, one pass: compute seconds (GEMMs, attention, HBM passes, fixed overhead) from
// the throughput model's efficiencies (throughput.hpp); backward ratios from flops.hpp.
struct LayerCost {
  double fwd = 0, bwd = 0;
  double attn_fwd = 0;  // attention part of fwd, which CP's ring exchange hides behind
};

double gemm_seconds(const PerfContext& p, const GemmShape& g) { return g.flops() / (p.peak_flops * gemm_efficiency(p, g)); }

LayerCost layer_cost(const ModelSpec& m, const PerfContext& p, const Layout& l) {
  const LayerGemms g = layer_gemms(m, l);
  const double gemm = gemm_seconds(p, g.qkv) + gemm_seconds(p, g.proj) + gemm_seconds(p, g.fc1) + gemm_seconds(p, g.fc2);
  const double attn = attention_flops_forward(m, l) / (p.peak_flops * attention_efficiency(p, d(l.seq) / d(l.cp)));
  const double act = 2.0 * d(l.seq) * d(l.mbs) * d(m.hidden_size) / d(l.tp * l.cp);
  const double elem = p.coef.elementwise_passes * act / p.hbm_bytes_per_s;
  const RecomputeFactors rc = recompute_factors(l.recompute);
  LayerCost c;
  c.attn_fwd = attn;
  c.fwd = gemm + attn + elem + p.coef.layer_overhead_s;
  c.bwd = (kGemmBackwardRatio + rc.gemm) * gemm + (kAttentionBackwardRatio + rc.attention) * attn +
          (2.0 + rc.gemm) * elem + (1.0 + rc.gemm) * p.coef.layer_overhead_s;
  return c;
}

// Megatron-LM rank order: TP innermost, then CP, DP, PP.
struct Ranks {
  std::int64_t t, c, dp, p;
  [[nodiscard]] std::int64_t rank(std::int64_t tp, std::int64_t cp, std::int64_t d, std::int64_t stage) const {
    return tp + t * (cp + c * (d + dp * stage));
  }
};

class StepBuilder {
 public:
  StepBuilder(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const PerfCoefficients& k, const StepOptions& o)
      : m_(m), l_(l), perf_(k, c), ranks_{l.tp, l.cp, l.dp, l.pp},
        topo_(c, TopologyOptions{(l.gpus() + c.gpus_per_node - 1) / c.gpus_per_node, o.nics_per_node,
                                 k.intra_efficiency, k.inter_efficiency}),
        opt_(o) {}

  StepResult build_and_run() {
    const std::int64_t p = l_.pp, v = std::max<std::int64_t>(1, l_.vpp), micro = l_.microbatches();
    const std::int64_t layers_per_chunk = m_.num_layers / (p * v);
    const LayerCost lc = layer_cost(m_, perf_, l_);
    const RecomputeFactors rc = recompute_factors(l_.recompute);
    const double s = d(l_.seq), b = d(l_.mbs), h = d(m_.hidden_size);
    const double act_bytes = 2.0 * s * b * h / d(l_.tp * l_.cp);

    // TP/SP (Korthikanti et al. 2023): 2 all-gathers + 2 reduce-scatters of s·b·h/c per layer and pass.
    double tp_fwd = 0;
    if (l_.tp > 1) {
      std::vector<std::int64_t> g;
      for (std::int64_t i = 0; i < l_.tp; ++i) g.push_back(ranks_.rank(i, 0, 0, 0));
      tp_fwd = 4.0 * collective(Collective::all_gather, 2.0 * s * b * h / d(l_.cp), g) * (1.0 - perf_.coef.tp_overlap);
    }
    const double tp_bwd = (1.0 + rc.gemm) * tp_fwd;
    // CP ring attention: c − 1 exchanges of the local K, V (backward: K, V, dK, dV), behind attention.
    double cp_fwd = 0, cp_bwd = 0;
    if (l_.cp > 1) {
      std::vector<std::int64_t> g;
      for (std::int64_t i = 0; i < l_.cp; ++i) g.push_back(ranks_.rank(0, i, 0, 0));
      const double kv = 2.0 * (s / d(l_.cp)) * b * h * (d(m_.num_kv_heads) / d(m_.num_heads)) * 2.0 / d(l_.tp);
      const double ring_f = collective(Collective::all_gather, kv * d(l_.cp), g);
      const double ring_b = collective(Collective::all_gather, 2.0 * kv * d(l_.cp), g);
      cp_fwd = std::max(0.0, ring_f - perf_.coef.cp_overlap * lc.attn_fwd);
      cp_bwd = std::max(0.0, ring_b - perf_.coef.cp_overlap * kAttentionBackwardRatio * lc.attn_fwd) + rc.attention * cp_fwd;
    }
    // First stage: embedding; last: LM head GEMM and the FP32 loss (throughput.hpp's terms).
    const double embed = 2.0 * act_bytes / perf_.hbm_bytes_per_s;
    const double head = gemm_seconds(perf_, GemmShape{s * b / d(l_.cp), d(m_.vocab_size) / d(l_.tp), h});
    const double loss = perf_.coef.loss_passes * 4.0 * s * b * d(m_.vocab_size) / d(l_.tp * l_.cp) / perf_.hbm_bytes_per_s * 0.5;

    // Activations one micro-batch leaves on a chunk (memory.hpp), freed by its backward.
    const double act_layer = activation_bytes_per_layer(m_, l_) * d(layers_per_chunk);

    StepResult out;
    out.gpus = l_.gpus();
    out.tp = l_.tp;
    TaskGraph& g = out.graph;
    const auto vs_count = p * v;
    // first/last task of each (virtual stage, micro-batch, pass)
    std::map<std::tuple<std::int64_t, std::int64_t, bool>, std::pair<TaskId, TaskId>> pass;
    std::vector<std::vector<PassOp>> order(static_cast<std::size_t>(p));
    for (std::int64_t st = 0; st < p; ++st) order[static_cast<std::size_t>(st)] = stage_schedule(l_.schedule, st, p, micro, v);

    // Build each stage's chain first (without cross-stage edges), then link them.
    std::vector<std::vector<TaskId>> stage_tasks(static_cast<std::size_t>(p));
    for (std::int64_t st = 0; st < p; ++st) {
      std::vector<TaskId> prev;
      for (const PassOp& op : order[static_cast<std::size_t>(st)]) {
        const std::int64_t vs = op.chunk * p + st;
        TaskId first = 0, last = 0;
        for (std::int64_t layer = 0; layer < layers_per_chunk; ++layer) {
          Task t;
          t.kind = TaskKind::delay;
          t.op = op.forward ? OpKind::compute_fwd : OpKind::compute_bwd;
          t.stage = static_cast<std::int32_t>(st);
          t.microbatch = op.microbatch;
          t.chunk = op.chunk;
          t.duration_s = op.forward ? lc.fwd + cp_fwd : lc.bwd + cp_bwd;
          if (layer == 0 && vs == 0) t.duration_s += embed;
          if (layer == layers_per_chunk - 1 && vs == vs_count - 1)
            t.duration_s += op.forward ? head + loss : kGemmBackwardRatio * head + loss;
          const TaskId id = add_task(g, t, prev);
          if (layer == 0) first = id;
          last = id;
          prev = {id};
          stage_tasks[static_cast<std::size_t>(st)].push_back(id);
          if (tp_fwd > 0) {
            Task c = t;
            c.op = OpKind::tp_comm;
            c.lane = 1;
            c.duration_s = op.forward ? tp_fwd : tp_bwd;
            const TaskId cid = add_task(g, c, prev);
            last = cid;
            prev = {cid};
            stage_tasks[static_cast<std::size_t>(st)].push_back(cid);
          }
        }
        pass[{vs, op.microbatch, op.forward}] = {first, last};
      }
      last_of_stage_.push_back(prev.empty() ? 0 : prev.front());
    }
    // Pipeline edges: forward vs−1 → vs, backward vs+1 → vs, the last virtual stage's forward → its backward.
    // Crossing GPUs, the t·c GPUs of the replica each send s·b·h/(t·c) BF16 (Narayanan et al. 2021 Sec. 4.1).
    for (std::int64_t vs = 0; vs < vs_count; ++vs) {
      for (std::int64_t mb = 0; mb < micro; ++mb) {
        if (vs > 0) link_stages(g, pass.at({vs - 1, mb, true}).second, pass.at({vs, mb, true}).first, vs - 1, vs, mb, act_bytes);
        if (vs + 1 < vs_count)
          link_stages(g, pass.at({vs + 1, mb, false}).second, pass.at({vs, mb, false}).first, vs + 1, vs, mb, act_bytes);
        else
          boost::add_edge(pass.at({vs, mb, true}).second, pass.at({vs, mb, false}).first, g);
      }
    }
    // DP: after each stage's last backward, the once-per-step gradient sync and parameter gather (PaRO
    // Sec. 3.1.1) over the DP×CP group, starting dp_overlap of the last backward early; then the optimizer.
    const std::int64_t group = l_.dp * l_.cp;
    for (std::int64_t st = 0; st < p; ++st) {
      const auto& tasks = stage_tasks[static_cast<std::size_t>(st)];
      std::vector<TaskId> deps{tasks.back()};
      double dp_s = 0;
      if (group > 1) {
        std::vector<std::int64_t> members;
        for (std::int64_t dd = 0; dd < l_.dp; ++dd)
          for (std::int64_t cc = 0; cc < l_.cp; ++cc) members.push_back(ranks_.rank(0, cc, dd, st));
        const double params = stage_parameters_per_gpu(m_, l_, st);
        const GradSync sync = update_grad_sync_kind(l_.sharding);
        const double grads = params * l_.precision.grad_bytes;
        if (sync == GradSync::all_reduce) dp_s += collective(Collective::all_reduce, grads, members);
        else if (sync != GradSync::none) dp_s += collective(Collective::reduce_scatter, grads, members);
        if (shard_level(l_.sharding.params) < shard_level(l_.sharding.optimizer))
          dp_s += collective(Collective::all_gather, params * l_.precision.weight_bytes, members);
      }
      if (dp_s > 0) {
        // Start it when (1 − dp_overlap) of the last backward pass of this stage has run.
        const double f = std::clamp(perf_.coef.dp_overlap, 0.0, 1.0);
        std::vector<TaskId> last_bwd;
        for (auto it = tasks.rbegin(); it != tasks.rend() && g[*it].op != OpKind::compute_fwd; ++it)
          if (g[*it].microbatch == g[tasks.back()].microbatch && g[*it].chunk == g[tasks.back()].chunk) last_bwd.push_back(*it);
        std::reverse(last_bwd.begin(), last_bwd.end());
        const auto k = static_cast<std::size_t>(std::clamp((1.0 - f) * d(static_cast<std::int64_t>(last_bwd.size())), 0.0,
                                                           d(static_cast<std::int64_t>(last_bwd.size()))));
        Task t;
        t.op = OpKind::dp_comm;
        t.stage = static_cast<std::int32_t>(st);
        t.lane = 3;
        t.duration_s = dp_s;
        // k = 0 (fully overlapped): it waits only for what precedes the last backward on the stage.
        std::vector<TaskId> after;
        if (k > 0) {
          after.push_back(last_bwd[k - 1]);
        } else if (!last_bwd.empty()) {
          const auto pos = std::find(tasks.begin(), tasks.end(), last_bwd.front());
          if (pos != tasks.begin()) after.push_back(*(pos - 1));
        }
        deps.push_back(add_task(g, t, after));
      }
      Task opt;
      opt.op = OpKind::optimizer;
      opt.stage = static_cast<std::int32_t>(st);
      const double shard_params = stage_parameters_per_gpu(m_, l_, st) / shard_divisor(l_.sharding.optimizer, l_, perf_.gpus_per_node);
      opt.duration_s = shard_params * (2.0 * l_.precision.optimizer_bytes + l_.precision.grad_bytes + l_.precision.weight_bytes) /
                           perf_.hbm_bytes_per_s + perf_.coef.step_overhead_s;
      (void)add_task(g, opt, deps);
    }

    out.run = run(g, topo_, opt_.engine);
    out.step_time_s = out.run.makespan_s;
    report(out, act_layer);
    return out;
  }

 private:
  double collective(Collective op, double bytes, const std::vector<std::int64_t>& members) {
    if (members.size() <= 1) return 0.0;
    auto key = std::make_tuple(static_cast<int>(op), bytes, members);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    std::int64_t per_node = 1;
    while (per_node < static_cast<std::int64_t>(members.size()) &&
           topo_.node_of(members[static_cast<std::size_t>(per_node)]) == topo_.node_of(members[0]))
      ++per_node;
    if (static_cast<std::int64_t>(members.size()) % per_node != 0) per_node = 1;
    const double t = simulate_collective(topo_, op, Algorithm::ring, bytes, members, per_node, opt_.engine).time_s;
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
    join.lane = 2;
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

  void report(StepResult& out, double act_chunk) const {
    const TaskGraph& g = out.graph;
    const std::int64_t p = l_.pp, v = std::max<std::int64_t>(1, l_.vpp);
    const double embed_act = embedding_activation_bytes(m_, l_), head_act = lm_head_activation_bytes(m_, l_);
    out.stages.assign(static_cast<std::size_t>(p), {});
    std::vector<std::vector<std::tuple<double, int, double>>> changes(static_cast<std::size_t>(p));
    std::vector<double> last_bwd_end(static_cast<std::size_t>(p), 0.0);
    std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::pair<double, double>> span;  // first start, last end
    for (std::size_t i = 0; i < boost::num_vertices(g); ++i) {
      const Task& t = g[i];
      const TaskTiming& tm = out.run.timing[i];
      if (t.kind != TaskKind::delay || t.stage < 0) continue;
      StageReport& sr = out.stages[static_cast<std::size_t>(t.stage)];
      if (t.op == OpKind::compute_fwd || t.op == OpKind::compute_bwd || t.op == OpKind::tp_comm) {
        sr.busy_s += tm.end_s - tm.start_s;
        if (t.op != OpKind::compute_fwd) last_bwd_end[static_cast<std::size_t>(t.stage)] = std::max(last_bwd_end[static_cast<std::size_t>(t.stage)], tm.end_s);
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
      double bytes = act_chunk;
      if (vs == 0) bytes += embed_act;
      if (vs == p * v - 1) bytes += head_act;
      auto& ch = changes[static_cast<std::size_t>(stage)];
      if (kind % 2 == 0) ch.emplace_back(se.first, +1, bytes);
      else ch.emplace_back(se.second, -1, -bytes);
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

  const ModelSpec& m_;
  const Layout& l_;
  PerfContext perf_;
  Ranks ranks_;
  Topology topo_;
  StepOptions opt_;
  std::vector<TaskId> last_of_stage_;
  std::map<std::tuple<int, double, std::vector<std::int64_t>>, double> cache_;
};

}  // namespace

StepResult simulate_step(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const PerfCoefficients& k,
                         const StepOptions& o) {
  validate_layout(m, l);
  if (l.lora.enabled()) throw Error("simulate: LoRA layouts are not modelled by the simulator (drop --lora-rank)");
  if (l.microbatches() < 1) throw Error("simulate: the layout has no micro-batch per pipeline");
  return StepBuilder(m, c, l, k, o).build_and_run();
}

}  // namespace headroom::sim
