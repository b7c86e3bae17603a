#include "server/storage/audit_replay.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "server/storage/audit_archive.h"
#include "server/storage/encrypted_storage.h"
#include "absl/strings/str_format.h"
#include "admin.pb.h"
#include "core/audit/audit_record.h"
#include "core/common/digest.h"
#include "core/audit/fuse_records.h"
#include "core/common/status_macros.h"
#include "core/shard/model_registry.h"
#include "core/audit/step_records.h"
#include "server/storage/lmu_secret.h"
#include "server/storage/log_entry.h"
#include "server/storage/manifest.h"
#include "server/storage/part_codec.h"
#include "server/storage/rocks_storage.h"
#include "server/storage/store.h"
#include "server/storage/spec_conversion.h"

namespace streamlearn::storage {
namespace {

namespace fs = std::filesystem;


// The fields of an audit record that replay reads; absent fields stay empty.
struct RecordFields {
  uint64_t index = 0;
  std::string kind;
  std::optional<PartKind> part;  // the shard part the record belongs to
  std::optional<uint64_t> log_seq;
  std::optional<uint64_t> snapshot_seq;
  std::string batch_digest, state_digest, blob_digest, merkle_curr;  // hex
};

std::string StringField(const AuditRecord& r, std::string_view key) {
  const AuditValue* v = r.Find(key);
  const std::string* s = v == nullptr ? nullptr : v->get_if<std::string>();
  return s == nullptr ? std::string() : *s;
}

std::optional<uint64_t> UintField(const AuditRecord& r, std::string_view key) {
  const AuditValue* v = r.Find(key);
  uint64_t x = 0;
  if (v == nullptr || !v->AsUint64(&x)) return std::nullopt;
  return x;
}

// DATA_LOSS naming the record when the line is not an envelope (the chain verifier would
// fail it too; replay does not re-verify the chain).
absl::StatusOr<RecordFields> ParseRecord(uint64_t index, std::string_view line) {
  absl::StatusOr<AuditRecord> env = ParseAuditJson(line);
  const AuditValue* body_v = env.ok() ? env->Find("body") : nullptr;
  const AuditRecord* body = body_v == nullptr ? nullptr : body_v->get_if<AuditRecord>();
  if (body == nullptr) {
    return absl::DataLossError(absl::StrCat(
        "audit record ", index, " is not an envelope with a body",
        env.ok() ? "" : absl::StrCat(": ", env.status().message()),
        " (run `streamlearn audit verify` to find the first bad record)"));
  }
  RecordFields f;
  f.index = index;
  f.kind = StringField(*body, "kind");
  if (f.kind == kRecordSauEvent || f.kind == kRecordSauControl) {
    f.part = PartKind::kSau;
  } else if (f.kind == kRecordLmuUpdate) {
    f.part = PartKind::kLmu;
  } else if (f.kind == kRecordFuseLearn || f.kind == kRecordFuseControl) {
    f.part = PartKind::kFuse;
  } else if (f.kind == kRecordSnapshot) {
    const std::string part = StringField(*body, "part");
    for (PartKind p : kPartKinds) {
      if (part == PartName(p)) f.part = p;
    }
  }
  f.log_seq = UintField(*body, "log_seq");
  f.snapshot_seq = UintField(*body, "snapshot_seq");
  f.batch_digest = StringField(*body, "batch_digest");
  f.state_digest = StringField(*body, "state_digest");
  f.blob_digest = StringField(*body, "blob_digest");
  f.merkle_curr = StringField(*env, "merkle_curr");
  return f;
}

// A shard part restored from a snapshot, not yet in the model.
struct Restored {
  std::unique_ptr<ShardPart> part;
  uint64_t log_seq = 0;
  Digest digest{};
};

// A snapshot record to check once the replay has applied its log_seq.
struct PendingSnapshot {
  uint64_t log_seq = 0;
  uint64_t index = 0;
  std::string state_digest;
};

// One part of the shard being replayed: the state lives in the model's shard.
class PartReplay {
 public:
  PartReplay(const ShardStore& store, Model* model, PartKind part,
             const lmu::HashSecret& secret)
      : store_(store),
        model_(model),
        shard_(store.shard()),
        secret_(secret) {
    report_.part = part;
  }

