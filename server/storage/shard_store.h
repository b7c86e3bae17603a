// ShardStore and StorageBackend: the storage interface every durable path goes through.
//
// A ShardStore is the durable state of one (model, shard): its audit chain, and for each of
// its parts (SAU, LMU, Fuse) a log of acknowledged batches, snapshots and the manifest that
// lists them. Everything one step changes is ONE ShardWrite, committed atomically: the batch's
// log entry with its audit records, or a snapshot with its manifest, its audit record and the
// log trim it allows. Nothing else writes a shard. A StorageBackend holds the models' specs and
// hands out their ShardStores.
//
// Implementations: RocksStorage (rocks_storage.h: the embedded RocksDB store, one database per
// process), and in tests FakeStorage (tests/fake_storage.h: in memory, with injected write and
// read errors). A replicated implementation plugs in here without touching the shard logic,
// the request handlers or core/.
//
//   std::unique_ptr<ShardStore> s = backend->OpenShard("demo", 0);
//   ShardWrite w;
//   w.log = LogAppend{.part = PartKind::kSau, .seq = 17, .entry = entry_bytes};
//   w.audit.push_back({.index = 4242, .line = line});
//   absl::Status st = s->Commit(w);               // all or nothing
//
// Errors: an I/O failure is UNAVAILABLE (nothing of the write is visible), corruption DATA_LOSS,
// each naming the model, shard, part and sequence number.
// Thread safety: implementations are thread-safe. A ShardWrite belongs to one thread, and the
// views it holds must outlive Commit.
#ifndef STREAMLEARN_SERVER_STORAGE_SHARD_STORE_H_
#define STREAMLEARN_SERVER_STORAGE_SHARD_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/shard/shard_part.h"

namespace streamlearn::storage {

// One log entry to append: the batch `seq` of a shard part.
struct LogAppend {
  PartKind part = PartKind::kSau;
  uint64_t seq = 0;
  std::string_view entry;
};

// One audit record: its chain index and canonical envelope line.
struct AuditAppend {
  uint64_t index = 0;
  std::string_view line;
};

// A snapshot of a shard part and the manifest that lists it from now on.
struct SnapshotPut {
  PartKind part = PartKind::kSau;
  uint64_t seq = 0;
  std::string_view blob;
  std::string manifest;                // the encoded manifest (manifest.h)
  std::vector<uint64_t> dropped;       // snapshot seqs the new manifest no longer lists
  uint64_t trim_log_through = 0;       // log entries of the part with seq <= this go (0: none)
};

// Everything one step writes to a shard, committed as one.
struct ShardWrite {
  std::optional<LogAppend> log;
  std::vector<AuditAppend> audit;      // consecutive indices, in order
  std::optional<SnapshotPut> snapshot;
  // Audit records with index < this go from the live store (0: none). Only an archive
  // (audit_archive.h) sets it, once those records are sealed in a segment file.
  uint64_t trim_audit_below = 0;

  bool empty() const {
    return !log.has_value() && audit.empty() && !snapshot.has_value() && trim_audit_below == 0;
  }
};

using LogVisitor = std::function<bool(uint64_t seq, std::string_view entry)>;
using AuditVisitor = std::function<bool(uint64_t index, std::string_view line)>;

class ShardStore {
 public:
  virtual ~ShardStore() = default;

  const std::string& model() const { return model_; }
  uint32_t shard() const { return shard_; }

  // Commits the write atomically. UNAVAILABLE on an I/O error (nothing written).
  virtual absl::Status Commit(const ShardWrite& write) = 0;
  // OK when a Commit can succeed as far as the store knows (after a failed one: once the
  // store resumed); UNAVAILABLE with the cause otherwise.
  virtual absl::Status ResumeWrites() = 0;

  // Calls fn(seq, entry) for the part's log entries with seq >= from, in order, until fn
  // returns false.
  virtual absl::Status ScanLog(PartKind part, uint64_t from, const LogVisitor& fn) const = 0;
  // The newest seq of the part's log; nullopt when it is empty.
  virtual absl::StatusOr<std::optional<uint64_t>> LastLogSeq(PartKind part) const = 0;
  // nullopt when absent.
  virtual absl::StatusOr<std::optional<std::string>> GetSnapshot(PartKind part,
                                                                 uint64_t seq) const = 0;
  virtual absl::StatusOr<std::optional<std::string>> GetManifest(PartKind part) const = 0;

  // Calls fn(index, line) for the audit records with index >= from, in order, until fn
  // returns false. LastAudit: the newest (index, line), nullopt for an empty chain.
  virtual absl::Status ScanAudit(uint64_t from, const AuditVisitor& fn) const = 0;
  virtual absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> LastAudit() const = 0;

  // Bounded audit storage (audit_archive.h): moves the chain's records with index < `below`
  // that are still in the live store into a sealed segment file ending on `seal`, the signed
  // tree head of size `below`; ScanAudit reads on across the segments. OK and nothing done
  // when below <= ArchivedBelow(). UNIMPLEMENTED where the backend keeps no archive.
  virtual absl::Status ArchiveAudit(uint64_t below, std::string_view seal) {
    (void)below;
    (void)seal;
    return absl::UnimplementedError(
        "this store keeps no audit archive (the embedded store's data directory has one)");
  }
  // The chain's records with index < this are in archive segments (0: none).
  virtual uint64_t ArchivedBelow() const { return 0; }
  // What an archive (audit_archive.h) tells the store it wraps: the records below `below` are
  // sealed in segment files, so a store that copies old records elsewhere (the JetStream
  // store's archive stream) need not copy those. A hint: it changes no stored data.
  virtual void NoteArchivedBelow(uint64_t below) { (void)below; }

 protected:
  ShardStore(std::string model, uint32_t shard) : model_(std::move(model)), shard_(shard) {}

 private:
  const std::string model_;
  const uint32_t shard_;
};

class StorageBackend {
 public:
  virtual ~StorageBackend() = default;

  // Every stored (model name, ModelSpec proto bytes), sorted by name.
  virtual absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListSpecs() const = 0;
  // Stores a new model: its spec and the first audit record (index 0, the genesis) of each
  // shard's chain, in one atomic write: the model exists with its chains or not at all.
  virtual absl::Status CreateModel(std::string_view name, std::string_view spec_bytes,
                                   std::span<const std::string> genesis_lines) = 0;
  // The store of one shard of a stored model; it may outlive nothing but this backend.
  virtual std::unique_ptr<ShardStore> OpenShard(std::string_view model, uint32_t shard) = 0;
  // A human-readable location for messages ("RocksDB at <path>").
  virtual std::string Describe() const = 0;
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_SHARD_STORE_H_
