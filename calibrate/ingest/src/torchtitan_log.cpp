// torchtitan training logs with the job's TOML config.
#include "headroom/ingest/measured_runs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"
#include "text.hpp"

namespace headroom::calibrate {

using text::at;
using text::lines_of;
using text::number_after;
using text::out_of_memory;
using text::steady_state;
using text::trim;

// ---- torchtitan -----------------------------------------------------------------------------------------

namespace {

// The subset of TOML torchtitan's job configs use: [section] headers and `key = value` lines with strings,
// numbers, booleans (and arrays, kept as text); '#' comments.
std::map<std::string, std::string> toml_values(std::string_view toml, std::string_view where) {
  std::map<std::string, std::string> out;
  std::string section;
  int lineno = 0;
  for (auto line : lines_of(toml)) {
    ++lineno;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      const auto close = line.find(']');
      if (close == std::string_view::npos) throw Error(at(where, lineno) + ": a section header without ']'");
      section = std::string(trim(line.substr(1, close - 1)));
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) throw Error(at(where, lineno) + ": expected 'key = value'");
    auto value = trim(line.substr(eq + 1));
    if (!value.empty() && value[0] == '"') {
      const auto close = value.find('"', 1);
      if (close == std::string_view::npos) throw Error(at(where, lineno) + ": a string without its closing quote");
      value = value.substr(1, close - 1);
    } else if (const auto hash = value.find('#'); hash != std::string_view::npos) {
      value = trim(value.substr(0, hash));
    }
    out[section + "." + std::string(trim(line.substr(0, eq)))] = std::string(value);
  }
  return out;
}

std::int64_t toml_int(const std::map<std::string, std::string>& t, const std::string& key, std::int64_t fallback,
                      std::string_view where) {
  const auto it = t.find(key);
  if (it == t.end()) return fallback;
  std::int64_t x = 0;
  const auto& s = it->second;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || p != s.data() + s.size() || x == 0 || x < -1)
    throw Error(std::string(where) + ": " + key + " '" + s + "' is not a positive integer (or -1)");
  return x;
}

// torchtitan model name and flavor to a shipped model: torchtitan's llama3 flavors are Llama 3.1's shapes
// (torchtitan/models/llama3/__init__.py).
std::string torchtitan_model(const std::map<std::string, std::string>& t) {
  const auto name = t.count("model.name") ? t.at("model.name") : std::string();
  auto flavor = t.count("model.flavor") ? t.at("model.flavor") : std::string();
  std::transform(flavor.begin(), flavor.end(), flavor.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name == "llama3" && (flavor == "8b" || flavor == "70b" || flavor == "405b")) return "llama3.1-" + flavor;
  return name + (flavor.empty() ? "" : "-" + flavor);
}

// [activation_checkpoint] mode and selective_ac_option as headroom's recompute: none, full, or op for torchtitan's
// per-op selective checkpointing; the layer-selective option (a number: every N-th block) is not priced. torchtitan's
// defaults (config_manager.py): mode "selective", selective_ac_option "2".
std::string torchtitan_recompute(const std::map<std::string, std::string>& t, std::string_view where) {
  const auto mode =
      t.count("activation_checkpoint.mode") ? t.at("activation_checkpoint.mode") : std::string("selective");
  if (mode == "none" || mode == "full") return mode;
  if (mode != "selective")
    throw Error(std::string(where) + ": activation_checkpoint.mode = " + mode.substr(0, 40) +
                " is not priced (valid: none, full, selective with selective_ac_option op)");
  const auto option = t.count("activation_checkpoint.selective_ac_option")
                          ? t.at("activation_checkpoint.selective_ac_option")
                          : std::string("2");
  if (option != "op")
    throw Error(std::string(where) + ": activation_checkpoint.selective_ac_option = " + option.substr(0, 40) +
                ": layer-selective checkpointing (every N-th block) is not priced (valid: op)");
  return "op";
}

}  // namespace

