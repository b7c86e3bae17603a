// Persistence: what makes a server's learned state survive a crash and its steps provable
// (issue 4; DESIGN: persistence, decisions 5 and 6; seed 002 sec. 7 and 8).
//
// Layout of a data directory:
//   <data_dir>/db/          the RocksDB database (server/store.h)
//   <data_dir>/lmu.secret   the LMU hash secret (server/lmu_secret.h)
//   <data_dir>/audit.key    the Ed25519 key that signs audit checkpoints (PEM, 0600)
//   <data_dir>/audit.pub    its public key (PEM), for verifiers
//
// Write path. Each model shard has a ShardLog: its audit chain (ShardJournal) and the commit
// hooks the SAU, LMU and Fuse shards call before a batch is published (Fuse: after it was
// applied, fuse_shard.h). A hook encodes the batch as a log entry, builds the step records (one
// per SAU event, one per LMU batch, one per fused sample, a control record after an alarm:
// step_records.h, fuse_records.h) and commits entry + records in one store write; the ack
// follows.
//
// Snapshots. Per shard part (SAU, LMU, Fuse), taken from a published version (the SAU never
// stops; the LMU's and the Fuse's writer waits while its state is serialized), every `snapshot_every_steps` events
// or samples, every `snapshot_interval`, and on demand (Admin.Snapshot). A snapshot is one
// store write: the blob, a new manifest (the newest `keep_snapshots` entries, each with the
// blob's SHA-256, the log_seq it covers and the audit index and merkle_curr of its snapshot
// record) and a snapshot audit record. Once `keep_snapshots` snapshots exist, log entries the
// oldest kept one covers are trimmed in the same write (until then the log is kept whole, so
// a part whose snapshots are all corrupt is rebuilt from seq 1).
//
// Recovery (Recover, at start-up): for every stored model, rebuild the model from its spec;
// for each shard part, restore the newest snapshot whose checksum and content verify (falling
// back to older ones, logged), replay the log entries after it through the same Ingest/Update
// code, and resume the audit chain from its newest record. Same events, same order: the
// recovered state is bit-identical to the state before the crash.
//
// Thread safety: thread-safe after Open; Recover runs before the server takes requests.
#ifndef STREAMLEARN_SERVER_PERSISTENCE_H_
#define STREAMLEARN_SERVER_PERSISTENCE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/audit/ed25519_key.h"
#include "core/shard/model_registry.h"
#include "server/metrics.h"
#include "server/shard_journal.h"
#include "server/store.h"

namespace streamlearn::server {

struct PersistenceOptions {
  std::string data_dir;                          // empty: memory only (no store, no recovery)
  Durability durability = Durability::kProcess;
  std::string audit_key_file;                    // empty: <data_dir>/audit.key
  uint64_t checkpoint_every = 1024;              // records between signed checkpoints
  uint64_t sau_digest_every = 4096;              // SAU events between state digests
  uint64_t lmu_digest_every = 1000000;           // LMU samples between state digests (0: never)
  uint64_t fuse_digest_every = 100000;           // fused samples between state digests (0: never)
  uint64_t snapshot_every_steps = 100000;        // events / samples per shard part (0: off)
  absl::Duration snapshot_interval = absl::Minutes(5);  // zero: off
  size_t keep_snapshots = 2;                     // >= 1; older ones and their log are dropped
};

// One snapshot manifest entry (newest first in a manifest).
struct ManifestEntry {
  uint64_t snapshot_seq = 0;
  uint64_t log_seq = 0;       // the last log entry the snapshot includes
  Digest blob_digest{};
  uint64_t audit_index = 0;   // of its snapshot record
  Digest audit_head{};        // merkle_curr of that record
};

struct SnapshotInfo {
  uint32_t shard = 0;
  StorePart part = StorePart::kSau;
  bool taken = false;         // false: nothing new since the last snapshot
  uint64_t snapshot_seq = 0;
  uint64_t log_seq = 0;
  uint64_t steps = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  uint64_t trimmed_through = 0;  // log entries with seq <= this are gone
};

// One model shard: its chain, its hooks' scratch and its snapshot bookkeeping.
class ShardLog {
 public:
  ShardLog(Store* store, const std::string& model, uint32_t shard, Ed25519PrivateKey key,
           const PersistenceOptions& options, Metrics* metrics);

  // The commit hooks' bodies: build records, write, fill *receipt. Called by the shards with
  // their writer lock held (so the SAU and LMU scratch each have one user at a time).
  absl::Status CommitSau(const SauCommit& c, Receipt* receipt);
  absl::Status CommitLmu(const LmuCommit& c, Receipt* receipt);
  // One fuse_learn record per applied sample (a fuse_control record after each negative
  // margin), batch_digest on the first, state_digest on the last when due (fuse_records.h).
  absl::Status CommitFuse(const FuseCommit& c, Receipt* receipt);

  ShardJournal& journal() { return journal_; }
  uint64_t steps_since_snapshot() const;

