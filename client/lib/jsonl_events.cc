#include "client/lib/jsonl_events.h"

#include <cassert>
#include <cmath>
#include <string>
#include <utility>

#include "core/common/strict_json.h"
#include "nlohmann/json.hpp"

namespace streamlearn {
namespace {

using nlohmann::json;

// Column of `"name"` in the line, so errors about a field point at it; 1 if not found.
size_t FieldColumn(std::string_view line, std::string_view name) {
  std::string quoted;
  quoted.reserve(name.size() + 2);
  quoted.append(1, '"').append(name).append(1, '"');
  const size_t pos = line.find(quoted);
  return pos == std::string_view::npos ? 1 : pos + 1;
}

bool ReadVector(const json& object, std::string_view line, const char* name, int size,
                std::vector<double>* out, LineError* error) {
  const auto it = object.find(name);
  if (it == object.end()) {
    *error = {1, std::string("missing field \"") + name + "\""};
    return false;
  }
  const size_t column = FieldColumn(line, name);
  if (!it->is_array() || static_cast<int>(it->size()) != size) {
    *error = {column, std::string("field \"") + name + "\": expected an array of " +
                          std::to_string(size) + " numbers, got " +
                          (it->is_array() ? "an array of " + std::to_string(it->size())
                                          : std::string(it->type_name()))};
    return false;
  }
  out->resize(size);
  for (int i = 0; i < size; ++i) {
    const json& x = (*it)[i];
    if (!x.is_number() || !std::isfinite(x.get<double>())) {
      *error = {column, std::string("field \"") + name + "\"[" + std::to_string(i) +
                            "]: expected a finite number, got " + x.dump()};
      return false;
    }
    (*out)[i] = x.get<double>();
  }
  return true;
}

}  // namespace

JsonlEventParser::JsonlEventParser(int d, int d_v) : d_(d), d_v_(d_v) {
  assert(d >= 1 && d_v >= 1);
}

bool JsonlEventParser::ParseLine(std::string_view line, EventRecord* event,
                                 LineError* error) const {
  JsonTextError json_error;
  absl::StatusOr<json> parsed = ParseStrictJson(line, &json_error);
  if (!parsed.ok()) {
    *error = {json_error.column, "invalid JSON: " + json_error.problem};
    return false;
  }
  const json object = *std::move(parsed);
  if (!object.is_object()) {
    *error = {1, std::string("expected a JSON object, got ") + object.type_name()};
    return false;
  }
  for (const auto& [name, value] : object.items()) {
    if (name != "t" && name != "k" && name != "v" && name != "key") {
      *error = {FieldColumn(line, name),
                "unknown field \"" + name + "\" (allowed: \"t\", \"k\", \"v\", \"key\")"};
      return false;
    }
  }
  event->has_t = object.contains("t");
  if (event->has_t) {
    const json& t = object["t"];
    if (!t.is_number_unsigned()) {
      *error = {FieldColumn(line, "t"),
                "field \"t\": expected an unsigned integer, got " + t.dump()};
      return false;
    }
    event->t = t.get<uint64_t>();
  }
  event->has_key = object.contains("key");
  if (event->has_key) {
    const json& key = object["key"];
    if (!key.is_string()) {
      *error = {FieldColumn(line, "key"), "field \"key\": expected a string, got " + key.dump()};
      return false;
    }
    event->key = key.get<std::string>();
  }
  return ReadVector(object, line, "k", d_, &event->k, error) &&
         ReadVector(object, line, "v", d_v_, &event->v, error);
}

}  // namespace streamlearn
