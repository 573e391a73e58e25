// headroom.Planner: the estimator called directly, not through argv and JSON. Specs, coefficients and the
// per-cluster context are resolved once by the constructor, exactly as the command line resolves its flags
// (cli_common.hpp resolve); each estimate then builds the layout (build_layout), prices it
// and returns typed objects whose fields equal `headroom estimate --json`'s.
#include "planner.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <thread>
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "cli.hpp"
#include "cli_common.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/mtsl.hpp"
#include "headroom/estimator/plan.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/estimator/throughput.hpp"

namespace py = pybind11;

namespace headroom::python {
namespace {

// The library's message with its fields named as keywords (tp, not --tp).
[[noreturn]] void raise(const Error& e) { throw py::value_error(cli::one_line(e.message(FieldNames::keywords))); }

// Python's text of a value, for errors.
std::string shown(const py::handle& v) { return py::repr(v).cast<std::string>().substr(0, 60); }

bool is_bool(const py::handle& v) {
  return py::isinstance<py::bool_>(v) || (py::hasattr(v, "dtype") && py::hasattr(v, "item") &&
                                          py::str(v.attr("dtype").attr("kind")).cast<std::string>() == "b");
}

// A keyword's value as its knob takes it (knobs.hpp check_knob): integers must be Python integers (or NumPy's),
// flags booleans, numbers real, names strings; anything else is a ValueError naming the keyword and what is valid.
KnobValue knob_value(const Knob& k, const py::handle& v) {
  const std::string_view name = k.name;
  switch (k.type) {
    case KnobType::count:
    case KnobType::whole: {
      if (PyLong_CheckExact(v.ptr()) != 0) {  // the common case, without the attribute lookups below
        int overflow = 0;
        const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
        if (overflow != 0 || x > kMaxInteger)
          throw Error(field(name) + " " + shown(v) + " is too large (at most 10^12)");
        return check_knob(k, static_cast<std::int64_t>(x));
      }
      if (is_bool(v) || !py::hasattr(v, "__index__")) throw Error(field(name) + " " + shown(v) + " is not an integer");
      py::int_ i;
      try {
        i = py::int_(v.attr("__index__")());  // NumPy: an array of more than one value has __index__ but refuses
      } catch (const py::error_already_set&) {
        throw Error(field(name) + " " + shown(v) + " is not an integer");
      }
      int overflow = 0;
      const long long x = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
      if (overflow != 0 || x > kMaxInteger) throw Error(field(name) + " " + shown(v) + " is too large (at most 10^12)");
      return check_knob(k, static_cast<std::int64_t>(x));
    }
    case KnobType::flag:
      if (PyBool_Check(v.ptr()) != 0) return v.ptr() == Py_True;
      if (!is_bool(v)) throw Error(field(name) + " " + shown(v) + " is not True or False");
      return check_knob(k, v.cast<bool>());
    case KnobType::number:
      if (is_bool(v) ||
          !(py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v) || py::hasattr(v, "__float__")) ||
          py::isinstance<py::str>(v))
        throw Error(field(name) + " " + shown(v) + " is not a number");
      return check_knob(k, PyFloat_AsDouble(v.ptr()));
    case KnobType::list:
      if (!py::isinstance<py::str>(v)) {
        if (!py::isinstance<py::list>(v) && !py::isinstance<py::tuple>(v))
          throw Error(field(name) + " " + shown(v) + " is not names (a string, or a list or tuple of strings)");
        std::string joined;
        for (const py::handle item : py::iter(v)) {
          if (!py::isinstance<py::str>(item)) throw Error(field(name) + " " + shown(v) + " is not names (strings)");
          joined += (joined.empty() ? "" : ",") + item.cast<std::string>();
        }
        return check_knob(k, joined);
      }
      return check_knob(k, v.cast<std::string>());
    case KnobType::choice:
    case KnobType::text:
      if (!py::isinstance<py::str>(v))
        throw Error(field(name) + " " + shown(v) + " is not a string" +
                    (k.type == KnobType::choice ? " (valid: " + std::string(k.choices) + ")" : ""));
      return check_knob(k, v.cast<std::string>());
  }
  return check_knob(k, v.cast<std::string>());
}

// Every knob's name, for the TypeError of an unknown keyword.
std::string knob_names() {
  std::string names;
  for (const Knob& k : knobs()) names += (names.empty() ? "" : ", ") + std::string(k.name);
  return names;
}

// The keywords of a layout (knobs.hpp: a knob's name or an older one; None = not given). An unknown keyword is a
// TypeError naming it, as Python's own; a bad value a ValueError.
KnobSettings knob_settings(const py::kwargs& kwargs) {
  KnobSettings k;
  for (const auto& [key, value] : kwargs) {
    const auto name = key.cast<std::string_view>();
    const Knob* x = find_knob(name);
    if (x == nullptr)
      throw py::type_error("unexpected keyword '" + std::string(name) + "' (layout keywords: " + knob_names() + ")");
    if (value.is_none()) continue;
    if (k.given(x->id))
      throw py::type_error("keyword " + std::string(x->name) + " given twice (as " + std::string(name) + ")");
    try {
      k.set(x->id, knob_value(*x, value));
    } catch (const Error& e) {
      raise(e);
    }
  }
  return k;
}

}  // namespace

