// The discrete-event engine: runs a DAG of tasks (Boost.Graph) on a topology. A task is a delay (compute,
// or a collective already timed on the topology) or a flow (bytes from one GPU to another along its route).
// A task starts when every predecessor has finished. A flow first waits its route's latency, then moves
// its bytes at a rate set by max-min fair sharing of every link it crosses with the other flows active at
// that moment (progressive filling, Bertsekas & Gallager, "Data Networks", Sec. 6.5.2); rates are
// recomputed whenever the set of active flows changes.
//
// Events sit in a priority queue ordered by (time, sequence number); the sequence number is the order of
// insertion, so equal-time events always run in the same order and a run is bit-for-bit reproducible.
#pragma once

#include <cstdint>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "headroom/simulator/topology.hpp"

namespace headroom::sim {

enum class TaskKind { delay, flow };

// What a task stands for, for reports and the trace; the engine ignores it.
enum class OpKind : std::uint8_t { compute_fwd, compute_bwd, tp_comm, pp_send, dp_comm, optimizer, transfer, join };

// The stream a stage's task runs on, as the trace shows it (one row per lane and stage).
enum class Lane : std::int32_t { compute = 0, tp_cp = 1, pp_send = 2, dp = 3, optimizer = 4 };
inline constexpr int kLanes = 5;

struct Task {
  TaskKind kind = TaskKind::delay;
  double duration_s = 0;     // delay
  std::int64_t src_gpu = 0;  // flow
  std::int64_t dst_gpu = 0;  // flow
  double bytes = 0;          // flow
  bool pipelined = false;    // flow: follows another send of the same member without a new start-up latency
  // labels
  OpKind op = OpKind::transfer;
  std::int32_t stage = -1;
  std::int32_t microbatch = -1;
  std::int32_t chunk = 0;  // virtual pipeline chunk (interleaved) or layer
  Lane lane = Lane::compute;
};

using TaskGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, Task>;
using TaskId = boost::graph_traits<TaskGraph>::vertex_descriptor;

// Adds a task and edges from each of `deps`; returns its id.
TaskId add_task(TaskGraph& g, const Task& t, const std::vector<TaskId>& deps = {});

struct EngineOptions {
  bool contention = true;  // false: every flow gets its route's narrowest link alone (no sharing)
};

struct TaskTiming {
  double start_s = 0;  // all predecessors done
  double end_s = 0;
};

struct RunResult {
  std::vector<TaskTiming> timing;  // by task id
  double makespan_s = 0;
  std::int64_t events = 0;        // events popped from the queue
  std::int64_t rate_updates = 0;  // max-min recomputations
};

// Throws Error if the graph has a cycle (some task never becomes ready).
[[nodiscard]] RunResult run(const TaskGraph& g, const Topology& topo, const EngineOptions& options = {});

}  // namespace headroom::sim
