// Model lookup for the data-plane services: the named model, refused unless it has the part
// the service serves (a model has an SAU part, an LMU part, or both; or a fuse part alone).
//
//   absl::StatusOr<std::shared_ptr<Model>> m =
//       FindModelWithPart(registry, "clicks", PartKind::kLmu);
//   // NOT_FOUND "model 'clicks' not found"
//   // FAILED_PRECONDITION "model 'clicks' has no lmu part"
//   // FAILED_PRECONDITION "model 'f' is a fused model (a fuse part alone): use the Fuse
//   //                      service (Fuse.Learn, Fuse.Predict)"   (SAU / LMU calls on it)
//
// Thread safety: as ModelRegistry::Find (thread-safe).
#ifndef STREAMLEARN_SERVER_MODEL_LOOKUP_H_
#define STREAMLEARN_SERVER_MODEL_LOOKUP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/shard/model_registry.h"

namespace streamlearn::server {

// FAILED_PRECONDITION naming the model and the part if `model` lacks it.
absl::Status RequirePart(const Model& model, PartKind part);

// Errors: NOT_FOUND (no such model), FAILED_PRECONDITION (the model lacks the part).
absl::StatusOr<std::shared_ptr<Model>> FindModelWithPart(const ModelRegistry& registry,
                                                         std::string_view name, PartKind part);

// The shard of `routing_key` in the named model; nullopt when there is no such model.
std::optional<uint32_t> ShardOfKey(const ModelRegistry& registry, std::string_view model,
                                   std::string_view routing_key);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_MODEL_LOOKUP_H_
