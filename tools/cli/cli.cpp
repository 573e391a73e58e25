#include "cli.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <sstream>
#include <string_view>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"

namespace headroom::cli {

std::string one_line(std::string_view text) {
  // Control characters (a newline or ESC in a value) are shown escaped, and a value of 100 KB is not echoed
  // whole: an error is one readable line.
  constexpr std::size_t kMaxChars = 600;
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80) {  // well-formed UTF-8 is kept ("t·c·p"); other bytes (a binary file's) are escaped
      const std::size_t n = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
      bool valid = n > 0 && i + n <= text.size();
      for (std::size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
      if (valid) {
        out.append(text.substr(i, n));
        i += n - 1;
      } else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out += hex;
      }
    } else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += ch;
    }
    if (out.size() > kMaxChars) {
      out.resize(kMaxChars);
      out += " ... (" + std::to_string(text.size()) + " characters in all)";
      break;
    }
  }
  return out;
}

namespace {

// Levenshtein distance, for "did you mean" on a mistyped subcommand.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The first argument when it is not a known subcommand (nor a flag): one line naming it, the nearest
// subcommand when one is close, and the list.
void check_subcommand(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].empty() || args[0][0] == '-') return;
  std::string known, nearest;
  std::size_t best = 3;  // at most two edits away, or a prefix
  for (const auto* sub : app.get_subcommands({})) {
    const std::string& name = sub->get_name();
    if (name == args[0]) return;
    known += (known.empty() ? "" : ", ") + name;
    const std::size_t d = name.rfind(args[0], 0) == 0 ? 0 : edit_distance(args[0], name);
    if (d < best) best = d, nearest = name;
  }
  throw Error("unknown command '" + args[0] + "'" + (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)") +
              "; commands: " + known);
}

// The command's flag nearest to a mistyped one ("--tpp": "--tp"): at most two edits away, the longer common prefix
// first; "" when none is close.
std::string nearest_flag(const CLI::App& command, std::string_view typed) {
  std::string nearest;
  std::size_t best = 3, best_prefix = 0;
  for (const CLI::Option* o : command.get_options()) {
    for (const std::string& name : o->get_lnames()) {
      const std::string flag = "--" + name;
      const std::size_t d = edit_distance(typed, flag);
      std::size_t prefix = 0;
      while (prefix < typed.size() && prefix < flag.size() && typed[prefix] == flag[prefix]) ++prefix;
      if (d < best || (d == best && prefix > best_prefix)) best = d, best_prefix = prefix, nearest = flag;
    }
  }
  return nearest;
}

// CLI11 lists what it did not expect back to front ("2 --tpp"): one line naming the first word that is not a flag of
// the command, with the nearest flag when one is close (as check_subcommand does for commands).
std::string unexpected_arguments(const CLI::App& app, const std::vector<std::string>& args, const std::string& what) {
  const CLI::App* command = nullptr;
  for (const CLI::App* sub : app.get_subcommands({}))
    if (!args.empty() && sub->get_name() == args[0]) command = sub;
  if (command == nullptr) return what;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a == "--") continue;
    const std::string name = a.substr(0, a.find('='));
    if (command->get_option_no_throw(name) != nullptr || app.get_option_no_throw(name) != nullptr) continue;
    const std::string nearest = nearest_flag(*command, name);
    return name + " is not a flag of " + command->get_name() +
           (nearest.empty() ? "" : " (did you mean " + nearest + "?)") + "; headroom " + command->get_name() +
           " --help lists them";
  }
  return what;
}

// CLI11's range check prints its bounds with std::to_string, the largest double as 309 digits ("Value -1 not in range
// 0.000000 to 1797...000.000000"): the value and the bounds as a person writes them.
std::string readable_range(const std::string& what) {
  const auto at = what.find(": Value ");
  const auto range = what.find(" not in range ");
  const auto to = what.find(" to ", range == std::string::npos ? 0 : range);
  if (at == std::string::npos || range == std::string::npos || to == std::string::npos || range < at) return what;
  double low = 0, high = 0;
  try {
    low = std::stod(what.substr(range + 14, to - range - 14));
    high = std::stod(what.substr(to + 4));
  } catch (const std::exception&) {
    return what;
  }
  char bounds[96];
  if (high >= std::numeric_limits<double>::max())
    std::snprintf(bounds, sizeof bounds, low > 0 && low <= std::numeric_limits<double>::min() ? "> 0" : ">= %g", low);
  else
    std::snprintf(bounds, sizeof bounds, "from %g to %g", low, high);
  return what.substr(0, at) + " " + what.substr(at + 8, range - at - 8) + " is out of range (valid: a number " +
         bounds + ")";
}

