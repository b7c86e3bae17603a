#include "server/model_lookup.h"

#include "absl/strings/str_cat.h"

namespace streamlearn::server {

absl::Status RequirePart(const Model& model, ModelPart part) {
  const bool has = part == ModelPart::kSau ? model.spec().has_sau : model.spec().has_lmu;
  if (has) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "model '", model.spec().name, "' has no ", part == ModelPart::kSau ? "sau" : "lmu",
      " part"));
}

absl::StatusOr<std::shared_ptr<Model>> FindModelWithPart(const ModelRegistry& registry,
                                                         std::string_view name, ModelPart part) {
  absl::StatusOr<std::shared_ptr<Model>> model = registry.Find(name);
  if (!model.ok()) return model.status();
  if (absl::Status s = RequirePart(**model, part); !s.ok()) return s;
  return model;
}

}  // namespace streamlearn::server