  // Restores the starting state (see the header, step 1). A mismatch is stored, not returned.
  absl::Status Start();

  // Pass 1: remembers the snapshot records of this part past the starting state.
  void NoteSnapshotRecord(const RecordFields& r);
  // Checks the snapshot records the starting state already reaches.
  absl::Status CheckPendingSnapshots();
  // Pass 2: a non-snapshot record of this part, in chain order.
  absl::Status OnRecord(const RecordFields& r);
  // After the chain: the log holds nothing past the records, and every snapshot record was
  // reached.
  absl::Status Finish();

  bool failed() const { return mismatch_.has_value(); }
  void MarkComplete() { report_.complete = true; }
  std::optional<ReplayMismatch>& mismatch() { return mismatch_; }
  const ReplayPartReport& report() const { return report_; }

 private:
  PartKind part() const { return report_.part; }
  void Mismatch(std::optional<uint64_t> index, uint64_t log_seq, std::string what,
                std::string expected, std::string got) {
    if (mismatch_.has_value()) return;
    mismatch_ = ReplayMismatch{.record_index = index,
                               .part = part(),
                               .log_seq = log_seq,
                               .what = std::move(what),
                               .expected = std::move(expected),
                               .got = std::move(got)};
  }
  // The log entry `seq` (exactly), or nullopt.
  absl::StatusOr<std::optional<std::string>> LogEntry(uint64_t seq) const;
  absl::StatusOr<std::optional<RecordFields>> RecordAt(uint64_t index) const;
  // Applies entry bytes through the shard's own Ingest/Update; the error names the cause.
  absl::Status Apply(std::string_view entry);
  Digest StateDigest() const;
  uint64_t ShardLogSeq() const;
  absl::StatusOr<Restored> Restore(std::string_view blob) const;
  void Install(Restored r);

