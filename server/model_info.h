// ModelInfo: what the Admin service reports about one model.
//
// The effective spec (Model::spec(), defaults resolved), the hex SHA-256 of the random-feature
// matrix, the learned-state size per shard, and one ShardInfo per shard from SauShard::Stats()
// (version, events, last t, hex state digest). Stats() hashes the shard's whole state, so
// building a ModelInfo costs O(state) per shard; it is meant for admin calls, not hot paths.
//
// Thread safety: safe to call concurrently with ingests and queries on the model; each shard's
// figures come from one published version, different shards may be at different moments.
#ifndef STREAMLEARN_SERVER_MODEL_INFO_H_
#define STREAMLEARN_SERVER_MODEL_INFO_H_

#include "admin.pb.h"
#include "core/shard/model_registry.h"

namespace streamlearn::server {

v1::ModelInfo MakeModelInfo(const Model& model);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_MODEL_INFO_H_
