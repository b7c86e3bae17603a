#include "server/storage/jetstream_storage.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/common/absl_view.h"
#include "core/common/mutex.h"
#include "core/common/status_macros.h"
#include "journal.pb.h"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {
namespace {

std::string RandomId() {
  std::random_device rd;
  const uint64_t v = (uint64_t{rd()} << 32) ^ rd();
  return absl::StrFormat("%016x", v);
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

std::string ModelKey(std::string_view model) {
  std::string out;
  for (char c : model) {
    if (c == '.') {
      out += "=2e";
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<std::string> ModelFromKey(std::string_view key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] == '=') {
      if (key.substr(i, 3) != "=2e") return std::nullopt;
      out += '.';
      i += 2;
    } else if (key[i] == '.') {
      return std::nullopt;
    } else {
      out += key[i];
    }
  }
  return out;
}

std::string JetStreamStorage::model_subject(std::string_view model) const {
  return absl::StrCat("$KV.", options_.prefix, "_MODELS.", ModelKey(model));
}

namespace {

// The state of one shard part as the journal says it.
struct PartIndex {
  std::map<uint64_t, uint64_t> log;                  // log seq -> journal stream seq
  uint64_t last_appended = 0;
  std::optional<std::string> manifest;
  std::map<uint64_t, journal::SnapshotRef> snapshots;  // snapshot seq -> where its bytes are
  uint64_t trimmed_through = 0;
};

class JetStreamShardStore final : public ShardStore {
 public:
  // Holds what it needs of the backend (the connection is shared), so it may outlive it.
  JetStreamShardStore(const JetStreamStorage& backend, std::shared_ptr<NatsClient> nats,
                      std::string model, uint32_t shard)
      : ShardStore(std::move(model), shard),
        layout_{.options = backend.options(),
                .models_stream = backend.models_stream(),
                .model_subject = backend.model_subject(this->model()),
                .journal_stream = backend.journal_stream(),
                .snapshot_stream = backend.snapshot_stream(),
                .archive_stream = backend.archive_stream()},
        backend_(&layout_),
        nats_holder_(std::move(nats)),
        nats_(*nats_holder_) {}

  absl::Status Commit(const ShardWrite& write) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status ResumeWrites() override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(EnsureLoaded());
    return Resync();
  }
  absl::Status ScanLog(PartKind part, uint64_t from, const LogVisitor& fn) const override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<uint64_t>> LastLogSeq(PartKind part) const override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(EnsureLoaded());
    auto it = parts_.find(part);
    if (it == parts_.end() || it->second.log.empty()) return std::optional<uint64_t>();
    return std::optional<uint64_t>(it->second.log.rbegin()->first);
  }
  absl::StatusOr<std::optional<std::string>> GetSnapshot(PartKind part,
                                                         uint64_t seq) const override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<std::string>> GetManifest(PartKind part) const override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(EnsureLoaded());
    auto it = parts_.find(part);
    if (it == parts_.end()) return std::optional<std::string>();
    return it->second.manifest;
  }
  absl::Status ScanAudit(uint64_t from, const AuditVisitor& fn) const override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> LastAudit() const override
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(EnsureLoaded());
    return last_audit_;
  }
  void NoteArchivedBelow(uint64_t below) override ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    trimmed_below_ = std::max(trimmed_below_, below);
  }

 private:
  std::string Where() const { return absl::StrCat("model '", model(), "' shard ", shard()); }
  std::string ChunkSubject(const journal::SnapshotRef& r) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::StrCat(Lower(backend_->options.prefix), ".s.", incarnation_, ".", shard(),
                        ".", r.part(), ".", r.seq(), ".", r.nonce());
  }

  // Reads the model's entry and the journal into the index (once).
  absl::Status EnsureLoaded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies one journal record to the index. DATA_LOSS when it does not follow.
  absl::Status Apply(uint64_t jseq, const journal::JournalRecord& r) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After an unanswered publish: is the subject where this store left it?
  absl::Status Resync() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes a record to the journal with the fence; on success applies it.
  // Publishes r after the subject's last message, as the record following the last valid one;
  // applies it once it is known to be valid. ABORTED (fenced) when another writer's valid
  // record came first.
  absl::Status Append(journal::JournalRecord r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether r follows the valid records read so far (the journal.proto rule). The first
  // message of the subject is valid: the first ever, or where a compaction purged up to, which
  // is always a valid record (MaybeCompact).
  bool Follows(const journal::JournalRecord& r) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return records_.empty() || r.prev() == last_valid_;
  }
  // Whether a valid record of another writer is among the subject's messages in
  // [from, through]; void ones are skipped.
  absl::StatusOr<bool> AnotherWriterIn(uint64_t from, uint64_t through) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The valid records, for scans outside the lock.
  std::vector<uint64_t> ValidRecords() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::vector<uint64_t>(records_.begin(), records_.end());
  }
  absl::Status Fence(absl::Status cause) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    fenced_ = absl::AbortedError(absl::StrCat(
        Where(), ": another writer appended to the shard's journal; this store is fenced (",
        cause.message(), ")"));
    return fenced_;
  }
  absl::StatusOr<journal::SnapshotRef> PutSnapshotChunks(const SnapshotPut& put)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MaybeCompact() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The audit records below `below` are sealed in archive segment files (audit_archive.h):
  // purges the archive stream's messages that hold only such records, and compaction archives
  // none of them again.
  absl::Status TrimAudit(uint64_t below) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Layout {
    JetStreamOptions options;
    std::string models_stream, model_subject, journal_stream, snapshot_stream, archive_stream;
  };
  const Layout layout_;
  const Layout* const backend_;
  const std::shared_ptr<NatsClient> nats_holder_;
  NatsClient& nats_;

  mutable Mutex mu_;
  mutable bool loaded_ ABSL_GUARDED_BY(mu_) = false;
  mutable std::string incarnation_ ABSL_GUARDED_BY(mu_);
  mutable std::string genesis_ ABSL_GUARDED_BY(mu_);
  mutable std::string journal_subject_ ABSL_GUARDED_BY(mu_);
  mutable std::string archive_subject_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t last_jseq_ ABSL_GUARDED_BY(mu_) = 0;      // the subject's last message
  mutable uint64_t last_valid_ ABSL_GUARDED_BY(mu_) = 0;     // its last valid record
  mutable uint64_t archive_last_ ABSL_GUARDED_BY(mu_) = 0;   // the archive's last message
  mutable uint64_t archived_through_ ABSL_GUARDED_BY(mu_) = 1;  // indices < this: archive
  // Indices < this are in archive segment files (TrimAudit; 0: none known to this store).
  uint64_t trimmed_below_ ABSL_GUARDED_BY(mu_) = 0;
  mutable std::deque<uint64_t> records_ ABSL_GUARDED_BY(mu_);   // valid records, in order
  mutable std::map<PartKind, PartIndex> parts_ ABSL_GUARDED_BY(mu_);
  mutable std::optional<std::pair<uint64_t, std::string>> last_audit_ ABSL_GUARDED_BY(mu_);
  absl::Status fenced_ ABSL_GUARDED_BY(mu_);
  bool uncertain_ ABSL_GUARDED_BY(mu_) = false;
};