Planner::Planner(const std::string& model, const std::string& cluster, const std::string& gpu,
                 const std::string& framework, const std::string& profile, const std::string& data_dir) {
  try {
    specs_ = resolve_plan({model, gpu, cluster, framework, profile, data_dir, {}});
    context_.emplace(specs_);
  } catch (const Error& e) {
    raise(e);
  }
}

Layout Planner::layout(const KnobSettings& k) const { return plan_layout(specs_, k); }

py::object Planner::estimate(const KnobSettings& k) const {
  try {
    return py::cast(headroom::estimate(specs_, *context_, layout(k)));
  } catch (const Error& e) {
    raise(e);
  }
}

py::object Planner::mtsl(KnobSettings k) const {
  try {
    if (k.given(KnobId::seq)) throw Error(field("seq") + " is what mtsl searches: leave it out");
    const std::int64_t cp = k.integer(KnobId::cp, 1);
    k.set(KnobId::seq, cp > 1 ? 2 * cp : 1);  // mtsl searches s: any valid one
    const Layout l = layout(k);
    const MtslResult r = max_trainable_seq(specs_.model, specs_.cluster, l, specs_.framework.residual);
    py::dict d;        // the keys of `headroom mtsl --json`
    d["gbs"] = l.gbs;  // the batch the MTSL holds: given, or default_microbatches per pipeline
    d["microbatches"] = l.microbatches();
    d["gbs_given"] = k.given(KnobId::gbs);
    d["mtsl_tokens"] = r.tokens;
    const MtslInterval band =
        mtsl_interval(specs_.model, specs_.cluster, l, specs_.framework.residual, specs_.framework.memory_band);
    d["mtsl_tokens_interval"] =
        band.known ? py::object(py::cast(std::vector<std::int64_t>{band.low, band.high})) : py::object(py::none());
    d["risk"] = "nominal";
    d["interval_source"] =
        band_source(specs_.framework.memory_band, "framework " + specs_.framework.name + "'s memory model", "MTSL");
    d["granularity_tokens"] = r.granularity;
    d["binding_stage"] = r.binding_stage;
    d["binding_term"] = std::string(r.binding_term);
    d["peak_gib"] = r.peak_bytes / kGiB;
    d["next_peak_gib"] = r.next_peak_bytes / kGiB;
    d["capacity_gib"] = r.capacity_bytes / kGiB;
    d["capped"] = r.capped;
    d["method"] = r.closed_form ? "closed form" : "bisection";
    return d;
  } catch (const Error& e) {
    raise(e);
  }
}

// What estimate_many writes per row, into the NumPy arrays' buffers.
struct Columns {
  double *peak, *capacity, *margin, *step, *tokens, *tflops, *mfu;
  bool* fits;
  char32_t* verdict;  // '<U9': kVerdictChars UCS-4 characters a row
};

