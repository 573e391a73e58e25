// The compiled half of the `headroom` Python package: runs the CLI in-process, so that every Python
// function returns exactly the CLI's JSON document and fails with exactly the CLI's message.
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cli.hpp"
#include "headroom/calibration/profile.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/spec.hpp"
#include "planner.hpp"

namespace py = pybind11;

namespace {

// Bytes, not str: a message may quote a file's bytes that are not UTF-8 (the package decodes with
// backslashreplace instead of failing with UnicodeDecodeError).
std::tuple<int, py::bytes, py::bytes> run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = 0;
  {
    py::gil_scoped_release release;  // long searches must not hold the interpreter
    code = headroom::cli::run(args, out, err);
  }
  return {code, py::bytes(out.str()), py::bytes(err.str())};
}

// A calibration profile, checked exactly as `--profile` checks it, back as JSON text; Error → ValueError.
std::string load_profile(const std::string& path) {
  try {
    return headroom::profile_to_json(headroom::load_profile(path, headroom::default_data_dir())).dump();
  } catch (const headroom::Error& e) {
    throw py::value_error(headroom::cli::one_line(e.what()));
  }
}

}  // namespace

PYBIND11_MODULE(_headroom, m) {
  m.doc() = "headroom's command line, callable in-process; use the `headroom` package instead";
  m.def("run", &run, py::arg("args"), "Run `headroom ARGS...`; returns (exit code, stdout, stderr).");
  m.def("load_profile", &load_profile, py::arg("path"), "A validated calibration profile as JSON text.");
  m.def("describe", &headroom::cli::describe,
        "The command line's commands and options and the knob table, as JSON text (the keyword mapping and stubs).");
  headroom::python::bind_planner(m);
}