std::string SubjectPrefix(const JetStreamOptions& o) { return Lower(o.prefix); }

absl::Status JetStreamShardStore::EnsureLoaded() const {
  if (loaded_) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::optional<StoredMsg> entry_msg,
                   nats_.NextMsg(backend_->models_stream, backend_->model_subject, 1));
  if (!entry_msg.has_value()) {
    return absl::NotFoundError(absl::StrCat("model '", model(), "' is not in the cluster"));
  }
  journal::ModelEntry entry;
  if (!entry.ParseFromString(entry_msg->data)) {
    return absl::DataLossError(absl::StrCat("model '", model(), "': its entry does not parse"));
  }
  if (shard() >= static_cast<uint32_t>(entry.genesis_size())) {
    return absl::NotFoundError(absl::StrCat(Where(), ": the model has ", entry.genesis_size(),
                                            " shards"));
  }
  const std::string prefix = SubjectPrefix(backend_->options);
  incarnation_ = entry.incarnation();
  genesis_ = entry.genesis(static_cast<int>(shard()));
  journal_subject_ = absl::StrCat(prefix, ".j.", incarnation_, ".", shard());
  archive_subject_ = absl::StrCat(prefix, ".a.", incarnation_, ".", shard());
  parts_.clear();
  records_.clear();
  last_valid_ = 0;
  archived_through_ = 1;
  last_audit_ = std::make_pair(uint64_t{0}, genesis_);

  ASSIGN_OR_RETURN(std::optional<StoredMsg> last_archive,
                   nats_.LastMsg(backend_->archive_stream, archive_subject_));
  archive_last_ = last_archive.has_value() ? last_archive->seq : 0;
  ASSIGN_OR_RETURN(std::optional<StoredMsg> last,
                   nats_.LastMsg(backend_->journal_stream, journal_subject_));
  last_jseq_ = last.has_value() ? last->seq : 0;
  absl::Status apply_status;
  uint64_t void_records = 0;
  if (last_jseq_ > 0) {
    RETURN_IF_ERROR(nats_.ScanSubject(
        backend_->journal_stream, journal_subject_, 1, last_jseq_,
        [&](const StoredMsg& m) {
          mu_.AssertHeld();  // ScanSubject calls back synchronously, under the caller's lock
          journal::JournalRecord r;
          if (!r.ParseFromString(m.data)) {
            apply_status = absl::DataLossError(absl::StrCat(
                Where(), ": journal message ", m.seq, " does not parse"));
            return false;
          }
          if (!Follows(r)) {
            ++void_records;  // a writer that lost a race; never acknowledged
            return true;
          }
          apply_status = Apply(m.seq, r);
          return apply_status.ok();
        }));
    RETURN_IF_ERROR(apply_status);
  }
  if (void_records > 0) {
    spdlog::info("{}: {} void journal record(s) skipped (writers that lost a race)", Where(),
                 void_records);
  }
  loaded_ = true;
  return absl::OkStatus();
}

