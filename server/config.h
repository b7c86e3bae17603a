// ServerConfig: the server's JSON configuration file.
//
//   {
//     "listen": "0.0.0.0:50051",      // optional; the --listen flag wins when given
//     "metrics": "0.0.0.0:9464",      // optional; "" disables the exposer
//     "data_dir": "./data",           // optional
//     "max_batch": 4096,              // optional, >= 1
//     "max_features": 4096,           // optional, >= 1: features per LMU or fused sample
//     "max_t_step": 1099511627776,    // optional, 1..2^62: how far a new t may jump
//     "max_message_bytes": 16777216,  // optional, >= 1
//     "lmu_secret_file": "/etc/sl/lmu.secret",  // optional; default <data_dir>/lmu.secret
//     "audit_key_file": "/etc/sl/audit.key",    // optional; default <data_dir>/audit.key
//     "encryption_keys": "/etc/sl/tenant-keys",  // optional: <tenant>.key files
//     "tls_cert": "/etc/sl/tls.crt", "tls_key": "/etc/sl/tls.key",   // optional, together
//     "tls_client_ca": "/etc/sl/ca.crt", "tls_peer_ca": "/etc/sl/ca.crt",  // optional
//     "allow_plaintext": false,       // optional
//     "access_file": "/etc/sl/access.json",     // optional (docs/SECURITY.md)
//     "health_listen": "0.0.0.0:8081",          // optional: plaintext health-only port
//     "cluster": {                    // optional: the cluster mode (docs/CLUSTER.md)
//       "nats": "nats://n1:4222,nats://n2:4222",  // required in the object
//       "server_id": "s1", "advertise": "s1:50051", "replicas": 3, "lease_ttl": "6s",
//       "prefix": "SL", "audit_archive_dir": "/var/lib/sl-archive"
//                                     // each optional, as the flags of the same names
//     },
//     "models": [                     // optional; created at start-up
//       {"name": "demo", "shards": 2, "sau": {"d": 64, "d_v": 64, "r": 256}}
//     ]
//   }
//
// Each model is an admin.proto ModelSpec in the protobuf JSON mapping (proto field names or
// their lowerCamel forms; enums by name), parsed with google::protobuf::util::
// JsonStringToMessage, so the schema is exactly the proto's and zeros mean "default" just as in
// Admin.CreateModel. Unknown keys, wrong types and invalid models are errors; so are a key
// given twice in one object and a number beyond the range of a double (the file is read with
// ParseStrictJson, core/common/strict_json.h), and a "listen" or "metrics" address that is not
// host:port with a port in 0..65535 (server/host_port.h). Every error names the file, the
// place (e.g. `models[1] ("demo")`, or `line 3, column 14` for JSON that does not parse) and
// the problem.
//
//   absl::StatusOr<ServerConfig> config = LoadServerConfig("/etc/streamlearn.json");
//
// Thread safety: plain data and functions without shared state.
#ifndef STREAMLEARN_SERVER_CONFIG_H_
#define STREAMLEARN_SERVER_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/shard/model_registry.h"

namespace streamlearn::server {

// The "cluster" object; each unset field keeps its flag's value.
struct ClusterConfig {
  std::string nats;
  std::optional<std::string> server_id;
  std::optional<std::string> advertise;
  std::optional<int> replicas;
  std::optional<absl::Duration> lease_ttl;
  std::optional<std::string> prefix;
  std::optional<std::string> audit_archive_dir;
};

struct ServerConfig {
  // Settings; unset when the file does not give them.
  std::optional<std::string> listen;
  std::optional<std::string> metrics;
  std::optional<std::string> data_dir;
  std::optional<uint64_t> max_batch;
  std::optional<uint64_t> max_features;
  std::optional<uint64_t> max_t_step;
  std::optional<uint64_t> max_message_bytes;
  std::optional<std::string> lmu_secret_file;
  std::optional<std::string> audit_key_file;
  std::optional<std::string> encryption_keys;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> tls_client_ca;
  std::optional<std::string> tls_peer_ca;
  std::optional<bool> allow_plaintext;
  std::optional<std::string> access_file;
  std::optional<std::string> health_listen;
  std::optional<ClusterConfig> cluster;
  // Validated specs (ValidateModelSpec, and sau::ValidateSpec for an SAU part, pass), names
  // distinct.
  std::vector<ModelSpec> models;
  // The same entries read as stored specs (storage::SpecOrigin::kStored): what an entry that
  // leaves an optional field unset meant before that field's default changed. A model stored
  // by an older server matches its config entry under either reading.
  std::vector<ModelSpec> models_as_stored;
};

// Errors: INVALID_ARGUMENT naming the place and the problem.
absl::StatusOr<ServerConfig> ParseServerConfig(std::string_view json_text);

// Reads and parses `path`. Errors name the file: NOT_FOUND / PERMISSION_DENIED when it cannot
// be read, INVALID_ARGUMENT when its content is wrong.
absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_CONFIG_H_
