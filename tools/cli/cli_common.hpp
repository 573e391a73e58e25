// Pieces shared by the subcommands: strict number parsing, spec options, layout options, printing.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <map>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "headroom/core/knobs.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/plan.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom::cli {

// A positive integer flag such as "8192", by the one integer grammar (knobs.hpp parse_integer); an Error naming `flag`.
std::int64_t parse_count(std::string_view flag, std::string_view text);

// --model/--gpu/--cluster/--framework/--data-dir, shared by every subcommand that needs specs.
struct SpecOptions {
  std::string model;
  std::string gpu;
  std::string cluster;
  std::string framework = "megatron";
  std::string data_dir;

  void add_to(CLI::App& app, bool need_model);
  [[nodiscard]] SpecLibrary library() const;
  // The request of these flags and --profile (plan.hpp).
  [[nodiscard]] PlanRequest request(const std::string& profile = "") const;
};

// The layout flags, registered from the knob table (knobs.hpp) with their Megatron-LM spellings; values kept as text
// so that errors name the flag.
struct LayoutOptions {
  std::array<std::string, kKnobCount> text;
  std::array<bool, kKnobCount> on{}, off{};  // flags: the on and off spellings given
  std::array<CLI::Option*, kKnobCount> option{}, off_option{};
  bool seq_optional = false;  // set by add_to(app, false)
  KnobSettings fallback;      // what applies to a knob not given (beyond the framework's defaults)

  // Every knob; need_seq = false: --seq is optional (`mtsl` searches it) and defaults to the shortest valid length.
  void add_to(CLI::App& app, bool need_seq = true);
  // Only these knobs (rank takes those it does not search).
  void add_to(CLI::App& app, std::initializer_list<KnobId> which);
  [[nodiscard]] bool given(KnobId id) const;
  // The knobs given, typed (knobs.hpp parse_knob); both spellings of one flag are an Error.
  [[nodiscard]] KnobSettings settings() const;
  // Framework defaults, then the flags; DP from --gpus / (t·c·p) unless --dp is given. Validated.
  [[nodiscard]] Layout build(const ModelSpec& model, const FrameworkProfile& framework) const;
  // The same, then what the precision and offloading need of the cluster (validate_on_cluster).
  [[nodiscard]] Layout build(const Plan& plan) const;
};

// Flags a mode does not use, given anyway: an Error naming the first one given and why it does nothing
// (`simulate --collective ... --trace F` traced nothing; `mtsl --target-seq` ignored --gpus and --tp).
void refuse_given(const CLI::App& app, std::initializer_list<const char*> flags, std::string_view why);

// A layout predicted not to fit, said where a command runs it anyway (launch, simulate): the JSON fields
// ("memory": peak, capacity, verdict) and, when it does not fit, one warning line ("# " prefixed for launch
// output that is pasted as a script).
nlohmann::json memory_verdict_json(const Plan& r, const Layout& l);
// [value × (1 − low), value × (1 + high)] divided by `unit`, or null where the band is unknown.
[[nodiscard]] nlohmann::json interval_json(const ErrorBand& band, double value, double unit = 1.0);
// --risk (rank, mtsl): nominal, an unknown band (the prediction decides); pessimistic, the framework's held-out band
// of the peak (its upper end must fit). Throws Error for another word or a framework without a band.
[[nodiscard]] ErrorBand risk_band(const std::string& risk, const FrameworkProfile& f);
inline constexpr const char* kRiskHelp =
    "nominal: a layout fits if its predicted peak does; pessimistic: if the upper end of the held-out band of its "
    "peak does";
// A run's columns (a runs table's, a log's or a command's layout: knobs.hpp names or older ones) as knob settings, by
// the knobs' grammar; two columns giving one knob are an Error.
[[nodiscard]] KnobSettings knob_settings_of(const std::map<std::string, std::string>& columns);
// What every layout rank searches shares, from the request's knobs the search does not vary: the framework's
// defaults with the request's LoRA, FP8, TP-overlap and optimizer-precision settings (each checked against the
// framework).
[[nodiscard]] Layout rank_base(const Plan& plan, const LayoutRequest& q);
// A layout in one word group: "tp2 cp1 pp4x2[7+14x8+7] dp8 mbs1 NNG rc:selective" (rank's and mtsl's tables).
[[nodiscard]] std::string layout_name(const ModelSpec& m, const Layout& l);
// The recompute as the text tables say it: "full", or "full (block 5)" for full recompute by layers.
[[nodiscard]] std::string recompute_text(const Layout& l);
[[nodiscard]] std::string memory_warning(const Plan& r, const Layout& l);

// Version of every JSON document the CLI prints (`schema_version`); raised when a field changes meaning or goes.
inline constexpr int kJsonSchemaVersion = 2;
// Prints one JSON document with its schema_version, indented.
void print_json(std::ostream& out, nlohmann::json doc);
// A byte count for JSON: an integer (byte counts were printed as 5543492704.010241).
[[nodiscard]] std::int64_t json_bytes(double bytes);

nlohmann::json layout_to_json(const ModelSpec& m, const Layout& l);
// The cluster of a document: "cluster" (its name), "cluster_assumed" (true when made up around a bare GPU, whose links
// nothing measured) and "cluster_source" (its spec's source, or what was assumed).
void add_cluster_json(nlohmann::json& doc, const ClusterSpec& c);
// For the text outputs: "cluster NAME assumed: ...\n" when the cluster was made up around a bare GPU, else "".
[[nodiscard]] std::string assumed_cluster_line(const ClusterSpec& c);
// The decoder layers per pipeline stage, run-length: "7+14x8+7" (Llama 3 405B); "" for an even split.
[[nodiscard]] std::string stage_layers_text(const ModelSpec& m, const Layout& l);
// " (layers 7+14x8+7)" for the text headers; "" for an even split.
[[nodiscard]] std::string stage_text(const ModelSpec& m, const Layout& l);
std::string format_gib(double bytes, int precision = 2);
// ASCII lower case, for names matched case-insensitively.
[[nodiscard]] std::string lower(std::string text);

}  // namespace headroom::cli
