#include "server/model_lookup.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/common/routing.h"
#include "core/common/status_macros.h"

namespace streamlearn::server {

absl::Status RequirePart(const Model& model, PartKind part) {
  const ModelSpec& spec = model.spec();
  if (spec.has(part)) return absl::OkStatus();
  if (part != PartKind::kFuse && spec.has_fuse) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", spec.name, "' is a fused model (a fuse part alone, no separate ",
        absl::string_view(PartName(part).data(), PartName(part).size()),
        " part): use the Fuse service (Fuse.Learn, Fuse.Predict)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "model '", spec.name, "' has no ",
      absl::string_view(PartName(part).data(), PartName(part).size()), " part",
      part == PartKind::kFuse ? " (create the model with a fuse part to use the Fuse service)"
                               : ""));
}

absl::StatusOr<std::shared_ptr<Model>> FindModelWithPart(const ModelRegistry& registry,
                                                         std::string_view name, PartKind part) {
  absl::StatusOr<std::shared_ptr<Model>> model = registry.Find(name);
  if (!model.ok()) return model.status();
  RETURN_IF_ERROR(RequirePart(**model, part));
  return model;
}

std::optional<uint32_t> ShardOfKey(const ModelRegistry& registry, std::string_view model,
                                   std::string_view routing_key) {
  absl::StatusOr<std::shared_ptr<Model>> m = registry.Find(model);
  if (!m.ok()) return std::nullopt;
  return ShardFor(routing_key, (*m)->num_shards());
}

}  // namespace streamlearn::server
