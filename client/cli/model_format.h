// Human-readable text for models: `streamlearn describe` (one model, every setting and each
// shard) and `streamlearn list` (one row per model).
//
//   std::cout << DescribeModel(info);
//
// Thread safety: plain functions.
#ifndef STREAMLEARN_CLIENT_CLI_MODEL_FORMAT_H_
#define STREAMLEARN_CLIENT_CLI_MODEL_FORMAT_H_

#include <string>
#include <vector>

#include "admin.pb.h"

namespace streamlearn::cli {

// The parts; for an SAU part its spec (dimensions, features, kernel, inputs, clipping,
// monitors), W digest, state size and a table of shards (version, events, last t, state
// digest); for an LMU part its spec (m, lr, delta shape, rebuild scheduling) and per shard:
// samples, versions, key counts, delta load, ring/stash occupancy, emergency, frozen,
// rebuilds and T_rb, probe maxima beside their bounds, tripwires, state digest.
std::string DescribeModel(const v1::ModelInfo& info);

// A table: name, parts, shards, d, d_v, r, tau, gamma, clipping, events, max version (SAU;
// "-" without an SAU part), LMU samples and max ver_base ("-" without an LMU part), W digest.
std::string ModelTable(const std::vector<v1::ModelInfo>& models);

// `streamlearn shards`: which server answered and in which mode, then a table of model, shard,
// owner, address, lease epoch ("-" while nobody serves a shard), with "*" on the rows the
// answering server serves, and a count of shards per owner.
std::string DescribeShardMap(const v1::ShardMapResponse& map);

}  // namespace streamlearn::cli

#endif  // STREAMLEARN_CLIENT_CLI_MODEL_FORMAT_H_
