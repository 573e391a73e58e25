#include "headroom/estimator/framework.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include <nlohmann/json.hpp>

#include "headroom/estimator/error.hpp"
#include "headroom/estimator/units.hpp"

namespace headroom {

namespace {

// Names are case-insensitive, as spec and sharding names are (DESIGN.md: "Names are case-insensitive").
std::string lowered(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Recompute parse_recompute(std::string_view text) {
  const std::string name = lowered(text);
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  throw Error("unknown recompute mode '" + std::string(text) + "' (valid: none, selective, full)");
}

Schedule parse_schedule(std::string_view text) {
  const std::string name = lowered(text);
  if (name == "1f1b") return Schedule::one_f_one_b;
  if (name == "interleaved") return Schedule::interleaved;
  if (name == "gpipe") return Schedule::gpipe;
  throw Error("unknown pipeline schedule '" + std::string(text) + "' (valid: 1f1b, interleaved, gpipe)");
}

Shard parse_shard(std::string_view text) {
  const auto s = text.size() == 1 && text[0] >= 'A' && text[0] <= 'Z' ? shard_from_letter(text[0]) : std::nullopt;
  if (!s) throw Error("unknown shard code '" + std::string(text) + "' (valid: N, I, G)");
  return *s;
}

StateSharding parse_sharding_code(std::string_view code) {
  const bool upper = std::all_of(code.begin(), code.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
  const auto s = upper ? sharding_from_code(code) : std::nullopt;
  if (!s) throw Error("sharding code '" + std::string(code) + "' must be three letters of N, I, G (P, G, OS), e.g. NNG");
  return *s;
}

Layout default_layout(const FrameworkProfile& f) {
  Layout l;
  l.sequence_parallel = f.sequence_parallel;
  l.flash_attention = f.flash_attention;
  l.schedule = f.schedule;
  l.recompute = f.recompute;
  l.precision = f.precision;
  l.sharding = f.sharding;
  l.fsdp_unit_buffers = f.fsdp_unit_buffers;
  return l;
}

FrameworkProfile framework_from_json(const nlohmann::json& j) {
  FrameworkProfile f;
  f.name = j.at("name").get<std::string>();
  f.sequence_parallel = j.at("sequence_parallel").get<bool>();
  f.flash_attention = j.at("flash_attention").get<bool>();
  f.schedule = parse_schedule(j.at("schedule").get<std::string>());
  f.recompute = parse_recompute(j.at("recompute").get<std::string>());
  const auto& p = j.at("precision");
  f.precision = {p.at("weight_bytes").get<double>(), p.at("grad_bytes").get<double>(),
                 p.at("optimizer_bytes").get<double>()};
  const auto& s = j.at("sharding");
  f.sharding = {parse_shard(s.at("params").get<std::string>()), parse_shard(s.at("grads").get<std::string>()),
                parse_shard(s.at("optimizer").get<std::string>())};
  f.fsdp_unit_buffers = j.value("fsdp_unit_buffers", std::int64_t{0});
  if (j.contains("supported_shardings"))
    for (const auto& code : j.at("supported_shardings")) f.supported_shardings.push_back(parse_sharding_code(code.get<std::string>()));
  if (j.contains("supported_recompute"))
    for (const auto& r : j.at("supported_recompute")) f.supported_recompute.push_back(parse_recompute(r.get<std::string>()));
  if (j.contains("supported_schedules"))
    for (const auto& x : j.at("supported_schedules")) f.supported_schedules.push_back(parse_schedule(x.get<std::string>()));
  f.uneven_pipeline_stages = j.value("uneven_pipeline_stages", false);
  const auto& r = j.at("residual");
  f.residual.name = f.name;
  f.residual.fixed_bytes = r.at("fixed_GiB").get<double>() * kGiB;
  f.residual.logits_bytes_per_element = r.at("logits_bytes_per_element").get<double>();
  f.residual.optimizer_shard_bytes_per_param = r.at("optimizer_shard_bytes_per_param").get<double>();
  f.residual.cp_communicator_bytes = r.at("cp_communicator_GiB").get<double>() * kGiB;
  f.residual.capacity_share = r.value("capacity_share", 0.0);
  if (r.contains("uncertainty"))
    f.memory_band = {r.at("uncertainty").at("peak_low").get<double>(), r.at("uncertainty").at("peak_high").get<double>(),
                     true};
  return f;
}

}  // namespace headroom
