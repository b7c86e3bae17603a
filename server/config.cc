#include "server/config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "admin.pb.h"
#include "core/common/status_macros.h"
#include "core/common/strict_json.h"
#include "core/sau/sau_spec.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "server/host_port.h"
#include "server/storage/spec_conversion.h"

namespace streamlearn::server {
namespace {

using Json = nlohmann::json;

constexpr const char* kKeys[] = {"listen",    "metrics",           "data_dir",       "max_batch",
                                 "max_message_bytes", "lmu_secret_file", "models"};

absl::Status CheckKeys(const Json& root) {
  for (const auto& [key, value] : root.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown key \"", key, "\" (expected ", absl::StrJoin(kKeys, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadString(const Json& root, const char* key, std::optional<std::string>* out) {
  auto it = root.find(key);
  if (it == root.end()) return absl::OkStatus();
  if (!it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", key, "\" must be a string, got ", it->type_name()));
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

// A "listen" or "metrics" address, when given: host:port ("" disables the metrics exposer).
absl::Status CheckAddress(const char* key, const std::optional<std::string>& address,
                          bool may_be_empty) {
  if (!address.has_value() || (may_be_empty && address->empty())) return absl::OkStatus();
  if (absl::Status s = CheckHostPort(*address); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\": ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ReadPositive(const Json& root, const char* key, uint64_t max,
                          std::optional<uint64_t>* out) {
  auto it = root.find(key);
  if (it == root.end()) return absl::OkStatus();
  if (!it->is_number_unsigned() || it->get<uint64_t>() == 0 || it->get<uint64_t>() > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", key, "\" must be an integer in 1..", max, ", got ", it->dump()));
  }
  *out = it->get<uint64_t>();
  return absl::OkStatus();
}

// One entry of "models": protobuf JSON -> v1::ModelSpec -> ModelSpec, then validated.
absl::StatusOr<ModelSpec> ParseModel(const Json& entry) {
  if (!entry.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("must be a ModelSpec object, got ", entry.type_name()));
  }
  v1::ModelSpec wire;
  const auto parsed = google::protobuf::util::JsonStringToMessage(entry.dump(), &wire);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a valid ModelSpec: ", std::string(parsed.message().data(), parsed.message().size())));
  }
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(wire);
  if (!spec.ok()) return spec.status();
  RETURN_IF_ERROR(ValidateModelSpec(*spec));
  if (spec->has_sau) {
    RETURN_IF_ERROR(sau::ValidateSpec(sau::ResolveDefaults(spec->sau)));
  }
  return spec;
}

absl::Status ReadModels(const Json& root, std::vector<ModelSpec>* out) {
  auto it = root.find("models");
  if (it == root.end()) return absl::OkStatus();
  if (!it->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"models\" must be an array, got ", it->type_name()));
  }
  std::map<std::string, size_t, std::less<>> seen;  // name -> index
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& entry = (*it)[i];
    std::string where = absl::StrCat("models[", i, "]");
    if (entry.is_object() && entry.contains("name") && entry["name"].is_string()) {
      absl::StrAppend(&where, " (\"", entry["name"].get<std::string>(), "\")");
    }
    absl::StatusOr<ModelSpec> spec = ParseModel(entry);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", spec.status().message()));
    }
    if (auto [prev, inserted] = seen.emplace(spec->name, i); !inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": duplicate model name, also in models[", prev->second, "]"));
    }
    out->push_back(*std::move(spec));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ServerConfig> ParseServerConfig(std::string_view json_text) {
  absl::StatusOr<Json> parsed = ParseStrictJson(json_text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", parsed.status().message()));
  }
  const Json root = *std::move(parsed);
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the top level must be a JSON object, got ", root.type_name()));
  }
  ServerConfig config;
  constexpr uint64_t kMaxInt = std::numeric_limits<int>::max();
  RETURN_IF_ERROR(CheckKeys(root));
  RETURN_IF_ERROR(ReadString(root, "listen", &config.listen));
  RETURN_IF_ERROR(ReadString(root, "metrics", &config.metrics));
  if (absl::Status s = CheckAddress("listen", config.listen, /*may_be_empty=*/false); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckAddress("metrics", config.metrics, /*may_be_empty=*/true); !s.ok()) {
    return s;
  }
  RETURN_IF_ERROR(ReadString(root, "data_dir", &config.data_dir));
  if (absl::Status s = ReadString(root, "lmu_secret_file", &config.lmu_secret_file); !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadPositive(root, "max_batch", kMaxInt, &config.max_batch); !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadPositive(root, "max_message_bytes", kMaxInt, &config.max_message_bytes);
      !s.ok()) {
    return s;
  }
  RETURN_IF_ERROR(ReadModels(root, &config.models));
  return config;
}

absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return absl::Status(err == 0 ? absl::StatusCode::kNotFound : absl::ErrnoToStatusCode(err),
                        absl::StrCat("config file '", path, "': cannot read: ",
                                     err == 0 ? "cannot open" : std::strerror(err)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("config file '", path, "': read error"));
  }
  absl::StatusOr<ServerConfig> config = ParseServerConfig(text.str());
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat("config file '", path, "': ", config.status().message()));
  }
  return config;
}

}  // namespace streamlearn::server