namespace {

// NumPy through its Python API and the buffer protocol only: the system pybind11 (2.10) predates NumPy 2's
// descriptor layout, so its numpy.h would compute wrong strides.
struct NumpyColumn {
  py::object array;
  void* data = nullptr;
};

NumpyColumn numpy_empty(std::size_t n, const char* dtype) {
  NumpyColumn c{py::module_::import("numpy").attr("empty")(n, dtype), nullptr};
  c.data = py::buffer(c.array).request(true).ptr;
  return c;
}

// One integer knob varied row by row in estimate_many.
struct IntColumn {
  KnobId id{};
  py::object values;  // a C-contiguous int64 array, kept alive while `data` is read
  const std::int64_t* data = nullptr;
};

bool integer_knob(const Knob& k) { return k.type == KnobType::count || k.type == KnobType::whole; }

// A column of an integer knob as int64. A NumPy array of integers is taken as it is; any other column is checked
// element by element as the keyword would be for one layout (a float, even 2.0, a bool, NaN, a string is a ValueError
// naming its row and the keyword).
py::object integer_column(const Knob& k, const py::handle& value) {
  const py::module_ np = py::module_::import("numpy");
  if (py::hasattr(value, "dtype") && py::hasattr(value, "shape")) {
    if (py::len(value.attr("shape")) != 1)
      throw py::value_error("column '" + std::string(k.name) + "' is not one-dimensional");
    const std::string kind = py::str(value.attr("dtype").attr("kind")).cast<std::string>();
    // Signed integers convert exactly; unsigned ones up to int64's maximum. Values past 10^12 are refused row by row
    // (estimate_many's on_error), as any other invalid row.
    const bool fits =
        kind == "i" || value.attr("size").cast<std::size_t>() == 0 || value.attr("max")().cast<double>() < 9.2e18;
    if ((kind == "i" || kind == "u") && fits) return np.attr("ascontiguousarray")(value, "int64");
  }
  const py::list items = py::hasattr(value, "tolist") ? py::list(value.attr("tolist")())
                                                      : py::list(py::reinterpret_borrow<py::object>(value));
  for (std::size_t i = 0; i < items.size(); ++i) {
    try {
      (void)knob_value(k, items[i]);
    } catch (const Error& e) {
      throw py::value_error("row " + std::to_string(i) + ": " + cli::one_line(e.message(FieldNames::keywords)));
    }
  }
  return np.attr("ascontiguousarray")(items, "int64");
}

std::size_t column_length(const py::handle& v) {
  return py::isinstance<py::str>(v) || !py::hasattr(v, "__len__") ? 0 : py::len(v);
}

constexpr std::size_t kVerdictChars = 9;

void write_verdict(char32_t* out, std::string_view v) {
  for (std::size_t c = 0; c < kVerdictChars; ++c) out[c] = c < v.size() ? static_cast<char32_t>(v[c]) : U'\0';
}

// estimate_many's input: the integer knobs given as columns (they may vary per row) and the other keywords, one
// value for every row (a scalar).
struct Inputs {
  std::vector<IntColumn> ints;
  py::kwargs scalars;
  std::size_t rows = 1;
};

Inputs read_inputs(const py::dict& columns) {
  Inputs in;
  std::size_t n = 0;
  for (const auto& [key, value] : columns) {
    const auto name = key.cast<std::string_view>();
    const Knob* k = find_knob(name);
    const std::size_t len = column_length(value);
    if (k == nullptr || !integer_knob(*k) || len == 0) {
      in.scalars[key] = value;  // checked, and an unknown name refused, by knob_settings
      continue;
    }
    if (n != 0 && len != n)
      throw py::value_error("column '" + std::string(name) + "' has " + std::to_string(len) + " values, another " +
                            std::to_string(n));
    n = len;
    IntColumn c{k->id, integer_column(*k, value), nullptr};
    c.data = static_cast<const std::int64_t*>(py::buffer(c.values).request().ptr);
    in.ints.push_back(std::move(c));
  }
  in.rows = std::max<std::size_t>(1, n);  // every column a scalar: one row
  return in;
}

// The NumPy arrays estimate_many returns, keyed like estimate --json's paths.
struct Outputs {
  NumpyColumn peak, capacity, margin, step, tokens, tflops, mfu, fits, verdict;

  explicit Outputs(std::size_t n)
      : peak(numpy_empty(n, "float64")),
        capacity(numpy_empty(n, "float64")),
        margin(numpy_empty(n, "float64")),
        step(numpy_empty(n, "float64")),
        tokens(numpy_empty(n, "float64")),
        tflops(numpy_empty(n, "float64")),
        mfu(numpy_empty(n, "float64")),
        fits(numpy_empty(n, "bool")),
        verdict(numpy_empty(n, "<U9")) {}

  [[nodiscard]] Columns columns() const {
    const auto f64 = [](const NumpyColumn& c) { return static_cast<double*>(c.data); };
    return {f64(peak),
            f64(capacity),
            f64(margin),
            f64(step),
            f64(tokens),
            f64(tflops),
            f64(mfu),
            static_cast<bool*>(fits.data),
            static_cast<char32_t*>(verdict.data)};
  }

