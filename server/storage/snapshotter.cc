#include "server/storage/snapshotter.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/common/digest.h"
#include "core/audit/step_records.h"
#include "server/storage/failpoint.h"
#include "server/storage/manifest.h"

namespace streamlearn::storage {

absl::StatusOr<SnapshotInfo> SnapshotPart(ShardWriter& writer, const ShardPart& part,
                                          const PersistenceOptions& options,
                                          StorageObserver* observer) {
  const PartKind kind = part.kind();
  ShardWriter::PartState& ps = writer.part(kind);
  std::vector<ManifestEntry>& manifest = writer.manifest(kind);
  ShardChain& chain = writer.chain();
  const absl::Time start = absl::Now();
  SnapshotInfo info{.shard = chain.shard(), .part = kind};

  // What was counted before the state is captured is surely in it (later work stays counted
  // for the next snapshot).
  const uint64_t before_steps = ps.steps_since.load(std::memory_order_relaxed);
  const uint64_t before_batches = ps.batches_since.load(std::memory_order_relaxed);
  absl::StatusOr<PartSnapshot> snap = part.TakeSnapshot();
  if (!snap.ok()) return snap.status();  // fenced: its memory holds an unlogged batch
  info.log_seq = snap->log_seq;
  info.steps = snap->steps;
  if (!manifest.empty() && manifest.front().log_seq == snap->log_seq) {
    // Nothing new since the last one: report it.
    ps.last_snapshot_ns = absl::ToUnixNanos(absl::Now());
    info.snapshot_seq = manifest.front().snapshot_seq;
    if (manifest.size() >= options.keep_snapshots) {
      info.trimmed_through = manifest.back().log_seq;
    }
    return info;
  }

  const uint64_t snapshot_seq = manifest.empty() ? 1 : manifest.front().snapshot_seq + 1;
  Sha256 sha;
  sha.Update(snap->blob);
  const Digest blob_digest = sha.Finish();
  Bodies bodies;
  AppendSnapshotBody(SnapshotRecord{.part = PartName(kind),
                                    .log_seq = snap->log_seq,
                                    .snapshot_seq = snapshot_seq,
                                    .steps = snap->steps,
                                    .blob_digest = blob_digest,
                                    .state_digest = snap->state_digest},
                     bodies.Add());
  std::vector<ManifestEntry> next;
  uint64_t trim_through = 0;
  absl::StatusOr<Receipt> r =
      chain.Commit(bodies, nullptr, [&](const Receipt& receipt, ShardWrite* write) {
        next.push_back(ManifestEntry{.snapshot_seq = snapshot_seq,
                                     .log_seq = snap->log_seq,
                                     .blob_digest = blob_digest,
                                     .audit_index = receipt.first_index,
                                     .audit_head = receipt.first_curr});
        SnapshotPut put;
        put.part = kind;
        put.seq = snapshot_seq;
        put.blob = snap->blob;
        for (const ManifestEntry& e : manifest) {
          if (next.size() < options.keep_snapshots) {
            next.push_back(e);
          } else {
            put.dropped.push_back(e.snapshot_seq);
          }
        }
        put.manifest = EncodeManifest(next);
        // Once the manifest is full, the oldest kept snapshot covers everything up to its
        // log_seq, and only a backup could need more. Before that the log is kept whole, so a
        // part whose every snapshot is corrupt can still be rebuilt from seq 1.
        if (next.size() >= options.keep_snapshots) {
          trim_through = next.back().log_seq;
          put.trim_log_through = trim_through;
        }
        write->snapshot = std::move(put);
        Failpoint("snapshot.before_write");
      });
  if (r.ok()) Failpoint("snapshot.after_write");
  if (!r.ok()) {
    if (observer != nullptr) observer->RecordSnapshotFailure(chain.model(), chain.shard());
    return r.status();
  }
  manifest = std::move(next);
  ps.last_snapshot_ns = absl::ToUnixNanos(absl::Now());
  // Steps applied while the snapshot was being written stay counted for the next one.
  ps.steps_since.fetch_sub(std::min(before_steps, ps.steps_since.load()),
                           std::memory_order_relaxed);
  ps.batches_since.fetch_sub(std::min(before_batches, ps.batches_since.load()),
                             std::memory_order_relaxed);
  info.taken = true;
  info.snapshot_seq = snapshot_seq;
  info.bytes = snap->blob.size();
  info.trimmed_through = trim_through;
  info.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (observer != nullptr) {
    observer->RecordSnapshot(chain.model(), chain.shard(), info.seconds, info.bytes);
  }
  return info;
}

bool SnapshotDue(const ShardWriter::PartState& ps, const PersistenceOptions& options,
                 absl::Time now) {
  const uint64_t steps = ps.steps_since.load(std::memory_order_relaxed);
  if (options.snapshot_every_steps > 0 && steps >= options.snapshot_every_steps) return true;
  const absl::Time last = absl::FromUnixNanos(ps.last_snapshot_ns.load());
  return options.snapshot_interval > absl::ZeroDuration() && steps > 0 &&
         now - last >= options.snapshot_interval;
}

}  // namespace streamlearn::storage
