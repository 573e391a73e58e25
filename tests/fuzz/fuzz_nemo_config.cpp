// A NeMo training config `headroom check` reads (read_nemo_config: libyaml's events flattened to dotted keys, the
// interpolations resolved, every key read or ignored, then the Megatron-LM line it gives read by
// parse_megatron_command); and the keys of a change between its layout and another.
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"
#include "headroom/ingest/measured_runs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::value_or_error([&] {
    const calibrate::MegatronCommand cmd = calibrate::read_nemo_config(text, 0, "fuzz.yaml");
    fuzz::require(!cmd.read.empty(), "a config read has read keys");
    fuzz::require(cmd.run.layout.contains("tp") && cmd.run.layout.contains("seq"), "a config read gives a layout");
    fuzz::require(!cmd.notes.empty() && cmd.notes.front().starts_with("read as the Megatron-LM arguments"),
                  "the Megatron-LM line read is noted first");
  });
  return 0;
}