absl::Status JetStreamShardStore::Apply(uint64_t jseq, const journal::JournalRecord& r) const {
  records_.push_back(jseq);
  last_valid_ = jseq;
  if (r.has_base()) {
    const journal::Base& b = r.base();
    for (const journal::PartBase& pb : b.parts()) {
      PartIndex& p = parts_[static_cast<PartKind>(pb.part())];
      p.last_appended = std::max(p.last_appended, pb.last_appended());
      p.manifest = pb.has_manifest() ? std::optional<std::string>(pb.manifest()) : std::nullopt;
      p.snapshots.clear();
      for (const journal::SnapshotRef& ref : pb.snapshots()) p.snapshots[ref.seq()] = ref;
      p.trimmed_through = std::max(p.trimmed_through, pb.trimmed_through());
      p.log.erase(p.log.begin(), p.log.upper_bound(p.trimmed_through));
    }
    archived_through_ = std::max(archived_through_, b.audit_archived_through());
    if (b.has_last_audit() && b.last_audit().index() >= last_audit_->first) {
      last_audit_ = std::make_pair(b.last_audit().index(), b.last_audit().line());
    }
    return absl::OkStatus();
  }
  if (r.has_log()) {
    PartIndex& p = parts_[static_cast<PartKind>(r.log().part())];
    if (r.log().seq() > p.trimmed_through) p.log[r.log().seq()] = jseq;
    p.last_appended = std::max(p.last_appended, r.log().seq());
  }
  for (const journal::AuditRecord& a : r.audit()) {
    if (a.index() <= last_audit_->first) continue;  // archived and kept in a journal prefix
    // After a compaction the journal starts past the genesis (the records between are in the
    // archive, which ScanAudit checks for gaps).
    const bool first_seen = last_audit_->first == 0 && jseq == records_.front();
    if (!first_seen && a.index() != last_audit_->first + 1) {
      return absl::DataLossError(absl::StrCat(Where(), ": journal message ", jseq,
                                              " holds audit record ", a.index(), " after ",
                                              last_audit_->first));
    }
    last_audit_ = std::make_pair(a.index(), a.line());
  }
  if (r.has_snapshot()) {
    const journal::SnapshotRecord& s = r.snapshot();
    PartIndex& p = parts_[static_cast<PartKind>(s.ref().part())];
    for (uint64_t d : s.dropped()) p.snapshots.erase(d);
    p.snapshots[s.ref().seq()] = s.ref();
    p.manifest = s.manifest();
    if (s.trim_log_through() > 0) {
      p.trimmed_through = std::max(p.trimmed_through, s.trim_log_through());
      p.log.erase(p.log.begin(), p.log.upper_bound(p.trimmed_through));
    }
  }
  return absl::OkStatus();
}

absl::Status JetStreamShardStore::Resync() {
  if (!fenced_.ok()) return fenced_;
  if (!uncertain_) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::optional<StoredMsg> last,
                   nats_.LastMsg(backend_->journal_stream, journal_subject_));
  const uint64_t now = last.has_value() ? last->seq : 0;
  if (now != last_jseq_) {
    return Fence(absl::UnavailableError(absl::StrCat(
        "the journal's last message is ", now, ", not ", last_jseq_,
        " after a publish NATS did not confirm")));
  }
  uncertain_ = false;
  return absl::OkStatus();
}

