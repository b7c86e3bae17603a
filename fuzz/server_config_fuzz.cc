// Fuzz target server_config: ParseServerConfig (server/config.h), the server's JSON config
// file, its models given in the protobuf JSON mapping of admin.proto's ModelSpec.
//
// Invariants: a refusal is INVALID_ARGUMENT; an accepted config holds what the header
// promises: the limits in their ranges, host:port addresses, valid models with distinct names.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "fuzz/fuzz_check.h"
#include "server/config.h"
#include "server/host_port.h"

namespace streamlearn::fuzz {
namespace {

void CheckRange(const std::optional<uint64_t>& v, uint64_t max, const char* what) {
  if (v.has_value()) FUZZ_CHECK(*v >= 1 && *v <= max, what);
}

void Run(std::string_view text) {
  absl::StatusOr<server::ServerConfig> config = server::ParseServerConfig(text);
  if (!config.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(config.status()), config.status().ToString());
    return;
  }
  constexpr uint64_t kMaxInt = std::numeric_limits<int>::max();
  CheckRange(config->max_batch, kMaxInt, "max_batch");
  CheckRange(config->max_features, kMaxInt, "max_features");
  CheckRange(config->max_t_step, uint64_t{1} << 62, "max_t_step");
  CheckRange(config->max_message_bytes, kMaxInt, "max_message_bytes");
  if (config->listen.has_value()) {
    FUZZ_CHECK(server::CheckHostPort(*config->listen).ok(), *config->listen);
  }
  if (config->metrics.has_value() && !config->metrics->empty()) {
    FUZZ_CHECK(server::CheckHostPort(*config->metrics).ok(), *config->metrics);
  }
  if (config->cluster.has_value()) {
    FUZZ_CHECK(!config->cluster->nats.empty(), "cluster without nats");
    if (config->cluster->replicas.has_value()) {
      FUZZ_CHECK(*config->cluster->replicas >= 1 && *config->cluster->replicas <= 5, "replicas");
    }
  }
  std::set<std::string> names;
  for (const ModelSpec& m : config->models) {
    FUZZ_CHECK(ValidateModelSpec(m).ok(), ValidateModelSpec(m).ToString());
    FUZZ_CHECK(names.insert(m.name).second, m.name);
  }
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
