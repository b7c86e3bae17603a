#include "server/model_registration.h"

#include <string>
#include <utility>

#include "core/common/digest.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace streamlearn::server {

absl::StatusOr<std::shared_ptr<Model>> RegisterModel(ModelSpec spec, ModelRegistry* registry,
                                                     std::string_view origin,
                                                     const ModelRegistry::ModelCommit& commit) {
  absl::StatusOr<std::shared_ptr<Model>> model = registry->Create(std::move(spec), commit);
  if (!model.ok()) return model.status();
  const ModelSpec& s = (*model)->spec();
  std::string parts;
  if (s.has_sau) {
    parts = fmt::format(" sau: d={} d_v={} r={} r_v={} tau={} gamma={} seed={} "
                        "state_bytes/shard={} w_digest={}",
                        s.sau.d, s.sau.d_v, s.sau.r, s.sau.r_v, s.sau.tau, s.sau.gamma,
                        s.sau.seed, (*model)->state_bytes(), ToHex((*model)->w_digest()));
    const sau::SauSpec r = sau::ResolveDefaults(s.sau);
    if (r.regulate_gamma) parts += fmt::format(" regulate_gamma<={}", r.gamma_max);
    if (r.regulate_clip) parts += fmt::format(" regulate_clip: c_hi={}<={}", r.c_hi, r.c_hi_max);
  }
  if (s.has_lmu) {
    parts += fmt::format(" lmu: m={} lr={} l2={} delta_buckets={} max_delta_buckets={} b={} "
                         "S={} L={} Q={} tau_low={} tau_high={} lambda_max={} T_rb={} margin={} "
                         "rebuild={}",
                         s.lmu.m, s.lmu.lr, s.lmu.l2, s.lmu.delta_buckets,
                         lmu::DeltaBucketsCap(s.lmu), s.lmu.bucket_size,
                         s.lmu.stash, s.lmu.max_relocations, s.lmu.ring, s.lmu.tau_low,
                         s.lmu.tau_high, s.lmu.lambda_max, s.lmu.rebuild_seconds, s.lmu.margin,
                         s.lmu.background_rebuild ? "background" : "inline");
  }
  spdlog::info("created model '{}' ({}): shards={}{}", s.name, origin, s.shards, parts);
  return model;
}

}  // namespace streamlearn::server
