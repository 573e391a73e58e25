// `headroom comm`: per-GPU model-state memory and per-stage communication volume of a sharding strategy
// (PaRO Tables 1–3), the list of PaRO strategies, and the comparison of PaRO Figure 5.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom::cli {
namespace {

struct CommOptions {
  std::string strategy;
  std::string params, trainable, gpus, group_size, accum = "1";
  std::string weight_bytes = "2", grad_bytes = "2", optimizer_bytes = "12";
  std::string collectives;
  bool list = false;
  bool compare = false;
  bool json = false;
};

// A positive finite number such as "12" or "2.5"; errors name the flag.
double parse_positive(std::string_view flag, std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || value <= 0)
    throw Error(std::string(flag) + " '" + std::string(text) + "' is not a positive number");
  return value;
}

// A parameter count, written as an integer or with an exponent ("7e9"): a whole number from 1 to 10^12.
double parse_parameters(std::string_view flag, std::string_view text) {
  const double value = parse_positive(flag, text);
  if (std::floor(value) != value || value > static_cast<double>(kMaxInteger))
    throw Error(std::string(flag) + " '" + std::string(text) + "' is not a whole number of parameters up to 10^12");
  return value;
}

CommSetup build_setup(const CommOptions& o) {
  if (o.params.empty()) throw Error("--params is required (number of model parameters Ψ, e.g. 7e9)");
  if (o.gpus.empty()) throw Error("--gpus is required (number of GPUs N in the data-parallel group)");
  if (o.group_size.empty()) throw Error("--group-size is required (GPUs M per group, usually per node)");
  CommSetup s;
  s.params = parse_parameters("--params", o.params);
  s.trainable = o.trainable.empty() ? s.params : parse_parameters("--trainable", o.trainable);
  s.gpus = parse_count("--gpus", o.gpus);
  s.group_size = parse_count("--group-size", o.group_size);
  s.accum = parse_count("--accum", o.accum);
  s.weight_bytes = parse_positive("--weight-bytes", o.weight_bytes);
  s.grad_bytes = parse_positive("--grad-bytes", o.grad_bytes);
  s.optimizer_bytes = parse_positive("--optimizer-bytes", o.optimizer_bytes);
  if (s.trainable > s.params)
    throw Error("--trainable " + o.trainable + " exceeds --params " + o.params + " (Ψ' must be at most Ψ)");
  if (s.gpus % s.group_size != 0)
    throw Error("--group-size " + o.group_size + " does not divide --gpus " + o.gpus + " (g = N/M must be whole)");
  validate_comm_setup(s);
  return s;
}

Strategy build_strategy(std::string_view name, const std::string& collectives) {
  Strategy st;
  try {
    st = parse_strategy(name);
  } catch (const Error& e) {
    throw Error(std::string("--strategy: ") + e.what());
  }
  if (collectives.empty()) return st;
  if (collectives == "ring")
    st.collectives = Collectives::ring;
  else if (collectives == "hierarchical")
    st.collectives = Collectives::hierarchical;
  else
    throw Error("--collectives '" + collectives + "' is not one of: ring, hierarchical");
  return st;
}

nlohmann::json setup_to_json(const CommSetup& s) {
  return {{"params", s.params},
          {"trainable", s.trainable},
          {"gpus", s.gpus},
          {"group_size", s.group_size},
          {"groups", s.groups()},
          {"accum", s.accum},
          {"weight_bytes", s.weight_bytes},
          {"grad_bytes", s.grad_bytes},
          {"optimizer_bytes", s.optimizer_bytes}};
}

nlohmann::json memory_to_json(const StateMemory& m) {
  return {{"params", json_bytes(m.params)},
          {"grads", json_bytes(m.grads)},
          {"optimizer", json_bytes(m.optimizer)},
          {"buffers", json_bytes(m.buffers)},
          {"total", json_bytes(m.total())}};
}

nlohmann::json volume_to_json(const Volume& v) { return {{"intra", v.intra}, {"inter", v.inter}}; }

nlohmann::json table1_to_json(const Table1Row& r) {
  nlohmann::json j;
  for (TrainableRegime reg :
       {TrainableRegime::full, TrainableRegime::at_least_sixth, TrainableRegime::below_sixth, TrainableRegime::peft})
    j[std::string(to_string(reg))] = r.recommended(reg);
  return j;
}

