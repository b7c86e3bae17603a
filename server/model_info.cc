#include "server/model_info.h"

#include "core/common/digest.h"
#include "server/spec_conversion.h"

namespace streamlearn::server {

v1::ModelInfo MakeModelInfo(const Model& model) {
  v1::ModelInfo info;
  *info.mutable_spec() = ModelSpecToProto(model.spec());
  info.set_w_digest(ToHex(model.w_digest()));
  info.set_state_bytes(model.state_bytes());
  for (uint32_t i = 0; i < model.num_shards(); ++i) {
    const ShardStats stats = model.shard(i).Stats();
    v1::ShardInfo* shard = info.add_shards();
    shard->set_shard(i);
    shard->set_ver_sau(stats.version);
    shard->set_events(stats.events);
    shard->set_last_t(stats.last_t);
    shard->set_state_digest(ToHex(stats.digest));
  }
  return info;
}

}  // namespace streamlearn::server
