#include "core/shard/model_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/name_rule.h"
#include "core/common/status_macros.h"
#include "core/fuse/fuse_unit.h"
#include "core/common/routing.h"

namespace streamlearn {

absl::Status CheckModelName(std::string_view name) { return CheckScopedModelName(name); }

absl::Status ValidateModelSpec(const ModelSpec& spec) {
  RETURN_IF_ERROR(CheckModelName(spec.name));
  if (spec.shards < 1 || spec.shards > 1024) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shards = %d is out of range; allowed 1..1024", spec.shards));
  }
  if (spec.has_fuse) {
    if (spec.has_sau || spec.has_lmu) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model has a fuse part and ", spec.has_sau ? "an sau" : "an lmu",
          " part; a fused model has the fuse part alone (it holds its own SAU and LMU: set "
          "fuse.sau and fuse.lmu)"));
    }
    absl::StatusOr<fuse::FuseSpec> resolved = fuse::ResolveFuseSpec(spec.fuse);
    if (!resolved.ok()) {
      return absl::Status(resolved.status().code(),
                          absl::StrCat("fuse.", resolved.status().message()));
    }
    return absl::OkStatus();
  }
  if (!spec.has_sau && !spec.has_lmu) {
    return absl::InvalidArgumentError(
        "the model has neither an sau nor an lmu part; give one (or both, or a fuse part "
        "alone)");
  }
  if (spec.has_lmu) return lmu::ValidateLmuSpec(spec.lmu);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Model>> Model::Create(ModelSpec spec,
                                                     const lmu::HashSecret& secret) {
  RETURN_IF_ERROR(ValidateModelSpec(spec));
  std::shared_ptr<Model> m(new Model());
  m->slots_.resize(size_t{spec.shards} * std::size(kPartKinds));
  if (spec.has_sau) {
    absl::StatusOr<sau::Memory> mem = sau::Memory::Create(spec.sau);
    if (!mem.ok()) return mem.status();
    spec.sau = mem->spec();  // resolved
    if (const sau::SauEstimator* prf = mem->prf()) m->w_digest_ = prf->w_digest();
    m->state_bytes_ = mem->state_bytes();
    for (uint32_t i = 0; i < spec.shards; ++i) {
      m->slots_[Slot(i, PartKind::kSau)] = std::make_unique<SauShard>(*mem);
    }
  }
  if (spec.has_lmu) {
    for (uint32_t i = 0; i < spec.shards; ++i) {
      m->slots_[Slot(i, PartKind::kLmu)] = std::make_unique<LmuShard>(spec.lmu, secret);
    }
  }
  if (spec.has_fuse) {
    for (uint32_t i = 0; i < spec.shards; ++i) {
      absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> unit =
          fuse::FuseUnit::Create(spec.fuse, secret);
      if (!unit.ok()) return unit.status();  // validated above: not expected
      if (i == 0) {
        if (const sau::SauEstimator* prf = (*unit)->sau().prf()) m->w_digest_ = prf->w_digest();
        m->state_bytes_ = (*unit)->sau().state_bytes();
      }
      m->slots_[Slot(i, PartKind::kFuse)] = std::make_unique<FuseShard>(*std::move(unit));
    }
    spec.fuse = m->fuse(0).spec();  // resolved
  }
  m->spec_ = std::move(spec);
  return m;
}

std::vector<ShardPart*> Model::parts(uint32_t i) const {
  std::vector<ShardPart*> out;
  for (PartKind kind : kPartKinds) {
    if (ShardPart* p = part(i, kind); p != nullptr) out.push_back(p);
  }
  return out;
}

uint32_t Model::ShardOf(std::string_view routing_key) const {
  return ShardFor(routing_key, num_shards());
}

absl::StatusOr<std::shared_ptr<Model>> ModelRegistry::Create(ModelSpec spec,
                                                             const ModelCommit& commit) {
  absl::StatusOr<std::shared_ptr<Model>> m = Model::Create(std::move(spec), secret_);
  if (!m.ok()) return m.status();
  MutexLock lock(&mu_);
  const std::string& name = (*m)->spec().name;
  if (models_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrFormat("model '%s' already exists", name));
  }
  if (commit) {
    RETURN_IF_ERROR(commit(*m));
  }
  models_.emplace(name, *m);
  return m;
}

absl::Status ModelRegistry::Add(std::shared_ptr<Model> model) {
  MutexLock lock(&mu_);
  const std::string& name = model->spec().name;
  if (models_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrFormat("model '%s' already exists", name));
  }
  models_.emplace(name, std::move(model));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Model>> ModelRegistry::Find(std::string_view name) const {
  RETURN_IF_ERROR(CheckModelName(name));
  MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return absl::NotFoundError(absl::StrFormat("model '%s' not found", name));
  }
  return it->second;
}

std::vector<std::shared_ptr<Model>> ModelRegistry::List() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Model>> out;
  out.reserve(models_.size());
  for (const auto& [name, m] : models_) out.push_back(m);
  return out;
}

}  // namespace streamlearn
