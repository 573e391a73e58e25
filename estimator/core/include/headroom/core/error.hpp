// Typed errors of the estimator library. The library never prints; the CLI maps Error to exit code 2.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

// A field of a request (a layout or search field: "tp", "lora_rank", "first_stage_layers") as an Error's message
// names it: a marker that each front end shows its own way, the CLI as its flag (--tp), the Python API as its
// keyword (tp).
[[nodiscard]] std::string field(std::string_view name);

// How an Error's fields read: as the CLI's flags or as the field names (the Python API's keywords).
enum class FieldNames { flags, keywords };

// The CLI flag of a field: a knob's first CLI spelling (knobs.hpp: tp → --tp, decoder_first_pipeline_num_layers →
// --decoder-first-pipeline-num-layers), else "--" and the name with '-' for '_'.
[[nodiscard]] std::string flag_of_field(std::string_view name);

// Bad user input (unknown name, invalid layout, malformed spec). The message is one line that names the
// bad value and says what would be valid; what() names the fields it carries as flags.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message);
  explicit Error(const char* message) : Error(std::string(message)) {}

  // The fields the message names, in order (empty when it names none).
  [[nodiscard]] const std::vector<std::string>& fields() const;
  // The message with its fields named as flags (= what()) or as keywords.
  [[nodiscard]] std::string message(FieldNames names) const;

 private:
  struct Marked {
    std::string text;  // with field() markers
    std::vector<std::string> fields;
  };
  std::shared_ptr<const Marked> marked_;  // shared: copying an exception must not throw
};

}  // namespace headroom
