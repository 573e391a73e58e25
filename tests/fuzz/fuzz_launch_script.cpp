// A launch script `headroom check` reads (launch_script_command: its variables, arrays and if blocks followed).
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "headroom/ingest/measured_runs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::value_or_error([&] {
    const auto words = calibrate::launch_script_command(text, "pretrain_gpt.py", "fuzz.sh");
    fuzz::require(!words.empty(), "the command has at least the training script");
  });
  return 0;
}
