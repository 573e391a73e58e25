// A torchtitan config registry `headroom check` reads (read_torchtitan_registry: Python tokenized, the function
// --config names followed through the functions it starts from, every field read or ignored), with torchtitan's
// command line: the input's lines after a line "#overrides", one argument each (the first line's --config is the
// function).
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "headroom/ingest/measured_runs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> args = fuzz::take_overrides(text);
  fuzz::value_or_error([&] {
    const calibrate::TorchtitanJob job =
        calibrate::read_torchtitan_registry(text, 8, "torchtitan/models/llama3/config_registry.py", args);
    fuzz::require(!job.read.empty(), "a config read has read fields");
    fuzz::require(job.layout.contains("model") && job.layout.contains("seq") && job.layout.at("gpus") == "8",
                  "a config read gives a model, a sequence and the world it was given");
  });
  return 0;
}
