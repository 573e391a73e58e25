#include "headroom/calibrate/measured_runs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"

namespace headroom::calibrate {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string at(std::string_view where, int line) { return std::string(where) + ":" + std::to_string(line); }

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::size_t b = 0; b <= text.size();) {
    const auto e = std::min(text.find('\n', b), text.size());
    out.push_back(text.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

// A finite non-negative decimal number, all of `s`; nullopt otherwise.
std::optional<double> number(std::string_view s) {
  s = trim(s);
  double x = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(x) || x < 0) return std::nullopt;
  return x;
}

// The number that follows `key` on `line` ("elapsed time per iteration (ms): 5630.1 | ..."), commas of
// thousands ("tps: 10,050") dropped.
std::optional<double> number_after(std::string_view line, std::string_view key) {
  const auto k = line.find(key);
  if (k == std::string_view::npos) return std::nullopt;
  auto rest = trim(line.substr(k + key.size()));
  std::string digits;
  for (const char c : rest) {
    if (c == ',') continue;
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      break;
    digits += c;
  }
  return number(digits);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Steady state of per-iteration values: the first logged value includes warm-up (compilation, allocator
// growth, NCCL set-up) and is dropped when others follow; the median of the rest resists stragglers.
double steady_state(const std::vector<double>& logged) {
  if (logged.size() == 1) return logged.front();
  return median({logged.begin() + 1, logged.end()});
}

bool out_of_memory(std::string_view text) {
  // torch.OutOfMemoryError ("CUDA out of memory. Tried to allocate ..."), HIP's wording, and the caching
  // allocator's error class name in older releases (torch.cuda.OutOfMemoryError).
  for (const std::string_view k : {"OutOfMemoryError", "CUDA out of memory", "HIP out of memory"})
    if (text.find(k) != std::string_view::npos) return true;
  return false;
}

void set_measured(MeasuredRun& run, std::string_view column, double value) {
  if (column == "tflops_per_gpu")
    run.tflops_per_gpu = value;
  else if (column == "tokens_per_s")
    run.tokens_per_s = value;
  else if (column == "step_time_s")
    run.step_time_s = value;
  else if (column == "peak_memory_gib")
    run.peak_memory_gib = value;
}

bool has_measurement(const MeasuredRun& r) {
  return r.tflops_per_gpu || r.tokens_per_s || r.step_time_s || r.peak_memory_gib;
}

std::string joined(const std::vector<std::string_view>& names) {
  std::string s;
  for (const auto n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

// One cell of a runs table into `run`. Layout cells are kept as text (checked where they are used, like
// the flags they are named after); measured cells must be numbers.
void put_cell(MeasuredRun& run, std::string_view column, std::string_view value, const std::string& here) {
  value = trim(value);
  if (value.empty()) return;  // an empty cell is a missing value
  const auto& layout = run_layout_columns();
  const auto& measured = run_measured_columns();
  if (column == "outcome") {
    if (value == "ok")
      run.outcome = RunOutcome::ok;
    else if (value == "oom")
      run.outcome = RunOutcome::oom;
    else
      throw Error(here + ": outcome '" + std::string(value) + "' (valid: ok, oom)");
  } else if (std::find(measured.begin(), measured.end(), column) != measured.end()) {
    const auto x = number(value);
    if (!x)
      throw Error(here + ": " + std::string(column) + " '" + std::string(value) + "' is not a non-negative number");
    set_measured(run, column, *x);
  } else if (std::find(layout.begin(), layout.end(), column) != layout.end() || find_knob(column) != nullptr) {
    run.layout[std::string(column)] = std::string(value);
  } else {
    throw Error(here + ": unknown column '" + std::string(column) + "' (valid: " + joined(layout) + ", outcome, " +
                joined(measured) + ")");
  }
}

void check_row(const MeasuredRun& run, const std::string& here) {
  if (run.outcome == RunOutcome::ok && !has_measurement(run))
    throw Error(here + ": a run with outcome ok needs one of " + joined(run_measured_columns()));
}

// RFC 4180: fields separated by commas, quoted with '"' where they hold commas, quotes ("") or newlines.
std::vector<std::vector<std::string>> csv_records(std::string_view text, std::string_view where,
                                                  std::vector<int>* first_lines) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string cell;
  bool quoted = false, field_started = false;
  int line = 1, record_line = 1;
  auto end_record = [&] {
    record.push_back(cell);
    const bool blank = record.size() == 1 && trim(record[0]).empty();
    if (!blank) {
      records.push_back(record);
      first_lines->push_back(record_line);
    }
    record.clear();
    cell.clear();
    field_started = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        cell += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        cell += c, line += c == '\n';
    } else if (c == '"' && !field_started) {
      quoted = field_started = true;
    } else if (c == ',') {
      record.push_back(cell), cell.clear(), field_started = false;
    } else if (c == '\n') {
      end_record();
      record_line = ++line;
    } else if (c != '\r') {
      cell += c, field_started = true;
    }
  }
  if (quoted) throw Error(at(where, record_line) + ": a quoted field is not closed");
  end_record();
  return records;
}

std::vector<MeasuredRun> parse_csv(std::string_view text, std::string_view where) {
  std::vector<int> lines;
  const auto records = csv_records(text, where, &lines);
  if (records.empty()) throw Error(std::string(where) + ": no header row");
  std::vector<std::string> header;
  std::set<std::string> seen;
  for (const auto& h : records[0]) {
    header.emplace_back(trim(h));
    if (!seen.insert(header.back()).second)
      throw Error(at(where, lines[0]) + ": column '" + header.back() + "' appears twice");
  }
  std::vector<MeasuredRun> runs;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto here = at(where, lines[r]);
    if (records[r].size() != header.size())
      throw Error(here + ": " + std::to_string(records[r].size()) + " fields where the header has " +
                  std::to_string(header.size()));
    MeasuredRun run;
    run.source = here;
    for (std::size_t c = 0; c < header.size(); ++c) put_cell(run, header[c], records[r][c], here);
    check_row(run, here);
    runs.push_back(std::move(run));
  }
  return runs;
}

// A JSON value of a layout column as the text a flag would carry: integers without a decimal point.
std::string cell_text(const nlohmann::json& v, const std::string& here, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return v.dump();
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9e15)
      return std::to_string(static_cast<std::int64_t>(x));
    return v.dump();
  }
  if (v.is_null()) return "";
  throw Error(here + ": " + key + " is a " + std::string(v.type_name()) + " (valid: a string, number or boolean)");
}

