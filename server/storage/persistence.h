// Persistence: what makes a server's learned state survive a crash and its steps provable
// (docs/DURABILITY.md). The facade of the storage library: it opens the backend and the audit
// key, creates models' chains, recovers them at start-up, runs the snapshotter, rebuilds
// fenced parts, and in the embedded mode records the data directory's floor and writes
// backups.
//
// Layout of a data directory (embedded mode):
//   <data_dir>/db/          the RocksDB database (store.h, behind RocksStorage)
//   <data_dir>/lmu.secret   the LMU hash secret (lmu_secret.h)
//   <data_dir>/audit.key    the Ed25519 key that signs audit checkpoints (audit_key.h)
//   <data_dir>/audit.pub    its public key (PEM), for verifiers
//   <data_dir>/streamlearn.marker   how far the store has certainly come (data_dir.h)
//   <data_dir>/audit-archive/  the audit chains' older records, in sealed segment files
//                           (audit_archive.h; the store keeps audit_live_records of each)
//
// Write path: each model shard has a ShardWriter (shard_writer.h) whose hooks commit every
// batch with its audit records as one ShardWrite before the ack. Snapshots: snapshotter.h.
// Recovery: recovery.h. Every durable byte goes through a StorageBackend (shard_store.h).
//
// Thread safety: thread-safe after Open; Recover runs before the server takes requests.
#ifndef STREAMLEARN_SERVER_STORAGE_PERSISTENCE_H_
#define STREAMLEARN_SERVER_STORAGE_PERSISTENCE_H_

#include <atomic>
#include <functional>
#include <utility>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/audit/ed25519_key.h"
#include "core/common/mutex.h"
#include "core/shard/model_registry.h"
#include "server/storage/options.h"
#include "server/storage/rocks_storage.h"
#include "server/storage/shard_chain.h"
#include "server/storage/shard_store.h"
#include "server/storage/shard_writer.h"
#include "server/storage/snapshotter.h"
#include "server/storage/storage_observer.h"
#include "server/storage/store.h"

namespace streamlearn::storage {

class Persistence {
 public:
  // Opens (or creates) the data directory's store and audit key. With an empty data_dir the
  // chain key is random for the process and nothing is stored. Errors: INVALID_ARGUMENT
  // (options), PERMISSION_DENIED / UNAVAILABLE (directory, store), DATA_LOSS (key file).
  static absl::StatusOr<std::unique_ptr<Persistence>> Open(PersistenceOptions options,
                                                           StorageObserver* observer);
  // Persistence over another backend (a fake in tests, a replicated store): no data
  // directory, so no marker, backups or checksum scans; `options.data_dir` must be empty.
  static absl::StatusOr<std::unique_ptr<Persistence>> OpenWith(
      PersistenceOptions options, std::unique_ptr<StorageBackend> backend,
      StorageObserver* observer);
  ~Persistence();
  Persistence(const Persistence&) = delete;
  Persistence& operator=(const Persistence&) = delete;

  // Restores every stored model into `registry` (see top of file). Errors name the model,
  // shard and part; DATA_LOSS when no snapshot verifies and the log no longer starts at 1.
  absl::Status Recover(ModelRegistry* registry);

  // The commit for ModelRegistry::Create: stores the spec and each shard's genesis record in
  // one write, then makes the model's ShardWriters. INVALID_ARGUMENT, naming the parameter,
  // when the spec would not come back the same from the store (a parameter the stored form
  // cannot hold: a recovery would rebuild the model differently); `secret` is the registry's.
  absl::Status OnCreate(const std::shared_ptr<Model>& model, const lmu::HashSecret& secret)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The model's writers; null for a model this object does not know.
  std::shared_ptr<ModelWriters> Find(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);

  // A fenced LMU or fuse part (a commit failed after the batch was applied in place) rebuilt
  // from the store's last committed state and reinstated, once the store takes writes again.
  // UNAVAILABLE while the store still fails (its cause); FAILED_PRECONDITION without a store;
  // errors of recovery (DATA_LOSS) otherwise. OK if the part is not (or no longer) fenced.
  absl::Status ReinstateFenced(Model& model, uint32_t shard, PartKind part,
                               const lmu::HashSecret& secret);
  // ReinstateFenced for the part when it is fenced; OK otherwise (a cheap check first).
  absl::Status ReinstateIfFenced(Model& model, uint32_t shard, PartKind part,
                                 const lmu::HashSecret& secret) {
    const ShardPart* p = model.part(shard, part);
    if (p == nullptr || !p->fenced()) return absl::OkStatus();
    return ReinstateFenced(model, shard, part, secret);
  }

