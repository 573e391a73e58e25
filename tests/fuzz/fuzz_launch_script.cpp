// A launch script `headroom check` reads (launch_script_command: its variables, arrays, if blocks and here-documents
// followed), then its command as check reads it (parse_megatron_command) and, for a DeepSpeed launch whose config the
// script writes, that config (read_deepspeed_config); then each outcome of the tests it cannot evaluate
// (launch_script_variants).
#include <cstdint>
#include <map>
#include <string>

#include "fuzz_support.hpp"
#include "headroom/ingest/measured_runs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::value_or_error([&] {
    std::map<std::string, std::string> files;
    const auto words = calibrate::launch_script_command(text, "pretrain_gpt.py", "fuzz.sh", {}, &files);
    fuzz::require(!words.empty(), "the command has at least the training script");
    calibrate::MegatronCommand cmd = calibrate::parse_megatron_command(words, 8, "fuzz.sh");
    if (const auto config = files.find(cmd.deepspeed_config); cmd.deepspeed && config != files.end()) {
      calibrate::read_deepspeed_config(config->second, "fuzz.json", cmd);
      fuzz::require(cmd.run.layout.contains("sharding"), "a DeepSpeed config read gives the sharding");
    }
  });
  fuzz::value_or_error([&] {
    const auto variants = calibrate::launch_script_variants(text, "pretrain_gpt.py", "fuzz.sh");
    fuzz::require(!variants.empty() && variants.size() <= calibrate::kMaxLaunchScriptVariants,
                  "one command for each outcome, at most kMaxLaunchScriptVariants");
    for (const auto& v : variants) fuzz::require(!v.command.empty(), "each outcome's command runs the script");
  });
  return 0;
}