std::vector<MeasuredRun> parse_jsonl(std::string_view text, std::string_view where) {
  std::vector<MeasuredRun> runs;
  int lineno = 0;
  for (const auto line : lines_of(text)) {
    ++lineno;
    if (trim(line).empty()) continue;
    const auto here = at(where, lineno);
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw Error(here + ": not a JSON object (JSON Lines: one object per line)");
    if (!j.is_object()) throw Error(here + ": a " + std::string(j.type_name()) + " where a run object was expected");
    MeasuredRun run;
    run.source = here;
    for (const auto& [key, value] : j.items()) {
      const auto& measured = run_measured_columns();
      const bool is_measured = std::find(measured.begin(), measured.end(), key) != measured.end();
      if (is_measured && !value.is_number() && !value.is_null())
        throw Error(here + ": " + key + " is a " + std::string(value.type_name()) + " (valid: a non-negative number)");
      put_cell(run, key, cell_text(value, here, key), here);
    }
    check_row(run, here);
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace

std::vector<std::vector<std::string>> read_csv_records(std::string_view text, std::string_view where) {
  std::vector<int> lines;
  return csv_records(text, where, &lines);
}

const std::vector<std::string_view>& run_layout_columns() {
  static const std::vector<std::string_view> columns = [] {
    std::vector<std::string_view> c = {"model", "gpu", "cluster", "framework"};
    for (const Knob& k : knobs()) c.push_back(k.name);  // every knob under its name (find_knob takes older ones)
    return c;
  }();
  return columns;
}

const std::vector<std::string_view>& run_measured_columns() {
  static const std::vector<std::string_view> columns = {"tflops_per_gpu", "tokens_per_s", "step_time_s",
                                                        "peak_memory_gib"};
  return columns;
}

std::vector<MeasuredRun> parse_runs_table(std::string_view text, std::string_view where) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) throw Error(std::string(where) + ": empty (a CSV table or JSON Lines of runs)");
  auto runs = text[first] == '{' ? parse_jsonl(text, where) : parse_csv(text, where);
  if (runs.empty()) throw Error(std::string(where) + ": a header but no run");
  return runs;
}