MeasuredRun parse_torchtitan_log(std::string_view log, std::string_view toml, std::int64_t gpus,
                                 std::string_view where) {
  const auto t = toml_values(toml, std::string(where) + " (TOML)");
  // Float8 linear layers (torchtitan's model.converters "float8", later "quantize.linear.float8": torchao, dynamic
  // tensorwise scaling unless a rowwise recipe is named); MX formats are not priced.
  bool float8 = false, float8_gather = false;
  if (const auto it = t.find("model.converters"); it != t.end() && it->second.find('"') != std::string::npos) {
    const std::string& c = it->second;
    float8 = c == "[\"float8\"]" || c == "[\"quantize.linear.float8\"]";
    if (!float8)
      throw Error(std::string(where) + ": model.converters = " + c.substr(0, 80) +
                  ": only torchao's float8 converter is priced (MX and other formats are not)");
    for (const char* section : {"float8.", "quantize.linear.float8."}) {
      const auto recipe = t.find(std::string(section) + "recipe_name");
      if (recipe != t.end() && recipe->second != "\"tensorwise\"")
        throw Error(std::string(where) + ": " + section + "recipe_name = " + recipe->second.substr(0, 40) +
                    ": only the tensorwise float8 recipe is priced");
      const auto gather = t.find(std::string(section) + "enable_fsdp_float8_all_gather");
      if (gather != t.end() && gather->second == "true") float8_gather = true;
    }
  }
  const auto tp = toml_int(t, "parallelism.tensor_parallel_degree", 1, where);
  const auto pp = toml_int(t, "parallelism.pipeline_parallel_degree", 1, where);
  const auto cp = toml_int(t, "parallelism.context_parallel_degree", 1, where);
  const auto replicate = toml_int(t, "parallelism.data_parallel_replicate_degree", 1, where);
  auto shard = toml_int(t, "parallelism.data_parallel_shard_degree", -1, where);
  if (tp < 0 || pp < 0 || cp < 0 || replicate < 0)
    throw Error(std::string(where) + ": only data_parallel_shard_degree may be -1 (the rest of the GPUs)");
  if (shard == -1) {
    if (gpus <= 0 || gpus % (tp * pp * cp * replicate) != 0)
      throw Error(std::string(where) + ": data_parallel_shard_degree = -1 needs the number of GPUs (a multiple of " +
                  std::to_string(tp * pp * cp * replicate) + ")");
    shard = gpus / (tp * pp * cp * replicate);
  }
  const auto world = tp * pp * cp * replicate * shard;
  if (gpus > 0 && gpus != world)
    throw Error(std::string(where) + ": the TOML's degrees make " + std::to_string(world) + " GPUs, not " +
                std::to_string(gpus));
  // [training] local_batch_size (batch_size before torchtitan 0.2) sequences per DP rank and step.
  const auto local = toml_int(t, "training.local_batch_size", toml_int(t, "training.batch_size", 8, where), where);
  const auto seq = toml_int(t, "training.seq_len", 2048, where);
  const auto dp = replicate * shard;
  auto gbs = toml_int(t, "training.global_batch_size", -1, where);
  if (gbs == -1) gbs = local * dp;
  MeasuredRun run;
  run.source = std::string(where);
  run.layout = {
      {"framework", "torchtitan"},
      {"model", torchtitan_model(t)},
      {"gpus", std::to_string(world)},
      {"tp", std::to_string(tp)},
      {"pp", std::to_string(pp)},
      {"cp", std::to_string(cp)},
      {"mbs", std::to_string(pp > 1 ? toml_int(t, "parallelism.pipeline_parallel_microbatch_size", 1, where) : local)},
      {"gbs", std::to_string(gbs)},
      {"seq", std::to_string(seq)},
      {"sharding", shard == 1 ? "ddp" : (replicate > 1 ? "hsdp" : "fsdp")}};
  run.layout["recompute"] = torchtitan_recompute(t, where);
  // torch.compile of the blocks ([compile] enable from torchtitan 0.2, [training] compile before) and async TP.
  for (const char* key : {"compile.enable", "training.compile"})
    if (const auto it = t.find(key); it != t.end() && it->second == "true") run.layout["compile"] = "true";
  if (const auto it = t.find("parallelism.enable_async_tensor_parallel"); it != t.end() && it->second == "true")
    run.layout["tp_comm_overlap"] = "true";
  if (float8) {
    run.layout["precision"] = "fp8";
    run.layout["fp8_recipe"] = "tensorwise";
    run.layout["fp8_param_gather"] = float8_gather ? "true" : "false";
  }
  std::vector<double> tps, tflops, mem;
  for (const auto line : lines_of(log)) {
    if (line.find("step:") == std::string_view::npos || line.find("tps:") == std::string_view::npos) continue;
    const auto x = number_after(line, "tps:");
    if (!x || !(*x > 0)) continue;  // a step that moved no tokens measures no speed (and would give 1/0 s)
    tps.push_back(*x);
    if (const auto f = number_after(line, "tflops:")) tflops.push_back(*f);
    if (const auto m = number_after(line, "memory:")) mem.push_back(*m);
  }
  if (!mem.empty()) run.peak_memory_gib = *std::max_element(mem.begin(), mem.end());
  if (out_of_memory(log))
    run.outcome = RunOutcome::oom;
  else if (tps.empty())
    throw Error(std::string(where) +
                ": no 'step: ... tps:' line and no out-of-memory error: the run neither trained "
                "nor ran out of memory");
  if (!tps.empty() && run.outcome == RunOutcome::ok) {
    run.tokens_per_s = steady_state(tps) * static_cast<double>(world);  // tps is per GPU
    run.step_time_s = static_cast<double>(gbs * seq) / *run.tokens_per_s;
    if (!tflops.empty()) run.tflops_per_gpu = steady_state(tflops);
  }
  return run;
}

}  // namespace headroom::calibrate