 private:
  friend class Persistence;
  struct PartState {
    std::vector<ManifestEntry> manifest;  // newest first
    std::atomic<uint64_t> steps_since{0};    // events / samples since the last snapshot
    std::atomic<uint64_t> batches_since{0};  // log entries since the last snapshot
    std::atomic<int64_t> last_snapshot_ns{absl::ToUnixNanos(absl::Now())};  // read unlocked
  };
  PartState& part(StorePart p) {
    return p == StorePart::kSau ? sau_ : p == StorePart::kLmu ? lmu_ : fuse_;
  }

  const PersistenceOptions& options_;
  Metrics* const metrics_;
  ShardJournal journal_;
  std::mutex snapshot_mu_;  // one snapshot of this shard at a time
  PartState sau_, lmu_, fuse_;
  Bodies sau_bodies_, lmu_bodies_, fuse_bodies_;
  std::string sau_entry_, lmu_entry_, fuse_entry_;
};

class ModelLog {
 public:
  ShardLog& shard(uint32_t i) { return *shards_[i]; }
  uint32_t num_shards() const { return static_cast<uint32_t>(shards_.size()); }

 private:
  friend class Persistence;
  std::vector<std::unique_ptr<ShardLog>> shards_;
};

class Persistence {
 public:
  // Opens (or creates) the data directory's store and audit key. With an empty data_dir the
  // chain key is random for the process and nothing is stored. Errors: INVALID_ARGUMENT
  // (options), PERMISSION_DENIED / UNAVAILABLE (directory, store), DATA_LOSS (key file).
  static absl::StatusOr<std::unique_ptr<Persistence>> Open(PersistenceOptions options,
                                                           Metrics* metrics);
  ~Persistence();
  Persistence(const Persistence&) = delete;
  Persistence& operator=(const Persistence&) = delete;

  // Restores every stored model into `registry` (see top of file). Errors name the model,
  // shard and part; DATA_LOSS when no snapshot verifies and the log no longer starts at 1.
  absl::Status Recover(ModelRegistry* registry);

  // The commit for ModelRegistry::Create: stores the spec and each shard's genesis record in
  // one write, then makes the model's ShardLogs.
  absl::Status OnCreate(const std::shared_ptr<Model>& model);

  // The model's logs; null for a model this object does not know.
  std::shared_ptr<ModelLog> Find(const std::string& name) const;

  // A fenced LMU or fuse part (a commit failed after the batch was applied in place) rebuilt
  // from the store's last committed state and reinstated, once the store takes writes again.
  // UNAVAILABLE while the store still fails (its cause); FAILED_PRECONDITION without a store;
  // errors of recovery (DATA_LOSS) otherwise. OK if the part is not (or no longer) fenced.
  absl::Status ReinstateFenced(Model& model, uint32_t shard, StorePart part,
                               const lmu::HashSecret& secret);

  // Snapshots every shard part of the model now.
  absl::StatusOr<std::vector<SnapshotInfo>> SnapshotModel(const Model& model);
  // A consistent copy of the store plus the key files in `dir` (which must not exist).
  absl::Status Backup(const std::string& dir);

  // Records in the data directory's marker how far the store has certainly come (audit chain
  // lengths, newest snapshots: data_dir.h, StoreFloor): syncs the WAL, then writes the marker.
  // Called after recovery, model creation (by the caller, outside the registry's lock),
  // snapshots and at Stop(); a failure is logged and returned, and changes nothing else. No-op
  // without a store. Thread-safe; it takes each shard's snapshot lock in turn, never with mu_.
  absl::Status RecordFloor();

  // Takes snapshots when due, in a background thread, until Stop().
  void StartSnapshotter(ModelRegistry* registry);
  void Stop();

  bool durable() const { return store_ != nullptr; }
  Store* store() const { return store_.get(); }
  const Ed25519PublicKey& public_key() const { return key_.PublicKey(); }
  const PersistenceOptions& options() const { return options_; }

 private:
  Persistence(PersistenceOptions options, Metrics* metrics, Ed25519PrivateKey key)
      : options_(std::move(options)), metrics_(metrics), key_(std::move(key)) {}

  std::shared_ptr<ModelLog> MakeLogs(const Model& model);
  absl::StatusOr<SnapshotInfo> SnapshotPart(const Model& model, uint32_t shard, StorePart part);
  absl::Status RecoverModel(ModelRegistry* registry, const std::string& name,
                            const std::string& spec_bytes);
  void SnapshotterLoop(ModelRegistry* registry);

  const PersistenceOptions options_;
  Metrics* const metrics_;
  Ed25519PrivateKey key_;
  std::unique_ptr<Store> store_;

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<ModelLog>, std::less<>> logs_;

  std::mutex floor_mu_;  // one marker write at a time

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread snapshotter_;
};

// The manifest's stored form (a checksummed container of kind "streamlearn.manifest").
std::string EncodeManifest(const std::vector<ManifestEntry>& entries);
absl::StatusOr<std::vector<ManifestEntry>> DecodeManifest(std::string_view bytes);

// The audit key: read from `path` (PEM), or generated and written there (0600) with the
// public key beside it as <path without .key>.pub when the file does not exist.
absl::StatusOr<Ed25519PrivateKey> LoadOrCreateAuditKey(const std::string& path);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_PERSISTENCE_H_