absl::StatusOr<bool> JetStreamShardStore::AnotherWriterIn(uint64_t from,
                                                          uint64_t through) const {
  bool found = false;
  absl::Status inner;
  RETURN_IF_ERROR(nats_.ScanSubject(
      backend_->journal_stream, journal_subject_, from, through, [&](const StoredMsg& m) {
        mu_.AssertHeld();  // ScanSubject calls back synchronously, under the caller's lock
        journal::JournalRecord r;
        if (!r.ParseFromString(m.data)) {
          inner = absl::DataLossError(absl::StrCat(Where(), ": journal message ", m.seq,
                                                   " does not parse"));
          return false;
        }
        found = Follows(r);
        return !found;
      }));
  RETURN_IF_ERROR(inner);
  return found;
}

absl::Status JetStreamShardStore::Append(journal::JournalRecord r) {
  r.set_prev(last_valid_);
  std::string bytes;
  r.SerializeToString(&bytes);
  if (static_cast<int64_t>(bytes.size()) > nats_.max_payload()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        Where(), ": a journal record of ", bytes.size(), " bytes exceeds NATS's max_payload of ",
        nats_.max_payload(), " bytes (raise max_payload, or send smaller batches)"));
  }
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<uint64_t> seq =
        nats_.Publish(journal_subject_, bytes, Expect::LastSeq(last_jseq_));
    if (!seq.ok()) {
      if (!absl::IsAborted(seq.status())) {
        if (absl::IsUnavailable(seq.status())) uncertain_ = true;
        return seq.status();
      }
      // The subject moved on. Only void records (a racer's, already fenced)? Then publish
      // again after them; a valid record of another writer fences this one.
      ASSIGN_OR_RETURN(std::optional<StoredMsg> last,
                       nats_.LastMsg(backend_->journal_stream, journal_subject_));
      const uint64_t now = last.has_value() ? last->seq : 0;
      if (now <= last_jseq_ || attempt >= 3) return Fence(seq.status());
      ASSIGN_OR_RETURN(bool other, AnotherWriterIn(last_jseq_ + 1, now));
      if (other) return Fence(seq.status());
      last_jseq_ = now;
      continue;
    }
    // Stored at *seq. If anything was stored in the stream between the subject's last message
    // and *seq, another writer may have published beside this one (the check JetStream let
    // through); the first valid record of the two counts.
    if (*seq != last_jseq_ + 1) {
      absl::StatusOr<bool> other = AnotherWriterIn(last_jseq_ + 1, *seq - 1);
      if (!other.ok()) {
        uncertain_ = true;  // stored, but valid or not is unknown: Resync fences
        return other.status();
      }
      if (*other) {
        last_jseq_ = *seq;
        return Fence(absl::AbortedError(
            absl::StrCat(Where(), ": another writer's record came first (journal message ",
                         *seq, " is void)")));
      }
    }
    last_jseq_ = *seq;
    return Apply(*seq, r);
  }
}

absl::StatusOr<journal::SnapshotRef> JetStreamShardStore::PutSnapshotChunks(
    const SnapshotPut& put) {
  journal::SnapshotRef ref;
  ref.set_part(static_cast<uint32_t>(put.part));
  ref.set_seq(put.seq);
  ref.set_nonce(RandomId());
  ref.set_size(put.blob.size());
  const std::string subject = ChunkSubject(ref);
  const size_t chunk = std::max<size_t>(1, backend_->options.snapshot_chunk);
  size_t off = 0;
  uint32_t n = 0;
  do {
    const std::string_view piece = put.blob.substr(off, chunk);
    ASSIGN_OR_RETURN(uint64_t seq,
                     nats_.Publish(subject, piece, Expect::Nothing()));
    if (n == 0) ref.set_first_chunk(seq);
    ++n;
    off += piece.size();
  } while (off < put.blob.size());
  ref.set_chunks(n);
  return ref;
}

