// Store: the one RocksDB database of a server process (docs/DECISIONS.md, "Persistence";
// docs/DURABILITY.md).
//
// Column families and keys (model names match [A-Za-z0-9_.-]{1,64}, so they hold no NUL;
// integers are big-endian so that key order is numeric order):
//   specs      name                                   -> ModelSpec proto bytes (resolved)
//   log        name \0 BE32 shard  u8 part  BE64 seq  -> one acknowledged batch (LogEntry bytes)
//   snapshots  name \0 BE32 shard  u8 part  BE64 seq  -> one snapshot blob
//              name \0 BE32 shard  u8 part  "M"       -> the manifest of that shard part
//   audit      name \0 BE32 shard  BE64 index         -> one canonical audit envelope line
// `part` is PartKind (SAU, LMU or Fuse); the audit chain is one per (model, shard).
//
// Writes go through StoreBatch and Store::Write, which commits the whole batch atomically
// (one rocksdb::WriteBatch). Durability:
//   kProcess  the WAL is written before Write returns (no fsync): survives kill -9 of the
//             process, not a power loss. The default.
//   kMachine  WriteOptions::sync: the WAL is fsync'ed before Write returns; concurrent
//             writers share one fsync (RocksDB's group commit). Survives power loss.
//
//   absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({.path = dir});
//   StoreBatch batch;
//   batch.AppendLog("demo", 0, PartKind::kSau, 17, entry_bytes);
//   batch.AppendAudit("demo", 0, 4242, line);
//   absl::Status s = (*store)->Write(batch);      // all or nothing
//
// Errors name the operation, the key (model, shard, part, seq) and RocksDB's message; I/O
// failures are UNAVAILABLE, corruption DATA_LOSS, a missing column family or a bad path
// FAILED_PRECONDITION / NOT_FOUND.
//
// Thread safety: Store is thread-safe (RocksDB is). A StoreBatch belongs to one thread.
#ifndef STREAMLEARN_SERVER_STORAGE_STORE_H_
#define STREAMLEARN_SERVER_STORAGE_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/mutex.h"
#include "server/storage/shard_store.h"