  [[nodiscard]] py::dict to_dict() const {
    py::dict d;
    d["memory.peak_gib"] = peak.array;
    d["memory.capacity_gib"] = capacity.array;
    d["memory.margin_gib"] = margin.array;
    d["memory.fits"] = fits.array;
    d["memory.verdict"] = verdict.array;
    d["perf.step_time_s"] = step.array;
    d["perf.tokens_per_s"] = tokens.array;
    d["perf.tflops_per_gpu"] = tflops.array;
    d["perf.mfu"] = mfu.array;
    return d;
  }
};

// run(part) for every part in [0, parts), on as many threads, the interpreter released.
template <class Run>
void run_parts(std::size_t parts, const Run& run) {
  py::gil_scoped_release release;
  std::vector<std::thread> pool;
  for (std::size_t part = 1; part < parts; ++part) pool.emplace_back(run, part);
  run(0);
  for (auto& t : pool) t.join();
}

}  // namespace

py::dict Planner::estimate_many(const py::dict& columns, const std::string& on_error, int threads) const {
  if (on_error != "raise" && on_error != "nan") throw py::value_error("on_error '" + on_error + "': valid: raise, nan");
  if (threads < 0) throw py::value_error("threads " + std::to_string(threads) + ": valid: 0 (every core) or more");
  const Inputs in = read_inputs(columns);
  const std::size_t n = in.rows;
  KnobSettings base = knob_settings(in.scalars);
  for (const IntColumn& c : in.ints) base.set(c.id, c.data[0]);  // a value, so that the request sees it given
  LayoutRequest request_base;
  try {
    request_base = layout_request(base, specs_.framework);
  } catch (const Error& e) {
    raise(e);
  }
  const Outputs outputs(n);
  const Columns out = outputs.columns();
  // Rows in parallel (the estimator is pure); the first error by row is kept.
  const std::size_t workers = threads > 0 ? static_cast<std::size_t>(threads)
                                          : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 64);
  const std::size_t chunk = std::max<std::size_t>(4096, (n + workers - 1) / workers);
  std::vector<std::pair<std::size_t, std::string>> errors((n + chunk - 1) / chunk, {n, ""});
  run_parts(errors.size(), [&](std::size_t part) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    LayoutRequest r = request_base;
    for (std::size_t i = part * chunk; i < std::min(n, (part + 1) * chunk); ++i) {
      try {
        for (const IntColumn& c : in.ints) {
          const std::int64_t v = c.data[i];
          if (v < (knob(c.id).type == KnobType::whole ? 0 : 1) || v > kMaxInteger)
            (void)check_knob(knob(c.id), v);  // the Error naming it
          *integer_field(r, c.id) = v;
        }
        price_row(r, out, i);
      } catch (const Error& e) {
        if (errors[part].first == n) errors[part] = {i, cli::one_line(e.message(FieldNames::keywords))};
        if (on_error == "raise") return;
        out.peak[i] = out.capacity[i] = out.margin[i] = out.step[i] = out.tokens[i] = out.tflops[i] = out.mfu[i] = nan;
        out.fits[i] = false;
        write_verdict(out.verdict + i * kVerdictChars, "invalid");
      }
    }
  });
  if (on_error == "raise")
    for (const auto& [row, message] : errors)
      if (row != n) throw py::value_error("row " + std::to_string(row) + ": " + message);
  return outputs.to_dict();
}

void Planner::price_row(const LayoutRequest& r, const Columns& out, std::size_t i) const {
  if (r.seq == 0) throw Error(field("seq") + " is required (tokens per sequence)");
  const Layout l = build_layout(specs_.model, specs_.framework, r);  // sizes checked there
  validate_on_cluster(specs_.model, l, specs_.cluster);
  const double peak = peak_memory_bytes(specs_.model, specs_.cluster, l, specs_.framework.residual);
  const double capacity = specs_.cluster.gpu.usable_memory_bytes;
  const PerfEstimate e = estimate_perf(specs_.model, context_->perf, l);
  out.peak[i] = peak / kGiB, out.capacity[i] = capacity / kGiB, out.margin[i] = (capacity - peak) / kGiB;
  out.fits[i] = peak <= capacity;
  out.step[i] = e.step_time_s, out.tokens[i] = e.tokens_per_s, out.tflops[i] = e.tflops_per_gpu, out.mfu[i] = e.mfu;
  write_verdict(out.verdict + i * kVerdictChars,
                to_string(memory_verdict(peak, capacity, specs_.framework.memory_band)));
}

