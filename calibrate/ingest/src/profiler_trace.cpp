// PyTorch profiler (Kineto) Chrome traces: GEMM, attention and collective kernel timings with their shapes.
#include <algorithm>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "headroom/ingest/measured_runs.hpp"
#include "headroom/core/error.hpp"

namespace headroom::calibrate {
namespace {

using nlohmann::json;

// The CPU op a kernel was launched from: Kineto gives GPU kernels the "External id" of that op.
struct LaunchingOp {
  std::string name;
  const json* dims = nullptr;   // "Input Dims" (record_shapes=True), in the trace
  const json* types = nullptr;  // "Input type"
};

bool is_gemm_op(std::string_view name) {
  return name == "aten::mm" || name == "aten::addmm" || name == "aten::bmm" || name == "aten::baddbmm";
}
// Attention ops of torch.nn.functional.scaled_dot_product_attention's backends (forward and backward);
// inputs are [batch, heads, seq, head_dim] (aten/src/ATen/native/transformers/attention.cpp).
bool is_attention_op(std::string_view name) {
  for (const std::string_view op :
       {"aten::_scaled_dot_product_flash_attention", "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention"})
    if (name == op || (name.starts_with(op) && name.substr(op.size()) == "_backward")) return true;
  return false;
}

std::vector<std::int64_t> shape(const json* dims, std::size_t i) {
  if (dims == nullptr || !dims->is_array() || i >= dims->size() || !(*dims)[i].is_array()) return {};
  std::vector<std::int64_t> s;
  for (const auto& d : (*dims)[i]) {
    if (!d.is_number_integer() || d.get<std::int64_t>() <= 0) return {};
    s.push_back(d.get<std::int64_t>());
  }
  return s;
}

std::string type_of(const json* types, std::size_t i) {
  return types != nullptr && types->is_array() && i < types->size() && (*types)[i].is_string()
             ? (*types)[i].get<std::string>()
             : std::string();
}

// (m, n, k, batch) of a GEMM op from its input shapes: mm [m,k]·[k,n]; addmm (bias, [m,k], [k,n]); bmm and
// baddbmm the same with a leading batch.
std::optional<GemmSample> gemm_of(const LaunchingOp& op) {
  const bool add = op.name == "aten::addmm" || op.name == "aten::baddbmm";
  const auto a = shape(op.dims, add ? 1 : 0), b = shape(op.dims, add ? 2 : 1);
  const bool batched = op.name == "aten::bmm" || op.name == "aten::baddbmm";
  const std::size_t rank = batched ? 3 : 2;
  if (a.size() != rank || b.size() != rank || a[rank - 1] != b[rank - 2]) return std::nullopt;
  GemmSample g;
  g.batch = batched ? a[0] : 1;
  g.m = a[rank - 2];
  g.k = a[rank - 1];
  g.n = b[rank - 1];
  g.dtype = type_of(op.types, add ? 1 : 0);
  return g;
}

std::optional<AttentionSample> attention_of(const LaunchingOp& op) {
  const bool backward = op.name.ends_with("_backward");
  // Forward inputs: query, key, value, ...; backward: grad_out, query, key, value, ...
  const std::size_t q = backward ? 1 : 0;
  const auto qs = shape(op.dims, q), ks = shape(op.dims, q + 1);
  if (qs.size() != 4 || ks.size() != 4) return std::nullopt;
  AttentionSample s;
  s.batch = qs[0];
  s.heads = qs[1];
  s.seq_q = qs[2];
  s.head_dim = qs[3];
  s.seq_k = ks[2];
  s.backward = backward;
  return s;
}

double seconds_of(const json& e) {
  const auto it = e.find("dur");
  return it != e.end() && it->is_number() && it->get<double>() > 0 ? it->get<double>() * 1e-6 : 0.0;  // µs
}

std::int64_t integer_arg(const json& args, const char* key) {
  const auto it = args.find(key);
  return it != args.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

std::string string_arg(const json& args, const char* key) {
  const auto it = args.find(key);
  return it != args.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool is_collective_kernel(const std::string& name) {
  return name.starts_with("ncclKernel") || name.starts_with("ncclDevKernel") || name.starts_with("rcclKernel");
}

}  // namespace

TraceKernels parse_profiler_trace(const json& trace, std::string_view where) {
  const json* events = nullptr;
  if (trace.is_object() && trace.contains("traceEvents") && trace["traceEvents"].is_array())
    events = &trace["traceEvents"];
  else if (trace.is_array())
    events = &trace;
  if (!events) throw Error(std::string(where) + ": no traceEvents array (a PyTorch profiler Chrome trace)");
  TraceKernels out;
  if (trace.is_object() && trace.contains("deviceProperties") && trace["deviceProperties"].is_array() &&
      !trace["deviceProperties"].empty() && trace["deviceProperties"][0].is_object())
    out.device = string_arg(trace["deviceProperties"][0], "name");

  std::unordered_map<std::int64_t, LaunchingOp> ops;
  for (const auto& e : *events) {
    if (!e.is_object() || string_arg(e, "cat") != "cpu_op" || !e.contains("args") || !e["args"].is_object()) continue;
    const auto& args = e["args"];
    const auto name = string_arg(e, "name");
    if (!is_gemm_op(name) && !is_attention_op(name)) continue;
    const auto id = integer_arg(args, "External id");
    if (id == 0) continue;
    const auto dims = args.find("Input Dims"), types = args.find("Input type");
    ops[id] = {name, dims == args.end() ? nullptr : &*dims, types == args.end() ? nullptr : &*types};
  }

  // Kernel time per launching op (an op may launch several kernels: sum them).
  std::unordered_map<std::int64_t, double> op_seconds;
  for (const auto& e : *events) {
    if (!e.is_object() || string_arg(e, "cat") != "kernel" || !e.contains("args") || !e["args"].is_object()) continue;
    const auto& args = e["args"];
    const auto name = string_arg(e, "name");
    if (is_collective_kernel(name)) {
      CollectiveSample c;
      c.collective = string_arg(args, "Collective name");
      c.in_elements = integer_arg(args, "In msg nelems");
      c.out_elements = integer_arg(args, "Out msg nelems");
      c.group_size = integer_arg(args, "Group size");
      c.dtype = string_arg(args, "dtype");
      c.seconds = seconds_of(e);
      if (!c.collective.empty() && c.seconds > 0) out.collectives.push_back(std::move(c));
      continue;
    }
    const auto id = integer_arg(args, "External id");
    if (ops.contains(id)) op_seconds[id] += seconds_of(e);
  }
  std::vector<std::int64_t> ids;
  ids.reserve(op_seconds.size());
  for (const auto& [id, s] : op_seconds) ids.push_back(id);
  std::sort(ids.begin(), ids.end());  // trace order, independent of the hash map's
  for (const auto id : ids) {
    const auto& op = ops.at(id);
    if (is_gemm_op(op.name)) {
      if (auto g = gemm_of(op)) g->seconds = op_seconds[id], out.gemms.push_back(*g);
    } else if (auto a = attention_of(op)) {
      a->seconds = op_seconds[id];
      out.attention.push_back(*a);
    }
  }
  return out;
}

}  // namespace headroom::calibrate