// An empty value ("--profile ''", "--trace=") was silently taken as "not given": no flag takes an empty value.
void check_empty_values(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) == 0 && !a.empty() && a.back() == '=')
      throw Error(a.substr(0, a.size() - 1) + " is empty: give a value");
    if (a.empty())
      throw Error(i > 0 ? args[i - 1] + " is empty: give a value" : "the command line starts with an empty word");
  }
}

// Metavariables by what a flag takes (CLI11 calls every string option TEXT, counts included).
constexpr std::pair<const char*, const char*> kOptionKinds[] = {{"--top", "INT"},
                                                                {"--gpus", "INT"},  // comm's (the knob's is INT too)
                                                                {"--sharding", "NAME|CODE"},
                                                                {"--max-gpus", "INT"},
                                                                {"--target-seq", "INT"},
                                                                {"--nodes", "INT"},
                                                                {"--bytes", "INT"},
                                                                {"--channels", "INT"},
                                                                {"--nics-per-node", "INT"},
                                                                {"--ranks", "INT"},
                                                                {"--gpus-per-node", "INT"},
                                                                {"--group-size", "INT"},
                                                                {"--accum", "INT"},
                                                                {"--params", "NUMBER"},
                                                                {"--trainable", "NUMBER"},
                                                                {"--min-r2", "NUMBER"},
                                                                {"--weight-bytes", "NUMBER"},
                                                                {"--grad-bytes", "NUMBER"},
                                                                {"--optimizer-bytes", "NUMBER"},
                                                                {"--model", "NAME|FILE"},
                                                                {"--gpu", "NAME|FILE"},
                                                                {"--cluster", "NAME|FILE"},
                                                                {"--framework", "NAME|FILE"},
                                                                {"--profile", "FILE"},
                                                                {"--out", "FILE"},
                                                                {"--trace", "FILE"},
                                                                {"--data-dir", "DIR"},
                                                                {"--ingest", "FILE"},
                                                                {"--from-runs", "FILE"},
                                                                {"--export", "megatron|torchtitan|fsdp"},
                                                                {"--sweep", "VAR=V1,V2,..."},
                                                                {"--constraint", "KNOB<=N|KNOB=VALUE"},
                                                                {"--strategy", "NAME|CODE"}};
// Each command's --help footer.
constexpr std::pair<const char*, const char*> kExamples[] = {
    {"check",
     "headroom check --cluster dgx-h100 -- torchrun --nproc-per-node 8 pretrain_gpt.py --num-layers 32 "
     "--hidden-size 4096 ... --bf16\n  headroom check --cluster dgx-h100 --model llama3.1-8b train.sh"},
    {"estimate",
     "headroom estimate --model llama3.1-8b --cluster dgx-a100-40gb --seq 8192 --tp 4 --pp 2 --gpus 8 "
     "--gbs 1024\n  headroom estimate --model path/to/config.json --gpu h100-80gb --seq 4096 --gpus 8 --json"},
    {"rank",
     "headroom rank --model llama3.1-8b --cluster h100-94gb-x4 --gpus 16 --seq 8192 --gbs 1024 --top 5\n"
     "  headroom rank --model llama3.1-70b --cluster dgx-h100 --gpus 64 --seq 8192 --gbs 512 "
     "--constraint pp=1 --all-shardings"},
    {"mtsl",
     "headroom mtsl --model llama3.1-70b --cluster lumi-mi250x --gpus 8 --tp 4 --dp 2 --lora-rank 128 "
     "--framework pytorch-fsdp\n  headroom mtsl --model llama3.1-8b --gpu h100-94gb --gpus 8 "
     "--sweep gpus=8,16,32\n  headroom mtsl --model llama3.1-8b --gpu h100-94gb --target-seq 131072"},
    {"comm", "headroom comm --strategy paro-igg --params 7e9 --gpus 32 --group-size 8\n  headroom comm --list"},
    {"launch", "headroom launch --model llama3.1-8b --cluster dgx-h100 --seq 8192 --tp 2 --pp 2 --gpus 16 --gbs 64"},
    {"simulate",
     "headroom simulate --collective all-gather --cluster dgx-a100-80gb --nodes 16 --bytes 1073741824\n"
     "  headroom simulate --model llama3.1-8b --cluster dgx-h100 --seq 8192 --tp 2 --pp 2 --gpus 16 "
     "--gbs 64 --trace step.json"},
    {"calibrate",
     "headroom calibrate --backend cpu --quick --out my-cpu.json\n  headroom calibrate --ingest "
     "all_reduce_perf.txt --out my-cluster.json\n  headroom calibrate --from-runs runs.csv "
     "--cluster dgx-h100 --out fitted.json"},
    {"validate", "headroom validate\n  headroom validate --json"}};
