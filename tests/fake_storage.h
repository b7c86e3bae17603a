// FakeStorage: an in-memory StorageBackend (server/storage/shard_store.h) for unit tests of
// the storage library, with a hand-written fault switch in the style of LevelDB's
// fault_injection_test: a test makes every write (or read) fail from some point on, watches
// what the code under test does about it, then heals the store and watches it recover.
//
//   FakeStorage fake;                                   // the store; keep it for the test
//   auto p = Persistence::OpenWith(options, fake.Share(), nullptr);   // a view of it
//   fake.FailWrites(absl::UnavailableError("disk full"));  // Commit / CreateModel fail ...
//   ...                                                 // ... and apply nothing
//   fake.HealWrites();
//   auto p2 = Persistence::OpenWith(options, fake.Share(), nullptr);  // a "restart"
//
// Every view made by Share() sees (and changes) the same state and the same fault switch, so
// a second Persistence over the same data is a restart. What it does like the real store
// (RocksStorage): a Commit applies all of a ShardWrite (log append, audit appends, dropped
// snapshots deleted, snapshot and manifest put, log trimmed) or nothing. What it does beyond
// it: a Commit that would overwrite or leave a gap in the audit chain, or a log append whose
// seq is not the part's highest seq ever appended + 1, is a bug of the caller and fails with
// INTERNAL (nothing applied), which a test sees as a failed write it did not inject.
//
// Faults: FailWrites(status) makes every later write (Commit, CreateModel) fail with `status`
// and ResumeWrites return it, until HealWrites(); FailWritesAfter(n, status) lets the next n
// writes succeed first; FailWriteOnce(n, status) fails the (n+1)-th write alone (a transient
// error). FailReads / FailReadsAfter / FailReadOnce do the same for every read (ListSpecs,
// ScanLog, LastLogSeq, GetSnapshot, GetManifest, ScanAudit, LastAudit), until HealReads().
// Test hooks (CorruptSnapshot, DeleteSnapshot, DropLogEntry, ...) change the stored data
// behind the code's back; the inspection calls (LogSeqs, SnapshotSeqs, Manifest, ...) read it.
// Neither is subject to the fault switch nor counted.
//
// Thread safety: thread-safe (one mutex over the shared state); visitors run without it.
#ifndef STREAMLEARN_TESTS_FAKE_STORAGE_H_
#define STREAMLEARN_TESTS_FAKE_STORAGE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/storage/shard_store.h"

namespace streamlearn::storage {

class FakeStorage final : public StorageBackend {
 public:
  FakeStorage() : state_(std::make_shared<State>()) {}
  FakeStorage(const FakeStorage&) = delete;
  FakeStorage& operator=(const FakeStorage&) = delete;

  // Another backend over the same data and fault switch (for Persistence::OpenWith, which
  // takes ownership of its backend).
  std::unique_ptr<FakeStorage> Share() const {
    return std::unique_ptr<FakeStorage>(new FakeStorage(state_));
  }

  // ---- StorageBackend ----

  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListSpecs() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (absl::Status s = state_->Read(); !s.ok()) return s;
    return std::vector<std::pair<std::string, std::string>>(state_->specs.begin(),
                                                            state_->specs.end());
  }

