// The printers of `headroom validate`'s report (validation/report.hpp), text and JSON, by side: memory
// (validate_memory.cpp: the 4D estimate tables, the OOM verdicts and the residual's form, the thesis's MTSL) and speed
// (validate_speed.cpp: the 4D throughput columns, the thesis's throughput, the published held-out sources).
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "headroom/validation/report.hpp"

namespace headroom::cli {

[[nodiscard]] nlohmann::json estimate_json(const validate::EstimateSection& e);
void print_estimates(std::ostream& out, const validate::EstimateSection& e);
[[nodiscard]] nlohmann::json verdict_json(const validate::VerdictSection& v, const FrameworkProfile& fw);
void print_verdicts(std::ostream& out, const validate::VerdictSection& v, const FrameworkProfile& fw);
[[nodiscard]] nlohmann::json thesis_mtsl_json(const validate::ThesisMtslValidation& v);
void print_thesis_mtsl(std::ostream& out, const validate::ThesisMtslValidation& v);

[[nodiscard]] nlohmann::json perf_json(const validate::PerfValidation& v);
void print_perf_validation(std::ostream& out, const validate::PerfValidation& v);
[[nodiscard]] nlohmann::json thesis_perf_json(const validate::ThesisPerfValidation& v);
void print_thesis_perf(std::ostream& out, const validate::ThesisPerfValidation& v);
[[nodiscard]] nlohmann::json published_json(const validate::PublishedValidation& v);
void print_published(std::ostream& out, const validate::PublishedValidation& v, const std::string& what,
                     const std::string& file, const std::string& coefficients = "megatron");
[[nodiscard]] nlohmann::json published_memory_json(const validate::PublishedMemoryValidation& v);
void print_published_memory(std::ostream& out, const validate::PublishedMemoryValidation& v);
[[nodiscard]] nlohmann::json stack_fraction_json(const validate::StackFractionFit& f);
void print_stack_fraction(std::ostream& out, const validate::StackFractionFit& f, const std::string& coefficients);
void print_attention_backends(std::ostream& out, const std::vector<validate::StackFractionFit>& fits,
                              const std::string& shipped, const std::string& default_backend);
[[nodiscard]] nlohmann::json collectives_json(const validate::CollectiveValidation& v);
void print_collectives(std::ostream& out, const validate::CollectiveValidation& v);
// A band as validate prints it: "-3.2% / +1.5%".
[[nodiscard]] std::string band_text(const ErrorBand& b);
[[nodiscard]] nlohmann::json band_json(const ErrorBand& shipped, const ErrorBand& computed);

}  // namespace headroom::cli
