// A validator for the subset of JSON Schema (draft 2020-12) that headroom's spec schemas use:
// type, properties, required, additionalProperties (false or a schema), items, enum, const,
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, minItems, minLength, oneOf-free.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace headroom {

// Throws Error("<where>: <json path> <what is wrong>") on the first violation.
void validate_against_schema(const nlohmann::json& doc, const nlohmann::json& schema, std::string_view where);

}  // namespace headroom
