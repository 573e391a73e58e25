#include "headroom/simulator/trace.hpp"

#include <string>

#include "headroom/core/atomic_file.hpp"

namespace headroom::sim {
namespace {

const char* lane_name(Lane lane) {
  switch (lane) {
    case Lane::compute: return "compute";
    case Lane::tp_cp: return "TP/CP collectives";
    case Lane::pp_send: return "PP send";
    case Lane::dp: return "DP collectives";
    case Lane::optimizer: return "optimizer";
  }
  return "?";
}

std::string op_name(const Task& t) {
  const std::string mb = t.microbatch >= 0 ? " mb" + std::to_string(t.microbatch) : "";
  const std::string chunk = t.chunk > 0 ? " c" + std::to_string(t.chunk) : "";
  switch (t.op) {
    case OpKind::compute_fwd: return "F" + mb + chunk;
    case OpKind::compute_bwd: return "B" + mb + chunk;
    case OpKind::tp_comm: return "TP" + mb;
    case OpKind::pp_send: return "send" + mb + chunk;
    case OpKind::dp_comm: return "DP grad sync";
    case OpKind::optimizer: return "optimizer";
    default: return "transfer";
  }
}

}  // namespace

nlohmann::json chrome_trace(const StepResult& r) {
  nlohmann::json events = nlohmann::json::array();
  const auto us = [](double s) { return s * 1e6; };
  for (const auto& st : r.stages) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", st.stage},
                      {"tid", 0},
                      {"args", {{"name", "stage " + std::to_string(st.stage)}}}});
    for (int lane = 0; lane < kLanes; ++lane)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", st.stage},
                        {"tid", lane},
                        {"args", {{"name", lane_name(static_cast<Lane>(lane))}}}});
    for (const auto& m : st.memory)
      events.push_back({{"name", "activations"},
                        {"ph", "C"},
                        {"pid", st.stage},
                        {"tid", 0},
                        {"ts", us(m.time_s)},
                        {"args", {{"GiB", m.bytes / (1024.0 * 1024.0 * 1024.0)}, {"microbatches", m.microbatches}}}});
  }
  const TaskGraph& g = r.graph;
  for (std::size_t i = 0; i < boost::num_vertices(g); ++i) {
    const Task& t = g[i];
    if (t.stage < 0 || t.op == OpKind::join) continue;
    if (t.kind == TaskKind::flow && t.src_gpu % std::max<std::int64_t>(1, r.tp) != 0) continue;  // one flow per send
    const TaskTiming& tm = r.run.timing[i];
    // A PP send is a join of its flows: shown from the sender's end of compute to arrival.
    events.push_back({{"name", op_name(t)},
                      {"cat", lane_name(t.lane)},
                      {"ph", "X"},
                      {"pid", t.stage},
                      {"tid", static_cast<int>(t.lane)},
                      {"ts", us(tm.start_s)},
                      {"dur", us(tm.end_s - tm.start_s)},
                      {"args", {{"microbatch", t.microbatch}, {"chunk", t.chunk}}}});
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ms"},
          {"otherData", {{"step_time_s", r.step_time_s}, {"gpus", r.gpus}, {"generator", "headroom simulate"}}}};
}

void write_chrome_trace(const StepResult& r, const std::filesystem::path& path) {
  write_file_atomically(path, chrome_trace(r).dump());
}

}  // namespace headroom::sim
