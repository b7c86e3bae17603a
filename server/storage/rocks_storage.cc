#include "server/storage/rocks_storage.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {
namespace {

// One shard of the database: every call is the Store's, keyed by (model, shard).
class RocksShardStore final : public ShardStore {
 public:
  RocksShardStore(Store* store, std::string model, uint32_t shard)
      : ShardStore(std::move(model), shard), store_(store) {}

  absl::Status Commit(const ShardWrite& write) override {
    StoreBatch batch;
    AddShardWrite(model(), shard(), write, &batch);
    RETURN_IF_ERROR(store_->Write(batch));
    // Archived records (audit_archive.h): their space is given back at once. A failed
    // compaction loses nothing (the keys are deleted either way); RocksDB retries later.
    if (write.trim_audit_below > 0) {
      if (absl::Status s = store_->CompactAudit(model(), shard(), write.trim_audit_below);
          !s.ok()) {
        spdlog::warn("{}", std::string(s.message()));
      }
    }
    return absl::OkStatus();
  }
  absl::Status ResumeWrites() override { return store_->ResumeWrites(); }
  absl::Status ScanLog(PartKind part, uint64_t from, const LogVisitor& fn) const override {
    return store_->ScanLog(model(), shard(), part, from, fn);
  }
  absl::StatusOr<std::optional<uint64_t>> LastLogSeq(PartKind part) const override {
    return store_->LastLogSeq(model(), shard(), part);
  }
  absl::StatusOr<std::optional<std::string>> GetSnapshot(PartKind part,
                                                         uint64_t seq) const override {
    return store_->GetSnapshot(model(), shard(), part, seq);
  }
  absl::StatusOr<std::optional<std::string>> GetManifest(PartKind part) const override {
    return store_->GetManifest(model(), shard(), part);
  }
  absl::Status ScanAudit(uint64_t from, const AuditVisitor& fn) const override {
    return store_->ScanAudit(model(), shard(), from, fn);
  }
  absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> LastAudit() const override {
    return store_->LastAudit(model(), shard());
  }

 private:
  Store* const store_;
};

}  // namespace

void AddShardWrite(std::string_view model, uint32_t shard, const ShardWrite& write,
                   StoreBatch* batch) {
  if (write.log.has_value()) {
    batch->AppendLog(model, shard, write.log->part, write.log->seq, write.log->entry);
  }
  for (const AuditAppend& a : write.audit) batch->AppendAudit(model, shard, a.index, a.line);
  if (write.trim_audit_below > 0) batch->TrimAudit(model, shard, write.trim_audit_below);
  if (write.snapshot.has_value()) {
    const SnapshotPut& s = *write.snapshot;
    for (uint64_t seq : s.dropped) batch->DeleteSnapshot(model, shard, s.part, seq);
    batch->PutSnapshot(model, shard, s.part, s.seq, s.blob);
    batch->PutManifest(model, shard, s.part, s.manifest);
    if (s.trim_log_through > 0) batch->TrimLog(model, shard, s.part, s.trim_log_through);
  }
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> RocksStorage::ListSpecs()
    const {
  return store_->ListSpecs();
}

absl::Status RocksStorage::CreateModel(std::string_view name, std::string_view spec_bytes,
                                       std::span<const std::string> genesis_lines) {
  StoreBatch batch;
  batch.PutSpec(name, spec_bytes);
  for (size_t i = 0; i < genesis_lines.size(); ++i) {
    batch.AppendAudit(name, static_cast<uint32_t>(i), 0, genesis_lines[i]);
  }
  return store_->Write(batch);
}

std::unique_ptr<ShardStore> RocksStorage::OpenShard(std::string_view model, uint32_t shard) {
  return std::make_unique<RocksShardStore>(store_.get(), std::string(model), shard);
}

std::string RocksStorage::Describe() const {
  return absl::StrCat("RocksDB at '", store_->options().path, "'");
}

}  // namespace streamlearn::storage
