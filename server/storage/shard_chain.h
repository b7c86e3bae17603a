// ShardChain: the audit chain of one (model, shard) and its commits to the store.
//
// Every state-changing step of a shard ends in one Commit: its audit record bodies (already
// canonical, core/audit/step_records.h), the log entry of the batch when there is one, and any
// extra operations (a snapshot and its manifest) go into ONE ShardWrite (shard_store.h),
// committed atomically. The batch is acknowledged only after that commit returns, so an
// acknowledged batch always has its events and its audit records stored together
// (docs/DURABILITY.md). The chain state (next
// index, head, records since the last signed checkpoint) advances only when the write
// succeeded; on an error nothing changed and the caller reports it.
//
// Without a store (no data_dir) the chain is still computed, so acks carry merkle_curr, but
// the records are not kept.
//
//   ShardChain chain(shard_store, "demo", 0, key, /*checkpoint_every=*/1024);
//   chain.Resume();                               // from the stored chain (or empty)
//   Bodies b; AppendSauEventBody(..., b.Add()); ...
//   absl::StatusOr<Receipt> r = chain.Commit(b, &log);
//
// Thread safety: thread-safe; commits are serialised by the chain's mutex (the SAU and LMU
// writers of a shard share its chain).
#ifndef STREAMLEARN_SERVER_STORAGE_SHARD_CHAIN_H_
#define STREAMLEARN_SERVER_STORAGE_SHARD_CHAIN_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/audit/checkpoint.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/merkle_tree.h"
#include "core/audit/tree_head.h"
#include "core/common/digest.h"
#include "core/common/mutex.h"
#include "server/storage/shard_store.h"

namespace streamlearn::storage {

// Canonical bodies in one buffer: Add() returns the string to append one body to.
class Bodies {
 public:
  std::string* Add() {
    Close();
    open_ = true;
    return &buf_;
  }
  void Clear() {
    buf_.clear();
    ends_.clear();
    open_ = false;
  }
  size_t size() {
    Close();
    return ends_.size();
  }
  std::string_view at(size_t i) {
    Close();
    const size_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(buf_).substr(begin, ends_[i] - begin);
  }

 private:
  void Close() {
    if (open_) ends_.push_back(buf_.size());
    open_ = false;
  }
  std::string buf_;
  std::vector<size_t> ends_;
  bool open_ = false;
};

struct Receipt {
  uint64_t first_index = 0;  // of the first record of this commit
  Digest first_curr{};       // its merkle_curr
  uint64_t next_index = 0;   // the chain's next index after it
  Digest head{};             // merkle_curr of the last record written (checkpoints included)
};

struct ChainHead {
  uint64_t next_index = 0;
  Digest head{};
};

struct SignedTreeHead {
  TreeHead head;      // origin, size, root
  std::string note;   // the signed note (core/audit/tree_head.h)
};

class ShardChain {
 public:
  // `store` (may be null: memory only) must outlive the chain. REQUIRES: checkpoint_every >= 1.
  ShardChain(ShardStore* store, std::string model, uint32_t shard, Ed25519PrivateKey key,
             uint64_t checkpoint_every);

  // Continues the stored chain: next index and head from its newest record. A resumed
  // writer signs a checkpoint after the next record (it cannot know how many records passed
  // since the last one without scanning, and an early checkpoint never breaks the cadence).
  // DATA_LOSS if the newest record is unreadable.
  absl::Status Resume() ABSL_LOCKS_EXCLUDED(mu_);
  // Continues a chain whose state the caller knows (a genesis it just wrote).
  void ResumeAt(const ChainHead& head, uint64_t since_checkpoint) ABSL_LOCKS_EXCLUDED(mu_);

  // Appends `bodies` (each a canonical record body) and writes them, the log entry and
  // whatever `extra` adds, in one store batch. `extra` is called with the receipt (so the
  // caller can point a manifest at the new records) and may add operations. With an empty
  // `bodies` nothing is written. On error the chain is unchanged.
  absl::StatusOr<Receipt> Commit(
      Bodies& bodies, const LogAppend* log,
      const std::function<void(const Receipt&, ShardWrite*)>& extra = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  ChainHead head() const ABSL_LOCKS_EXCLUDED(mu_);

  // The RFC 6962 tree over the chain's stored lines (core/audit/merkle_tree.h; docs/AUDIT.md,
  // "Merkle tree, signed tree heads and proofs"). A size of 0 means every committed record.
  // FAILED_PRECONDITION without a store (the lines are not kept); OUT_OF_RANGE for a size or
  // an index beyond the committed chain; INVALID_ARGUMENT for first size 0 or first > second.
  absl::StatusOr<SignedTreeHead> SignedHead(uint64_t size) const ABSL_LOCKS_EXCLUDED(mu_);
  // PATH(index, D[size]) with the record's line (the leaf) and the size resolved.
  struct Inclusion {
    uint64_t tree_size = 0;
    std::string line;
    std::vector<Digest> path;
  };
  absl::StatusOr<Inclusion> InclusionProof(uint64_t index, uint64_t size) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // PROOF(first, D[second]) with the second size resolved.
  struct Consistency {
    uint64_t second_size = 0;
    std::vector<Digest> hashes;
  };
  absl::StatusOr<Consistency> ConsistencyProof(uint64_t first, uint64_t second) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Bounded storage (audit_archive.h): while more than `live_records` committed records would
  // stay in the live store, moves the oldest into archive segments that end on multiples of
  // `segment_records`, each sealed by the signed tree head of its end. Returns the number of
  // records archived (0 when none is due). REQUIRES: live_records, segment_records >= 1.
  // FAILED_PRECONDITION without a store; the store's errors (UNIMPLEMENTED when it keeps no
  // archive) otherwise. Runs beside commits (it reads only committed records).
  absl::StatusOr<uint64_t> Archive(uint64_t live_records, uint64_t segment_records) const
      ABSL_LOCKS_EXCLUDED(mu_, archive_mu_);
  const std::string& model() const { return model_; }
  uint32_t shard() const { return shard_; }
  ShardStore* store() const { return store_; }

 private:
  // The committed size for a requested tree size (0: all), or OUT_OF_RANGE.
  absl::StatusOr<uint64_t> TreeSize(uint64_t requested, const char* what) const
      ABSL_LOCKS_EXCLUDED(mu_);

  ShardStore* const store_;
  const std::string model_;
  const uint32_t shard_;
  const Ed25519PrivateKey key_;  // signs tree heads
  // Reads only committed, immutable lines; null without a store.
  std::unique_ptr<MerkleTreeCache> tree_;
  mutable Mutex archive_mu_;  // one Archive pass at a time; taken before mu_
  mutable Mutex mu_;
  AuditLogWriter writer_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);  // scratch
  ShardWrite write_ ABSL_GUARDED_BY(mu_);                // scratch
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_SHARD_CHAIN_H_
