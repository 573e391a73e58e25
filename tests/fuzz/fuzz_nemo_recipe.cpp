// A NeMo 2.0 pre-training recipe `headroom check` reads (read_nemo_recipe: Python tokenized, the top-level functions'
// parameters and statements, the calls of model(), trainer() and pretrain_recipe() as expressions, every setting read
// or ignored), with NeMo-Run's overrides: the input's lines after a line "#overrides", one override each.
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
    const calibrate::MegatronCommand cmd = calibrate::read_nemo_recipe(text, 0, "fuzz.py", overrides);
    fuzz::require(!cmd.read.empty(), "a recipe read has read settings");
    fuzz::require(cmd.run.layout.contains("model") && cmd.run.layout.contains("seq") && cmd.run.layout.contains("gpus"),
                  "a recipe read gives a model, a sequence and a world");
    fuzz::require(!cmd.notes.empty() && cmd.notes.front().starts_with("read as NeMo 2.0 recipe settings"),
                  "the recipe's world is noted first");
  });
  return 0;
}