nlohmann::json strategy_to_json(const Strategy& st, double trainable_fraction) {
  const Table1Row* row = table1_row(st.sharding);
  const TrainableRegime regime = trainable_regime(trainable_fraction);
  return {{"name", st.name},
          {"code", sharding_code(st.sharding)},
          {"params", to_string(st.sharding.params)},
          {"grads", to_string(st.sharding.grads)},
          {"optimizer", to_string(st.sharding.optimizer)},
          {"collectives", to_string(st.collectives)},
          {"secondary_param_copy", st.secondary_param_copy},
          {"rotation", to_string(st.rotation)},
          {"principle1", satisfies_principle1(st.sharding)},
          {"principle2", satisfies_principle2(st.sharding)},
          {"principle3", satisfies_principle3(st.sharding)},
          {"table1", row ? table1_to_json(*row) : nlohmann::json(nullptr)},
          {"regime", to_string(regime)},
          {"recommended", row ? nlohmann::json(row->recommended(regime)) : nlohmann::json(nullptr)}};
}

constexpr std::string_view kVolumeUnit = "elements, summed over all GPUs, one mini-batch of s micro-batches";

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

void print_one(std::ostream& out, const Strategy& st, const CommSetup& s) {
  const StateMemory m = state_memory_per_gpu(st, s);
  const StageVolumes v = communication_volume(st, s);
  char line[200];
  out << "headroom comm: " << st.name << " = " << sharding_code(st.sharding) << " (P " << to_string(st.sharding.params)
      << ", G " << to_string(st.sharding.grads) << ", OS " << to_string(st.sharding.optimizer) << "), "
      << to_string(st.collectives) << " collectives"
      << (st.secondary_param_copy ? ", secondary intra-group parameter copy" : "")
      << (st.rotation != Rotation::none ? ", RTP rotation " + std::string(to_string(st.rotation)) : "") << "\n";
  out << "Ψ = " << num(s.params) << " parameters (" << num(s.trainable) << " trainable), N = " << s.gpus
      << " GPUs in g = " << s.groups() << " groups of M = " << s.group_size << ", s = " << s.accum
      << " micro-batches per mini-batch\n\n";
  std::snprintf(line, sizeof line, "%-28s %10s\n", "model states per GPU", "GiB");
  out << line;
  const std::pair<const char*, double> rows[] = {{"params", m.params},
                                                 {"grads", m.grads},
                                                 {"optimizer", m.optimizer},
                                                 {"buffers", m.buffers},
                                                 {"total", m.total()}};
  for (const auto& [name, bytes] : rows) {
    std::snprintf(line, sizeof line, "  %-26s %10.2f\n", name, bytes / kGiB);
    out << line;
  }
  out << "\n";
  std::snprintf(line, sizeof line, "%-34s %12s %12s %9s %9s\n", "communication per mini-batch", "intra", "inter",
                "intra/Ψ", "inter/Ψ");
  out << line;
  const std::string sync = v.update_sync == GradSync::none ? "update sync G (none)"
                                                           : "update " + std::string(to_string(v.update_sync)) + " G";
  const std::pair<std::string, Volume> stages[] = {
      {"forward all-gather P", v.forward_gather_params},      {"backward all-gather P", v.backward_gather_params},
      {"backward reduce-scatter G", v.backward_reduce_grads}, {sync, v.update_sync_grads},
      {"update all-gather P", v.update_gather_params},        {"total", v.total()}};
  for (const auto& [name, vol] : stages) {
    std::snprintf(line, sizeof line, "  %-32s %12.4g %12.4g %9.3f %9.3f\n", name.c_str(), vol.intra, vol.inter,
                  vol.intra / s.params, vol.inter / s.params);
    out << line;
  }
  out << "(" << kVolumeUnit << ")\n\n";
  const Table1Row* row = table1_row(st.sharding);
  const TrainableRegime regime = trainable_regime(s.trainable / s.params);
  out << "PaRO principles: 1 " << (satisfies_principle1(st.sharding) ? "yes" : "no") << ", 2 "
      << (satisfies_principle2(st.sharding) ? "yes" : "no") << ", 3 "
      << (satisfies_principle3(st.sharding) ? "yes" : "no") << "; Table 1 for " << to_string(regime) << ": "
      << (row ? (row->recommended(regime) ? "recommended" : "not recommended") : "not a PaRO strategy") << "\n";
}

