// ShardWriter: the durable writer of one model shard. It owns the shard's audit chain
// (shard_chain.h) and its ShardStore, and holds the commit hooks the SAU, LMU and Fuse shards
// call before a batch is published (Fuse: after it was applied, core/shard/fuse_shard.h). A
// hook encodes the batch as a log entry (log_entry.h), builds the audit records (one per SAU
// event, one per LMU batch, one per fused sample, a control record after an alarm:
// core/audit/step_records.h, fuse_records.h) and commits entry + records as one ShardWrite;
// the ack follows. It also keeps each part's snapshot bookkeeping (manifest, steps since the
// last snapshot) for the snapshotter (snapshotter.h) and recovery (recovery.h).
//
//   ShardWriter w(backend->OpenShard("demo", 0), "demo", 0, key, options, observer);
//   SauCommitHook hook = [&](const SauCommit& c) { return w.CommitSau(c, &receipt); };
//
// Thread safety: the hooks are called by the shards with their writer lock held (so each
// part's scratch has one user at a time); the chain is thread-safe; a part's manifest is read
// and written under snapshot_mu() (checked by clang's -Wthread-safety).
#ifndef STREAMLEARN_SERVER_STORAGE_SHARD_WRITER_H_
#define STREAMLEARN_SERVER_STORAGE_SHARD_WRITER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/audit/ed25519_key.h"
#include "core/common/mutex.h"
#include "core/shard/fuse_shard.h"
#include "core/shard/lmu_shard.h"
#include "core/shard/sau_shard.h"
#include "server/storage/manifest.h"
#include "server/storage/options.h"
#include "server/storage/shard_chain.h"
#include "server/storage/shard_store.h"
#include "server/storage/storage_observer.h"

namespace streamlearn::storage {

class ShardWriter {
 public:
  // The snapshot bookkeeping of one part, read and written without locks (its manifest is
  // manifest(part), under snapshot_mu()).
  struct PartState {
    std::atomic<uint64_t> steps_since{0};    // events / samples since the last snapshot
    std::atomic<uint64_t> batches_since{0};  // log entries since the last snapshot
    std::atomic<int64_t> last_snapshot_ns{absl::ToUnixNanos(absl::Now())};  // read unlocked
  };

  // `store` may be null (memory only: the chain is computed, nothing is kept); `options` and
  // `observer` (may be null) must outlive the writer.
  ShardWriter(std::unique_ptr<ShardStore> store, const std::string& model, uint32_t shard,
              Ed25519PrivateKey key, const PersistenceOptions& options,
              StorageObserver* observer);

  // The commit hooks' bodies: build records, write, fill *receipt.
  absl::Status CommitSau(const SauCommit& c, Receipt* receipt);
  absl::Status CommitLmu(const LmuCommit& c, Receipt* receipt);
  // One fuse_learn record per applied sample (a fuse_control record after each negative
  // margin), batch_digest on the first, state_digest on the last when due (fuse_records.h).
  absl::Status CommitFuse(const FuseCommit& c, Receipt* receipt);

  ShardChain& chain() { return chain_; }
  ShardStore* store() const { return store_.get(); }
  PartState& part(PartKind p) {
    return p == PartKind::kSau ? sau_ : p == PartKind::kLmu ? lmu_ : fuse_;
  }
  // One snapshot of this shard at a time.
  Mutex& snapshot_mu() ABSL_LOCK_RETURNED(snapshot_mu_) { return snapshot_mu_; }
  // The part's manifest: its snapshots, newest first.
  std::vector<ManifestEntry>& manifest(PartKind p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(snapshot_mu_) {
    return manifests_[static_cast<size_t>(p) - 1];
  }
  uint64_t steps_since_snapshot() const;

 private:
  // Commits `bodies` with the log entry, then counts `steps` toward the part's next snapshot.
  absl::Status CommitBatch(PartKind part, uint64_t seq, const std::string& entry,
                           Bodies& bodies, uint64_t steps, Receipt* receipt);

  const PersistenceOptions& options_;
  StorageObserver* const observer_;
  const std::unique_ptr<ShardStore> store_;
  ShardChain chain_;
  Mutex snapshot_mu_;
  std::vector<ManifestEntry> manifests_[3] ABSL_GUARDED_BY(snapshot_mu_);  // index PartKind - 1
  PartState sau_, lmu_, fuse_;
  // Per part (index PartKind - 1), used by the part's commit hook only. Not GUARDED_BY: the
  // lock is the part's writer lock (in the shard, another object), which the analysis cannot
  // name from here.
  Bodies bodies_[3];
  std::string entries_[3];
};

// The writers of every shard of one model, and (cluster mode, docs/CLUSTER.md) whether this
// server serves each shard now.
//
// A shard's gate is held shared by everything that uses the shard's parts or writer while it
// serves (a batch, a query, a snapshot), and exclusively by what changes whether it serves
// (Persistence::LoadShard, ReleaseShard): so a shard is never loaded or released under a
// request that uses it, and a request that passed Serve() finishes on the state it started on.
// In the embedded mode every shard serves from the start and nothing takes a gate exclusively.
class ModelWriters {
 public:
  ModelWriters(std::vector<std::unique_ptr<ShardWriter>> shards, bool serving = true);
  ShardWriter& shard(uint32_t i) { return *shards_[i]->writer; }
  uint32_t num_shards() const { return static_cast<uint32_t>(shards_.size()); }

  // A shard in use: holds its gate shared.
  class Use {
   public:
    Use() = default;
    explicit Use(std::shared_mutex* gate) : lock_(*gate) {}
    bool held() const { return lock_.owns_lock(); }
   private:
    std::shared_lock<std::shared_mutex> lock_;
  };
  // Holds shard i's gate shared and returns it when the shard serves; false (and nothing
  // held) when it does not.
  bool TryUse(uint32_t i, Use* use);
  bool serving(uint32_t i) const { return shards_[i]->serving.load(std::memory_order_acquire); }

  // Runs fn with shard i's gate held exclusively (no request uses the shard meanwhile).
  template <typename Fn>
  auto Exclusive(uint32_t i, Fn&& fn) {
    std::unique_lock<std::shared_mutex> lock(shards_[i]->gate);
    return fn();
  }
  // REQUIRES: inside Exclusive(i, ...).
  void Replace(uint32_t i, std::unique_ptr<ShardWriter> writer) {
    shards_[i]->writer = std::move(writer);
  }
  void set_serving(uint32_t i, bool serving) {
    shards_[i]->serving.store(serving, std::memory_order_release);
  }

 private:
  struct Slot {
    std::unique_ptr<ShardWriter> writer;
    std::shared_mutex gate;
    std::atomic<bool> serving{true};
  };
  std::vector<std::unique_ptr<Slot>> shards_;
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_SHARD_WRITER_H_