absl::Status JetStreamShardStore::Commit(const ShardWrite& write) {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(EnsureLoaded());
  RETURN_IF_ERROR(Resync());
  if (write.empty()) return absl::OkStatus();
  if (write.trim_audit_below > 0) {
    // Only an archive sets it, in a write of its own (audit_archive.h).
    if (write.log.has_value() || !write.audit.empty() || write.snapshot.has_value()) {
      return absl::InternalError(absl::StrCat(
          Where(), ": a trim of the audit records comes in a write of its own"));
    }
    return TrimAudit(write.trim_audit_below);
  }
  uint64_t next_audit = last_audit_->first + 1;
  for (const AuditAppend& a : write.audit) {
    if (a.index != next_audit++) {
      return absl::InternalError(absl::StrCat(Where(), ": audit record ", a.index,
                                              " does not follow ", next_audit - 2));
    }
  }
  if (write.log.has_value()) {
    const PartIndex& p = parts_[write.log->part];
    if (write.log->seq != p.last_appended + 1) {
      return absl::InternalError(absl::StrCat(Where(), " part ", AbslView(PartName(write.log->part)),
                                              ": log seq ", write.log->seq, " after ",
                                              p.last_appended));
    }
  }
  journal::JournalRecord r;
  if (write.log.has_value()) {
    journal::LogRecord* l = r.mutable_log();
    l->set_part(static_cast<uint32_t>(write.log->part));
    l->set_seq(write.log->seq);
    l->set_entry(std::string(write.log->entry));
  }
  for (const AuditAppend& a : write.audit) {
    journal::AuditRecord* rec = r.add_audit();
    rec->set_index(a.index);
    rec->set_line(std::string(a.line));
  }
  std::vector<std::string> dropped_subjects;
  if (write.snapshot.has_value()) {
    const SnapshotPut& put = *write.snapshot;
    ASSIGN_OR_RETURN(journal::SnapshotRef ref, PutSnapshotChunks(put));
    journal::SnapshotRecord* s = r.mutable_snapshot();
    *s->mutable_ref() = ref;
    s->set_manifest(put.manifest);
    for (uint64_t d : put.dropped) s->add_dropped(d);
    s->set_trim_log_through(put.trim_log_through);
    const PartIndex& p = parts_[put.part];
    for (uint64_t d : put.dropped) {
      if (auto it = p.snapshots.find(d); it != p.snapshots.end()) {
        dropped_subjects.push_back(ChunkSubject(it->second));
      }
    }
  }
  RETURN_IF_ERROR(Append(r));
  // Committed. What follows only reclaims space; a failure is logged, the next one retries.
  for (const std::string& subject : dropped_subjects) {
    if (absl::Status s = nats_.PurgeSubject(backend_->snapshot_stream, subject); !s.ok()) {
      spdlog::warn("{}: a dropped snapshot stays behind: {}", Where(), s.ToString());
    }
  }
  if (write.snapshot.has_value() && write.snapshot->trim_log_through > 0) {
    if (absl::Status s = MaybeCompact(); !s.ok()) {
      spdlog::warn("{}: journal compaction failed (retried after the next snapshot): {}",
                   Where(), s.ToString());
      if (absl::IsAborted(s)) return absl::OkStatus();  // fenced_ is set; the commit stands
    }
  }
  return absl::OkStatus();
}

absl::Status JetStreamShardStore::TrimAudit(uint64_t below) {
  if (below > last_audit_->first + 1) {
    return absl::InternalError(absl::StrCat(Where(), ": trimming the audit records below ",
                                            below, ", past the chain's last record ",
                                            last_audit_->first));
  }
  trimmed_below_ = std::max(trimmed_below_, below);
  if (archive_last_ == 0) return absl::OkStatus();
  // The archive's messages hold consecutive records in order: keep from the first one that
  // holds a record at or past `below`.
  uint64_t keep = archive_last_ + 1;
  absl::Status inner;
  RETURN_IF_ERROR(nats_.ScanSubject(
      backend_->archive_stream, archive_subject_, 1, archive_last_, [&](const StoredMsg& m) {
        journal::AuditArchive batch;
        if (!batch.ParseFromString(m.data)) {
          inner = absl::DataLossError(absl::StrCat(Where(), ": audit archive message ", m.seq,
                                                   " does not parse"));
          return false;
        }
        if (batch.records_size() > 0 &&
            batch.records(batch.records_size() - 1).index() >= below) {
          keep = m.seq;
          return false;
        }
        return true;
      }));
  RETURN_IF_ERROR(inner);
  // The subject's last message stays even when all of it is sealed: the next archive publish
  // expects it as the subject's last sequence (an emptied subject would fail that check and
  // fence this store).
  keep = std::min(keep, archive_last_);
  return nats_.PurgeSubject(backend_->archive_stream, archive_subject_, keep);
}

