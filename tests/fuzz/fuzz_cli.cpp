// The `headroom` command line: CLI11 and every subcommand's flag and number parsing, run in-process through
// cli::run as main() runs it. The input is the argument list, one argument per line. Contract: exit code 0, or
// 2 with exactly one line "error: ..." on stderr (or check's verdicts 3 and 4, with its answer on stdout); 1
// ("internal error") means an exception other than Error got through. The fuzzer must not write files or wander the
// file system, so arguments naming an output (--out, --trace, --html) and paths that leave the scratch working
// directory (absolute, "..") are not run; the scratch directory holds a headroom model, a Hugging Face config, a
// calibration profile and performance coefficients to name. `validate` is not run: it reads no input but the shipped
// data and takes seconds; nor are simulations of more than 16 nodes, GPUs, micro-batches or channels (see cheap()).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "fuzz_support.hpp"

namespace {

namespace fs = std::filesystem;
using headroom::fuzz::fail;

bool runnable(std::string_view arg) {
  if (arg.rfind("--out", 0) == 0 || arg.rfind("--trace", 0) == 0 || arg.rfind("--html", 0) == 0) return false;
  if (arg == "validate") return false;
  if (!arg.empty() && arg.front() == '/') return false;
  return arg.find("..") == std::string_view::npos && arg.find("=/") == std::string_view::npos;
}

// simulate is bounded (cmd_simulate.cpp), but a ring over its largest groups on several channels takes minutes
// under ASan: counts stay small so that one input stays well inside run-fuzz.sh's timeout.
bool cheap(const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "simulate") == args.end()) return true;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = i > 0 ? args[i - 1] : "", value = args[i];
    if (const auto eq = value.find('='); eq != std::string::npos) {
      flag = value.substr(0, eq);
      value = value.substr(eq + 1);
    }
    if (flag == "--bytes" || flag == "--seq" || flag == "--seq-length") continue;
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && !(x <= 16)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const fs::path data = headroom::fuzz::data_dir();
  ::setenv("HEADROOM_DATA_DIR", data.c_str(), 1);
  const fs::path& dir = headroom::fuzz::scratch_dir();
  fs::copy_file(data / "models" / "llama3.1-8b.json", dir / "model.json");
  fs::copy_file(data / "profiles" / "cpu-example-quick.json", dir / "profile.json");
  fs::copy_file(data / "perf" / "megatron.json", dir / "perf.json");
  std::ofstream(dir / "config.json") << R"({"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": true})";
  fs::current_path(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(in, line);) {
    if (!runnable(line)) return -1;  // not added to the corpus
    args.push_back(line);
  }
  if (!cheap(args)) return -1;
  std::ostringstream out, err;
  const int code = headroom::cli::run(args, out, err);
  const std::string e = err.str();
  if (code == 0) return 0;
  // check's verdicts: 3 uncertain, 4 out of memory, with the answer on stdout and nothing on stderr.
  const bool verdict = !args.empty() && args.front() == "check" && (code == 3 || code == 4);
  if (verdict && e.empty() && !out.str().empty()) return 0;
  if (code != 2) fail("exit code " + std::to_string(code) + ": " + e);
  if (e.rfind("error: ", 0) != 0 || e.empty() || e.back() != '\n' || e.find('\n') != e.size() - 1)
    fail("exit code 2 without exactly one line \"error: ...\" on stderr: " + e);
  return 0;
}
