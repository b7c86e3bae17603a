#include "server/model_info.h"

#include <vector>

#include "server/batch_step.h"

#include "core/common/digest.h"
#include "server/storage/spec_conversion.h"

namespace streamlearn::server {
namespace {

void LmuShardInfoToProto(uint32_t shard, const LmuShardStats& stats, v1::LmuShardInfo* out) {
  const lmu::LmuTableStats& t = stats.table;
  out->set_shard(shard);
  out->set_samples(stats.samples);
  out->set_last_t(stats.last_t);
  out->set_state_digest(ToHex(stats.digest));
  out->set_ver_base(t.ver_base);
  out->set_ver_delta(t.ver_delta);
  out->set_base_keys(t.base_keys);
  out->set_delta_keys(t.delta_keys);
  out->set_delta_load(t.delta_load);
  out->set_stash_used(static_cast<uint32_t>(t.stash_used));
  out->set_ring_used(static_cast<uint32_t>(t.ring_used));
  out->set_emergency_used(t.emergency_used);
  out->set_frozen(t.frozen);
  out->set_rebuilds(t.rebuilds);
  out->set_last_rebuild_seconds(t.last_rebuild_seconds);
  out->set_max_rebuild_seconds(t.max_rebuild_seconds);
  out->set_max_locate_probes(static_cast<uint32_t>(t.max_locate_probes));
  out->set_max_insert_probes(static_cast<uint32_t>(t.max_insert_probes));
  out->set_locate_bound(static_cast<uint32_t>(t.locate_bound));
  out->set_insert_bound(static_cast<uint32_t>(t.insert_bound));
  out->set_tripwires(t.tripwires);
  out->set_tau_high_crossings(t.tau_high_crossings);
  out->set_delta_buckets(t.delta_buckets);
  out->set_delta_growths(t.delta_growths);
}

void FuseShardInfoToProto(uint32_t shard, const FuseShardStats& stats, const ModelSpec& spec,
                          v1::FuseShardInfo* out) {
  out->set_shard(shard);
  out->set_steps(stats.steps);
  out->set_last_t(stats.last_t);
  out->set_state_digest(ToHex(stats.digest));
  out->set_log_seq(stats.log_seq);
  out->set_ver_sau(stats.ver_sau);
  out->set_ver_base(stats.table.ver_base);
  out->set_ver_delta(stats.table.ver_delta);
  out->set_delta_load(stats.table.delta_load);
  out->set_actions(stats.actions_total);
  out->set_g_max(stats.controls.g_max);
  out->set_lmu_lr_scale(stats.controls.lmu_lr_scale);
  out->set_lmu_tau_low(stats.controls.lmu_tau_low.value_or(spec.fuse.lmu.tau_low));
  out->set_delta_buckets(stats.table.delta_buckets);
  out->set_delta_growths(stats.table.delta_growths);
}

}  // namespace

v1::ModelInfo MakeModelInfo(const Model& model, storage::Persistence* persistence) {
  v1::ModelInfo info;
  // Cluster mode: the shards this server serves, each held while it is read.
  std::vector<storage::ModelWriters::Use> uses(model.num_shards());
  std::vector<bool> here(model.num_shards(), true);
  for (uint32_t i = 0; i < model.num_shards(); ++i) {
    absl::StatusOr<storage::ModelWriters::Use> use =
        UseShard(persistence, model.spec().name, i);
    here[i] = use.ok();
    if (use.ok()) uses[i] = *std::move(use);
  }
  *info.mutable_spec() = storage::ModelSpecToProto(model.spec());
  if (model.spec().has_sau) {
    info.set_w_digest(ToHex(model.w_digest()));
    info.set_state_bytes(model.state_bytes());
    for (uint32_t i = 0; i < model.num_shards(); ++i) {
      if (!here[i]) continue;
      const ShardStats stats = model.sau(i).Stats();
      v1::ShardInfo* shard = info.add_shards();
      shard->set_shard(i);
      shard->set_ver_sau(stats.version);
      shard->set_events(stats.events);
      shard->set_last_t(stats.last_t);
      shard->set_state_digest(ToHex(stats.digest));
      shard->set_gamma(stats.gamma);
      shard->set_c_hi(stats.c_hi);
      shard->set_gamma_raises(stats.gamma_raises);
      shard->set_gamma_lowers(stats.gamma_lowers);
      shard->set_c_hi_raises(stats.c_hi_raises);
    }
  }
  if (model.spec().has_lmu) {
    for (uint32_t i = 0; i < model.num_shards(); ++i) {
      if (!here[i]) continue;
      LmuShardInfoToProto(i, model.lmu(i).Stats(), info.add_lmu_shards());
    }
  }
  if (model.spec().has_fuse) {
    info.set_w_digest(ToHex(model.w_digest()));
    info.set_state_bytes(model.state_bytes());
    for (uint32_t i = 0; i < model.num_shards(); ++i) {
      if (!here[i]) continue;
      FuseShardInfoToProto(i, model.fuse(i).Stats(), model.spec(), info.add_fuse_shards());
    }
  }
  return info;
}

}  // namespace streamlearn::server