absl::Status JetStreamShardStore::MaybeCompact() {
  // The journal's messages before `keep` hold nothing the parts' logs still need.
  // The purge must stop at a valid record (a reader takes the first message it finds for one):
  // the first still needed by a part's log, or else the Base published below.
  uint64_t keep = last_jseq_ + 1;
  bool keep_is_valid = false;
  for (const auto& [kind, p] : parts_) {
    if (!p.log.empty() && p.log.begin()->second < keep) {
      keep = p.log.begin()->second;
      keep_is_valid = true;
    }
  }
  const size_t removable = static_cast<size_t>(
      std::lower_bound(records_.begin(), records_.end(), keep) - records_.begin());
  if (removable < backend_->options.compact_after) return absl::OkStatus();

  // 1. Archive the prefix's audit records not archived yet.
  journal::AuditArchive batch;
  size_t batch_bytes = 0;
  // Records sealed in archive segments since (TrimAudit) need no copy in the stream.
  const uint64_t archive_from = std::max(archived_through_, trimmed_below_);
  uint64_t archived = archive_from;
  auto flush = [&]() -> absl::Status {
    mu_.AssertHeld();  // called only below, under the caller's lock
    if (batch.records_size() == 0) return absl::OkStatus();
    absl::StatusOr<uint64_t> seq = nats_.Publish(archive_subject_, batch.SerializeAsString(),
                                                 Expect::LastSeq(archive_last_));
    if (!seq.ok()) {
      if (absl::IsAborted(seq.status())) return Fence(seq.status());
      return seq.status();
    }
    archive_last_ = *seq;
    archived = batch.records(batch.records_size() - 1).index() + 1;
    batch.Clear();
    batch_bytes = 0;
    return absl::OkStatus();
  };
  absl::Status inner;
  RETURN_IF_ERROR(nats_.ScanSubject(
      backend_->journal_stream, journal_subject_, 1, keep - 1, [&](const StoredMsg& m) {
        mu_.AssertHeld();  // ScanSubject calls back synchronously, under the caller's lock
        if (!std::binary_search(records_.begin(), records_.end(), m.seq)) return true;  // void
        journal::JournalRecord r;
        if (!r.ParseFromString(m.data)) {
          inner = absl::DataLossError(absl::StrCat(Where(), ": journal message ", m.seq,
                                                   " does not parse"));
          return false;
        }
        for (const journal::AuditRecord& a : r.audit()) {
          if (a.index() < archive_from) continue;
          *batch.add_records() = a;
          batch_bytes += a.line().size() + 16;
          if (batch_bytes >= backend_->options.snapshot_chunk) {
            inner = flush();
            if (!inner.ok()) return false;
          }
        }
        return true;
      }));
  RETURN_IF_ERROR(inner);
  RETURN_IF_ERROR(flush());

  // 2. The base: everything the prefix said about the parts, and where the audit went.
  journal::JournalRecord base_record;
  journal::Base* base = base_record.mutable_base();
  for (const auto& [kind, p] : parts_) {
    journal::PartBase* pb = base->add_parts();
    pb->set_part(static_cast<uint32_t>(kind));
    pb->set_last_appended(p.last_appended);
    pb->set_has_manifest(p.manifest.has_value());
    if (p.manifest.has_value()) pb->set_manifest(*p.manifest);
    for (const auto& [seq, ref] : p.snapshots) *pb->add_snapshots() = ref;
    pb->set_trimmed_through(p.trimmed_through);
  }
  base->set_audit_archived_through(archived);
  base->mutable_last_audit()->set_index(last_audit_->first);
  base->mutable_last_audit()->set_line(last_audit_->second);
  RETURN_IF_ERROR(Append(base_record));
  if (!keep_is_valid) keep = last_valid_;  // the Base

  // 3. The prefix goes.
  RETURN_IF_ERROR(nats_.PurgeSubject(backend_->journal_stream, journal_subject_, keep));
  records_.erase(records_.begin(), records_.begin() + static_cast<std::ptrdiff_t>(removable));
  return absl::OkStatus();
}

absl::Status JetStreamShardStore::ScanLog(PartKind part, uint64_t from,
                                          const LogVisitor& fn) const {
  uint64_t start = 0, through = 0;
  std::string subject;
  std::vector<uint64_t> valid;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(EnsureLoaded());
    auto it = parts_.find(part);
    if (it == parts_.end()) return absl::OkStatus();
    auto first = it->second.log.lower_bound(from);
    if (first == it->second.log.end()) return absl::OkStatus();
    start = first->second;
    through = it->second.log.rbegin()->second;
    subject = journal_subject_;
    valid = ValidRecords();
  }
  absl::Status inner;
  RETURN_IF_ERROR(nats_.ScanSubject(
      backend_->journal_stream, subject, start, through, [&](const StoredMsg& m) {
        if (!std::binary_search(valid.begin(), valid.end(), m.seq)) return true;  // void
        journal::JournalRecord r;
        if (!r.ParseFromString(m.data)) {
          inner = absl::DataLossError(absl::StrCat(Where(), ": journal message ", m.seq,
                                                   " does not parse"));
          return false;
        }
        if (!r.has_log() || r.log().part() != static_cast<uint32_t>(part) ||
            r.log().seq() < from) {
          return true;
        }
        return fn(r.log().seq(), r.log().entry());
      }));
  return inner;
}

