// A NeMo training config `headroom check` reads (read_nemo_config: libyaml's events flattened to dotted keys, the
// interpolations resolved, every key read or ignored, then the Megatron-LM line it gives read by
// parse_megatron_command), with Hydra's overrides: the input's lines after a line "#overrides", one override each.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "headroom/ingest/measured_runs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> overrides = fuzz::take_overrides(text);
  fuzz::value_or_error([&] {
    const calibrate::MegatronCommand cmd = calibrate::read_nemo_config(text, 0, "fuzz.yaml", overrides);
    fuzz::require(!cmd.read.empty(), "a config read has read keys");
    fuzz::require(cmd.run.layout.contains("tp") && cmd.run.layout.contains("seq"), "a config read gives a layout");
    fuzz::require(!cmd.notes.empty() && cmd.notes.front().starts_with("read as the Megatron-LM arguments"),
                  "the Megatron-LM line read is noted first");
  });
  return 0;
}
