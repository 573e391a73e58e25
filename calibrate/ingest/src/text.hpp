// The text-scanning helpers the readers of runs, logs and traces share (internal to ingest/).
#pragma once

#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headroom::calibrate::text {

[[nodiscard]] std::string lower(std::string text);
[[nodiscard]] std::string at(std::string_view where, int line);
[[nodiscard]] std::string_view trim(std::string_view s);
// The items of a list as Python prints it (['moe', 'layernorm']), as a YAML flow sequence ([moe, layernorm]) or as a
// command's words (moe layernorm): brackets and quotes dropped, split at commas and spaces; none for [].
[[nodiscard]] std::vector<std::string> list_items(std::string_view list);
[[nodiscard]] std::vector<std::string_view> lines_of(std::string_view text);
// A finite non-negative decimal number, all of `s`; nullopt otherwise.
[[nodiscard]] std::optional<double> number(std::string_view s);
// The number that follows `key` on `line` ("elapsed time per iteration (ms): 5630.1 | ..."), commas of
// thousands ("tps: 10,050") dropped.
[[nodiscard]] std::optional<double> number_after(std::string_view line, std::string_view key);
// The measurement that follows `key` on a log line: a positive number_after; a logged zero (a step that took no
// time or moved no tokens, an allocator that reserved nothing) measures nothing and is not one.
[[nodiscard]] std::optional<double> measurement_after(std::string_view line, std::string_view key);
[[nodiscard]] double median(std::vector<double> v);
// Steady state of per-iteration values: the first logged value includes warm-up (compilation, allocator
// growth, NCCL set-up) and is dropped when others follow; the median of the rest resists stragglers.
[[nodiscard]] double steady_state(const std::vector<double>& logged);
[[nodiscard]] bool out_of_memory(std::string_view text);
// A torch dtype as the dtype knobs name it ("torch.bfloat16" → "bf16"; Megatron-LM's arguments.py dtype_map, where
// fp8 is torch.uint8); any other value as it is.
[[nodiscard]] std::string dtype_name(const std::string& v);

// The row of a config reader's key table (rows with a dotted `key`, or a prefix ending in "*" for every key under it)
// that `key` matches, in the table's order; nullptr when none does.
template <class Rules>
[[nodiscard]] auto key_rule(const Rules& rules, std::string_view key) -> decltype(&*std::begin(rules)) {
  for (const auto& r : rules)
    if (r.key == key || (r.key.ends_with('*') && key.starts_with(r.key.substr(0, r.key.size() - 1)))) return &r;
  return nullptr;
}

}  // namespace headroom::calibrate::text
