// A NeMo 2.0 pre-training recipe `headroom check` reads (read_nemo_recipe: Python tokenized, pretrain_recipe()
// evaluated through the functions it calls, every setting read or ignored), with NeMo-Run's overrides: the input's
// lines after a line "#overrides", one override each. Every sibling recipe it imports is the input itself, so calls
// across modules (and back into the same one) are followed too. The same text is then read as a Megatron-Bridge
// recipe (read_bridge_recipe) whose function is pretrain_recipe() and whose every megatron.bridge module is the input,
// with the overrides as run_recipe.py's.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "headroom/ingest/measured_runs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> overrides = fuzz::take_overrides(text);
  fuzz::value_or_error([&] {
    const calibrate::MegatronCommand cmd = calibrate::read_nemo_recipe(
        text, 0, "fuzz.py", overrides, [&](const std::string&) -> std::optional<std::string> { return text; });
    fuzz::require(!cmd.read.empty(), "a recipe read has read settings");
    fuzz::require((cmd.run.layout.contains("model") != !cmd.model_unread.empty()) && cmd.run.layout.contains("seq") &&
                      cmd.run.layout.contains("gpus"),
                  "a recipe read gives a model (or says why not), a sequence and a world");
    fuzz::require(!cmd.notes.empty() && cmd.notes.front().starts_with("read as NeMo 2.0 recipe settings"),
                  "the recipe's world is noted first");
  });
  fuzz::value_or_error([&] {
    const calibrate::MegatronCommand cmd =
        calibrate::read_bridge_recipe(text, "pretrain_recipe", 8, "fuzz.py", overrides,
                                      [&](const std::string&) -> std::optional<std::string> { return text; });
    fuzz::require((cmd.run.layout.contains("model") != !cmd.model_unread.empty()) && cmd.run.layout.contains("seq") &&
                      cmd.run.layout.at("gpus") == "8",
                  "a Bridge recipe read gives a model (or says why not), a sequence and --gpus's world");
    fuzz::require(!cmd.notes.empty() && cmd.notes.front().starts_with("read as Megatron-Bridge recipe"),
                  "the Bridge recipe's world is noted first");
  });
  return 0;
}