// ---- Megatron-LM ----------------------------------------------------------------------------------------

namespace {

// The arguments block of megatron/training/arguments.py (_print_args): "  name ......... value" between
// "---- arguments ----" and "---- end of arguments ----"; launchers may prefix every line ("[rank0]: ").
std::map<std::string, std::string> megatron_arguments(const std::vector<std::string_view>& lines,
                                                      std::string_view where) {
  std::map<std::string, std::string> args;
  bool inside = false, found = false;
  for (const auto line : lines) {
    if (line.find("end of arguments") != std::string_view::npos) {
      inside = false;
      continue;
    }
    if (line.find(" arguments ---") != std::string_view::npos) {
      inside = found = true;
      continue;
    }
    if (!inside) continue;
    const auto dots = line.find(" ..");
    if (dots == std::string_view::npos) continue;
    const auto head = trim(line.substr(0, dots));
    const auto name =
        head.substr(head.find_last_of(" \t]") == std::string_view::npos ? 0 : head.find_last_of(" \t]") + 1);
    auto v = dots + 1;
    while (v < line.size() && line[v] == '.') ++v;
    args[std::string(name)] = std::string(trim(line.substr(v)));
  }
  if (!found)
    throw Error(std::string(where) + ": no Megatron-LM arguments block ('---- arguments ----'): the layout is unknown");
  return args;
}

std::optional<std::string> arg(const std::map<std::string, std::string>& args, const std::string& name) {
  const auto it = args.find(name);
  if (it == args.end() || it->second == "None" || it->second.empty()) return std::nullopt;
  return it->second;
}

std::int64_t int_arg(const std::map<std::string, std::string>& args, const std::string& name, std::string_view where) {
  const auto v = arg(args, name);
  if (!v) throw Error(std::string(where) + ": the arguments block has no " + name);
  std::int64_t x = 0;
  const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (ec != std::errc() || p != v->data() + v->size() || x <= 0)
    throw Error(std::string(where) + ": " + name + " '" + *v + "' is not a positive integer");
  return x;
}

bool flag_arg(const std::map<std::string, std::string>& args, const std::string& name) {
  const auto v = arg(args, name);
  return v && *v == "True";
}

// " > padded vocab (size: 50257) with 431 dummy tokens (new size: 50688)" (megatron/training/tokenizer).
std::optional<std::int64_t> padded_vocab(const std::vector<std::string_view>& lines) {
  for (const auto line : lines)
    if (line.find("padded vocab") != std::string_view::npos)
      if (const auto v = number_after(line, "(new size:")) return static_cast<std::int64_t>(*v);
  return std::nullopt;
}

// The experts and latent attention of a Megatron-LM run (arguments.py names; moe_ffn_hidden_size defaults to
// ffn_hidden_size there, moe_layer_freq 1 or a list of leading 0s then 1s); anything else is refused naming it.
void megatron_experts(const std::map<std::string, std::string>& args, ModelSpec& m, std::string_view where) {
  const std::string w(where);
  if (arg(args, "num_experts")) {
    m.num_experts = int_arg(args, "num_experts", where);
    m.moe_router_topk = int_arg(args, "moe_router_topk", where);
    m.moe_ffn_hidden_size =
        arg(args, "moe_ffn_hidden_size") ? int_arg(args, "moe_ffn_hidden_size", where) : m.ffn_hidden_size;
    if (arg(args, "moe_shared_expert_intermediate_size"))
      m.shared_expert_ffn_hidden_size = int_arg(args, "moe_shared_expert_intermediate_size", where);
    m.shared_expert_gate = flag_arg(args, "moe_shared_expert_gate");
    const std::string freq = arg(args, "moe_layer_freq").value_or("1");
    if (freq != "1") {  // "[0, 0, 0, 1, 1, ...]": leading dense layers only
      std::int64_t dense = 0, moe = 0;
      bool ok = freq.size() >= 2 && freq.front() == '[' && freq.back() == ']';
      for (const char c : freq.substr(1, freq.size() - 2)) {
        if (c == '0' && moe == 0)
          ++dense;
        else if (c == '1')
          ++moe;
        else if (c != ',' && c != ' ')
          ok = false;
      }
      if (!ok || dense + moe != m.num_layers)
        throw Error(w + ": moe_layer_freq " + freq.substr(0, 60) +
                    ": only leading dense layers then experts on every layer are priced");
      m.first_dense_layers = dense;
    }
  }
  if (flag_arg(args, "multi_latent_attention")) {
    m.q_lora_rank = arg(args, "q_lora_rank") ? int_arg(args, "q_lora_rank", where) : 0;
    m.kv_lora_rank = int_arg(args, "kv_lora_rank", where);
    m.qk_nope_head_dim = int_arg(args, "qk_head_dim", where);
    m.qk_rope_head_dim = int_arg(args, "qk_pos_emb_head_dim", where);
    m.v_head_dim = int_arg(args, "v_head_dim", where);
    m.head_dim = 0;
  }
}

// The model of a Megatron-LM GPT run from its arguments (megatron/training/arguments.py names).
std::optional<ModelSpec> megatron_model(const std::map<std::string, std::string>& args,
                                        const std::vector<std::string_view>& lines, std::string_view where) {
  ModelSpec m;
  m.name = "megatron-args";
  m.hidden_size = int_arg(args, "hidden_size", where);
  m.num_layers = int_arg(args, "num_layers", where);
  m.num_heads = int_arg(args, "num_attention_heads", where);
  m.num_kv_heads = flag_arg(args, "group_query_attention") ? int_arg(args, "num_query_groups", where) : m.num_heads;
  m.ffn_hidden_size = int_arg(args, "ffn_hidden_size", where);
  // arguments.py sets kv_channels to hidden_size / heads when it is not given; another value is the head width.
  if (const auto kv = arg(args, "kv_channels"); kv && *kv != "None") {
    m.head_dim = int_arg(args, "kv_channels", where);
    if (m.head_dim * m.num_heads == m.hidden_size) m.head_dim = 0;
  }
  const auto vocab = padded_vocab(lines);
  if (vocab)
    m.vocab_size = *vocab;
  else if (arg(args, "padded_vocab_size"))
    m.vocab_size = int_arg(args, "padded_vocab_size", where);
  else if (arg(args, "vocab_size"))
    m.vocab_size = int_arg(args, "vocab_size", where);
  else
    return std::nullopt;  // the tokenizer's size is not in the log: the row needs a model column
  m.max_context = arg(args, "max_position_embeddings") ? int_arg(args, "max_position_embeddings", where)
                                                       : int_arg(args, "seq_length", where);
  m.tied_embeddings = !flag_arg(args, "untie_embeddings_and_output_weights");
  m.norm = arg(args, "normalization").value_or("LayerNorm") == "RMSNorm" ? Norm::rmsnorm : Norm::layernorm;
  m.mlp = flag_arg(args, "swiglu") ? Mlp::swiglu : Mlp::gelu;
  m.linear_biases = arg(args, "add_bias_linear").value_or("True") == "True";
  m.qkv_bias = arg(args, "add_qkv_bias").value_or("False") == "True";
  m.learned_positions = arg(args, "position_embedding_type").value_or("learned_absolute") == "learned_absolute";
  m.qk_norm = arg(args, "qk_layernorm").value_or("False") == "True";
  megatron_experts(args, m, where);
  if (const auto window = arg(args, "window_size"); window && *window != "None")
    throw Error(std::string(where) + ": window_size " + *window +
                ": runs with sliding-window attention are not read from Megatron-LM logs yet (give a model spec)");
  return m;
}

// Whether a knob Megatron-LM prints whatever the run does means something in this run: the experts' only with
// experts, FP8's only with an FP8 format, the optimizer offload's only with --optimizer-cpu-offload, the activation
// offload's only with --cpu-offloading (arguments.py prints them all, with their defaults).
bool megatron_knob_applies(KnobId id, const std::map<std::string, std::string>& args) {
  switch (id) {
    case KnobId::ep:
    case KnobId::etp:
    case KnobId::moe_token_dispatcher_type:
    case KnobId::moe_expert_capacity_factor: return arg(args, "num_experts").has_value();
    case KnobId::fp8_recipe:
    case KnobId::fp8_param_gather: return arg(args, "fp8").has_value();
    case KnobId::optimizer_offload_fraction:
    case KnobId::overlap_cpu_optimizer_d2h_h2d: return flag_arg(args, "optimizer_cpu_offload");
    case KnobId::cpu_offloading_num_layers: return flag_arg(args, "cpu_offloading");
    default: return true;
  }
}

// The run's knobs from the arguments block: each knob's log_key (knobs.hpp), as printed; then what arguments.py
// derives or defaults differently.
std::map<std::string, std::string> megatron_layout(const std::map<std::string, std::string>& args,
                                                   std::string_view where) {
  std::map<std::string, std::string> l;
  l["framework"] = "megatron";
  for (const Knob& k : knobs()) {
    if (k.log_key.empty() || !megatron_knob_applies(k.id, args)) continue;
    const auto v = arg(args, std::string(k.log_key));
    if (v) l[std::string(k.name)] = k.type == KnobType::flag && (*v == "True" || *v == "False") ? lower(*v) : *v;
  }
  for (const char* required : {"world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size",
                               "context_parallel_size", "micro_batch_size", "global_batch_size", "seq_length"})
    (void)int_arg(args, required, where);
  if (!arg(args, "virtual_pipeline_model_parallel_size") && arg(args, "num_layers_per_virtual_pipeline_stage"))
    l["vpp"] =
        std::to_string(int_arg(args, "num_layers", where) / int_arg(args, "pipeline_model_parallel_size", where) /
                       int_arg(args, "num_layers_per_virtual_pipeline_stage", where));
  // recompute_granularity None is no recompute, whatever the framework profile's default.
  if (!l.contains("recompute")) l["recompute"] = "none";
  // arguments.py's default dispatcher is allgather, which headroom does not price (the knob's check says so).
  if (arg(args, "num_experts") && !arg(args, "moe_token_dispatcher_type")) l["moe_token_dispatcher_type"] = "allgather";
  // Megatron-LM's distributed optimizer shards optimizer states over DP (ZeRO-1); without it, DDP.
  l["sharding"] = flag_arg(args, "use_distributed_optimizer") ? "zero1" : "ddp";
  return l;
}

}  // namespace

