// headroom.Planner, the typed Python API over the estimator (planner.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <pybind11/pybind11.h>

#include "cli_common.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom::python {

struct Columns;

class Planner {
 public:
  Planner(const std::string& model, const std::string& cluster, const std::string& gpu, const std::string& framework,
          const std::string& profile, const std::string& data_dir);
  Planner(const Planner&) = delete;  // context_ refers to specs_
  Planner& operator=(const Planner&) = delete;
  Planner(Planner&&) = delete;
  Planner& operator=(Planner&&) = delete;
  ~Planner() = default;

  // The cluster resolved from the constructor's cluster/gpu (an assumed one where no shipped cluster has the GPU).
  [[nodiscard]] const ClusterSpec& cluster() const { return specs_.cluster; }
  [[nodiscard]] pybind11::object estimate(const KnobSettings& k) const;
  [[nodiscard]] pybind11::object mtsl(KnobSettings k) const;
  [[nodiscard]] pybind11::dict estimate_many(const pybind11::dict& columns, const std::string& on_error,
                                             int threads) const;

 private:
  [[nodiscard]] Layout layout(const KnobSettings& k) const;
  // estimate_many's row i into its columns; Error for an invalid layout.
  void price_row(const LayoutRequest& r, const Columns& out, std::size_t i) const;

  Plan specs_;
  std::optional<PlanContext> context_;
};

void bind_planner(pybind11::module_& m);

}  // namespace headroom::python