  // ---- Cluster mode (options.cluster; docs/CLUSTER.md) ----
  // Registers every stored model that `registry` does not hold yet, with none of its shards
  // served; returns their names. Recover does this in the cluster mode.
  absl::StatusOr<std::vector<std::string>> RegisterStoredModels(ModelRegistry* registry)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Loads shard `shard` of the model from the store (read afresh: another server may have
  // written it since this one last served it) into fresh parts and a fresh writer, and serves
  // it. Waits for nothing but the shard's own in-flight requests (none while it does not
  // serve). Returns the log entries replayed. Errors of recovery; the shard then does not serve.
  absl::StatusOr<uint64_t> LoadShard(Model& model, uint32_t shard,
                                     const lmu::HashSecret& secret) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops serving the shard once its in-flight requests finished (no-op if it does not serve).
  void ReleaseShard(const std::string& model, uint32_t shard) ABSL_LOCKS_EXCLUDED(mu_);
  // Holds the shard for a request: in the cluster mode its gate, shared, when this server
  // serves it (false otherwise); in the embedded mode always true and nothing is held.
  bool TryUseShard(const ModelWriters& writers, uint32_t shard, ModelWriters::Use* use) const {
    return !options_.cluster || const_cast<ModelWriters&>(writers).TryUse(shard, use);
  }
  // The status of a request for a shard this server does not serve: UNAVAILABLE, starting
  // "NOT-OWNER", naming the owner and its address when the cluster knows them (SetOwnerLookup),
  // with the address also as the status payload kOwnerPayload.
  static constexpr char kOwnerPayload[] = "streamlearn.owner";
  absl::Status NotServed(const std::string& model, uint32_t shard) const;
  // Who serves a shard: (server id, address), empty when nobody does yet.
  using OwnerLookup =
      std::function<std::pair<std::string, std::string>(const std::string&, uint32_t)>;
  void SetOwnerLookup(OwnerLookup lookup) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    owner_lookup_ = std::move(lookup);
  }
  bool cluster() const { return options_.cluster; }
  // Marks the shard as not served without waiting (a request that met the journal's fence
  // calls it while it holds the shard).
  void StopServing(const std::string& model, uint32_t shard) ABSL_LOCKS_EXCLUDED(mu_);

  // Snapshots every shard part of the model now (in the cluster mode: the shards this server
  // serves).
  absl::StatusOr<std::vector<SnapshotInfo>> SnapshotModel(const Model& model);
  // A consistent copy of the store plus the key files in `dir` (which must not exist).
  absl::Status Backup(const std::string& dir);

  // Records in the data directory's marker how far the store has certainly come (audit chain
  // lengths, newest snapshots: data_dir.h, StoreFloor): syncs the WAL, then writes the marker.
  // Called after recovery, model creation (by the caller, outside the registry's lock),
  // snapshots and at Stop(); a failure is logged and returned, and changes nothing else. No-op
  // without a store. Thread-safe; it takes each shard's snapshot lock in turn, never with mu_.
  absl::Status RecordFloor() ABSL_LOCKS_EXCLUDED(mu_, floor_mu_);

  // Takes snapshots when due and archives the audit chains' old records when due (embedded
  // store with audit_live_records > 0), in a background thread, until Stop(). The thread runs
  // when either is on: a server with snapshots off still keeps its audit table bounded.
  void StartSnapshotter(ModelRegistry* registry);
  void Stop() ABSL_LOCKS_EXCLUDED(stop_mu_);

  bool durable() const { return backend_ != nullptr; }
  // The embedded RocksDB store; null in memory-only mode or over another backend.
  Store* store() const { return rocks_ != nullptr ? &rocks_->store() : nullptr; }
  const Ed25519PublicKey& public_key() const { return key_.PublicKey(); }
  const PersistenceOptions& options() const { return options_; }

 private:
  Persistence(PersistenceOptions options, StorageObserver* observer, Ed25519PrivateKey key)
      : options_(std::move(options)), observer_(observer), key_(std::move(key)) {}

  std::shared_ptr<ModelWriters> MakeWriters(const Model& model, bool serving);
  std::unique_ptr<ShardWriter> MakeWriter(const Model& model, uint32_t shard);
  absl::Status RecoverModel(ModelRegistry* registry, const std::string& name,
                            const std::string& spec_bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void SnapshotterLoop(ModelRegistry* registry) ABSL_LOCKS_EXCLUDED(stop_mu_);
  // Moves the shard's old audit records to the archive when due (audit_archive.h; the
  // embedded mode with audit_live_records > 0). Logs what it archived.
  absl::Status ArchiveChain(const std::string& model, uint32_t shard, ShardWriter& writer);

  const PersistenceOptions options_;
  StorageObserver* const observer_;
  Ed25519PrivateKey key_;
  std::unique_ptr<StorageBackend> backend_;  // null: memory only
  RocksStorage* rocks_ = nullptr;            // backend_, when it is the embedded store
  bool archiving_ = false;  // chains move their old records to archive segments

  // Never held while a shard's snapshot_mu() is taken (RecordFloor).
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<ModelWriters>, std::less<>> writers_ ABSL_GUARDED_BY(mu_);
  OwnerLookup owner_lookup_ ABSL_GUARDED_BY(mu_);

  // One marker write at a time: it serialises RecordFloor's sync and write, and guards no
  // member (the marker is a file).
  Mutex floor_mu_;

  Mutex stop_mu_;
  CondVar stop_cv_;  // signalled when stop_ is set
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  // Started by StartSnapshotter, joined by the one Stop() that sets stop_.
  std::thread snapshotter_;
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_PERSISTENCE_H_