absl::StatusOr<std::optional<std::string>> JetStreamShardStore::GetSnapshot(
    PartKind part, uint64_t seq) const {
  journal::SnapshotRef ref;
  std::string subject;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(EnsureLoaded());
    auto it = parts_.find(part);
    if (it == parts_.end()) return std::optional<std::string>();
    auto s = it->second.snapshots.find(seq);
    if (s == it->second.snapshots.end()) return std::optional<std::string>();
    ref = s->second;
    subject = ChunkSubject(ref);
  }
  std::string blob;
  uint32_t chunks = 0;
  ASSIGN_OR_RETURN(std::optional<StoredMsg> last,
                   nats_.LastMsg(backend_->snapshot_stream, subject));
  if (!last.has_value()) return std::optional<std::string>();  // purged behind the manifest
  RETURN_IF_ERROR(nats_.ScanSubject(backend_->snapshot_stream, subject, ref.first_chunk(),
                                    last->seq, [&](const StoredMsg& m) {
                                      blob += m.data;
                                      return ++chunks < ref.chunks();
                                    }));
  if (chunks != ref.chunks() || blob.size() != ref.size()) {
    return absl::DataLossError(absl::StrCat(Where(), " part ", AbslView(PartName(part)), ": snapshot ",
                                            seq, " has ", chunks, " of ", ref.chunks(),
                                            " chunks, ", blob.size(), " of ", ref.size(),
                                            " bytes"));
  }
  return std::optional<std::string>(std::move(blob));
}

absl::Status JetStreamShardStore::ScanAudit(uint64_t from, const AuditVisitor& fn) const {
  std::string genesis, archive, journal;
  uint64_t archived_through = 1, archive_last = 0, last_jseq = 0;
  std::vector<uint64_t> valid;
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(EnsureLoaded());
    genesis = genesis_;
    archive = archive_subject_;
    journal = journal_subject_;
    archived_through = archived_through_;
    archive_last = archive_last_;
    last_jseq = last_jseq_;
    valid = ValidRecords();
  }
  uint64_t next = 0;  // the index the chain needs next
  bool go_on = true;
  if (from == 0) go_on = fn(0, genesis);
  next = 1;
  absl::Status inner;
  auto visit = [&](const journal::AuditRecord& a) {
    if (a.index() < next) return true;  // a duplicate (archive) or already given
    // The records before `from` may be gone from the stream: sealed in archive segments
    // (TrimAudit), which the caller reads first.
    if (a.index() > next && a.index() <= from) next = a.index();
    if (a.index() != next) {
      inner = absl::DataLossError(absl::StrCat(
          Where(), ": the audit chain jumps from ", next - 1, " to ", a.index(),
          " (records sealed in archive segment files leave the stream; they are read from "
          "the archive directory)"));
      return false;
    }
    ++next;
    if (a.index() < from) return true;
    go_on = fn(a.index(), a.line());
    return go_on;
  };
  if (go_on && archived_through > 1 && from < archived_through && archive_last == 0) {
    // The records below archived_through went to archive segments before any reached the
    // archive stream (TrimAudit ahead of the first compaction): not here.
    return absl::DataLossError(absl::StrCat(
        Where(), ": audit records 1..", archived_through - 1,
        " are not in the store (records sealed in archive segment files leave the stream; "
        "they are read from the archive directory)"));
  }
  if (go_on && archived_through > 1 && archive_last > 0 && from < archived_through) {
    RETURN_IF_ERROR(nats_.ScanSubject(
        backend_->archive_stream, archive, 1, archive_last, [&](const StoredMsg& m) {
          journal::AuditArchive batch;
          if (!batch.ParseFromString(m.data)) {
            inner = absl::DataLossError(absl::StrCat(Where(), ": audit archive message ",
                                                     m.seq, " does not parse"));
            return false;
          }
          for (const journal::AuditRecord& a : batch.records()) {
            if (a.index() >= archived_through) return false;
            if (!visit(a)) return false;
          }
          return next < archived_through;
        }));
    RETURN_IF_ERROR(inner);
  } else if (archived_through > 1) {
    next = archived_through;  // the caller starts after the archive
  }
  if (!go_on) return absl::OkStatus();
  if (next < archived_through) {
    return absl::DataLossError(absl::StrCat(Where(), ": the audit archive stream ends at ",
                                            next - 1, ", before ", archived_through - 1,
                                            " (reading from ", from, ")"));
  }
  if (last_jseq == 0) return absl::OkStatus();
  RETURN_IF_ERROR(nats_.ScanSubject(
      backend_->journal_stream, journal, 1, last_jseq, [&](const StoredMsg& m) {
        if (!std::binary_search(valid.begin(), valid.end(), m.seq)) return true;  // void
        journal::JournalRecord r;
        if (!r.ParseFromString(m.data)) {
          inner = absl::DataLossError(absl::StrCat(Where(), ": journal message ", m.seq,
                                                   " does not parse"));
          return false;
        }
        for (const journal::AuditRecord& a : r.audit()) {
          if (!visit(a)) return false;
        }
        return true;
      }));
  return inner;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JetStreamStorage>> JetStreamStorage::Open(
    std::shared_ptr<NatsClient> nats, JetStreamOptions options) {
  if (options.prefix.empty() ||
      !std::all_of(options.prefix.begin(), options.prefix.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
      })) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster: the stream prefix '", options.prefix, "' is not [A-Z0-9_]+"));
  }
  if (options.replicas < 1 || options.replicas > 5) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster: replicas must be 1..5, not ", options.replicas));
  }
  std::unique_ptr<JetStreamStorage> s(new JetStreamStorage(std::move(nats), options));
  const std::string p = SubjectPrefix(options);
  RETURN_IF_ERROR(s->nats_->EnsureStream({.name = s->models_stream(),
                                          .subjects = {absl::StrCat("$KV.", options.prefix,
                                                                    "_MODELS.>")},
                                          .replicas = options.replicas,
                                          .max_msgs_per_subject = 8}));
  RETURN_IF_ERROR(s->nats_->EnsureStream({.name = s->journal_stream(),
                                          .subjects = {absl::StrCat(p, ".j.>")},
                                          .replicas = options.replicas}));
  RETURN_IF_ERROR(s->nats_->EnsureStream({.name = s->snapshot_stream(),
                                          .subjects = {absl::StrCat(p, ".s.>")},
                                          .replicas = options.replicas}));
  RETURN_IF_ERROR(s->nats_->EnsureStream({.name = s->archive_stream(),
                                          .subjects = {absl::StrCat(p, ".a.>")},
                                          .replicas = options.replicas}));
  return s;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> JetStreamStorage::ListSpecs()
    const {
  const std::string filter = absl::StrCat("$KV.", options_.prefix, "_MODELS.>");
  const size_t skip = filter.size() - 1;
  // Every entry, one direct get each (no stream info, no consumer: both can time out while a
  // NATS node is down); the first entry of a key is the model (CreateModel).
  std::map<std::string, std::string> first;
  absl::Status bad;
  RETURN_IF_ERROR(nats_->ScanSubjectDirect(models_stream(), filter, [&](const StoredMsg& m) {
    std::optional<std::string> name = ModelFromKey(std::string_view(m.subject).substr(skip));
    if (!name.has_value() || first.contains(*name)) return true;  // not ours, or a later entry
    journal::ModelEntry entry;
    if (!entry.ParseFromString(m.data)) {
      bad = absl::DataLossError(absl::StrCat("model '", *name, "': its entry does not parse"));
      return false;
    }
    first.emplace(*name, entry.spec());
    return true;
  }));
  RETURN_IF_ERROR(bad);
  return std::vector<std::pair<std::string, std::string>>(first.begin(), first.end());
}

