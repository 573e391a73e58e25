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

// The layout keywords of Planner's methods, as Python passed them (validated by build_layout).
struct LayoutKeywords {
  std::int64_t seq = 0, tp = 1, cp = 1, pp = 1, vpp = 1, mbs = 1, ep = 1, etp = 0;
  std::optional<std::int64_t> gpus, dp, gbs;
  std::optional<std::string> recompute, schedule, sharding;
  std::optional<bool> sequence_parallel, flash_attention;
  std::optional<std::int64_t> lora_rank;
  std::optional<std::string> lora_targets;
  std::optional<std::string> dispatcher;                  // moe_token_dispatcher_type
  std::optional<double> expert_load;                      // moe_expert_capacity_factor
  std::optional<std::string> precision, fp8_recipe;       // "bf16" | "fp8"; "delayed" | "tensorwise"
  std::optional<bool> fp8_param_gather, overlap_offload;  // overlap_cpu_optimizer_d2h_h2d
  std::optional<double> optimizer_offload;                // optimizer_offload_fraction
  std::optional<std::int64_t> offload_layers;             // cpu_offloading_num_layers
  std::optional<bool> overlap_p2p_comm;                   // Megatron-LM's (--no-overlap-p2p-communication: False)
  std::optional<bool> tp_comm_overlap;                    // Megatron-LM's --tp-comm-overlap
};

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
  [[nodiscard]] pybind11::object estimate(const LayoutKeywords& k) const;
  [[nodiscard]] pybind11::object mtsl(const LayoutKeywords& k) const;
  [[nodiscard]] pybind11::dict estimate_many(const pybind11::dict& columns, const std::string& on_error,
                                             int threads) const;

 private:
  [[nodiscard]] LayoutRequest request(const LayoutKeywords& k) const;
  [[nodiscard]] Layout layout(const LayoutKeywords& k) const;
  // estimate_many's row i into its columns; Error for an invalid layout.
  void price_row(const LayoutRequest& r, const Columns& out, std::size_t i) const;

  cli::ResolvedSpecs specs_;
  std::optional<PerfContext> context_;
};

void bind_planner(pybind11::module_& m);

}  // namespace headroom::python
