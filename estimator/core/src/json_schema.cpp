#include "headroom/core/json_schema.hpp"

#include <cmath>
#include <string>

#include "headroom/core/error.hpp"

namespace headroom {
namespace {

using nlohmann::json;

bool has_type(const json& value, std::string_view type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    // 7e9 written in a spec is an integer in JSON Schema's sense if it has no fractional part.
    const double x = value.is_number_float() ? value.get<double>() : 0.5;
    return std::abs(x) < 9.0e18 && std::floor(x) == x;
  }
  return false;
}

std::string short_dump(const json& value) {
  std::string s = value.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

[[noreturn]] void fail(std::string_view where, const std::string& path, const std::string& what) {
  throw Error(std::string(where) + ": " + (path.empty() ? std::string("document") : path) + " " + what);
}

void validate(const json& value, const json& schema, std::string_view where, const std::string& path) {
  if (auto it = schema.find("type"); it != schema.end()) {
    bool ok = false;
    std::string expected;
    if (it->is_array()) {
      for (const auto& t : *it) {
        ok = ok || has_type(value, t.get<std::string>());
        expected += (expected.empty() ? "" : " or ") + t.get<std::string>();
      }
    } else {
      expected = it->get<std::string>();
      ok = has_type(value, expected);
    }
    if (!ok) fail(where, path, "must be " + expected + " (got " + short_dump(value) + ")");
  }
  if (auto it = schema.find("const"); it != schema.end() && value != *it) {
    fail(where, path, "must be " + it->dump() + " (got " + short_dump(value) + ")");
  }
  if (auto it = schema.find("enum"); it != schema.end()) {
    bool found = false;
    for (const auto& e : *it) found = found || e == value;
    if (!found) fail(where, path, "must be one of " + it->dump() + " (got " + short_dump(value) + ")");
  }
  if (value.is_number()) {
    const double x = value.get<double>();
    const std::string got = " (got " + short_dump(value) + ")";
    if (auto it = schema.find("minimum"); it != schema.end() && x < it->get<double>())
      fail(where, path, "must be >= " + it->dump() + got);
    if (auto it = schema.find("maximum"); it != schema.end() && x > it->get<double>())
      fail(where, path, "must be <= " + it->dump() + got);
    if (auto it = schema.find("exclusiveMinimum"); it != schema.end() && x <= it->get<double>())
      fail(where, path, "must be > " + it->dump() + got);
    if (auto it = schema.find("exclusiveMaximum"); it != schema.end() && x >= it->get<double>())
      fail(where, path, "must be < " + it->dump() + got);
  }
  if (value.is_string()) {
    if (auto it = schema.find("minLength");
        it != schema.end() && value.get<std::string>().size() < it->get<std::size_t>())
      fail(where, path, "must have at least " + it->dump() + " characters");
  }
  if (value.is_array()) {
    if (auto it = schema.find("minItems"); it != schema.end() && value.size() < it->get<std::size_t>())
      fail(where, path, "must have at least " + it->dump() + " items");
    if (auto it = schema.find("items"); it != schema.end()) {
      for (std::size_t i = 0; i < value.size(); ++i)
        validate(value[i], *it, where, path + "[" + std::to_string(i) + "]");
    }
  }
  if (value.is_object()) {
    const json empty = json::object();
    const auto props_it = schema.find("properties");
    const json& props = props_it != schema.end() ? *props_it : empty;
    if (auto it = schema.find("required"); it != schema.end()) {
      for (const auto& key : *it) {
        if (!value.contains(key.get<std::string>()))
          fail(where, path.empty() ? "" : path, "is missing required key '" + key.get<std::string>() + "'");
      }
    }
    const auto extra = schema.find("additionalProperties");
    for (const auto& [key, child] : value.items()) {
      const std::string child_path = path.empty() ? key : path + "." + key;
      if (auto p = props.find(key); p != props.end()) {
        validate(child, *p, where, child_path);
      } else if (extra != schema.end()) {
        if (extra->is_boolean() && !extra->get<bool>()) {
          std::string known;
          for (const auto& [k, unused] : props.items()) known += (known.empty() ? "" : ", ") + k;
          fail(where, child_path, "is not a known key (known: " + known + ")");
        }
        if (extra->is_object()) validate(child, *extra, where, child_path);
      }
    }
  }
}

}  // namespace

void validate_against_schema(const json& doc, const json& schema, std::string_view where) {
  validate(doc, schema, where, "");
}

}  // namespace headroom
