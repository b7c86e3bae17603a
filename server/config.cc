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

constexpr const char* kKeys[] = {"listen",          "metrics",        "data_dir",
                                 "max_batch",       "max_features",   "max_t_step",
                                 "max_message_bytes",
                                 "lmu_secret_file", "audit_key_file", "encryption_keys", "tls_cert",
                                 "tls_key",         "tls_client_ca",  "tls_peer_ca",
                                 "allow_plaintext", "access_file",    "health_listen",
                                 "cluster",
                                 "models"};
constexpr const char* kClusterKeys[] = {"nats",     "server_id", "advertise",
                                        "replicas", "lease_ttl", "prefix",
                                        "audit_archive_dir"};

template <size_t N>
absl::Status CheckKeys(const Json& object, const char* const (&keys)[N], const char* where) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const char* k : keys) known = known || key == k;
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(where, "unknown key \"", key,
                                                     "\" (expected ", absl::StrJoin(keys, ", "),
                                                     ")"));
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

absl::Status ReadBool(const Json& root, const char* key, std::optional<bool>* out) {
  auto it = root.find(key);
  if (it == root.end()) return absl::OkStatus();
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", key, "\" must be true or false, got ", it->type_name()));
  }
  *out = it->get<bool>();
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

// "cluster": {"nats": "nats://...", "server_id": .., "advertise": .., "replicas": 1..5,
// "lease_ttl": ">= 1s", "prefix": "[A-Z0-9_]+", "audit_archive_dir": a path}; nats is
// required.
absl::Status ReadCluster(const Json& root, std::optional<ClusterConfig>* out) {
  auto it = root.find("cluster");
  if (it == root.end()) return absl::OkStatus();
  if (!it->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"cluster\" must be an object, got ", it->type_name()));
  }
  RETURN_IF_ERROR(CheckKeys(*it, kClusterKeys, "cluster: "));
  ClusterConfig c;
  auto with_place = [](const absl::Status& s) {
    return s.ok() ? s : absl::InvalidArgumentError(absl::StrCat("cluster: ", s.message()));
  };
  std::optional<std::string> nats, lease_ttl;
  RETURN_IF_ERROR(with_place(ReadString(*it, "nats", &nats)));
  if (!nats.has_value() || nats->empty()) {
    return absl::InvalidArgumentError(
        "cluster: \"nats\" (the NATS URLs, comma-separated) is required");
  }
  c.nats = *nats;
  RETURN_IF_ERROR(with_place(ReadString(*it, "server_id", &c.server_id)));
  RETURN_IF_ERROR(with_place(ReadString(*it, "advertise", &c.advertise)));
  if (c.advertise.has_value()) {
    if (absl::Status s = CheckHostPort(*c.advertise); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cluster: \"advertise\": ", s.message()));
    }
  }
  std::optional<uint64_t> replicas;
  RETURN_IF_ERROR(with_place(ReadPositive(*it, "replicas", 5, &replicas)));
  if (replicas.has_value()) c.replicas = static_cast<int>(*replicas);
  RETURN_IF_ERROR(with_place(ReadString(*it, "lease_ttl", &lease_ttl)));
  if (lease_ttl.has_value()) {
    absl::Duration d;
    if (!absl::ParseDuration(*lease_ttl, &d) || d < absl::Seconds(1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster: \"lease_ttl\" must be a duration >= 1s (\"6s\"), got \"", *lease_ttl, "\""));
    }
    c.lease_ttl = d;
  }
  RETURN_IF_ERROR(with_place(ReadString(*it, "prefix", &c.prefix)));
  RETURN_IF_ERROR(with_place(ReadString(*it, "audit_archive_dir", &c.audit_archive_dir)));
  *out = std::move(c);
  return absl::OkStatus();
}

// One entry of "models": protobuf JSON -> v1::ModelSpec -> ModelSpec, then validated. Also the
// same entry read as a stored spec (*as_stored, not validated: it is only compared with a
// stored model).
absl::StatusOr<ModelSpec> ParseModel(const Json& entry, ModelSpec* as_stored) {
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
  absl::StatusOr<ModelSpec> stored =
      storage::ModelSpecFromProto(wire, storage::SpecOrigin::kStored);
  if (!stored.ok()) return stored.status();
  *as_stored = *std::move(stored);
  RETURN_IF_ERROR(ValidateModelSpec(*spec));
  if (spec->has_sau) {
    RETURN_IF_ERROR(sau::ValidateSpec(sau::ResolveDefaults(spec->sau)));
  }
  return spec;
}

absl::Status ReadModels(const Json& root, std::vector<ModelSpec>* out,
                        std::vector<ModelSpec>* as_stored) {
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
    ModelSpec stored;
    absl::StatusOr<ModelSpec> spec = ParseModel(entry, &stored);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", spec.status().message()));
    }
    if (auto [prev, inserted] = seen.emplace(spec->name, i); !inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": duplicate model name, also in models[", prev->second, "]"));
    }
    out->push_back(*std::move(spec));
    as_stored->push_back(std::move(stored));
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
  RETURN_IF_ERROR(CheckKeys(root, kKeys, ""));
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
  RETURN_IF_ERROR(ReadPositive(root, "max_features", kMaxInt, &config.max_features));
  RETURN_IF_ERROR(ReadPositive(root, "max_t_step", uint64_t{1} << 62, &config.max_t_step));
  if (absl::Status s = ReadPositive(root, "max_message_bytes", kMaxInt, &config.max_message_bytes);
      !s.ok()) {
    return s;
  }
  RETURN_IF_ERROR(ReadString(root, "audit_key_file", &config.audit_key_file));
  RETURN_IF_ERROR(ReadString(root, "encryption_keys", &config.encryption_keys));
  RETURN_IF_ERROR(ReadString(root, "tls_cert", &config.tls_cert));
  RETURN_IF_ERROR(ReadString(root, "tls_key", &config.tls_key));
  RETURN_IF_ERROR(ReadString(root, "tls_client_ca", &config.tls_client_ca));
  RETURN_IF_ERROR(ReadString(root, "tls_peer_ca", &config.tls_peer_ca));
  RETURN_IF_ERROR(ReadBool(root, "allow_plaintext", &config.allow_plaintext));
  RETURN_IF_ERROR(ReadString(root, "access_file", &config.access_file));
  RETURN_IF_ERROR(ReadString(root, "health_listen", &config.health_listen));
  if (absl::Status s = CheckAddress("health_listen", config.health_listen, /*may_be_empty=*/true);
      !s.ok()) {
    return s;
  }
  RETURN_IF_ERROR(ReadCluster(root, &config.cluster));
  RETURN_IF_ERROR(ReadModels(root, &config.models, &config.models_as_stored));
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