MeasuredRun parse_megatron_log(std::string_view text, std::string_view where) {
  const auto lines = lines_of(text);
  const auto args = megatron_arguments(lines, where);
  MeasuredRun run;
  run.source = std::string(where);
  run.layout = megatron_layout(args, where);
  run.model = megatron_model(args, lines, where);
  std::vector<double> step_ms, tflops;
  for (const auto line : lines) {
    if (line.find(" iteration ") == std::string_view::npos && line.rfind("iteration ", 0) != 0) {
      if (line.find("memory (MB)") != std::string_view::npos)
        if (const auto mib = number_after(line, "max reserved:"))
          run.peak_memory_gib = std::max(run.peak_memory_gib.value_or(0.0), *mib / 1024.0);
      continue;
    }
    if (const auto ms = number_after(line, "elapsed time per iteration (ms):")) {
      step_ms.push_back(*ms);
      if (const auto f = number_after(line, "throughput per GPU (TFLOP/s/GPU):")) tflops.push_back(*f);
    }
  }
  if (out_of_memory(text))
    run.outcome = RunOutcome::oom;
  else if (step_ms.empty())
    throw Error(std::string(where) +
                ": no iteration line and no out-of-memory error: the run neither trained nor "
                "ran out of memory");
  if (!step_ms.empty() && run.outcome == RunOutcome::ok) {
    run.step_time_s = steady_state(step_ms) / 1e3;
    if (!tflops.empty()) run.tflops_per_gpu = steady_state(tflops);
    run.tokens_per_s =
        static_cast<double>(int_arg(args, "global_batch_size", where) * int_arg(args, "seq_length", where)) /
        *run.step_time_s;
  }
  return run;
}

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
      {"framework", "pytorch-fsdp"},
      {"model", torchtitan_model(t)},
      {"gpus", std::to_string(world)},
      {"tp", std::to_string(tp)},
      {"pp", std::to_string(pp)},
      {"cp", std::to_string(cp)},
      {"mbs", std::to_string(pp > 1 ? toml_int(t, "parallelism.pipeline_parallel_microbatch_size", 1, where) : local)},
      {"gbs", std::to_string(gbs)},
      {"seq", std::to_string(seq)},
      {"sharding", shard == 1 ? "ddp" : (replicate > 1 ? "hsdp" : "fsdp")}};
  if (const auto it = t.find("activation_checkpoint.mode"); it != t.end()) run.layout["recompute"] = it->second;
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