void run_one(const CommOptions& o, std::ostream& out) {
  const Strategy st = build_strategy(o.strategy, o.collectives);
  const CommSetup s = build_setup(o);
  if (!o.json) {
    print_one(out, st, s);
    return;
  }
  const StageVolumes v = communication_volume(st, s);
  const Volume total = v.total();
  nlohmann::json sync = volume_to_json(v.update_sync_grads);
  sync["operation"] = to_string(v.update_sync);
  const nlohmann::json doc = {{"strategy", strategy_to_json(st, s.trainable / s.params)},
                              {"setup", setup_to_json(s)},
                              {"memory_bytes", memory_to_json(state_memory_per_gpu(st, s))},
                              {"volume",
                               {{"unit", kVolumeUnit},
                                {"intra", total.intra},
                                {"inter", total.inter},
                                {"total", total.total()},
                                {"stages",
                                 {{"forward_ag_p", volume_to_json(v.forward_gather_params)},
                                  {"backward_ag_p", volume_to_json(v.backward_gather_params)},
                                  {"backward_rs_g", volume_to_json(v.backward_reduce_grads)},
                                  {"update_rs_or_ar_g", sync},
                                  {"update_ag_p", volume_to_json(v.update_gather_params)}}}}}};
  print_json(out, doc);
}

void run_list(const CommOptions& o, std::ostream& out) {
  constexpr std::string_view kNamed[] = {"ddp",  "zero1", "zero2",  "zero3", "fsdp",
                                         "mics", "hsdp",  "zero++", "rtp",   "rtp-inplace"};
  nlohmann::json list = nlohmann::json::array();
  char line[160];
  if (!o.json) {
    out << "The 14 PaRO strategies (Principle 1: OS sharded at least as finely as P and G); Table 1 marks\n";
    std::snprintf(line, sizeof line, "%-5s %-40s %6s %7s %7s %5s %4s %4s\n", "code", "aliases", "full", ">=1/6", "<1/6",
                  "PEFT", "P2", "P3");
    out << line;
  }
  for (const Table1Row& row : paro_table1()) {
    const std::string code = sharding_code(row.sharding);
    nlohmann::json aliases = nlohmann::json::array({"paro-" + lower(code)});
    nlohmann::json variants = nlohmann::json::array();
    std::string shown;
    for (std::string_view n : kNamed) {
      const Strategy st = parse_strategy(n);
      if (sharding_code(st.sharding) != code) continue;
      const bool plain = !st.secondary_param_copy && st.rotation == Rotation::none;
      (plain ? aliases : variants).push_back(n);
      shown += (shown.empty() ? "" : ", ") + std::string(n);
    }
    list.push_back({{"code", code},
                    {"params", to_string(row.sharding.params)},
                    {"grads", to_string(row.sharding.grads)},
                    {"optimizer", to_string(row.sharding.optimizer)},
                    {"paper_alias", row.alias.empty() ? nlohmann::json(nullptr) : nlohmann::json(row.alias)},
                    {"aliases", aliases},
                    {"variants", variants},
                    {"table1", table1_to_json(row)},
                    {"principle2", satisfies_principle2(row.sharding)},
                    {"principle3", satisfies_principle3(row.sharding)}});
    if (!o.json) {
      auto mark = [](bool b) { return b ? "yes" : "-"; };
      std::snprintf(line, sizeof line, "%-5s %-40s %6s %7s %7s %5s %4s %4s\n", code.c_str(), shown.c_str(),
                    mark(row.full), mark(row.at_least_sixth), mark(row.below_sixth), mark(row.peft),
                    mark(satisfies_principle2(row.sharding)), mark(satisfies_principle3(row.sharding)));
      out << line;
    }
  }
  if (o.json) {
    print_json(out, nlohmann::json{{"strategies", list}});
    return;
  }
  out << "(Table 1 columns by trainable fraction Ψ'/Ψ, yes = recommended; P2/P3: satisfies Principle 2 / 3;\n"
         " zero++ and rtp are variants of GGG with a secondary parameter copy or weight rotation)\n";
}