absl::Status JetStreamStorage::CreateModel(std::string_view name, std::string_view spec_bytes,
                                           std::span<const std::string> genesis_lines) {
  journal::ModelEntry entry;
  entry.set_spec(std::string(spec_bytes));
  entry.set_incarnation(RandomId());
  for (const std::string& g : genesis_lines) entry.add_genesis(g);
  const std::string subject = model_subject(name);
  absl::StatusOr<uint64_t> seq = nats_->Publish(subject, entry.SerializeAsString(), Expect::Empty());
  const absl::Status exists =
      absl::AlreadyExistsError(absl::StrCat("model '", AbslView(name), "' already exists in the cluster"));
  if (absl::IsAborted(seq.status())) return exists;
  RETURN_IF_ERROR(seq.status());
  // Two creates that reach the stream's leader together can both be stored (nats-server issue
  // 4320): the first entry of the key is the model, everywhere it is read.
  ASSIGN_OR_RETURN(std::optional<StoredMsg> first, nats_->NextMsg(models_stream(), subject, 1));
  if (!first.has_value() || first->seq != *seq) return exists;
  return absl::OkStatus();
}

std::unique_ptr<ShardStore> JetStreamStorage::OpenShard(std::string_view model,
                                                        uint32_t shard) {
  return std::make_unique<JetStreamShardStore>(*this, nats_, std::string(model), shard);
}

std::string JetStreamStorage::Describe() const {
  return absl::StrCat("NATS JetStream at ", nats_->options().servers, " (", options_.replicas,
                      " replicas, prefix ", options_.prefix, ")");
}

}  // namespace streamlearn::storage
