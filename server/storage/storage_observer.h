// StorageObserver: what the storage library reports as it works (writes, snapshots,
// recoveries), for whoever exports it. The server's Metrics (server/metrics.h) implements it
// with Prometheus series; storage itself depends on no metrics library.
//
// Thread safety: implementations must be thread-safe; the calls come from request threads,
// the snapshotter and recovery.
#ifndef STREAMLEARN_SERVER_STORAGE_STORAGE_OBSERVER_H_
#define STREAMLEARN_SERVER_STORAGE_STORAGE_OBSERVER_H_

#include <cstdint>
#include <string>

namespace streamlearn::storage {

class StorageObserver {
 public:
  virtual ~StorageObserver() = default;

  // After `n` audit records were appended to the shard's chain; `next_index` is the index the
  // next record will get (the chain's length).
  virtual void RecordAuditRecords(const std::string& model, uint32_t shard, uint64_t n,
                                  const std::string& head_hex, uint64_t next_index) = 0;
  // After a snapshot of the shard was written: `seconds` from start to durable, `bytes` written.
  virtual void RecordSnapshot(const std::string& model, uint32_t shard, double seconds,
                              uint64_t bytes) = 0;
  virtual void RecordSnapshotFailure(const std::string& model, uint32_t shard) = 0;
  // One commit of a log entry (`bytes` of it) to the store, any model.
  virtual void RecordStoreWrite(double seconds, uint64_t bytes) = 0;
  // After the shard was recovered: `replayed_batches` replayed on top of its snapshots.
  virtual void RecordRecovery(const std::string& model, uint32_t shard,
                              uint64_t replayed_batches, double seconds) = 0;
  // Log entries of the shard since its last snapshots (what a recovery would replay).
  virtual void SetLogBacklog(const std::string& model, uint32_t shard, uint64_t batches) = 0;
  // The shard's audit chain: records moved to archive segments, records still in the store,
  // and the most the store keeps while archiving keeps up (audit_live_records +
  // audit_segment_records; audit_archive.h, when archiving is on).
  virtual void SetAuditArchive(const std::string& model, uint32_t shard, uint64_t archived,
                               uint64_t live, uint64_t live_bound) {
    (void)model, (void)shard, (void)archived, (void)live, (void)live_bound;
  }
  // An archive pass of the shard's chain failed (its records stay in the store).
  virtual void RecordAuditArchiveFailure(const std::string& model, uint32_t shard) {
    (void)model, (void)shard;
  }
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_STORAGE_OBSERVER_H_