void run_compare(const CommOptions& o, std::ostream& out) {
  const CommSetup s = build_setup(o);
  nlohmann::json schemes = nlohmann::json::array();
  char line[200];
  if (!o.json) {
    out << "PaRO Figure 5: Ψ = " << num(s.params) << ", N = " << s.gpus << ", g = " << s.groups()
        << ", M = " << s.group_size << ", s = " << s.accum << "\n";
    std::snprintf(line, sizeof line, "%-20s %-5s %-12s %10s %12s %12s %9s %9s\n", "scheme", "code", "collectives",
                  "GiB/GPU", "intra", "inter", "intra/Ψ", "inter/Ψ");
    out << line;
  }
  for (std::string_view name : named_schemes()) {
    const Strategy st = build_strategy(name, o.collectives);
    const StateMemory m = state_memory_per_gpu(st, s);
    const Volume v = communication_volume(st, s).total();
    schemes.push_back({{"scheme", name},
                       {"name", st.name},
                       {"code", sharding_code(st.sharding)},
                       {"collectives", to_string(st.collectives)},
                       {"memory_bytes", memory_to_json(m)},
                       {"volume", {{"intra", v.intra}, {"inter", v.inter}, {"total", v.total()}}}});
    if (!o.json) {
      std::snprintf(line, sizeof line, "%-20s %-5s %-12s %10.2f %12.4g %12.4g %9.2f %9.2f\n", st.name.c_str(),
                    sharding_code(st.sharding).c_str(), std::string(to_string(st.collectives)).c_str(),
                    m.total() / kGiB, v.intra, v.inter, v.intra / s.params, v.inter / s.params);
      out << line;
    }
  }
  if (o.json) {
    print_json(out, nlohmann::json{{"setup", setup_to_json(s)}, {"volume_unit", kVolumeUnit}, {"schemes", schemes}});
    return;
  }
  out << "(model states per GPU in GiB; volumes in " << kVolumeUnit << ")\n";
}

}  // namespace

void register_comm(CLI::App& app, std::ostream& out) {
  auto o = std::make_shared<CommOptions>();
  CLI::App* sub = app.add_subcommand("comm", "memory and communication volume of a sharding strategy (PaRO)");
  auto* strategy = sub->add_option("--strategy,--sharding", o->strategy,
                                   "ddp, zero1, zero2, zero3, fsdp, mics, hsdp, zero++, rtp, rtp-inplace, "
                                   "paro-XYZ or a code XYZ of N/I/G");
  sub->add_option("--params", o->params, "model parameters Ψ (e.g. 7e9)");
  sub->add_option("--trainable", o->trainable, "trainable parameters Ψ' (default Ψ)");
  sub->add_option("--gpus", o->gpus, "GPUs N in the data-parallel group");
  sub->add_option("--group-size", o->group_size, "GPUs M per group (usually per node); g = N/M");
  sub->add_option("--accum", o->accum, "gradient accumulation steps s (micro-batches per mini-batch)")
      ->capture_default_str();
  sub->add_option("--weight-bytes", o->weight_bytes, "bytes per parameter")->capture_default_str();
  sub->add_option("--grad-bytes", o->grad_bytes, "bytes per gradient")->capture_default_str();
  sub->add_option("--optimizer-bytes", o->optimizer_bytes, "optimizer bytes K per trainable parameter")
      ->capture_default_str();
  sub->add_option("--collectives", o->collectives, "override: ring | hierarchical");
  auto* list = sub->add_flag("--list", o->list, "list the 14 PaRO strategies with aliases and Table 1 marks");
  auto* compare = sub->add_flag("--compare", o->compare, "PaRO Figure 5: every named scheme side by side");
  sub->add_flag("--json", o->json, "print one JSON document");
  list->excludes(compare)->excludes(strategy);
  compare->excludes(strategy);
  sub->callback([o, sub, &out] {
    if (o->list) {
      refuse_given(*sub,
                   {"--params", "--trainable", "--gpus", "--group-size", "--accum", "--weight-bytes", "--grad-bytes",
                    "--optimizer-bytes", "--collectives"},
                   "with --list (it lists the strategies; their volumes take --strategy)");
      return run_list(*o, out);
    }
    if (o->compare) return run_compare(*o, out);
    if (o->strategy.empty()) throw Error("give --strategy NAME, --list or --compare");
    run_one(*o, out);
  });
}

}  // namespace headroom::cli
