// Recovery: a shard part rebuilt from its ShardStore (shard_store.h), at start-up and after a
// failed write fenced it.
//
// A part is restored from the newest snapshot whose checksum and content verify (falling back
// to older ones, logged), then the log entries after it are replayed through the part's own
// batch method (PartCodec, part_codec.h). Same entries, same order: the recovered state is
// bit-identical to the state the entries were acknowledged on. Without a usable snapshot the
// log is replayed into a fresh part, which is right only while the log still starts at seq 1:
// otherwise DATA_LOSS, naming the model, shard and part and what is missing.
//
// Thread safety: RecoverShard runs before the model is shared; RebuildFencedPart replays into
// a private part and swaps it in through the part's Reinstate.
#ifndef STREAMLEARN_SERVER_STORAGE_RECOVERY_H_
#define STREAMLEARN_SERVER_STORAGE_RECOVERY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/lmu/keyed_hash.h"
#include "core/shard/model_registry.h"
#include "core/shard/shard_part.h"
#include "server/storage/manifest.h"
#include "server/storage/shard_store.h"
#include "server/storage/shard_writer.h"

namespace streamlearn::storage {

struct PartRecovery {
  std::vector<ManifestEntry> manifest;  // the usable snapshots, newest first
  uint64_t batches = 0;                 // log entries replayed
  uint64_t steps = 0;                   // events / samples they applied
  std::unique_ptr<ShardPart> restored;  // from a snapshot; null: `fresh` holds the state
};

// Rebuilds the part of fresh.kind() from `store`. `fresh` is a new part of the model (the
// state when no snapshot verifies); the log is replayed into the restored part, or into
// `fresh` when there is none.
absl::StatusOr<PartRecovery> RecoverPart(const ShardStore& store, const ModelSpec& spec,
                                         const lmu::HashSecret& secret, size_t keep_snapshots,
                                         ShardPart& fresh);

// Recovers every part of shard `shard` of `model` (built by Model::Create, not yet shared)
// and resumes the shard's audit chain; fills the writer's snapshot bookkeeping. Returns the
// log entries replayed.
absl::StatusOr<uint64_t> RecoverShard(ShardWriter& writer, Model& model, uint32_t shard,
                                      const lmu::HashSecret& secret, size_t keep_snapshots);

// Rebuilds a fenced LMU or Fuse part from the store and reinstates it (its Reinstate's
// errors: FAILED_PRECONDITION when it is no longer fenced or the rebuild is stale). Returns
// the log entries replayed.
absl::StatusOr<uint64_t> RebuildFencedPart(const ShardStore& store, Model& model, uint32_t shard,
                                           PartKind kind, const lmu::HashSecret& secret,
                                           size_t keep_snapshots);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_RECOVERY_H_
