// ModelInfo: what the Admin service reports about one model.
//
// The effective spec (Model::spec(), defaults resolved), the hex SHA-256 of the random-feature
// matrix, the learned-state size per shard, and one ShardInfo per shard from SauShard::Stats()
// (version, events, last t, hex state digest). With an LMU part, one LmuShardInfo per shard
// from LmuShard::Stats() (samples, versions, key counts, delta occupancy, rebuilds, probe
// maxima beside their bounds, tripwires, hex digest of the logical state). A part the model
// With a fuse part, the fused SAU's W digest and state size and one FuseShardInfo per shard from
// FuseShard::Stats() (steps, last t, log_seq, versions, delta load, control actions so far, the
// controls in force, hex FuseUnit::StateDigest). A part the model
// does not have leaves its fields empty (no W digest, no shards / lmu_shards). Stats() hashes
// the shard's whole state (the LMU digest sorts every id: O(n log n)), so building a
// ModelInfo is meant for admin calls, not hot paths.
//
// Thread safety: safe to call concurrently with ingests and queries on the model; each shard's
// figures come from one published version, different shards may be at different moments.
#ifndef STREAMLEARN_SERVER_MODEL_INFO_H_
#define STREAMLEARN_SERVER_MODEL_INFO_H_

#include "admin.pb.h"
#include "server/storage/persistence.h"
#include "core/shard/model_registry.h"

namespace streamlearn::server {

// In the cluster mode (persistence given and clustered) it lists the shards this server serves.
v1::ModelInfo MakeModelInfo(const Model& model, storage::Persistence* persistence = nullptr);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_MODEL_INFO_H_