  const ShardStore& store_;
  Model* const model_;
  const uint32_t shard_;
  const lmu::HashSecret& secret_;
  ReplayPartReport report_;
  std::optional<ReplayMismatch> mismatch_;
  uint64_t start_record_ = UINT64_MAX;  // index of the starting snapshot's record
  uint64_t applied_ = 0;                // the last log seq in the state
  std::vector<PendingSnapshot> pending_;  // sorted by log_seq once pass 1 is over
  bool pending_sorted_ = false;
};

absl::StatusOr<std::optional<std::string>> PartReplay::LogEntry(uint64_t seq) const {
  std::optional<std::string> out;
  absl::Status s = store_.ScanLog(part(), seq,
                                  [&](uint64_t at, std::string_view entry) {
                                    if (at == seq) out = std::string(entry);
                                    return false;
                                  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::optional<RecordFields>> PartReplay::RecordAt(uint64_t index) const {
  std::optional<RecordFields> out;
  absl::Status failure;
  absl::Status s = store_.ScanAudit(index, [&](uint64_t at, std::string_view line) {
    if (at != index) return false;
    absl::StatusOr<RecordFields> r = ParseRecord(at, line);
    if (r.ok()) {
      out = *std::move(r);
    } else {
      failure = r.status();
    }
    return false;
  });
  if (!s.ok()) return s;
  if (!failure.ok()) return failure;
  return out;
}

absl::StatusOr<Restored> PartReplay::Restore(std::string_view blob) const {
  return VisitPart(part(), [&]<typename ShardT>(PartType<ShardT>) -> absl::StatusOr<Restored> {
    absl::StatusOr<std::unique_ptr<ShardT>> s =
        PartCodec<ShardT>::Restore(model_->spec(), secret_, blob);
    if (!s.ok()) return s.status();
    Restored r;
    r.log_seq = (*s)->log_seq();
    r.digest = (*s)->StateDigest();
    r.part = *std::move(s);
    return r;
  });
}

void PartReplay::Install(Restored r) { model_->Replace(shard_, std::move(r.part)); }

absl::Status PartReplay::Apply(std::string_view entry) {
  return VisitPart(part(), [&]<typename ShardT>(PartType<ShardT>) {
    return PartCodec<ShardT>::Apply(model_->part<ShardT>(shard_), entry).status();
  });
}

Digest PartReplay::StateDigest() const { return model_->part(shard_, part())->StateDigest(); }

uint64_t PartReplay::ShardLogSeq() const { return model_->part(shard_, part())->log_seq(); }

absl::Status PartReplay::Start() {
  absl::StatusOr<std::optional<uint64_t>> last = store_.LastLogSeq(part());
  if (!last.ok()) return last.status();
  absl::StatusOr<std::optional<std::string>> first = LogEntry(1);
  if (!first.ok()) return first.status();
  const bool log_whole = first->has_value() || !last->has_value();
  report_.batches_logged = last->value_or(0);
  absl::StatusOr<std::optional<std::string>> mbytes = store_.GetManifest(part());
  if (!mbytes.ok()) return mbytes.status();
  std::vector<ManifestEntry> manifest;
  if (mbytes->has_value()) {
    absl::StatusOr<std::vector<ManifestEntry>> m = DecodeManifest(**mbytes);
    if (!m.ok()) {
      Mismatch(std::nullopt, 0, "snapshot manifest", "a readable manifest",
               std::string(m.status().message()));
      return absl::OkStatus();
    }
    manifest = *std::move(m);
  }
  if (manifest.empty()) {
    if (!log_whole) {
      Mismatch(std::nullopt, 1, "log entry", "the log to start at seq 1 (no snapshot)",
               "no entry 1; the log was trimmed but the manifest lists no snapshot");
    }
    return absl::OkStatus();  // from the empty state
  }

  // The oldest snapshot is checked in any case; replay starts from it unless the log is still
  // whole (not trimmed yet), in which case starting from the empty state checks more.
  const ManifestEntry& oldest = manifest.back();
  report_.checked_snapshot_seq = oldest.snapshot_seq;
  report_.batches_logged = std::max(report_.batches_logged, oldest.log_seq);
  const std::string snap = absl::StrCat("snapshot ", oldest.snapshot_seq);

  absl::StatusOr<std::optional<std::string>> blob =
      store_.GetSnapshot(part(), oldest.snapshot_seq);
  if (!blob.ok()) return blob.status();
  if (!blob->has_value()) {
    Mismatch(oldest.audit_index, oldest.log_seq, snap + " blob", "the blob the manifest lists",
             "no blob in the store");
    return absl::OkStatus();
  }
  const std::string blob_hex = ToHex(Sha256Of(**blob));
  if (blob_hex != ToHex(oldest.blob_digest)) {
    Mismatch(oldest.audit_index, oldest.log_seq, snap + " blob SHA-256 (manifest)",
             ToHex(oldest.blob_digest), blob_hex);
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<RecordFields>> rec = RecordAt(oldest.audit_index);
  if (!rec.ok()) return rec.status();
  if (!rec->has_value()) {
    Mismatch(oldest.audit_index, oldest.log_seq, snap + " record",
             "the snapshot record the manifest points at", "no record at that index");
    return absl::OkStatus();
  }
  const RecordFields& r = **rec;
  if (r.kind != kRecordSnapshot || r.part != part() || r.log_seq != oldest.log_seq ||
      r.snapshot_seq != oldest.snapshot_seq) {
    Mismatch(r.index, oldest.log_seq, snap + " record",
             absl::StrFormat("a %s snapshot record with snapshot_seq %d and log_seq %d",
                             PartName(part()), oldest.snapshot_seq, oldest.log_seq),
             absl::StrFormat("kind \"%s\", snapshot_seq %d, log_seq %d", r.kind,
                             r.snapshot_seq.value_or(0), r.log_seq.value_or(0)));
    return absl::OkStatus();
  }
  if (r.merkle_curr != ToHex(oldest.audit_head)) {
    Mismatch(r.index, oldest.log_seq, snap + " record merkle_curr (manifest audit_head)",
             ToHex(oldest.audit_head), r.merkle_curr);
    return absl::OkStatus();
  }
  if (r.blob_digest != blob_hex) {
    Mismatch(r.index, oldest.log_seq, snap + " blob_digest", r.blob_digest, blob_hex);
    return absl::OkStatus();
  }
  absl::StatusOr<Restored> restored = Restore(**blob);
  if (!restored.ok()) {
    Mismatch(r.index, oldest.log_seq, snap + " restore", "a blob that restores",
             std::string(restored.status().message()));
    return absl::OkStatus();
  }
  if (restored->log_seq != oldest.log_seq) {
    Mismatch(r.index, oldest.log_seq, snap + " log_seq", absl::StrCat(oldest.log_seq),
             absl::StrCat(restored->log_seq));
    return absl::OkStatus();
  }
  const std::string state_hex = ToHex(restored->digest);
  ++report_.state_digests_checked;
  if (r.state_digest != state_hex) {
    Mismatch(r.index, oldest.log_seq, snap + " state_digest", r.state_digest, state_hex);
    return absl::OkStatus();
  }
  if (log_whole) return absl::OkStatus();  // its record is checked again when replay gets there
  Install(*std::move(restored));
  report_.start_snapshot_seq = oldest.snapshot_seq;
  report_.start_log_seq = oldest.log_seq;
  applied_ = oldest.log_seq;
  start_record_ = oldest.audit_index;
  return absl::OkStatus();
}

void PartReplay::NoteSnapshotRecord(const RecordFields& r) {
  if (r.index == start_record_ || !r.log_seq.has_value() || *r.log_seq < applied_) return;
  pending_.push_back({.log_seq = *r.log_seq, .index = r.index, .state_digest = r.state_digest});
}

absl::Status PartReplay::CheckPendingSnapshots() {
  if (!pending_sorted_) {
    std::stable_sort(pending_.begin(), pending_.end(),
                     [](const PendingSnapshot& a, const PendingSnapshot& b) {
                       return a.log_seq < b.log_seq;
                     });
    std::reverse(pending_.begin(), pending_.end());  // the next one due is at the back
    pending_sorted_ = true;
  }
  while (!failed() && !pending_.empty() && pending_.back().log_seq <= applied_) {
    const PendingSnapshot p = pending_.back();
    pending_.pop_back();
    const std::string got = ToHex(StateDigest());
    ++report_.state_digests_checked;
    if (p.state_digest != got) {
      Mismatch(p.index, p.log_seq, "snapshot state_digest", p.state_digest, got);
    }
  }
  return absl::OkStatus();
}

absl::Status PartReplay::OnRecord(const RecordFields& r) {
  if (failed() || !r.log_seq.has_value() || *r.log_seq <= report_.start_log_seq) {
    return absl::OkStatus();  // covered by the starting snapshot
  }
  const uint64_t seq = *r.log_seq;
  if (seq < applied_) {
    Mismatch(r.index, seq, "log_seq order",
             absl::StrCat("log_seq >= ", applied_, " (the batches of a part are in order)"),
             absl::StrCat(seq));
    return absl::OkStatus();
  }
  if (seq > applied_) {
    if (seq != applied_ + 1) {
      // Entries applied_+1 .. seq-1 have no record, or this record is out of place.
      Mismatch(r.index, seq, "log_seq",
               absl::StrCat(applied_ + 1, " (the next batch of the part)"), absl::StrCat(seq));
      return absl::OkStatus();
    }
    // The first record of batch `seq`: check the entry, then apply it.
    absl::StatusOr<std::optional<std::string>> entry = LogEntry(seq);
    if (!entry.ok()) return entry.status();
    if (!entry->has_value()) {
      Mismatch(r.index, seq, "log entry", absl::StrCat("log entry ", seq), "missing from the log");
      return absl::OkStatus();
    }
    if (r.batch_digest.empty()) {
      Mismatch(r.index, seq, "batch_digest", "the first record of a batch carries one",
               "none");
      return absl::OkStatus();
    }
    const std::string got = ToHex(Sha256Of(**entry));
    ++report_.batch_digests_checked;
    if (r.batch_digest != got) {
      Mismatch(r.index, seq, "batch_digest", r.batch_digest, got);
      return absl::OkStatus();
    }
    if (absl::Status s = Apply(**entry); !s.ok()) {
      Mismatch(r.index, seq, "log entry replay", "the entry to apply", std::string(s.message()));
      return absl::OkStatus();
    }
    applied_ = seq;
    ++report_.batches_replayed;
    if (ShardLogSeq() != seq) {
      Mismatch(r.index, seq, "log_seq after replay", absl::StrCat(seq),
               absl::StrCat(ShardLogSeq()));
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(CheckPendingSnapshots());
    if (failed()) return absl::OkStatus();
  } else if (!r.batch_digest.empty()) {
    Mismatch(r.index, seq, "batch_digest", "one batch_digest per batch (on its first record)",
             "a second one");
    return absl::OkStatus();
  }
  if (!r.state_digest.empty()) {
    const std::string got = ToHex(StateDigest());
    ++report_.state_digests_checked;
    if (r.state_digest != got) Mismatch(r.index, seq, "state_digest", r.state_digest, got);
  }
  return absl::OkStatus();
}

absl::Status PartReplay::Finish() {
  if (failed()) return absl::OkStatus();
  if (applied_ < report_.batches_logged) {
    Mismatch(std::nullopt, applied_ + 1, "batch record",
             absl::StrCat("a record with the batch_digest of log entry ", applied_ + 1),
             absl::StrCat("none in the chain (the log holds entries through ",
                          report_.batches_logged, ")"));
    return absl::OkStatus();
  }
  if (!pending_.empty()) {
    const PendingSnapshot& p = pending_.back();
    Mismatch(p.index, p.log_seq, "snapshot log_seq",
             absl::StrCat("at most ", applied_, " (the last logged batch)"),
             absl::StrCat(p.log_seq));
    return absl::OkStatus();
  }
  if (part() == PartKind::kLmu) {
    // The final base: every id at its own hash position (Keys_base[h(id)] == id).
    absl::StatusOr<uint64_t> n = model_->lmu(shard_).CheckBaseMembership();
    if (!n.ok()) {
      Mismatch(std::nullopt, applied_, "MPHF membership", "Keys_base[h(id)] == id",
               std::string(n.status().message()));
      return absl::OkStatus();
    }
    report_.base_ids_checked = *n;
  }
  return absl::OkStatus();
}

// The model as stored: spec from the specs column family, shards built empty.
absl::StatusOr<std::shared_ptr<Model>> LoadModel(const StorageBackend& backend,
                                                 const lmu::HashSecret& secret,
                                                 const std::string& name) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs = backend.ListSpecs();
  if (!specs.ok()) return specs.status();
  for (const auto& [stored, bytes] : *specs) {
    if (stored != name) continue;
    v1::ModelSpec wire;
    if (!wire.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat("model '", name, "': the stored spec is unreadable"));
    }
    absl::StatusOr<ModelSpec> spec = ModelSpecFromProto(wire, SpecOrigin::kStored);
    if (!spec.ok()) return spec.status();
    return Model::Create(*std::move(spec), secret);
  }
  return absl::NotFoundError(absl::StrCat("model '", name, "' is not in ", backend.Describe()));
}

absl::StatusOr<ReplayReport> ReplayShard(StorageBackend& backend, const lmu::HashSecret& secret,
                                         Model* model, uint32_t shard) {
  const std::string& name = model->spec().name;
  ReplayReport report;
  report.model = name;
  report.shard = shard;
  if (shard >= model->num_shards()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shard %d is out of range: model '%s' has %d shard(s)", shard, name,
        model->num_shards()));
  }
  const std::unique_ptr<ShardStore> store = backend.OpenShard(name, shard);
  std::vector<std::unique_ptr<PartReplay>> parts;
  for (const ShardPart* p : model->parts(shard)) {
    parts.push_back(std::make_unique<PartReplay>(*store, model, p->kind(), secret));
  }
  const auto of = [&](PartKind p) -> PartReplay* {
    for (auto& r : parts) {
      if (r->report().part == p) return r.get();
    }
    return nullptr;
  };
  const auto done = [&]() -> absl::StatusOr<ReplayReport> {
    for (auto& p : parts) {
      report.parts.push_back(p->report());
      if (p->failed() && !report.mismatch.has_value()) report.mismatch = p->mismatch();
    }
    return report;
  };
  const auto any_failed = [&] {
    return std::any_of(parts.begin(), parts.end(), [](const auto& p) { return p->failed(); });
  };

  for (auto& p : parts) {
    RETURN_IF_ERROR(p->Start());
  }
  if (any_failed()) return done();

  // Pass 1: the snapshot records (a snapshot's record may follow records of later batches:
  // the SAU is snapshotted from a published version while the writer goes on).
  absl::Status failure;
  absl::Status scan = store->ScanAudit(0, [&](uint64_t index, std::string_view line) {
    absl::StatusOr<RecordFields> r = ParseRecord(index, line);
    if (!r.ok()) {
      failure = r.status();
      return false;
    }
    if (r->kind == kRecordSnapshot && r->part.has_value()) {
      if (PartReplay* p = of(*r->part)) p->NoteSnapshotRecord(*r);
    }
    return true;
  });
  if (!scan.ok()) return scan;
  if (!failure.ok()) return failure;
  for (auto& p : parts) {
    RETURN_IF_ERROR(p->CheckPendingSnapshots());
  }
  if (any_failed()) return done();

  // Pass 2: the batch records in chain order, replaying each batch when its first record
  // comes.
  scan = store->ScanAudit(0, [&](uint64_t index, std::string_view line) {
    absl::StatusOr<RecordFields> r = ParseRecord(index, line);
    if (!r.ok()) {
      failure = r.status();
      return false;
    }
    if (r->kind == kRecordSnapshot || !r->part.has_value()) return true;
    PartReplay* p = of(*r->part);
    if (p == nullptr) return true;
    if (absl::Status s = p->OnRecord(*r); !s.ok()) {
      failure = s;
      return false;
    }
    return !p->failed();
  });
  if (!scan.ok()) return scan;
  if (!failure.ok()) return failure;
  if (!any_failed()) {
    for (auto& p : parts) {
      RETURN_IF_ERROR(p->Finish());
    }
  }
  if (!any_failed()) {
    for (auto& p : parts) p->MarkComplete();
  }
  return done();
}

absl::StatusOr<std::unique_ptr<StorageBackend>> OpenReadOnly(const std::string& data_dir,
                                                              const std::string& keys_dir) {
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open({.path = (fs::path(data_dir) / "db").string(), .read_only = true});
  if (!store.ok()) return store.status();
  ASSIGN_OR_RETURN(std::unique_ptr<StorageBackend> rocks,
                   ArchiveAuditTo(std::make_unique<RocksStorage>(*std::move(store)),
                                  {.dir = AuditArchiveDir(data_dir)}));
  TenantKeys keys;
  if (!keys_dir.empty()) {
    ASSIGN_OR_RETURN(keys, TenantKeys::LoadDir(keys_dir));
  }
  return EncryptAtRest(std::move(rocks), std::move(keys));
}

// The LMU secret of the data directory, read (never created). A model without an LMU (or
// Fuse) part needs none: a zero secret is returned when the file is absent.
absl::StatusOr<lmu::HashSecret> ReadSecret(const std::string& data_dir, bool needed) {
  const std::string path = (fs::path(data_dir) / "lmu.secret").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (!needed) return lmu::HashSecret{};
    return absl::NotFoundError(absl::StrCat(
        "'", path, "' does not exist: the LMU part cannot be replayed without the secret its "
        "hashes were keyed with"));
  }
  return LoadOrCreateLmuSecret(path);
}

absl::StatusOr<std::vector<ReplayReport>> ReplayShards(const std::string& data_dir,
                                                       const std::string& model,
                                                       std::optional<uint32_t> only,
                                                       const std::string& keys_dir) {
  absl::StatusOr<std::unique_ptr<StorageBackend>> store = OpenReadOnly(data_dir, keys_dir);
  if (!store.ok()) return store.status();
  // The spec alone first (zero secret) to learn whether the secret is needed.
  absl::StatusOr<std::shared_ptr<Model>> probe = LoadModel(**store, lmu::HashSecret{}, model);
  if (!probe.ok()) return probe.status();
  const ModelSpec& spec = (*probe)->spec();
  absl::StatusOr<lmu::HashSecret> secret = ReadSecret(data_dir, spec.has_lmu || spec.has_fuse);
  if (!secret.ok()) return secret.status();
  const uint32_t shards = (*probe)->num_shards();
  probe->reset();
  std::vector<ReplayReport> out;
  const uint64_t end = only.has_value() ? uint64_t{*only} + 1 : shards;
  for (uint64_t i = only.value_or(0); i < end; ++i) {
    absl::StatusOr<ReplayReport> r =
        ReplayAndCheck(**store, *secret, model, static_cast<uint32_t>(i));
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

}  // namespace

absl::StatusOr<ReplayReport> ReplayAndCheck(StorageBackend& backend,
                                            const lmu::HashSecret& secret,
                                            const std::string& model, uint32_t shard) {
  absl::StatusOr<std::shared_ptr<Model>> m = LoadModel(backend, secret, model);
  if (!m.ok()) return m.status();
  return ReplayShard(backend, secret, m->get(), shard);
}

absl::StatusOr<ReplayReport> ReplayAndCheck(const std::string& data_dir, const std::string& model,
                                            uint32_t shard, const std::string& keys_dir) {
  absl::StatusOr<std::vector<ReplayReport>> r = ReplayShards(data_dir, model, shard, keys_dir);
  if (!r.ok()) return r.status();
  return std::move(r->front());
}

absl::StatusOr<std::vector<ReplayReport>> ReplayAndCheckAllShards(const std::string& data_dir,
                                                                  const std::string& model,
                                                                  const std::string& keys_dir) {
  return ReplayShards(data_dir, model, std::nullopt, keys_dir);
}

std::string FormatReplayReport(const ReplayReport& report) {
  std::string out;
  for (const ReplayPartReport& p : report.parts) {
    const bool bad = report.mismatch.has_value() && report.mismatch->part == p.part;
    absl::StrAppendFormat(&out, "model '%s' shard %d %s: ", report.model, report.shard,
                          PartName(p.part));
    if (p.start_snapshot_seq == 0 && p.checked_snapshot_seq != 0) {
      absl::StrAppendFormat(&out, "from the empty state (the log is whole; snapshot %d checked): ",
                            p.checked_snapshot_seq);
    } else if (p.start_snapshot_seq == 0) {
      out += "from the empty state: ";
    } else {
      absl::StrAppendFormat(&out, "from snapshot %d (log_seq %d): ", p.start_snapshot_seq,
                            p.start_log_seq);
    }
    absl::StrAppendFormat(&out,
                          "replayed %d batches of %d, checked %d state digests and %d batch "
                          "digests%s: %s\n",
                          p.batches_replayed, p.batches_logged, p.state_digests_checked,
                          p.batch_digests_checked,
                          p.part == PartKind::kLmu
                              ? absl::StrFormat(" and the MPHF membership of %d base ids",
                                                p.base_ids_checked)
                              : std::string(),
                          p.complete ? "OK"
                                     : (bad ? "MISMATCH"
                                            : "not finished (stopped at the shard's mismatch)"));
  }
  if (const std::optional<ReplayMismatch>& m = report.mismatch) {
    absl::StrAppendFormat(&out, "MISMATCH in model '%s' shard %d %s at ", report.model,
                          report.shard, PartName(m->part));
    if (m->record_index.has_value()) {
      absl::StrAppendFormat(&out, "audit record %d, ", *m->record_index);
    }
    absl::StrAppendFormat(&out, "log_seq %d: %s: expected %s, got %s\n", m->log_seq, m->what,
                          m->expected, m->got);
  }
  return out;
}

}  // namespace streamlearn::storage
