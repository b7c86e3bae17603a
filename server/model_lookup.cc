#include "server/model_lookup.h"

#include "absl/strings/str_cat.h"

namespace streamlearn::server {

absl::Status RequirePart(const Model& model, ModelPart part) {
  const ModelSpec& spec = model.spec();
  const bool has = part == ModelPart::kSau   ? spec.has_sau
                   : part == ModelPart::kLmu ? spec.has_lmu
                                             : spec.has_fuse;
  if (has) return absl::OkStatus();
  if (part != ModelPart::kFuse && spec.has_fuse) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", spec.name, "' is a fused model (a fuse part alone, no separate ",
        part == ModelPart::kSau ? "sau" : "lmu",
        " part): use the Fuse service (Fuse.Learn, Fuse.Predict)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "model '", spec.name, "' has no ",
      part == ModelPart::kSau ? "sau" : part == ModelPart::kLmu ? "lmu" : "fuse", " part",
      part == ModelPart::kFuse ? " (create the model with a fuse part to use the Fuse service)"
                               : ""));
}

absl::StatusOr<std::shared_ptr<Model>> FindModelWithPart(const ModelRegistry& registry,
                                                         std::string_view name, ModelPart part) {
  absl::StatusOr<std::shared_ptr<Model>> model = registry.Find(name);
  if (!model.ok()) return model.status();
  if (absl::Status s = RequirePart(**model, part); !s.ok()) return s;
  return model;
}

absl::Status BindStreamModel(const ModelRegistry& registry, const storage::Persistence* persistence,
                             const std::string& name, ModelPart part,
                             std::shared_ptr<Model>* model, std::shared_ptr<storage::ModelWriters>* logs) {
  if (*model != nullptr && (*model)->spec().name == name) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<Model>> found = FindModelWithPart(registry, name, part);
  if (!found.ok()) return found.status();
  *model = *std::move(found);
  *logs = persistence != nullptr ? persistence->Find(name) : nullptr;
  return absl::OkStatus();
}

}  // namespace streamlearn::server
