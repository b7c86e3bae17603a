// ModelRegistry: the named models of one server process and their shards (DESIGN: identity).
//
//   ModelRegistry reg;
//   auto model = reg.Create(spec);        // INVALID_ARGUMENT / ALREADY_EXISTS
//   auto m = reg.Find("demo");            // NOT_FOUND naming the model
//   SauShard& shard = (*m)->shard(ShardFor(routing_key, (*m)->num_shards()));
//
// Models are never removed while the process runs, so a shared_ptr from Find stays valid.
// Thread safety: all methods are thread-safe.
#ifndef STREAMLEARN_CORE_SHARD_MODEL_REGISTRY_H_
#define STREAMLEARN_CORE_SHARD_MODEL_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/sau_spec.h"
#include "core/shard/sau_shard.h"

namespace streamlearn {

struct ModelSpec {
  std::string name;
  uint32_t shards = 1;
  sau::SauSpec sau;
};

// Checks name ([A-Za-z0-9_.-]{1,64}) and shard count (1..1024); the SAU spec is checked by
// sau::ValidateSpec after defaults are resolved.
absl::Status ValidateModelSpec(const ModelSpec& spec);

class Model {
 public:
  // Builds the shards; the resolved spec (defaults filled in) is what spec() returns.
  static absl::StatusOr<std::shared_ptr<Model>> Create(ModelSpec spec);

  const ModelSpec& spec() const { return spec_; }
  uint32_t num_shards() const { return static_cast<uint32_t>(shards_.size()); }
  SauShard& shard(uint32_t i) { return *shards_[i]; }
  const SauShard& shard(uint32_t i) const { return *shards_[i]; }
  const Digest& w_digest() const { return w_digest_; }
  size_t state_bytes() const { return state_bytes_; }

  // The shard a routing key maps to (core/shard/routing.h).
  uint32_t ShardOf(std::string_view routing_key) const;

 private:
  Model() = default;
  ModelSpec spec_;
  Digest w_digest_{};
  size_t state_bytes_ = 0;
  std::vector<std::unique_ptr<SauShard>> shards_;
};

class ModelRegistry {
 public:
  absl::StatusOr<std::shared_ptr<Model>> Create(ModelSpec spec);
  absl::StatusOr<std::shared_ptr<Model>> Find(std::string_view name) const;
  std::vector<std::shared_ptr<Model>> List() const;  // sorted by name

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Model>, std::less<>> models_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_MODEL_REGISTRY_H_