// --help: the metavariables of the flags that are not knobs (the knobs set theirs, knobs.hpp) and each command's
// examples.
void describe_options(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    for (const auto& [name, text] : kExamples)
      if (sub->get_name() == name) sub->footer(std::string("\nExamples:\n  ") + text);
    for (const auto& [flag, kind] : kOptionKinds)
      if (CLI::Option* o = sub->get_option_no_throw(flag)) o->type_name(kind);
  }
}

// The command line: every command registered, with its flags described.
void build_app(CLI::App& app, std::ostream& out, std::ostream& err) {
  app.require_subcommand(1);
  app.set_version_flag("--version", "headroom 0.1.0");
  register_calibrate(app, out, err);
  register_check(app, out);
  register_comm(app, out);
  register_estimate(app, out);
  register_launch(app, out);
  register_rank(app, out);
  register_mtsl(app, out);
  register_simulate(app, out);
  register_validate(app, out);
  describe_options(app);
}

std::vector<std::string> split(std::string_view list, char separator = ',') {
  std::vector<std::string> out;
  while (!list.empty()) {
    const auto cut = list.find(separator);
    out.emplace_back(list.substr(0, cut));
    if (cut == std::string_view::npos) break;
    list.remove_prefix(cut + 1);
  }
  return out;
}

const Knob* knob_of_option(const CLI::Option& o) {
  for (const Knob& k : knobs())
    for (const std::string_view spellings : {k.flags, k.off_flags})
      for (const std::string& flag : split(spellings))
        for (const std::string& name : o.get_lnames())
          if (flag == "--" + name) return &k;
  return nullptr;
}

std::string_view type_name(KnobType t) {
  switch (t) {
    case KnobType::count: return "count";
    case KnobType::whole: return "whole";
    case KnobType::flag: return "flag";
    case KnobType::number: return "number";
    case KnobType::choice: return "choice";
    case KnobType::list: return "list";
    case KnobType::text: return "text";
  }
  return "";
}

}  // namespace

std::string describe() {
  std::ostringstream sink;
  CLI::App app("headroom: memory and throughput planning for LLM training", "headroom");
  build_app(app, sink, sink);
  nlohmann::json commands = nlohmann::json::object();
  for (const CLI::App* sub : app.get_subcommands({})) {
    nlohmann::json options = nlohmann::json::array();
    for (const CLI::Option* o : sub->get_options()) {
      if (o->get_lnames().empty() || o->get_lnames().front() == "help") continue;
      const Knob* k = knob_of_option(*o);
      options.push_back({{"names", o->get_lnames()},
                         {"type", o->get_expected_min() == 0 ? "" : o->get_type_name()},
                         {"flag", o->get_expected_min() == 0},
                         {"multi", o->get_items_expected_max() > 1},
                         {"required", o->get_required()},
                         {"knob", k != nullptr ? nlohmann::json(k->name) : nlohmann::json(nullptr)}});
    }
    commands[sub->get_name()] = options;
  }
  nlohmann::json table = nlohmann::json::array();
  for (const Knob& k : knobs())
    table.push_back({{"name", k.name},
                     {"type", type_name(k.type)},
                     {"flags", split(k.flags)},
                     {"off_flags", split(k.off_flags)},
                     {"choices", k.choices.empty() ? nlohmann::json::array() : nlohmann::json(split(k.choices, '|'))},
                     {"aliases", split(k.aliases)},
                     {"default", k.default_text},
                     {"unit", k.unit},
                     {"help", k.help.empty() ? k.off_help : k.help},
                     {"json", k.json},
                     {"log_key", k.log_key}});
  return nlohmann::json{{"commands", commands}, {"knobs", table}}.dump();
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app("headroom: memory and throughput planning for LLM training", "headroom");
  build_app(app, out, err);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them back to front
  try {
    check_subcommand(app, args);
    check_empty_values(args);
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << (app.get_subcommands().empty() ? app.help() : app.get_subcommands().front()->help());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return 0;
  } catch (const CLI::ExtrasError& e) {
    err << "error: " << one_line(unexpected_arguments(app, args, e.what())) << "\n";
    return 2;
  } catch (const CLI::ValidationError& e) {
    err << "error: " << one_line(readable_range(e.what())) << "\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    err << "error: " << one_line(e.what()) << "\n";
    return 2;
  } catch (const QuietExit& e) {
    return e.code();
  } catch (const CheckFailed& e) {
    err << one_line(e.what()) << "\n";
    return 1;
  } catch (const Error& e) {
    err << "error: " << one_line(e.what()) << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    err << "error: out of memory: the request is too large for this machine\n";
    return 2;
  } catch (const std::exception& e) {
    err << "internal error: " << one_line(e.what()) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace headroom::cli
