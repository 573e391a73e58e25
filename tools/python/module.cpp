// The compiled half of the `headroom` Python package: runs the CLI in-process, so that every Python
// function returns exactly the CLI's JSON document and fails with exactly the CLI's message.
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cli.hpp"

namespace py = pybind11;

namespace {

std::tuple<int, std::string, std::string> run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  int code = 0;
  {
    py::gil_scoped_release release;  // long searches must not hold the interpreter
    code = headroom::cli::run(args, out, err);
  }
  return {code, out.str(), err.str()};
}

}  // namespace

PYBIND11_MODULE(_headroom, m) {
  m.doc() = "headroom's command line, callable in-process; use the `headroom` package instead";
  m.def("run", &run, py::arg("args"),
        "Run `headroom ARGS...`; returns (exit code, stdout, stderr).");
}
