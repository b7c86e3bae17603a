#include "server/batch_step.h"

#include "absl/strings/str_cat.h"
#include "server/model_lookup.h"

namespace streamlearn::server {

std::string SamplePrefix(size_t i, uint64_t t) {
  return absl::StrCat("sample ", i, " (t=", t, "): ");
}

absl::Status CheckParallel(int ids, int vals, absl::FunctionRef<std::string()> what) {
  if (ids == vals) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what(), "ids has ", ids,
                                                 " values but vals has ", vals,
                                                 "; give one value per id"));
}

absl::StatusOr<BatchRoute> RouteBatch(const ModelRegistry& registry,
                                      storage::Persistence* persistence,
                                      const std::string& model_name,
                                      const std::string& routing_key, PartKind kind, size_t n,
                                      size_t max_batch, StreamBinding* binding,
                                      uint32_t* shard_out) {
  if (binding->model == nullptr || binding->model->spec().name != model_name) {
    absl::StatusOr<std::shared_ptr<Model>> found = FindModelWithPart(registry, model_name, kind);
    if (!found.ok()) return found.status();
    binding->model = *std::move(found);
    binding->writers = persistence != nullptr ? persistence->Find(model_name) : nullptr;
  }
  BatchRoute route;
  route.model = binding->model.get();
  route.shard = route.model->ShardOf(routing_key);
  *shard_out = route.shard;
  // The part checks the count too; checking it here first keeps a flood of tiny items in one
  // message from costing a view each before it is refused.
  if (n > max_batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch has ", n, " ", kind == PartKind::kSau ? "events" : "samples",
                     "; the limit is ", max_batch, " per request (max_batch)"));
  }
  route.persistence = persistence;
  route.secret = &registry.secret();
  if (binding->writers != nullptr) {
    if (!persistence->TryUseShard(*binding->writers, route.shard, &route.use)) {
      return persistence->NotServed(model_name, route.shard);
    }
    route.writer = &binding->writers->shard(route.shard);
  }
  return route;
}

absl::StatusOr<storage::ModelWriters::Use> UseShard(storage::Persistence* persistence,
                                                    const std::string& model, uint32_t shard) {
  storage::ModelWriters::Use use;
  if (persistence == nullptr || !persistence->cluster()) return use;
  std::shared_ptr<storage::ModelWriters> writers = persistence->Find(model);
  if (writers == nullptr || !persistence->TryUseShard(*writers, shard, &use)) {
    return persistence->NotServed(model, shard);
  }
  return use;
}

}  // namespace streamlearn::server
