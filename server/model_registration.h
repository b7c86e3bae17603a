// Model registration: creates a model and logs one line saying what was created and why.
//
// Both ways a model comes to exist go through here: Admin.CreateModel and the models of the
// config file at start-up. The log line gives the effective dimensions, the shard count, the
// W digest and the origin, so a log reader can tell which spec a server is running.
//
//   auto model = RegisterModel(spec, &registry, "Admin.CreateModel");
//
// Thread safety: as ModelRegistry::Create (thread-safe).
#ifndef STREAMLEARN_SERVER_MODEL_REGISTRATION_H_
#define STREAMLEARN_SERVER_MODEL_REGISTRATION_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/shard/model_registry.h"

namespace streamlearn::server {

// Errors from the registry, unchanged: INVALID_ARGUMENT naming the field, ALREADY_EXISTS.
// `commit` (may be empty) persists the model before it becomes visible (ModelRegistry::Create).
absl::StatusOr<std::shared_ptr<Model>> RegisterModel(
    ModelSpec spec, ModelRegistry* registry, std::string_view origin,
    const ModelRegistry::ModelCommit& commit = {});

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_MODEL_REGISTRATION_H_
