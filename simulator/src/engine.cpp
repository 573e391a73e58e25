#include "headroom/simulator/engine.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <string>
#include <utility>

#include "headroom/core/error.hpp"

namespace headroom::sim {

TaskId add_task(TaskGraph& g, const Task& t, const std::vector<TaskId>& deps) {
  const TaskId id = boost::add_vertex(t, g);
  for (const TaskId d : deps) boost::add_edge(d, id, g);
  return id;
}

namespace {

enum class EventKind : std::uint8_t { ready, done, flow_active, flow_tick };

struct Event {
  double time = 0;
  std::uint64_t seq = 0;
  EventKind kind = EventKind::ready;
  std::int64_t task = 0;  // task id, or the rate version for flow_tick
};

// Earliest time first; equal times in insertion order.
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time > b.time || (a.time == b.time && a.seq > b.seq);
  }
};

struct ActiveFlow {
  std::int64_t task = 0;
  const Route* route = nullptr;  // points into the route cache, which outlives the run
  double remaining = 0;
  double rate = 0;
  double tolerance = 0;
};

class Run {
 public:
  Run(const TaskGraph& g, const Topology& topo, const EngineOptions& o)
      : g_(g),
        topo_(topo),
        opt_(o),
        link_cap_(topo.link_count()),
        link_count_(topo.link_count()),
        link_flows_(topo.link_count()) {}

  RunResult go() {
    const std::size_t n = boost::num_vertices(g_);
    result_.timing.assign(n, {});
    waiting_.assign(n, 0);
    for (auto [e, end] = boost::edges(g_); e != end; ++e) ++waiting_[boost::target(*e, g_)];
    for (std::size_t v = 0; v < n; ++v)
      if (waiting_[v] == 0) push(0.0, EventKind::ready, static_cast<std::int64_t>(v));
    std::size_t finished = 0;
    while (!queue_.empty()) {
      const double now = queue_.top().time;
      advance(now);
      bool changed = false;
      while (!queue_.empty() && queue_.top().time == now) {
        const Event ev = queue_.top();
        queue_.pop();
        ++result_.events;
        changed |= handle(ev, now, finished);
      }
      if (changed) reshare(now);
    }
    if (finished != n)
      throw Error("simulator: " + std::to_string(n - finished) + " of " + std::to_string(n) +
                  " tasks never ran (the step graph has a cycle)");
    return std::move(result_);
  }

 private:
  void push(double t, EventKind k, std::int64_t task) { queue_.push(Event{t, seq_++, k, task}); }

  void finish(std::int64_t task, double now, std::size_t& finished) {
    result_.timing[static_cast<std::size_t>(task)].end_s = now;
    result_.makespan_s = std::max(result_.makespan_s, now);
    ++finished;
    for (auto [e, end] = boost::out_edges(static_cast<TaskId>(task), g_); e != end; ++e) {
      const TaskId next = boost::target(*e, g_);
      if (--waiting_[next] == 0) push(now, EventKind::ready, static_cast<std::int64_t>(next));
    }
  }

  const Route& route(std::int64_t src, std::int64_t dst) {
    auto [it, inserted] = routes_.try_emplace({src, dst});
    if (inserted) it->second = topo_.route(src, dst);
    return it->second;
  }

  // Returns true when the set of active flows changed.
  bool handle(const Event& ev, double now, std::size_t& finished) {
    switch (ev.kind) {
      case EventKind::ready: {
        const Task& t = g_[static_cast<TaskId>(ev.task)];
        result_.timing[static_cast<std::size_t>(ev.task)].start_s = now;
        if (t.kind == TaskKind::delay || t.src_gpu == t.dst_gpu) {
          push(now + (t.kind == TaskKind::delay ? t.duration_s : 0.0), EventKind::done, ev.task);
          return false;
        }
        const Route& r = route(t.src_gpu, t.dst_gpu);
        push(now + (t.pipelined ? 0.0 : r.latency_s), EventKind::flow_active, ev.task);
        return false;
      }
      case EventKind::done: finish(ev.task, now, finished); return false;
      case EventKind::flow_active: {
        const Task& t = g_[static_cast<TaskId>(ev.task)];
        if (t.bytes <= 0) {
          finish(ev.task, now, finished);
          return false;
        }
        flows_.push_back(ActiveFlow{ev.task, &route(t.src_gpu, t.dst_gpu), t.bytes, 0.0, 1e-9 * t.bytes});
        return true;
      }
      case EventKind::flow_tick: {
        if (static_cast<std::uint64_t>(ev.task) != version_) return false;
        std::size_t keep = 0;
        for (const ActiveFlow& f : flows_) {  // finish() leaves flows_ alone
          if (done(f, now)) {
            finish(f.task, now, finished);
          } else {
            flows_[keep++] = f;
          }
        }
        flows_.resize(keep);
        return true;  // re-plan even if rounding left a flow a hair short of done
      }
    }
    return false;
  }