namespace rocksdb {
class Cache;
class ColumnFamilyHandle;
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace streamlearn::storage {

enum class Durability { kProcess, kMachine };

// "process" / "machine"; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<Durability> ParseDurability(std::string_view name);
std::string_view DurabilityName(Durability d);


struct StoreOptions {
  std::string path;                          // the database directory
  bool create_if_missing = true;             // false: NOT_FOUND when there is no database
  Durability durability = Durability::kProcess;
  bool read_only = false;                    // open an existing database for reading only
                                             // (works while a server holds it open; sees
                                             // the database as it was when opened)
  // Whether the audit table's blocks are compressed (snappy). An archive that takes the old
  // records (audit_archive.h) compresses them itself: then the table is a bounded staging
  // area and is better left uncompressed.
  bool compress_audit = true;
};

class StoreBatch {
 public:
  StoreBatch();
  ~StoreBatch();
  StoreBatch(const StoreBatch&) = delete;
  StoreBatch& operator=(const StoreBatch&) = delete;

  void PutSpec(std::string_view model, std::string_view spec_bytes);
  void AppendLog(std::string_view model, uint32_t shard, PartKind part, uint64_t seq,
                 std::string_view entry);
  // Deletes log entries with seq <= last (a range delete) of one shard part.
  void TrimLog(std::string_view model, uint32_t shard, PartKind part, uint64_t last);
  // Deletes the chain's audit records with index < below (archived: audit_archive.h).
  void TrimAudit(std::string_view model, uint32_t shard, uint64_t below);
  void AppendAudit(std::string_view model, uint32_t shard, uint64_t index,
                   std::string_view line);
  void PutSnapshot(std::string_view model, uint32_t shard, PartKind part, uint64_t seq,
                   std::string_view blob);
  void DeleteSnapshot(std::string_view model, uint32_t shard, PartKind part, uint64_t seq);
  void PutManifest(std::string_view model, uint32_t shard, PartKind part,
                   std::string_view manifest);

  size_t bytes() const;  // approximate size of what the batch will write
  bool empty() const;

 private:
  friend class Store;
  struct Op;
  void Add(uint8_t kind, uint8_t cf, std::string key, std::string_view value);

  std::vector<Op> ops_;  // applied to a rocksdb::WriteBatch by Store::Write
  size_t bytes_ = 0;     // keys and values of ops_
};

class Store {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Commits the batch atomically with the store's durability. UNAVAILABLE on an I/O error;
  // FAILED_PRECONDITION on a read-only store. After an I/O error (a full disk, say) RocksDB
  // stops taking writes; the next Write asks it to resume first, so writes succeed again as
  // soon as the cause is gone, without a restart.
  absl::Status Write(const StoreBatch& batch);
  // OK when writes are possible as far as the store knows: no I/O error since the last
  // successful write, or RocksDB resumed after one. UNAVAILABLE with the current cause
  // otherwise. Thread-safe: one caller at a time asks RocksDB (a Resume() beside another one
  // fails with Busy, not with the cause), and those that waited find it done.
  absl::Status ResumeWrites() ABSL_LOCKS_EXCLUDED(resume_mu_);
  // Makes every write so far durable on the machine (fsyncs the WAL; a no-op cost under
  // Durability::kMachine, where every write is synced already).
  absl::Status SyncWal();

  // specs: every stored (name, spec bytes), sorted by name.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListSpecs() const;

  // log: calls fn(seq, entry) for entries with seq >= from, in seq order, until fn returns
  // false or the entries end.
  absl::Status ScanLog(std::string_view model, uint32_t shard, PartKind part, uint64_t from,
                       const std::function<bool(uint64_t seq, std::string_view entry)>& fn) const;
  // The largest seq in the log of that shard part, nullopt when empty.
  absl::StatusOr<std::optional<uint64_t>> LastLogSeq(std::string_view model, uint32_t shard,
                                                     PartKind part) const;

  // snapshots: nullopt when absent.
  absl::StatusOr<std::optional<std::string>> GetSnapshot(std::string_view model, uint32_t shard,
                                                         PartKind part, uint64_t seq) const;
  absl::StatusOr<std::optional<std::string>> GetManifest(std::string_view model, uint32_t shard,
                                                         PartKind part) const;

  // audit: calls fn(index, line) for records with index >= from, in order, until fn returns
  // false. LastAudit gives the newest (index, line) of a chain, nullopt when it is empty.
  // Compacts the chain's audit keys below `below` (deleted by TrimAudit), so that the disk
  // space they held is given back now rather than at some later compaction.
  absl::Status CompactAudit(std::string_view model, uint32_t shard, uint64_t below);
  absl::Status ScanAudit(std::string_view model, uint32_t shard, uint64_t from,
                         const std::function<bool(uint64_t index, std::string_view line)>& fn)
      const;
  absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> LastAudit(
      std::string_view model, uint32_t shard) const;

  // A consistent, independent copy of the whole database in `dir`: a rocksdb::Checkpoint,
  // whose hard links to the live table files are then replaced by copies (fsync'ed), so that
  // damage to a live file never reaches the backup. `dir` must not exist yet (ALREADY_EXISTS);
  // its parent must. FAILED_PRECONDITION on a read-only store (a checkpoint flushes the
  // memtables first).
  absl::Status Backup(const std::string& dir) const;

  // Reads every block of the audit column family, checking its checksums (RocksDB's error
  // names the damaged file). DATA_LOSS on a checksum error. Cost: one sequential read of the
  // audit table (docs/DURABILITY.md, "Start-up checks").
  absl::Status VerifyAuditChecksums() const;

  // What RocksDB holds in memory, from its own accounting: the block cache's contents (data,
  // index and filter blocks), every column family's memtables, and the table readers kept
  // outside the cache. The process's resident memory is the rest plus these.
  struct MemoryUsage {
    uint64_t block_cache = 0;
    uint64_t memtables = 0;
    uint64_t table_readers = 0;
  };
  MemoryUsage Memory() const;

  // The table files of the database, for diagnostics and tests: (column family, file path).
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> TableFiles() const;

  // Test hook: overwrite a stored value in place (a corrupted snapshot, a tampered record),
  // bypassing every check. Not used by the server. FAILED_PRECONDITION on a read-only store.
  absl::Status RawPutSnapshot(std::string_view model, uint32_t shard, PartKind part,
                              uint64_t seq, std::string_view blob);
  absl::Status RawPutAudit(std::string_view model, uint32_t shard, uint64_t index,
                           std::string_view line);

  const StoreOptions& options() const { return options_; }

 private:
  Store() = default;
  absl::StatusOr<std::optional<std::string>> Get(uint8_t cf, const std::string& key) const;
  absl::Status RawPut(uint8_t cf, const std::string& key, std::string_view value);

  StoreOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  std::shared_ptr<rocksdb::Cache> cache_;  // the one block cache of every column family
  // A write failed: the next one first asks RocksDB to resume from its background error.
  mutable std::atomic<bool> resume_needed_{false};
  // One resume at a time: RocksDB answers a Resume() beside another (or beside its own
  // recovery) with Busy, which is not the failure's cause.
  Mutex resume_mu_;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs_;  // default, specs, log, snapshots, audit
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_STORE_H_