void bind_planner(py::module_& m) {
  // The library's one result type (plan.hpp), its fields named as estimate --json's; repr shows them, pickling
  // carries its JSON document.
  const auto as_json = [](const auto& x) { return to_json(x); };
  py::class_<StageResult>(m, "Stage", "Memory of one pipeline stage, bytes per GPU (integers, as in the JSON).")
      .def_readonly("stage", &StageResult::stage)
      .def_readonly("params", &StageResult::params)
      .def_readonly("grads", &StageResult::grads)
      .def_readonly("optimizer", &StageResult::optimizer)
      .def_readonly("activations", &StageResult::activations)
      .def_readonly("residual", &StageResult::residual)
      .def_readonly("fp8_copies_and_scales", &StageResult::fp8_copies_and_scales)
      .def_readonly("host", &StageResult::host)
      .def_readonly("total", &StageResult::total)
      .def("__repr__", [](const StageResult& x) {
        return "Stage(stage=" + std::to_string(x.stage) + ", params=" + std::to_string(x.params) +
               ", grads=" + std::to_string(x.grads) + ", optimizer=" + std::to_string(x.optimizer) +
               ", activations=" + std::to_string(x.activations) + ", residual=" + std::to_string(x.residual) +
               ", total=" + std::to_string(x.total) + ")";
      });
  py::class_<MemoryResult>(m, "Memory", "The memory part of an estimate (`estimate --json`'s `memory`).")
      .def_readonly("paper_total_gib", &MemoryResult::paper_total_gib)
      .def_readonly("peak_gib", &MemoryResult::peak_gib)
      .def_readonly("peak_stage", &MemoryResult::peak_stage)
      .def_readonly("capacity_gib", &MemoryResult::capacity_gib)
      .def_readonly("margin_gib", &MemoryResult::margin_gib)
      .def_readonly("verdict", &MemoryResult::verdict)
      .def_readonly("peak_gib_interval", &MemoryResult::peak_gib_interval)
      .def_readonly("interval_source", &MemoryResult::interval_source)
      .def_readonly("stages", &MemoryResult::stages)
      .def("__repr__", [](const MemoryResult& x) {
        return "Memory(peak_gib=" + py::repr(py::float_(x.peak_gib)).cast<std::string>() + ", verdict='" + x.verdict +
               "', stages=" + std::to_string(x.stages.size()) + ")";
      });
  py::class_<StepBreakdown>(m, "Breakdown", "Where the step time goes, seconds (`perf.breakdown`).")
      .def_readonly("gemm_s", &StepBreakdown::gemm_s)
      .def_readonly("attention_s", &StepBreakdown::attention_s)
      .def_readonly("elementwise_s", &StepBreakdown::elementwise_s)
      .def_property_readonly("compute_s", &StepBreakdown::compute_s)
      .def_readonly("overhead_s", &StepBreakdown::overhead_s)
      .def_readonly("tp_comm_s", &StepBreakdown::tp_comm_s)
      .def_readonly("cp_comm_s", &StepBreakdown::cp_comm_s)
      .def_readonly("pp_comm_s", &StepBreakdown::pp_comm_s)
      .def_readonly("ep_comm_s", &StepBreakdown::ep_comm_s)
      .def_readonly("dp_comm_s", &StepBreakdown::dp_comm_s)
      .def_readonly("bubble_s", &StepBreakdown::bubble_s)
      .def_readonly("optimizer_s", &StepBreakdown::optimizer_s)
      .def_readonly("offload_s", &StepBreakdown::offload_s)
      .def_readonly("slowest_stage", &StepBreakdown::slowest_stage);
  py::class_<PerfResult>(m, "Perf", "The speed part of an estimate (`estimate --json`'s `perf`).")
      .def_readonly("step_time_s", &PerfResult::step_time_s)
      .def_readonly("step_time_s_interval", &PerfResult::step_time_s_interval)
      .def_readonly("interval_source", &PerfResult::interval_source)
      .def_readonly("tokens_per_s", &PerfResult::tokens_per_s)
      .def_readonly("tflops_per_gpu", &PerfResult::tflops_per_gpu)
      .def_readonly("mfu", &PerfResult::mfu)
      .def_readonly("pts_s", &PerfResult::pts_s)
      .def_readonly("model_flops_per_step", &PerfResult::model_flops_per_step)
      .def_readonly("coefficients", &PerfResult::coefficients)
      .def_readonly("coefficients_source", &PerfResult::coefficients_source)
      .def_readonly("coefficients_gpu", &PerfResult::coefficients_gpu)
      .def_readonly("device_kernels", &PerfResult::device_kernels)
      .def_readonly("compute_clock_fraction", &PerfResult::compute_clock_fraction)
      .def_readonly("coefficients_fitted_under", &PerfResult::coefficients_fitted_under)
      .def_property_readonly(
          "coefficients_scale",
          [](const PerfResult& x) {
            return std::map<std::string, double>{{"gemm", x.gemm_scale}, {"attention", x.attention_scale}};
          })
      .def_readonly("link_coefficients_source", &PerfResult::link_coefficients_source)
      .def_readonly("breakdown", &PerfResult::breakdown)
      .def("__repr__", [](const PerfResult& x) {
        return "Perf(step_time_s=" + py::repr(py::float_(x.step_time_s)).cast<std::string>() +
               ", tokens_per_s=" + py::repr(py::float_(x.tokens_per_s)).cast<std::string>() + ", coefficients='" +
               x.coefficients + "')";
      });
  py::class_<Estimate>(m, "Estimate", "One layout's memory and speed, equal to `headroom estimate --json`.")
      .def_readonly("memory", &Estimate::memory)
      .def_readonly("perf", &Estimate::perf)
      .def(
          "to_json", [as_json](const Estimate& x) { return as_json(x).dump(); },
          R"(estimate --json's "memory" and "perf" as JSON text)")
      .def("__repr__",
           [](const Estimate& x) {
             char text[160];
             std::snprintf(text, sizeof text, "Estimate(peak_gib=%.3f, verdict='%s', step_time_s=%.4g)",
                           x.memory.peak_gib, x.memory.verdict.c_str(), x.perf.step_time_s);
             return std::string(text);
           })
      .def("__eq__", [as_json](const Estimate& a, const Estimate& b) { return as_json(a) == as_json(b); })
      .def(py::pickle([as_json](const Estimate& x) { return as_json(x).dump(); },
                      [](const std::string& state) { return estimate_from_json(nlohmann::json::parse(state)); }));

  auto planner = py::class_<Planner>(
      m, "Planner",
      "A model on a cluster under a framework, resolved once; estimates of layouts without the command line.");
  planner.def(py::init<const std::string&, const std::string&, const std::string&, const std::string&,
                       const std::string&, const std::string&>(),
              py::kw_only(), py::arg("model"), py::arg("cluster") = "", py::arg("gpu") = "",
              py::arg("framework") = "megatron", py::arg("profile") = "", py::arg("data_dir") = "");
  planner.def_property_readonly(
      "cluster", [](const Planner& p) { return p.cluster().name; }, "The cluster's name, as the CLI's \"cluster\".");
  planner.def_property_readonly(
      "cluster_assumed", [](const Planner& p) { return p.cluster().assumed; },
      "True when no shipped cluster has the GPU and its links are assumed (the CLI's \"cluster_assumed\").");
  planner.def_property_readonly(
      "cluster_source", [](const Planner& p) { return p.cluster().source; },
      "The cluster spec's source, or what was assumed (the CLI's \"cluster_source\").");
  // The layout keywords (the CLI's layout flags, '_' for '-') are read from **kwargs by name: pybind11's
  // per-argument matching of 16 optional keywords cost more than the estimate itself.
  planner.def(
      "estimate", [](const Planner& p, const py::kwargs& k) { return p.estimate(knob_settings(k)); },
      "estimate(*, seq, tp=1, cp=1, pp=1, vpp=1, ep=1, etp=None, mbs=1, gpus=None, dp=None, gbs=None, recompute=None, "
      "schedule=None, "
      "sharding=None, sequence_parallel=None, flash_attention=None, lora_rank=None, lora_targets=None)\n"
      "Memory and speed of one layout: an Estimate equal to `headroom estimate --json`.");
  planner.def(
      "mtsl", [](const Planner& p, const py::kwargs& k) { return p.mtsl(knob_settings(k)); },
      "mtsl(*, tp=1, cp=1, pp=1, ..., the keywords of estimate but seq)\n"
      "The longest trainable sequence of a layout (`headroom mtsl`): tokens, binding stage and term.");
  planner.def(
      "estimate_many", &Planner::estimate_many, py::arg("columns"), py::kw_only(), py::arg("on_error") = "raise",
      py::arg("threads") = 0,
      "Many layouts at once: `columns` maps keywords to scalars or equal-length sequences / NumPy arrays; "
      "returns NumPy columns keyed like the JSON paths ('memory.peak_gib', 'perf.step_time_s', ...). "
      "on_error='nan' marks invalid rows (verdict 'invalid', NaN) instead of raising; threads=0 uses every core.");
}

}  // namespace headroom::python