  // A flow is done when what remains is within rounding of its size, or when finishing it would take less time
  // than `now` can resolve (a fraction of a byte at hundreds of GB/s): its next tick would fall at `now` again,
  // forever.
  static bool done(const ActiveFlow& f, double now) {
    return f.remaining <= f.tolerance || now + f.remaining / f.rate <= now;
  }

  void advance(double now) {
    const double dt = now - last_;
    if (dt > 0)
      for (auto& f : flows_) f.remaining = std::max(0.0, f.remaining - f.rate * dt);
    last_ = now;
  }

  // Max-min fair rates by progressive filling: repeatedly saturate the links that offer the smallest equal
  // share to their not-yet-limited flows.
  void reshare(double now) {
    ++version_;
    ++result_.rate_updates;
    if (flows_.empty()) return;
    if (!opt_.contention) {
      for (auto& f : flows_) {
        f.rate = std::numeric_limits<double>::infinity();
        for (const auto l : f.route->links) f.rate = std::min(f.rate, topo_.link_bytes_per_s(l));
      }
    } else {
      touched_.clear();
      for (std::size_t i = 0; i < flows_.size(); ++i) {
        flows_[i].rate = -1;  // not yet limited
        for (const auto l : flows_[i].route->links) {
          const auto li = static_cast<std::size_t>(l);
          if (link_flows_[li].empty()) {
            touched_.push_back(l);
            link_cap_[li] = topo_.link_bytes_per_s(l);
            link_count_[li] = 0;
          }
          link_flows_[li].push_back(static_cast<std::int32_t>(i));
          ++link_count_[li];
        }
      }
      std::sort(touched_.begin(), touched_.end());
      std::size_t unfixed = flows_.size();
      while (unfixed > 0) {
        double best = std::numeric_limits<double>::infinity();
        for (const auto l : touched_) {
          const auto li = static_cast<std::size_t>(l);
          if (link_count_[li] > 0) best = std::min(best, link_cap_[li] / link_count_[li]);
        }
        const double cutoff = best * (1.0 + 1e-12);
        for (const auto l : touched_) {
          const auto li = static_cast<std::size_t>(l);
          if (link_count_[li] == 0 || link_cap_[li] / link_count_[li] > cutoff) continue;
          for (const auto fi : link_flows_[li]) {
            ActiveFlow& f = flows_[static_cast<std::size_t>(fi)];
            if (f.rate >= 0) continue;
            f.rate = best;
            --unfixed;
            for (const auto k : f.route->links) {
              const auto ki = static_cast<std::size_t>(k);
              link_cap_[ki] = std::max(0.0, link_cap_[ki] - best);
              --link_count_[ki];
            }
          }
        }
      }
      for (const auto l : touched_) link_flows_[static_cast<std::size_t>(l)].clear();
    }
    double next = std::numeric_limits<double>::infinity();
    for (const auto& f : flows_) next = std::min(next, now + f.remaining / f.rate);
    if (next < std::numeric_limits<double>::infinity())
      push(next, EventKind::flow_tick, static_cast<std::int64_t>(version_));
  }

  const TaskGraph& g_;
  const Topology& topo_;
  EngineOptions opt_;
  RunResult result_;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::uint64_t seq_ = 0;
  std::uint64_t version_ = 0;
  double last_ = 0;
  std::vector<std::int64_t> waiting_;
  std::vector<ActiveFlow> flows_;
  std::map<std::pair<std::int64_t, std::int64_t>, Route> routes_;
  std::vector<double> link_cap_;
  std::vector<double> link_count_;
  std::vector<std::vector<std::int32_t>> link_flows_;
  std::vector<std::int32_t> touched_;
};

}  // namespace

RunResult run(const TaskGraph& g, const Topology& topo, const EngineOptions& options) {
  return Run(g, topo, options).go();
}

}  // namespace headroom::sim
