#include "text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

namespace headroom::calibrate::text {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string at(std::string_view where, int line) { return std::string(where) + ":" + std::to_string(line); }

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> list_items(std::string_view list) {
  std::vector<std::string> items(1);
  for (const char c : list) {
    if (c == '[' || c == ']' || c == '\'' || c == '"') continue;
    if (c != ',' && c != ' ')
      items.back() += c;
    else if (!items.back().empty())
      items.emplace_back();
  }
  if (items.back().empty()) items.pop_back();
  return items;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::size_t b = 0; b <= text.size();) {
    const auto e = std::min(text.find('\n', b), text.size());
    out.push_back(text.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

// A finite non-negative decimal number, all of `s`; nullopt otherwise.
std::optional<double> number(std::string_view s) {
  s = trim(s);
  double x = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || !std::isfinite(x) || x < 0) return std::nullopt;
  return x;
}

// The number that follows `key` on `line` ("elapsed time per iteration (ms): 5630.1 | ..."), commas of
// thousands ("tps: 10,050") dropped.
std::optional<double> number_after(std::string_view line, std::string_view key) {
  const auto k = line.find(key);
  if (k == std::string_view::npos) return std::nullopt;
  auto rest = trim(line.substr(k + key.size()));
  std::string digits;
  for (const char c : rest) {
    if (c == ',') continue;
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      break;
    digits += c;
  }
  return number(digits);
}

std::optional<double> measurement_after(std::string_view line, std::string_view key) {
  const auto x = number_after(line, key);
  return x && *x > 0 ? x : std::nullopt;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Steady state of per-iteration values: the first logged value includes warm-up (compilation, allocator
// growth, NCCL set-up) and is dropped when others follow; the median of the rest resists stragglers.
double steady_state(const std::vector<double>& logged) {
  if (logged.size() == 1) return logged.front();
  return median({logged.begin() + 1, logged.end()});
}

std::string dtype_name(const std::string& v) {
  for (const auto& [torch_name, name] : {std::pair{"torch.float32", "fp32"}, std::pair{"torch.bfloat16", "bf16"},
                                         std::pair{"torch.float16", "fp16"}, std::pair{"torch.uint8", "fp8"}})
    if (v == torch_name) return name;
  return v;
}

bool out_of_memory(std::string_view text) {
  // torch.OutOfMemoryError ("CUDA out of memory. Tried to allocate ..."), HIP's wording, and the caching
  // allocator's error class name in older releases (torch.cuda.OutOfMemoryError).
  for (const std::string_view k : {"OutOfMemoryError", "CUDA out of memory", "HIP out of memory"})
    if (text.find(k) != std::string_view::npos) return true;
  return false;
}

}  // namespace headroom::calibrate::text
