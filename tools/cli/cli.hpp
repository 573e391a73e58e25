// The `headroom` command line, callable in-process (tests) or from main(). Returns the exit code:
// 0 success, 2 bad input (one line on `err`), 1 an internal failure.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace headroom::cli {

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The command line's shape as JSON, for the Python package's keyword mapping and its generated stubs: "commands"
// (each command's options: "names" (long names), "type" (its metavariable: INT, NUMBER, ...; "" for a flag), "flag",
// "multi" (taken several times), "required", "knob" (the knob it spells, knobs.hpp, or null)) and "knobs" (the
// knob table: name, type, flags, off_flags, choices, aliases, default, unit, help, json, log_key).
[[nodiscard]] std::string describe();

// An error message as one readable line: control characters escaped (\n, \x1b), capped at 600 characters.
[[nodiscard]] std::string one_line(std::string_view text);

}  // namespace headroom::cli
