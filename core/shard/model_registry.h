// ModelRegistry: the named models of one server process and their shards
// (docs/DECISIONS.md, "Identity and routing").
//
//   ModelRegistry reg;
//   auto model = reg.Create(spec);        // INVALID_ARGUMENT / ALREADY_EXISTS
//   auto m = reg.Find("demo");            // NOT_FOUND naming the model
//   SauShard& shard = (*m)->sau((*m)->ShardOf(routing_key));
//   for (ShardPart* part : (*m)->parts(0)) { ... }     // SAU, LMU, Fuse: the ones it has
//
// Models are never removed while the process runs, so a shared_ptr from Find stays valid.
// Thread safety: all methods are thread-safe.
#ifndef STREAMLEARN_CORE_SHARD_MODEL_REGISTRY_H_
#define STREAMLEARN_CORE_SHARD_MODEL_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/mutex.h"
#include "core/common/name_rule.h"
#include "core/fuse/fuse_spec.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/sau_spec.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_spec.h"
#include "core/shard/fuse_shard.h"
#include "core/shard/lmu_shard.h"
#include "core/shard/sau_shard.h"
#include "core/shard/shard_part.h"

namespace streamlearn {

// A model has an SAU, an LMU, or both, in every shard; or a fused learner alone (its own SAU,
// LMU, gate and control plane: core/fuse/fuse_unit.h). A fused model sets has_fuse and clears
// has_sau and has_lmu.
struct ModelSpec {
  std::string name;
  uint32_t shards = 1;
  bool has_sau = true;
  sau::SauSpec sau;
  bool has_lmu = false;
  lmu::LmuSpec lmu;
  bool has_fuse = false;
  fuse::FuseSpec fuse;

  bool has(PartKind kind) const {
    return kind == PartKind::kSau ? has_sau : kind == PartKind::kLmu ? has_lmu : has_fuse;
  }
};

// A model name follows the name rule (core/common/name_rule.h, shared with backup names): 1..64
// bytes of [A-Za-z0-9_.-], and not "." or ".." (names become keys), scoped "tenant/name"
// for a tenant other than the default one (CheckScopedModelName). INVALID_ARGUMENT naming the rule otherwise; the name is quoted
// escaped and cut (QuoteForError), so a binary or huge name never comes back verbatim.
inline constexpr size_t kModelNameMaxBytes = kScopedNameMaxBytes;
absl::Status CheckModelName(std::string_view name);

// Checks name (CheckModelName), shard count (1..1024) and that the model has a part
// (a fuse part alone: with sau or lmu beside it, INVALID_ARGUMENT); the SAU spec is checked by
// sau::ValidateSpec after defaults are resolved, the LMU spec by lmu::ValidateLmuSpec, the
// fuse spec by fuse::ResolveFuseSpec (its messages prefixed "fuse.").
absl::Status ValidateModelSpec(const ModelSpec& spec);

class Model {
 public:
  // Builds the shards; the resolved spec (defaults filled in) is what spec() returns. The LMU's
  // keyed hashes derive from `secret` (lmu/keyed_hash.h).
  static absl::StatusOr<std::shared_ptr<Model>> Create(ModelSpec spec,
                                                       const lmu::HashSecret& secret = {});

  const ModelSpec& spec() const { return spec_; }
  uint32_t num_shards() const { return spec_.shards; }
  // The part of shard i of a kind; REQUIRES: i < num_shards() and spec().has(PartT::kKind).
  template <typename PartT>
  PartT& part(uint32_t i) const {
    return static_cast<PartT&>(*slots_[Slot(i, PartT::kKind)]);
  }
  SauShard& sau(uint32_t i) const { return part<SauShard>(i); }
  LmuShard& lmu(uint32_t i) const { return part<LmuShard>(i); }
  FuseShard& fuse(uint32_t i) const { return part<FuseShard>(i); }
  // The part of shard i of `kind`; null when the model has none. REQUIRES: i < num_shards().
  ShardPart* part(uint32_t i, PartKind kind) const { return slots_[Slot(i, kind)].get(); }
  // The parts shard i has, in PartKind order.
  std::vector<ShardPart*> parts(uint32_t i) const;
  // The SAU's random-feature matrix (a fused model: its fused SAU's).
  const Digest& w_digest() const { return w_digest_; }
  size_t state_bytes() const { return state_bytes_; }

  // The shard a routing key maps to (core/common/routing.h).
  uint32_t ShardOf(std::string_view routing_key) const;

  // Recovery (server/storage/recovery.h): replaces a part by one restored from a snapshot.
  // Only before the model is shared (ModelRegistry::Add). REQUIRES: i < num_shards() and the
  // model has a part of that kind.
  void Replace(uint32_t i, std::unique_ptr<ShardPart> part) {
    const size_t slot = Slot(i, part->kind());
    slots_[slot] = std::move(part);
  }

 private:
  Model() = default;
  ModelSpec spec_;
  Digest w_digest_{};
  size_t state_bytes_ = 0;
  static size_t Slot(uint32_t i, PartKind kind) {
    return size_t{i} * std::size(kPartKinds) + static_cast<size_t>(kind) - 1;
  }
  // Shard i's part of kind k at Slot(i, k); null where the model has no such part.
  std::vector<std::unique_ptr<ShardPart>> slots_;
};

class ModelRegistry {
 public:
  explicit ModelRegistry(const lmu::HashSecret& secret = {}) : secret_(secret) {}

  // `commit` (may be null) runs after the model is built and before it becomes visible, with
  // the registry locked (so a name is committed once); its error fails the creation.
  using ModelCommit = std::function<absl::Status(const std::shared_ptr<Model>&)>;
  absl::StatusOr<std::shared_ptr<Model>> Create(ModelSpec spec, const ModelCommit& commit = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  // Adds a model built elsewhere (recovery). ALREADY_EXISTS if the name is taken.
  absl::Status Add(std::shared_ptr<Model> model) ABSL_LOCKS_EXCLUDED(mu_);
  // INVALID_ARGUMENT for a name that is not a model name (CheckModelName), NOT_FOUND for one
  // that is not registered.
  absl::StatusOr<std::shared_ptr<Model>> Find(std::string_view name) const
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<std::shared_ptr<Model>> List() const ABSL_LOCKS_EXCLUDED(mu_);  // sorted by name
  const lmu::HashSecret& secret() const { return secret_; }

 private:
  const lmu::HashSecret secret_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Model>, std::less<>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_MODEL_REGISTRY_H_