  absl::Status CreateModel(std::string_view name, std::string_view spec_bytes,
                           std::span<const std::string> genesis_lines) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (absl::Status s = state_->Write(); !s.ok()) return s;
    state_->specs[std::string(name)] = std::string(spec_bytes);
    for (size_t i = 0; i < genesis_lines.size(); ++i) {
      ShardData& shard = state_->shards[{std::string(name), static_cast<uint32_t>(i)}];
      shard.audit.clear();
      shard.audit[0] = genesis_lines[i];
    }
    return absl::OkStatus();
  }

  std::unique_ptr<ShardStore> OpenShard(std::string_view model, uint32_t shard) override {
    return std::make_unique<FakeShardStore>(state_, std::string(model), shard);
  }

  std::string Describe() const override { return "FakeStorage (in memory)"; }

  // ---- Fault switch ----

  // Every later write fails with `status` (nothing applied) until HealWrites().
  void FailWrites(absl::Status status) { FailWritesAfter(0, std::move(status)); }
  // The next `n` writes succeed; the (n+1)-th and every later one fail until HealWrites().
  void FailWritesAfter(uint64_t n, absl::Status status) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->write_fault = Fault{.allowed = n, .status = std::move(status)};
  }
  // A transient fault: the next `n` writes succeed, the (n+1)-th fails, later ones succeed.
  void FailWriteOnce(uint64_t n, absl::Status status) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->write_fault = Fault{.allowed = n, .failures = 1, .status = std::move(status)};
  }
  void HealWrites() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->write_fault.reset();
  }
  // The same for reads.
  void FailReads(absl::Status status) { FailReadsAfter(0, std::move(status)); }
  void FailReadsAfter(uint64_t n, absl::Status status) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->read_fault = Fault{.allowed = n, .status = std::move(status)};
  }
  void FailReadOnce(uint64_t n, absl::Status status) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->read_fault = Fault{.allowed = n, .failures = 1, .status = std::move(status)};
  }
  void HealReads() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->read_fault.reset();
  }

  // Successful ShardStore::Commit calls; failed writes (injected or INTERNAL); read calls
  // (failed ones included). Over all views.
  uint64_t commits() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->commits;
  }
  uint64_t failed_writes() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->failed_writes;
  }
  uint64_t reads() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->reads;
  }

  // ---- Test hooks: change the stored data (not faulted, not counted) ----

  // Replaces a stored snapshot blob; false when there is none.
  bool CorruptSnapshot(std::string_view model, uint32_t shard, PartKind part, uint64_t seq,
                       std::string bytes) {
    std::lock_guard<std::mutex> lock(state_->mu);
    PartData* p = state_->FindPart(model, shard, part);
    if (p == nullptr) return false;
    auto it = p->snapshots.find(seq);
    if (it == p->snapshots.end()) return false;
    it->second = std::move(bytes);
    return true;
  }
  bool DeleteSnapshot(std::string_view model, uint32_t shard, PartKind part, uint64_t seq) {
    std::lock_guard<std::mutex> lock(state_->mu);
    PartData* p = state_->FindPart(model, shard, part);
    return p != nullptr && p->snapshots.erase(seq) == 1;
  }
  bool DropLogEntry(std::string_view model, uint32_t shard, PartKind part, uint64_t seq) {
    std::lock_guard<std::mutex> lock(state_->mu);
    PartData* p = state_->FindPart(model, shard, part);
    return p != nullptr && p->log.erase(seq) == 1;
  }
  bool CorruptManifest(std::string_view model, uint32_t shard, PartKind part,
                       std::string bytes) {
    std::lock_guard<std::mutex> lock(state_->mu);
    PartData* p = state_->FindPart(model, shard, part);
    if (p == nullptr || !p->manifest.has_value()) return false;
    p->manifest = std::move(bytes);
    return true;
  }

  // ---- Inspection (not faulted, not counted) ----

  std::vector<std::string> ModelNames() const {
    std::lock_guard<std::mutex> lock(state_->mu);
    std::vector<std::string> out;
    for (const auto& [name, spec] : state_->specs) out.push_back(name);
    return out;
  }
  std::vector<uint64_t> LogSeqs(std::string_view model, uint32_t shard, PartKind part) const {
    std::lock_guard<std::mutex> lock(state_->mu);
    std::vector<uint64_t> out;
    if (const PartData* p = state_->FindPart(model, shard, part); p != nullptr) {
      for (const auto& [seq, entry] : p->log) out.push_back(seq);
    }
    return out;
  }
  std::vector<uint64_t> SnapshotSeqs(std::string_view model, uint32_t shard,
                                     PartKind part) const {
    std::lock_guard<std::mutex> lock(state_->mu);
    std::vector<uint64_t> out;
    if (const PartData* p = state_->FindPart(model, shard, part); p != nullptr) {
      for (const auto& [seq, blob] : p->snapshots) out.push_back(seq);
    }
    return out;
  }
  std::optional<std::string> Snapshot(std::string_view model, uint32_t shard, PartKind part,
                                      uint64_t seq) const {
    std::lock_guard<std::mutex> lock(state_->mu);
    const PartData* p = state_->FindPart(model, shard, part);
    if (p == nullptr) return std::nullopt;
    auto it = p->snapshots.find(seq);
    if (it == p->snapshots.end()) return std::nullopt;
    return it->second;
  }
  std::optional<std::string> Manifest(std::string_view model, uint32_t shard,
                                      PartKind part) const {
    std::lock_guard<std::mutex> lock(state_->mu);
    const PartData* p = state_->FindPart(model, shard, part);
    return p != nullptr ? p->manifest : std::nullopt;
  }
  // The number of audit records of the shard's chain.
  uint64_t AuditSize(std::string_view model, uint32_t shard) const {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto it = state_->shards.find({std::string(model), shard});
    return it == state_->shards.end() ? 0 : it->second.audit.size();
  }

 private:
  struct Fault {
    uint64_t allowed = 0;                        // calls that still succeed first
    uint64_t failures = ~uint64_t{0};            // calls that fail then (all: until healed)
    absl::Status status;
  };
  struct PartData {
    std::map<uint64_t, std::string> log;
    uint64_t last_appended = 0;  // the highest log seq ever appended (trims keep it)
    std::map<uint64_t, std::string> snapshots;
    std::optional<std::string> manifest;
  };
  struct ShardData {
    std::map<PartKind, PartData> parts;
    std::map<uint64_t, std::string> audit;
  };
  struct State {
    mutable std::mutex mu;
    std::map<std::string, std::string> specs;
    std::map<std::pair<std::string, uint32_t>, ShardData> shards;
    std::optional<Fault> write_fault;
    std::optional<Fault> read_fault;
    uint64_t commits = 0;
    uint64_t failed_writes = 0;
    uint64_t reads = 0;

    // REQUIRES: mu held. The fault a write (or read) meets now, if any; counts the call.
    absl::Status Write() {
      absl::Status s = Take(write_fault);
      if (!s.ok()) ++failed_writes;
      return s;
    }
    absl::Status Read() {
      ++reads;
      return Take(read_fault);
    }
    static absl::Status Take(std::optional<Fault>& fault) {
      if (!fault.has_value()) return absl::OkStatus();
      if (fault->allowed > 0) {
        --fault->allowed;
        return absl::OkStatus();
      }
      absl::Status s = fault->status;
      if (--fault->failures == 0) fault.reset();
      return s;
    }
    // Whether writes fail now, without counting a call.
    absl::Status WriteFailure() const {
      return write_fault.has_value() && write_fault->allowed == 0 ? write_fault->status
                                                                  : absl::OkStatus();
    }
    PartData* FindPart(std::string_view model, uint32_t shard, PartKind part) {
      auto it = shards.find({std::string(model), shard});
      if (it == shards.end()) return nullptr;
      auto p = it->second.parts.find(part);
      return p == it->second.parts.end() ? nullptr : &p->second;
    }
    const PartData* FindPart(std::string_view model, uint32_t shard, PartKind part) const {
      return const_cast<State*>(this)->FindPart(model, shard, part);
    }
  };

  class FakeShardStore final : public ShardStore {
   public:
    FakeShardStore(std::shared_ptr<State> state, std::string model, uint32_t shard)
        : ShardStore(std::move(model), shard), state_(std::move(state)) {}

    absl::Status Commit(const ShardWrite& write) override {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (absl::Status s = state_->Write(); !s.ok()) return s;
      if (absl::Status s = Check(write); !s.ok()) {
        ++state_->failed_writes;
        return s;
      }
      ShardData& sd = state_->shards[{model(), shard()}];
      if (write.log.has_value()) {
        PartData& p = sd.parts[write.log->part];
        p.log[write.log->seq] = std::string(write.log->entry);
        p.last_appended = write.log->seq;
      }
      for (const AuditAppend& a : write.audit) sd.audit[a.index] = std::string(a.line);
      sd.audit.erase(sd.audit.begin(), sd.audit.lower_bound(write.trim_audit_below));
      if (write.snapshot.has_value()) {
        const SnapshotPut& put = *write.snapshot;
        PartData& p = sd.parts[put.part];
        for (uint64_t seq : put.dropped) p.snapshots.erase(seq);
        p.snapshots[put.seq] = std::string(put.blob);
        p.manifest = put.manifest;
        if (put.trim_log_through > 0) {
          p.log.erase(p.log.begin(), p.log.upper_bound(put.trim_log_through));
        }
      }
      ++state_->commits;
      return absl::OkStatus();
    }

    absl::Status ResumeWrites() override {
      std::lock_guard<std::mutex> lock(state_->mu);
      return state_->WriteFailure();
    }

    absl::Status ScanLog(PartKind part, uint64_t from, const LogVisitor& fn) const override {
      std::vector<std::pair<uint64_t, std::string>> entries;
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        if (absl::Status s = state_->Read(); !s.ok()) return s;
        if (const PartData* p = state_->FindPart(model(), shard(), part); p != nullptr) {
          entries.assign(p->log.lower_bound(from), p->log.end());
        }
      }
      for (const auto& [seq, entry] : entries) {
        if (!fn(seq, entry)) break;
      }
      return absl::OkStatus();
    }

    absl::StatusOr<std::optional<uint64_t>> LastLogSeq(PartKind part) const override {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (absl::Status s = state_->Read(); !s.ok()) return s;
      const PartData* p = state_->FindPart(model(), shard(), part);
      if (p == nullptr || p->log.empty()) return std::optional<uint64_t>();
      return std::optional<uint64_t>(p->log.rbegin()->first);
    }

    absl::StatusOr<std::optional<std::string>> GetSnapshot(PartKind part,
                                                           uint64_t seq) const override {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (absl::Status s = state_->Read(); !s.ok()) return s;
      const PartData* p = state_->FindPart(model(), shard(), part);
      if (p == nullptr) return std::optional<std::string>();
      auto it = p->snapshots.find(seq);
      if (it == p->snapshots.end()) return std::optional<std::string>();
      return std::optional<std::string>(it->second);
    }

    absl::StatusOr<std::optional<std::string>> GetManifest(PartKind part) const override {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (absl::Status s = state_->Read(); !s.ok()) return s;
      const PartData* p = state_->FindPart(model(), shard(), part);
      return p != nullptr ? p->manifest : std::optional<std::string>();
    }

    absl::Status ScanAudit(uint64_t from, const AuditVisitor& fn) const override {
      std::vector<std::pair<uint64_t, std::string>> records;
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        if (absl::Status s = state_->Read(); !s.ok()) return s;
        auto it = state_->shards.find({model(), shard()});
        if (it != state_->shards.end()) {
          records.assign(it->second.audit.lower_bound(from), it->second.audit.end());
        }
      }
      for (const auto& [index, line] : records) {
        if (!fn(index, line)) break;
      }
      return absl::OkStatus();
    }

    absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> LastAudit() const override {
      using Last = std::optional<std::pair<uint64_t, std::string>>;
      std::lock_guard<std::mutex> lock(state_->mu);
      if (absl::Status s = state_->Read(); !s.ok()) return s;
      auto it = state_->shards.find({model(), shard()});
      if (it == state_->shards.end() || it->second.audit.empty()) return Last();
      return Last(*it->second.audit.rbegin());
    }

   private:
    // REQUIRES: mu held. INTERNAL for a write no correct caller makes.
    absl::Status Check(const ShardWrite& write) const {
      const std::string where = absl::StrCat("FakeStorage: model '", model(), "' shard ",
                                             shard());
      auto sd = state_->shards.find({model(), shard()});
      if (sd == state_->shards.end()) {
        return absl::InternalError(absl::StrCat(where, ": no such model shard (no genesis)"));
      }
      if (!write.audit.empty()) {
        const uint64_t next =
            sd->second.audit.empty() ? 0 : sd->second.audit.rbegin()->first + 1;
        for (size_t i = 0; i < write.audit.size(); ++i) {
          if (write.audit[i].index != next + i) {
            return absl::InternalError(absl::StrCat(where, ": audit record ",
                                                    write.audit[i].index, " where ", next + i,
                                                    " is next"));
          }
        }
      }
      if (write.log.has_value()) {
        auto p = sd->second.parts.find(write.log->part);
        const uint64_t last = p == sd->second.parts.end() ? 0 : p->second.last_appended;
        if (write.log->seq != last + 1) {
          return absl::InternalError(absl::StrCat(where, " ",
                                                  std::string(PartName(write.log->part)),
                                                  ": log seq ", write.log->seq, " after ", last));
        }
      }
      return absl::OkStatus();
    }

    const std::shared_ptr<State> state_;
  };

  explicit FakeStorage(std::shared_ptr<State> state) : state_(std::move(state)) {}

  const std::shared_ptr<State> state_;
};

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_TESTS_FAKE_STORAGE_H_
