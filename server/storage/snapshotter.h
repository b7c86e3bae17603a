// Snapshots of shard parts: one part's state, taken from its current committed version and
// written with its manifest, its audit record and the log trim it allows, as one ShardWrite.
//
// A snapshot is taken every `snapshot_every_steps` events or samples of a part, every
// `snapshot_interval`, and on demand (Admin.Snapshot). The SAU never stops for it (it reads a
// published version); the LMU's and the Fuse's writer waits while its state is serialized.
// The manifest keeps the newest `keep_snapshots` entries, each with the blob's SHA-256, the
// log_seq it covers and the audit index and merkle_curr of its snapshot record. Once
// `keep_snapshots` snapshots exist, log entries the oldest kept one covers are trimmed in the
// same write; until then the log is kept whole, so a part whose snapshots are all corrupt is
// rebuilt from seq 1.
//
// Thread safety: SnapshotPart REQUIRES the writer's snapshot_mu() held (one snapshot of a shard
// at a time).
#ifndef STREAMLEARN_SERVER_STORAGE_SNAPSHOTTER_H_
#define STREAMLEARN_SERVER_STORAGE_SNAPSHOTTER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/shard/shard_part.h"
#include "server/storage/options.h"
#include "server/storage/shard_writer.h"
#include "server/storage/storage_observer.h"

namespace streamlearn::storage {

struct SnapshotInfo {
  uint32_t shard = 0;
  PartKind part = PartKind::kSau;
  bool taken = false;         // false: nothing new since the last snapshot
  uint64_t snapshot_seq = 0;
  uint64_t log_seq = 0;
  uint64_t steps = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  uint64_t trimmed_through = 0;  // log entries with seq <= this are gone
};

// Snapshots `part` (of the writer's shard) now, unless nothing changed since the last one.
// UNAVAILABLE when the part is fenced or the write fails (nothing changed then).
absl::StatusOr<SnapshotInfo> SnapshotPart(ShardWriter& writer, const ShardPart& part,
                                          const PersistenceOptions& options,
                                          StorageObserver* observer)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer.snapshot_mu());

// Whether the part is due for a snapshot at `now` (by steps or by time).
bool SnapshotDue(const ShardWriter::PartState& ps, const PersistenceOptions& options,
                 absl::Time now);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_SNAPSHOTTER_H_
