#include "cli.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string_view>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "headroom/core/error.hpp"

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
constexpr std::pair<const char*, const char*> kOptionKinds[] = {{"--tp", "INT"},
                                                                {"--cp", "INT"},
                                                                {"--pp", "INT"},
                                                                {"--vpp", "INT"},
                                                                {"--ep", "INT"},
                                                                {"--etp", "INT"},
                                                                {"--moe-expert-capacity-factor", "NUMBER"},
                                                                {"--mbs", "INT"},
                                                                {"--gpus", "INT"},
                                                                {"--dp", "INT"},
                                                                {"--gbs", "INT"},
                                                                {"--seq", "INT"},
                                                                {"--lora-rank", "INT"},
                                                                {"--top", "INT"},
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
                                                                {"--decoder-first-pipeline-num-layers", "INT"},
                                                                {"--decoder-last-pipeline-num-layers", "INT"},
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
                                                                {"--lora-targets", "LIST"},
                                                                {"--recompute", "MODE"},
                                                                {"--schedule", "NAME"},
                                                                {"--sharding", "NAME|CODE"},
                                                                {"--strategy", "NAME|CODE"}};
// Each command's --help footer.
constexpr std::pair<const char*, const char*> kExamples[] = {
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
// --help: the metavariables, each command's examples, and the defaults that come from the framework profile rather
// than from the flag.
void describe_options(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    for (const auto& [name, text] : kExamples)
      if (sub->get_name() == name) sub->footer(std::string("\nExamples:\n  ") + text);
    for (const auto& [flag, kind] : kOptionKinds)
      if (CLI::Option* o = sub->get_option_no_throw(flag)) o->type_name(kind);
    for (const char* flag : {"--recompute", "--schedule", "--sharding"})
      if (CLI::Option* o = sub->get_option_no_throw(flag))
        o->description(o->get_description() + " (default: the --framework profile's)");
  }
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app("headroom: memory and throughput planning for LLM training", "headroom");
  app.require_subcommand(1);
  app.set_version_flag("--version", "headroom 0.1.0");
  register_calibrate(app, out, err);
  register_comm(app, out);
  register_estimate(app, out);
  register_launch(app, out);
  register_rank(app, out);
  register_mtsl(app, out);
  register_simulate(app, out);
  register_validate(app, out);
  describe_options(app);
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
