// One training step as a task DAG on the topology: per pipeline stage, the schedule's forward and backward
// passes layer by layer (compute, then the layer's TP collectives), CP ring exchange beside attention, PP
// send/recv as flows between the stages, DP/FSDP collectives on a communication lane with their overlap,
// and the optimizer step.
//
// Scale choice: one representative GPU per pipeline stage (TP rank 0 of DP replica 0) is simulated task by
// task; the TP, CP and DP collectives of its groups are run once each on the topology (collectives.hpp,
// ring, every transfer of the group) and cached, then enter the step as delays. PP sends move the bytes of
// all t·c GPUs of the replica as flows, so stages that share NICs contend. This keeps a 1,024-GPU step at a
// few tens of thousands of tasks.
//
// Compute costs are the throughput model's (throughput.hpp: GEMM and attention efficiencies, HBM passes);
// links are the cluster's datasheet numbers times the coefficients' achieved fractions, so that without
// contention the simulator and the analytical model agree.
#pragma once

#include <cstdint>
#include <vector>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/simulator/engine.hpp"
#include "headroom/simulator/topology.hpp"

namespace headroom::sim {

// What one step simulation may build, in tasks of its graph (step_task_bound): a task costs about 230 bytes and 0.4 us
// with its events, so 10^7 is about 2.5 GB; a Chrome trace of it costs about 2.5 kB a task more (the JSON document
// before it is written), so 10^6 with one.
inline constexpr double kMaxStepTasks = 1e7;
inline constexpr double kMaxTracedStepTasks = 1e6;

struct StepOptions {
  EngineOptions engine;
  std::int64_t nics_per_node = 0;    // 0: one per GPU
  double max_tasks = kMaxStepTasks;  // kMaxTracedStepTasks when the step is traced
};

// At most how many tasks the step graph of `l` holds, from the layout alone: per pipeline stage and pass (2m of them
// per virtual stage) a compute task per layer (and a TP task with TP) and up to 4 more (FSDP gather, marker, split, PP
// send), per stage boundary and pass t·c flows and a join, per stage 3 (gather, sync, optimizer).
[[nodiscard]] double step_task_bound(const ModelSpec& m, const Layout& l);

struct MemoryPoint {
  double time_s = 0;
  double bytes = 0;               // activations held
  std::int32_t microbatches = 0;  // micro-batch chunks whose activations are held
};

struct StageReport {
  std::int64_t stage = 0;
  double busy_s = 0;  // compute and blocking TP/CP communication of the stage's GPU
  double idle_s = 0;  // step time − busy
  double peak_activation_bytes = 0;
  std::int32_t peak_microbatches = 0;
  std::vector<MemoryPoint> memory;  // step function, one point per change
};

struct StepResult {
  double step_time_s = 0;
  double bubble_s = 0;         // time from start to the last backward anywhere, beyond the busiest stage's work
  double bubble_fraction = 0;  // bubble / (busy of that stage before it): (p − 1)/m for uniform 1F1B
  std::vector<StageReport> stages;
  TaskGraph graph;  // the simulated DAG (for the trace)
  RunResult run;
  std::int64_t gpus = 0;
  std::int64_t tp = 1;
};

// The layout must be valid for the model (LoRA included: frozen base, trainable adapters). Throws Error, also when
// step_task_bound is above options.max_tasks (before anything is built).
[[nodiscard]] StepResult simulate_step(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                       const PerfCoefficients& k, const StepOptions& o = {});

}  // namespace headroom::sim
