#include "server/model_registration.h"

#include <utility>

#include "core/common/digest.h"
#include "spdlog/spdlog.h"

namespace streamlearn::server {

absl::StatusOr<std::shared_ptr<Model>> RegisterModel(ModelSpec spec, ModelRegistry* registry,
                                                     std::string_view origin) {
  absl::StatusOr<std::shared_ptr<Model>> model = registry->Create(std::move(spec));
  if (!model.ok()) return model.status();
  const ModelSpec& s = (*model)->spec();
  spdlog::info(
      "created model '{}' ({}): shards={} d={} d_v={} r={} r_v={} tau={} gamma={} seed={} "
      "state_bytes/shard={} w_digest={}",
      s.name, origin, s.shards, s.sau.d, s.sau.d_v, s.sau.r, s.sau.r_v, s.sau.tau, s.sau.gamma,
      s.sau.seed, (*model)->state_bytes(), ToHex((*model)->w_digest()));
  return model;
}

}  // namespace streamlearn::server
