#include "server/persistence.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "admin.pb.h"
#include "core/audit/audit_record.h"
#include "core/audit/merkle_chain.h"
#include "core/common/byte_codec.h"
#include "core/shard/fuse_records.h"
#include "core/shard/step_records.h"
#include "google/protobuf/util/json_util.h"
#include "server/data_dir.h"
#include "server/failpoint.h"
#include "server/log_entry.h"
#include "server/spec_conversion.h"
#include "spdlog/spdlog.h"

namespace streamlearn::server {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kManifestKind = "streamlearn.manifest";
constexpr uint32_t kManifestSection = 1;
// One encoded entry: snapshot_seq, log_seq, blob_digest, audit_index, audit_head.
constexpr size_t kManifestEntryBytes = 8 + 8 + 32 + 8 + 32;

Digest Sha(std::string_view bytes) {
  Sha256 h;
  h.Update(bytes);
  return h.Finish();
}

constexpr StorePart kParts[] = {StorePart::kSau, StorePart::kLmu, StorePart::kFuse};

bool HasPart(const ModelSpec& spec, StorePart p) {
  return p == StorePart::kSau ? spec.has_sau : p == StorePart::kLmu ? spec.has_lmu : spec.has_fuse;
}

absl::Status WithContext(const absl::Status& s, const std::string& context) {
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

// Writes `text` to `path` with mode `mode`, via a temporary file and a rename, fsync'ed.
absl::Status WriteFileAtomically(const std::string& path, std::string_view text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("'", tmp, "': cannot create: ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return absl::Status(absl::ErrnoToStatusCode(err),
                          absl::StrCat("'", tmp, "': cannot write: ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = fsync(fd) == 0;
  close(fd);
  if (!synced || rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("'", path, "': cannot write: ", std::strerror(errno)));
  }
  // The rename is durable only once the directory is.
  const std::string dir = fs::path(path).parent_path().empty()
                              ? std::string(".")
                              : fs::path(path).parent_path().string();
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("'", path, "': cannot read: ", std::strerror(errno)));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// <path without .key>.pub
std::string AuditPublicKeyPath(const std::string& key_path) {
  std::string pub = key_path;
  if (pub.size() > 4 && pub.ends_with(".key")) pub.resize(pub.size() - 4);
  return pub + ".pub";
}

// The genesis record's model_spec: the effective spec as JSON (all fields, proto names).
std::string SpecJson(const v1::ModelSpec& spec) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opt;
  opt.always_print_primitive_fields = true;
  opt.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(spec, &json, opt);
  return json;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Manifest

std::string EncodeManifest(const std::vector<ManifestEntry>& entries) {
  ByteWriter w;
  w.U64(entries.size());
  for (const ManifestEntry& e : entries) {
    w.U64(e.snapshot_seq);
    w.U64(e.log_seq);
    w.Raw(std::string_view(reinterpret_cast<const char*>(e.blob_digest.data()), 32));
    w.U64(e.audit_index);
    w.Raw(std::string_view(reinterpret_cast<const char*>(e.audit_head.data()), 32));
  }
  SnapshotBuilder b(kManifestKind);
  b.AddSection(kManifestSection, w.Take());
  return b.Finish();
}

absl::StatusOr<std::vector<ManifestEntry>> DecodeManifest(std::string_view bytes) {
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes, kManifestKind);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::string_view> body = c->Section(kManifestSection);
  if (!body.ok()) return body.status();
  ByteReader r(*body);
  uint64_t n = 0;
  if (absl::Status s = r.U64(&n); !s.ok()) return s;
  if (n > r.remaining() / kManifestEntryBytes) {
    return absl::DataLossError("manifest: entry count past the end");
  }
  std::vector<ManifestEntry> out(n);
  for (ManifestEntry& e : out) {
    std::string_view raw;
    if (absl::Status s = r.U64(&e.snapshot_seq); !s.ok()) return s;
    if (absl::Status s = r.U64(&e.log_seq); !s.ok()) return s;
    if (absl::Status s = r.Raw(32, &raw); !s.ok()) return s;
    std::memcpy(e.blob_digest.data(), raw.data(), 32);
    if (absl::Status s = r.U64(&e.audit_index); !s.ok()) return s;
    if (absl::Status s = r.Raw(32, &raw); !s.ok()) return s;
    std::memcpy(e.audit_head.data(), raw.data(), 32);
  }
  if (absl::Status s = r.ExpectDone("manifest"); !s.ok()) return s;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Audit key

absl::StatusOr<Ed25519PrivateKey> LoadOrCreateAuditKey(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) {
    absl::StatusOr<std::string> pem = ReadFile(path);
    if (!pem.ok()) return pem.status();
    absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::FromPem(*pem);
    if (!key.ok()) {
      return absl::DataLossError(absl::StrCat("audit key file '", path,
                                              "' is not an Ed25519 private key in PEM: ",
                                              key.status().message()));
    }
    // A crash between the two files may have left the public key out: write it again. One
    // that is there must be this key's: auditors verify checkpoints with the published file.
    const std::string pub_path = AuditPublicKeyPath(path);
    absl::StatusOr<std::string> pub = key->PublicKey().ToPem();
    if (!pub.ok()) return pub.status();
    if (!fs::exists(pub_path, ec)) {
      if (absl::Status s = WriteFileAtomically(pub_path, *pub, 0644); !s.ok()) {
        return WithContext(s, "audit public key");
      }
    } else {
      absl::StatusOr<std::string> published = ReadFile(pub_path);
      if (!published.ok()) return published.status();
      absl::StatusOr<Ed25519PublicKey> parsed = Ed25519PublicKey::FromPem(*published);
      if (!parsed.ok() || parsed->fingerprint() != key->PublicKey().fingerprint()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "audit public key file '", pub_path, "' is not the public key of '", path, "' (",
            parsed.ok() ? absl::StrCat("fingerprint ", parsed->fingerprint(), ", the key's is ",
                                       key->PublicKey().fingerprint())
                        : absl::StrCat("it does not parse: ", parsed.status().message()),
            "): auditors would verify checkpoints with the wrong key. Restore the matching "
            "pair from a backup"));
      }
    }
    return key;
  }
  absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::Generate();
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> pem = key->ToPem();
  if (!pem.ok()) return pem.status();
  if (absl::Status s = WriteFileAtomically(path, *pem, 0600); !s.ok()) {
    return WithContext(s, "audit key");
  }
  absl::StatusOr<std::string> pub = key->PublicKey().ToPem();
  if (!pub.ok()) return pub.status();
  const std::string pub_path = AuditPublicKeyPath(path);
  if (absl::Status s = WriteFileAtomically(pub_path, *pub, 0644); !s.ok()) {
    return WithContext(s, "audit public key");
  }
  spdlog::info("created the audit signing key '{}' (public key '{}', fingerprint {})", path,
               pub_path, key->PublicKey().fingerprint());
  return key;
}

// ---------------------------------------------------------------------------------------------
// ShardLog

ShardLog::ShardLog(Store* store, const std::string& model, uint32_t shard, Ed25519PrivateKey key,
                   const PersistenceOptions& options, Metrics* metrics)
    : options_(options),
      metrics_(metrics),
      journal_(store, model, shard, std::move(key), options.checkpoint_every) {}

uint64_t ShardLog::steps_since_snapshot() const {
  return sau_.steps_since.load(std::memory_order_relaxed) +
         lmu_.steps_since.load(std::memory_order_relaxed) +
         fuse_.steps_since.load(std::memory_order_relaxed);
}

absl::Status ShardLog::CommitSau(const SauCommit& c, Receipt* receipt) {
  EncodeSauEntry(c.batch, &sau_entry_);
  const Digest batch_digest = Sha(sau_entry_);
  const uint64_t after = c.state->events();
  const uint64_t before = after - c.applied.size();
  const uint64_t k = options_.sau_digest_every;
  SauStateSummary summary;
  const bool digest_due = k > 0 && after / k > before / k;
  if (digest_due) summary = SummarizeSau(*c.state);

  Bodies& bodies = sau_bodies_;
  bodies.Clear();
  for (size_t i = 0; i < c.applied.size(); ++i) {
    const sau::EventDiagnostics& d = c.diags[i];
    const uint64_t t = c.batch[c.applied[i]].t;
    AppendSauEventBody(
        SauEventRecord{.t = t,
                       .log_seq = c.log_seq,
                       .ver_sau = c.version,
                       .diag = &d,
                       .batch_digest = i == 0 ? &batch_digest : nullptr,
                       .state = digest_due && i + 1 == c.applied.size() ? &summary : nullptr},
        bodies.Add());
    // The alarm's policy action, right after the alarm (DESIGN decision 6).
    if (d.alarm) AppendSauAlarmBody(t, c.log_seq, d, bodies.Add());
  }
  const LogAppend log{.part = StorePart::kSau, .seq = c.log_seq, .entry = sau_entry_};
  const absl::Time start = absl::Now();
  absl::StatusOr<Receipt> r = journal_.Commit(bodies, &log);
  if (!r.ok()) return r.status();
  *receipt = *r;
  sau_.steps_since.fetch_add(c.applied.size(), std::memory_order_relaxed);
  sau_.batches_since.fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) {
    metrics_->RecordStoreWrite(absl::ToDoubleSeconds(absl::Now() - start), sau_entry_.size());
    metrics_->RecordAuditRecords(journal_.model(), journal_.shard(),
                                 r->next_index - r->first_index, ToHex(r->head), r->next_index);
  }
  return absl::OkStatus();
}

absl::Status ShardLog::CommitLmu(const LmuCommit& c, Receipt* receipt) {
  EncodeLmuEntry(c.batch, &lmu_entry_);
  const Digest batch_digest = Sha(lmu_entry_);
  const lmu::LmuTableStats ts = c.learner->TableStats();
  const uint64_t after = c.learner->samples();
  const uint64_t before = after - c.outcome->applied;
  const uint64_t k = options_.lmu_digest_every;
  Digest state{};
  const bool digest_due = k > 0 && after / k > before / k;
  if (digest_due) state = c.learner->StateDigest();

  Bodies& bodies = lmu_bodies_;
  bodies.Clear();
  AppendLmuUpdateBody(LmuUpdateRecord{.t_first = c.t_first,
                                      .t_last = c.t_last,
                                      .applied = c.outcome->applied,
                                      .duplicates = c.outcome->duplicates.size(),
                                      .log_seq = c.log_seq,
                                      .inserted = c.outcome->inserted,
                                      .c_lookup_p100 = c.outcome->c_lookup_p100,
                                      .c_insert_p100 = c.outcome->c_insert_p100,
                                      .table = &ts,
                                      .batch_digest = &batch_digest,
                                      .state_digest = digest_due ? &state : nullptr},
                      bodies.Add());
  const LogAppend log{.part = StorePart::kLmu, .seq = c.log_seq, .entry = lmu_entry_};
  const absl::Time start = absl::Now();
  absl::StatusOr<Receipt> r = journal_.Commit(bodies, &log);
  if (!r.ok()) return r.status();
  *receipt = *r;
  lmu_.steps_since.fetch_add(c.outcome->applied, std::memory_order_relaxed);
  lmu_.batches_since.fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) {
    metrics_->RecordStoreWrite(absl::ToDoubleSeconds(absl::Now() - start), lmu_entry_.size());
    metrics_->RecordAuditRecords(journal_.model(), journal_.shard(),
                                 r->next_index - r->first_index, ToHex(r->head), r->next_index);
  }
  return absl::OkStatus();
}

absl::Status ShardLog::CommitFuse(const FuseCommit& c, Receipt* receipt) {
  EncodeFuseEntry(c.batch, &fuse_entry_);
  const Digest batch_digest = Sha(fuse_entry_);
  const std::vector<FuseApplied>& steps = c.outcome->steps;
  const uint64_t after = c.unit->steps();
  const uint64_t before = after - steps.size();
  const uint64_t k = options_.fuse_digest_every;
  Digest state{};
  const bool digest_due = k > 0 && after / k > before / k;
  if (digest_due) state = c.unit->StateDigest();

  Bodies& bodies = fuse_bodies_;
  bodies.Clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    const FuseApplied& a = steps[i];
    if (absl::Status s = AppendFuseLearnBody(
            a.step.record, c.log_seq, i == 0 ? &batch_digest : nullptr,
            digest_due && i + 1 == steps.size() ? &state : nullptr, bodies.Add());
        !s.ok()) {
      return s;
    }
    // The alarm's actions right after the alarm (DESIGN decision 6; fuse_records.h).
    if (a.negative_margin) {
      if (absl::Status s = AppendFuseControlBody(c.batch[a.index].t, c.log_seq, a.next_actions,
                                                 bodies.Add());
          !s.ok()) {
        return s;
      }
    }
  }
  const LogAppend log{.part = StorePart::kFuse, .seq = c.log_seq, .entry = fuse_entry_};
  const absl::Time start = absl::Now();
  absl::StatusOr<Receipt> r = journal_.Commit(bodies, &log);
  if (!r.ok()) return r.status();
  *receipt = *r;
  fuse_.steps_since.fetch_add(steps.size(), std::memory_order_relaxed);
  fuse_.batches_since.fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) {
    metrics_->RecordStoreWrite(absl::ToDoubleSeconds(absl::Now() - start), fuse_entry_.size());
    metrics_->RecordAuditRecords(journal_.model(), journal_.shard(),
                                 r->next_index - r->first_index, ToHex(r->head), r->next_index);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Persistence

absl::StatusOr<std::unique_ptr<Persistence>> Persistence::Open(PersistenceOptions options,
                                                               Metrics* metrics) {
  if (options.checkpoint_every < 2) {
    return absl::InvalidArgumentError("audit checkpoint_every must be >= 2");
  }
  if (options.keep_snapshots < 1) {
    return absl::InvalidArgumentError("keep_snapshots must be >= 1");
  }
  std::string key_path = options.audit_key_file;
  if (key_path.empty() && !options.data_dir.empty()) {
    key_path = (fs::path(options.data_dir) / "audit.key").string();
  }
  absl::StatusOr<Ed25519PrivateKey> key =
      key_path.empty() ? Ed25519PrivateKey::Generate() : LoadOrCreateAuditKey(key_path);
  if (!key.ok()) return key.status();
  if (key_path.empty()) {
    spdlog::warn("no data_dir: learned state and audit records live in memory only, and the "
                 "audit signing key (fingerprint {}) lives as long as this process",
                 key->PublicKey().fingerprint());
  }
  std::unique_ptr<Persistence> p(new Persistence(std::move(options), metrics, *std::move(key)));
  if (!p->options_.data_dir.empty()) {
    const std::string db_path = (fs::path(p->options_.data_dir) / "db").string();
    std::error_code ec;
    // Below its floor the store lost data; checked read-only, before an open for writing
    // deletes the table files an older MANIFEST version does not list (data_dir.h).
    absl::StatusOr<std::optional<StoreFloor>> floor = ReadStoreFloor(p->options_.data_dir);
    if (!floor.ok()) return floor.status();
    if (floor->has_value() && fs::exists(fs::path(db_path) / "CURRENT", ec)) {
      absl::StatusOr<std::unique_ptr<Store>> ro =
          Store::Open({.path = db_path, .read_only = true});
      if (!ro.ok()) return ro.status();
      if (absl::Status s = CheckStoreFloor(**ro, **floor); !s.ok()) return s;
    }
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(
        {.path = (fs::path(p->options_.data_dir) / "db").string(),
         .durability = p->options_.durability});
    if (!store.ok()) return store.status();
    p->store_ = *std::move(store);
    // Every block of the audit table is read once: a chain the server cannot read is refused
    // at start, not found later by an auditor (docs/DURABILITY.md, "Start-up checks").
    const absl::Time verify_start = absl::Now();
    if (absl::Status s = p->store_->VerifyAuditChecksums(); !s.ok()) {
      return absl::DataLossError(absl::StrCat(
          s.message(), "; the audit chains are unreadable and the server will not serve them. "
          "Restore the data directory from a backup (docs/DURABILITY.md)"));
    }
    spdlog::info("audit table checksums verified in {:.3f} s",
                 absl::ToDoubleSeconds(absl::Now() - verify_start));
    spdlog::info("store '{}' open, durability {}; audit key fingerprint {}",
                 p->store_->options().path, DurabilityName(p->options_.durability),
                 p->key_.PublicKey().fingerprint());
  }
  return p;
}

Persistence::~Persistence() { Stop(); }

std::shared_ptr<ModelLog> Persistence::MakeLogs(const Model& model) {
  auto logs = std::make_shared<ModelLog>();
  for (uint32_t i = 0; i < model.num_shards(); ++i) {
    logs->shards_.push_back(std::make_unique<ShardLog>(store_.get(), model.spec().name, i, key_,
                                                       options_, metrics_));
  }
  return logs;
}

std::shared_ptr<ModelLog> Persistence::Find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(name);
  return it == logs_.end() ? nullptr : it->second;
}

absl::Status Persistence::OnCreate(const std::shared_ptr<Model>& model) {
  const ModelSpec& spec = model->spec();
  const v1::ModelSpec wire = ModelSpecToProto(spec);
  std::shared_ptr<ModelLog> logs = MakeLogs(*model);
  // Genesis records and the spec in one write: a model exists on disk with its chains or not
  // at all. Each genesis names its (model, shard), so no chain passes as another's.
  const std::string spec_json = SpecJson(wire);
  StoreBatch batch;
  batch.PutSpec(spec.name, wire.SerializeAsString());
  std::vector<ChainHead> heads;
  for (uint32_t i = 0; i < model->num_shards(); ++i) {
    const ChainId id{.model = spec.name, .shard = i};
    std::string genesis;
    if (absl::Status s = AppendCanonical(GenesisBody(spec_json, model->w_digest(), &id), &genesis);
        !s.ok()) {
      return s;
    }
    MerkleChain chain;
    const std::string line = chain.AppendCanonical(genesis);
    batch.AppendAudit(spec.name, i, 0, line);
    heads.push_back({.next_index = 1, .head = chain.head()});
  }
  if (store_ != nullptr) {
    if (absl::Status s = store_->Write(batch); !s.ok()) {
      return WithContext(s, absl::StrCat("model '", spec.name, "': storing its spec"));
    }
  }
  // The writers continue after their genesis, which counts toward the first checkpoint.
  for (uint32_t i = 0; i < model->num_shards(); ++i) {
    logs->shard(i).journal().ResumeAt(heads[i], /*since_checkpoint=*/1);
  }
  std::lock_guard<std::mutex> lock(mu_);
  logs_[spec.name] = std::move(logs);
  return absl::OkStatus();
}

absl::Status Persistence::Recover(ModelRegistry* registry) {
  if (store_ == nullptr) return absl::OkStatus();
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs = store_->ListSpecs();
  if (!specs.ok()) return specs.status();
  for (const auto& [name, bytes] : *specs) {
    if (absl::Status s = RecoverModel(registry, name, bytes); !s.ok()) {
      return WithContext(s, absl::StrCat("recovering model '", name, "'"));
    }
  }
  if (!specs->empty()) spdlog::info("recovered {} model(s) from the store", specs->size());
  return RecordFloor();
}

absl::Status Persistence::RecordFloor() {
  if (store_ == nullptr) return absl::OkStatus();
  // The logs are copied out first: a snapshot holds a shard's snapshot_mu_ and then takes mu_
  // (Find), so mu_ is never held while a snapshot_mu_ is taken.
  std::map<std::string, std::shared_ptr<ModelLog>, std::less<>> models;
  {
    std::lock_guard<std::mutex> lock(mu_);
    models = logs_;
  }
  StoreFloor floor;
  for (const auto& [name, logs] : models) {
    for (uint32_t i = 0; i < logs->num_shards(); ++i) {
      ShardLog& log = logs->shard(i);
      floor.chains[{name, i}] = log.journal().head().next_index;
      std::lock_guard<std::mutex> snapshot_lock(log.snapshot_mu_);
      for (StorePart part : kParts) {
        const std::vector<ManifestEntry>& m = log.part(part).manifest;
        if (!m.empty()) floor.snapshots[{name, i, part}] = m.front().log_seq;
      }
    }
  }
  // The values were read first: once the WAL is synced they are all durable.
  std::lock_guard<std::mutex> lock(floor_mu_);
  absl::Status s = store_->SyncWal();
  if (s.ok()) s = MarkDataDir(options_.data_dir, floor);
  if (!s.ok()) {
    spdlog::warn("could not record the store's floor in {}: {}", kDataDirMarker,
                 std::string(s.message()));
  }
  return s;
}

namespace {

// Restores one shard part: the newest verifying snapshot (or a fresh state when the log
// still starts at 1), then the log after it. Returns the number of replayed batches.
template <typename ShardT, typename RestoreFn, typename ReplayFn>
absl::StatusOr<uint64_t> RecoverPart(Store& store, const std::string& model, uint32_t shard,
                                     StorePart part, size_t keep_snapshots,
                                     std::vector<ManifestEntry>* manifest,
                                     std::unique_ptr<ShardT>* out, const RestoreFn& restore,
                                     const ReplayFn& replay) {
  const std::string where =
      absl::StrFormat("model '%s' shard %d %s", model, shard, StorePartName(part));
  absl::StatusOr<std::optional<std::string>> mbytes = store.GetManifest(model, shard, part);
  if (!mbytes.ok()) return mbytes.status();
  manifest->clear();
  bool manifest_unreadable = false;
  if (mbytes->has_value()) {
    absl::StatusOr<std::vector<ManifestEntry>> m = DecodeManifest(**mbytes);
    if (!m.ok()) {
      // Which snapshots exist and how far the log was trimmed are unknown: only a log that
      // still starts at seq 1 can rebuild the part (checked below).
      spdlog::error("{}: the snapshot manifest is unreadable ({}); trying the log alone", where,
                    std::string(m.status().message()));
      manifest_unreadable = true;
    } else {
      *manifest = *std::move(m);
    }
  }
  uint64_t from_seq = 0;  // replay entries after this
  size_t used = manifest->size();  // index of the snapshot restored
  for (size_t m = 0; m < manifest->size(); ++m) {
    const ManifestEntry& e = (*manifest)[m];
    absl::StatusOr<std::optional<std::string>> blob =
        store.GetSnapshot(model, shard, part, e.snapshot_seq);
    if (!blob.ok()) return blob.status();
    absl::Status why;
    if (!blob->has_value()) {
      why = absl::NotFoundError("the blob is missing");
    } else if (Sha(**blob) != e.blob_digest) {
      why = absl::DataLossError("its SHA-256 differs from the manifest's");
    } else {
      absl::StatusOr<std::unique_ptr<ShardT>> restored = restore(**blob);
      if (restored.ok() && (*restored)->log_seq() != e.log_seq) {
        why = absl::DataLossError("its log_seq differs from the manifest's");
      } else if (restored.ok()) {
        *out = *std::move(restored);
        from_seq = e.log_seq;
        used = m;
        break;
      } else {
        why = restored.status();
      }
    }
    spdlog::error("{}: snapshot {} (log_seq {}) is not usable: {}; falling back to an older one",
                  where, e.snapshot_seq, e.log_seq, std::string(why.message()));
  }
  // Without a usable snapshot, starting empty is right only if the log was never trimmed.
  // SnapshotPart trims (through the oldest kept snapshot) only once the manifest is full.
  if (from_seq == 0 && manifest->size() >= keep_snapshots && manifest->back().log_seq > 0) {
    return absl::DataLossError(absl::StrFormat(
        "%s: no snapshot verifies and the log through seq %d was trimmed after them; the "
        "state cannot be rebuilt (restore a backup)", where, manifest->back().log_seq));
  }
  if (manifest_unreadable) {
    absl::StatusOr<std::optional<uint64_t>> last = store.LastLogSeq(model, shard, part);
    if (!last.ok()) return last.status();
    if (!last->has_value()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: the snapshot manifest is unreadable and the log is empty (trimmed); the state "
          "cannot be rebuilt (restore a backup)", where));
    }
  }
  // The log must continue right after the state we start from.
  uint64_t expect = from_seq + 1;
  uint64_t replayed = 0;
  absl::Status failure;
  absl::Status scan = store.ScanLog(model, shard, part, 0, [&](uint64_t seq, std::string_view entry) {
    if (seq <= from_seq) return true;  // covered by the snapshot (not trimmed yet)
    if (seq != expect) {
      failure = absl::DataLossError(absl::StrFormat(
          "%s: the log jumps from %d to %d; the entries in between are gone (no usable "
          "snapshot covers them)", where, expect - 1, seq));
      return false;
    }
    if (absl::Status s = replay(out->get(), entry); !s.ok()) {
      failure = WithContext(s, absl::StrFormat("%s: replaying log entry %d", where, seq));
      return false;
    }
    ++expect;
    ++replayed;
    return true;
  });
  if (!scan.ok()) return scan;
  if (!failure.ok()) return failure;
  // Every state the manifest records must be reached again: the newest snapshot covers
  // log_seq L, so the log (or an older snapshot plus the log) must reach L too. This catches a
  // trimmed log whatever keep_snapshots was when it was trimmed.
  if (!manifest->empty() && expect - 1 < manifest->front().log_seq) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the newest snapshot covers the log through seq %d, but no usable snapshot and "
        "log reach past seq %d; the state cannot be rebuilt (restore a backup)",
        where, manifest->front().log_seq, expect - 1));
  }
  if (used > 0 && !manifest->empty()) {
    // Forget the snapshots that failed, so the next snapshot never keeps one of them instead
    // of the one that worked (their blobs are overwritten as the sequence numbers come round).
    spdlog::warn("{}: {} newer snapshot(s) unusable; recovered from {} ({})", where,
                 std::min(used, manifest->size()),
                 used < manifest->size() ? "an older snapshot" : "the whole log",
                 absl::StrFormat("replayed %d batches", replayed));
    const auto failed = static_cast<std::ptrdiff_t>(std::min(used, manifest->size()));
    manifest->erase(manifest->begin(), manifest->begin() + failed);
  }
  return replayed;
}

}  // namespace

absl::Status Persistence::RecoverModel(ModelRegistry* registry, const std::string& name,
                                       const std::string& spec_bytes) {
  const absl::Time start = absl::Now();
  v1::ModelSpec wire;
  if (!wire.ParseFromString(spec_bytes)) return absl::DataLossError("the stored spec is unreadable");
  absl::StatusOr<ModelSpec> spec = ModelSpecFromProto(wire);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::shared_ptr<Model>> model = Model::Create(*spec, registry->secret());
  if (!model.ok()) return model.status();
  Model& m = **model;
  std::shared_ptr<ModelLog> logs = MakeLogs(m);
  for (uint32_t i = 0; i < m.num_shards(); ++i) {
    ShardLog& log = logs->shard(i);
    uint64_t replayed = 0;
    uint64_t steps = 0;  // events / samples replayed into the current part
    if (m.spec().has_sau) {
      steps = 0;
      std::unique_ptr<SauShard> shard;
      const sau::SauSpec& sspec = m.spec().sau;
      absl::StatusOr<uint64_t> n = RecoverPart<SauShard>(
          *store_, name, i, StorePart::kSau, options_.keep_snapshots, &log.sau_.manifest, &shard,
          [&](std::string_view blob) { return SauShard::Restore(sspec, blob); },
          [&](SauShard* s, std::string_view entry) -> absl::Status {
            absl::StatusOr<SauEntry> e = SauEntry::Decode(entry);
            if (!e.ok()) return e.status();
            SauShard& target = s != nullptr ? *s : m.shard(i);
            absl::StatusOr<IngestOutcome> o = target.Ingest(e->views(), SIZE_MAX);
            if (!o.ok()) return o.status();
            steps += o->applied;
            return absl::OkStatus();
          });
      if (!n.ok()) return n.status();
      // Without a usable snapshot the replay went into the model's fresh shard.
      if (shard != nullptr) m.ReplaceShard(i, std::move(shard));
      log.sau_.batches_since = *n;
      log.sau_.steps_since = steps;  // the replayed backlog counts toward the next snapshot
      replayed += *n;
    }
    if (m.spec().has_lmu) {
      steps = 0;
      std::unique_ptr<LmuShard> shard;
      const lmu::LmuSpec& lspec = m.spec().lmu;
      absl::StatusOr<uint64_t> n = RecoverPart<LmuShard>(
          *store_, name, i, StorePart::kLmu, options_.keep_snapshots, &log.lmu_.manifest, &shard,
          [&](std::string_view blob) {
            return LmuShard::Restore(lspec, registry->secret(), blob);
          },
          [&](LmuShard* s, std::string_view entry) -> absl::Status {
            absl::StatusOr<LmuEntry> e = LmuEntry::Decode(entry);
            if (!e.ok()) return e.status();
            LmuShard& target = s != nullptr ? *s : m.lmu_shard(i);
            absl::StatusOr<UpdateOutcome> o = target.Update(e->views(), SIZE_MAX);
            if (!o.ok()) return o.status();
            steps += o->applied;
            return absl::OkStatus();
          });
      if (!n.ok()) return n.status();
      if (shard != nullptr) m.ReplaceLmuShard(i, std::move(shard));
      log.lmu_.batches_since = *n;
      log.lmu_.steps_since = steps;
      replayed += *n;
    }
    if (m.spec().has_fuse) {
      steps = 0;
      std::unique_ptr<FuseShard> shard;
      const fuse::FuseSpec& fspec = m.spec().fuse;
      absl::StatusOr<uint64_t> n = RecoverPart<FuseShard>(
          *store_, name, i, StorePart::kFuse, options_.keep_snapshots, &log.fuse_.manifest, &shard,
          [&](std::string_view blob) {
            return FuseShard::Restore(fspec, registry->secret(), blob);
          },
          [&](FuseShard* s, std::string_view entry) -> absl::Status {
            absl::StatusOr<FuseEntry> e = FuseEntry::Decode(entry);
            if (!e.ok()) return e.status();
            FuseShard& target = s != nullptr ? *s : m.fuse_shard(i);
            absl::StatusOr<FuseLearnOutcome> o = target.Learn(e->views(), SIZE_MAX);
            if (!o.ok()) return o.status();
            steps += o->applied;
            return absl::OkStatus();
          });
      if (!n.ok()) return n.status();
      if (shard != nullptr) m.ReplaceFuseShard(i, std::move(shard));
      log.fuse_.batches_since = *n;
      log.fuse_.steps_since = steps;
      replayed += *n;
    }
    if (absl::Status s = log.journal().Resume(); !s.ok()) return s;
    if (metrics_ != nullptr) {
      metrics_->RecordRecovery(name, i, replayed, absl::ToDoubleSeconds(absl::Now() - start));
    }
    spdlog::info("model '{}' shard {}: recovered (replayed {} logged batches; audit chain at {})",
                 name, i, replayed, log.journal().head().next_index);
  }
  if (absl::Status s = registry->Add(*model); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  logs_[name] = std::move(logs);
  return absl::OkStatus();
}

absl::Status Persistence::ReinstateFenced(Model& model, uint32_t shard, StorePart part,
                                          const lmu::HashSecret& secret) {
  const std::string& name = model.spec().name;
  const bool lmu = part == StorePart::kLmu;
  if (lmu ? !model.lmu_shard(shard).fenced() : !model.fuse_shard(shard).fenced()) {
    return absl::OkStatus();
  }
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(
        "this shard part was fenced by a failed rebuild and there is no store to rebuild it "
        "from; restart the server");
  }
  if (absl::Status s = store_->ResumeWrites(); !s.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "the shard's last write failed and the store still fails (", s.message(),
        "); retry once the cause (a full disk, say) is fixed"));
  }
  std::shared_ptr<ModelLog> logs = Find(name);
  if (logs == nullptr) return absl::NotFoundError(absl::StrCat("model '", name, "' has no log"));
  ShardLog& log = logs->shard(shard);
  // No snapshot of the part runs meanwhile (it would fail on the fence anyway).
  std::lock_guard<std::mutex> lock(log.snapshot_mu_);
  std::vector<ManifestEntry> manifest;  // as stored; the log's own copy stays as it is
  const absl::Time start = absl::Now();
  absl::StatusOr<uint64_t> replayed;
  absl::Status reinstated;
  if (lmu) {
    const lmu::LmuSpec& spec = model.spec().lmu;
    auto fresh = std::make_unique<LmuShard>(spec, secret);
    replayed = RecoverPart<LmuShard>(
        *store_, name, shard, part, options_.keep_snapshots, &manifest, &fresh,
        [&](std::string_view blob) { return LmuShard::Restore(spec, secret, blob); },
        [&](LmuShard* s, std::string_view entry) -> absl::Status {
          absl::StatusOr<LmuEntry> e = LmuEntry::Decode(entry);
          if (!e.ok()) return e.status();
          return s->Update(e->views(), SIZE_MAX).status();
        });
    if (replayed.ok()) reinstated = model.lmu_shard(shard).Reinstate(std::move(fresh));
  } else {
    const fuse::FuseSpec& spec = model.spec().fuse;
    absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> unit = fuse::FuseUnit::Create(spec, secret);
    if (!unit.ok()) return unit.status();
    auto fresh = std::make_unique<FuseShard>(*std::move(unit));
    replayed = RecoverPart<FuseShard>(
        *store_, name, shard, part, options_.keep_snapshots, &manifest, &fresh,
        [&](std::string_view blob) { return FuseShard::Restore(spec, secret, blob); },
        [&](FuseShard* s, std::string_view entry) -> absl::Status {
          absl::StatusOr<FuseEntry> e = FuseEntry::Decode(entry);
          if (!e.ok()) return e.status();
          return s->Learn(e->views(), SIZE_MAX).status();
        });
    if (replayed.ok()) reinstated = model.fuse_shard(shard).Reinstate(std::move(fresh));
  }
  if (!replayed.ok()) return replayed.status();
  if (!reinstated.ok()) {
    // Another call reinstated it first (then it is no longer fenced), or the part committed
    // more since: this rebuild is stale and is dropped.
    const bool still = lmu ? model.lmu_shard(shard).fenced() : model.fuse_shard(shard).fenced();
    return still ? reinstated : absl::OkStatus();
  }
  spdlog::warn("model '{}' shard {} {}: rebuilt from the store after a failed write (replayed "
               "{} logged batches in {:.3f} s); writes resume",
               name, shard, StorePartName(part), *replayed,
               absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

absl::StatusOr<SnapshotInfo> Persistence::SnapshotPart(const Model& model, uint32_t shard,
                                                       StorePart part) {
  std::shared_ptr<ModelLog> logs = Find(model.spec().name);
  if (logs == nullptr) {
    return absl::NotFoundError(absl::StrCat("model '", model.spec().name, "' has no log"));
  }
  ShardLog& log = logs->shard(shard);
  ShardLog::PartState& ps = log.part(part);
  const absl::Time start = absl::Now();
  SnapshotInfo info{.shard = shard, .part = part};

  // What was counted before the state is captured is surely in it (later work stays counted
  // for the next snapshot).
  const uint64_t before_steps = ps.steps_since.load(std::memory_order_relaxed);
  const uint64_t before_batches = ps.batches_since.load(std::memory_order_relaxed);
  std::string blob;
  uint64_t log_seq = 0, steps = 0;
  Digest state{};
  if (part == StorePart::kSau) {
    SauShardSnapshot s = model.shard(shard).Snapshot();
    blob = std::move(s.blob);
    log_seq = s.log_seq;
    steps = s.events;
    state = s.state_digest;
  } else if (part == StorePart::kLmu) {
    absl::StatusOr<LmuShardSnapshot> s = model.lmu_shard(shard).Snapshot();
    if (!s.ok()) return s.status();  // fenced: its memory holds an unlogged batch
    blob = std::move(s->blob);
    log_seq = s->log_seq;
    steps = s->samples;
    state = s->state_digest;
  } else {
    absl::StatusOr<FuseShardSnapshot> s = model.fuse_shard(shard).Snapshot();
    if (!s.ok()) return s.status();  // fenced, as the LMU
    blob = std::move(s->blob);
    log_seq = s->log_seq;
    steps = s->steps;
    state = s->state_digest;
  }
  info.log_seq = log_seq;
  info.steps = steps;
  if (!ps.manifest.empty() && ps.manifest.front().log_seq == log_seq) {
    // Nothing new since the last one: report it.
    ps.last_snapshot_ns = absl::ToUnixNanos(absl::Now());
    info.snapshot_seq = ps.manifest.front().snapshot_seq;
    if (ps.manifest.size() >= options_.keep_snapshots) {
      info.trimmed_through = ps.manifest.back().log_seq;
    }
    return info;
  }

  const uint64_t snapshot_seq = ps.manifest.empty() ? 1 : ps.manifest.front().snapshot_seq + 1;
  const Digest blob_digest = Sha(blob);
  Bodies bodies;
  AppendSnapshotBody(SnapshotRecord{.part = StorePartName(part),
                                    .log_seq = log_seq,
                                    .snapshot_seq = snapshot_seq,
                                    .steps = steps,
                                    .blob_digest = blob_digest,
                                    .state_digest = state},
                     bodies.Add());
  std::vector<ManifestEntry> next;
  uint64_t trim_through = 0;
  const std::string& name = model.spec().name;
  absl::StatusOr<Receipt> r = log.journal().Commit(
      bodies, nullptr, [&](const Receipt& receipt, StoreBatch* batch) {
        next.push_back(ManifestEntry{.snapshot_seq = snapshot_seq,
                                     .log_seq = log_seq,
                                     .blob_digest = blob_digest,
                                     .audit_index = receipt.first_index,
                                     .audit_head = receipt.first_curr});
        for (const ManifestEntry& e : ps.manifest) {
          if (next.size() < options_.keep_snapshots) {
            next.push_back(e);
          } else {
            batch->DeleteSnapshot(name, shard, part, e.snapshot_seq);
          }
        }
        batch->PutSnapshot(name, shard, part, snapshot_seq, blob);
        batch->PutManifest(name, shard, part, EncodeManifest(next));
        // Once the manifest is full, the oldest kept snapshot covers everything up to its
        // log_seq, and only a backup could need more. Before that the log is kept whole, so a
        // part whose every snapshot is corrupt can still be rebuilt from seq 1.
        if (next.size() >= options_.keep_snapshots) {
          trim_through = next.back().log_seq;
          if (trim_through > 0) batch->TrimLog(name, shard, part, trim_through);
        }
        Failpoint("snapshot.before_write");
      });
  if (r.ok()) Failpoint("snapshot.after_write");
  if (!r.ok()) {
    if (metrics_ != nullptr) metrics_->RecordSnapshotFailure(name, shard);
    return r.status();
  }
  ps.manifest = std::move(next);
  ps.last_snapshot_ns = absl::ToUnixNanos(absl::Now());
  // Steps applied while the snapshot was being written stay counted for the next one.
  ps.steps_since.fetch_sub(std::min(before_steps, ps.steps_since.load()),
                           std::memory_order_relaxed);
  ps.batches_since.fetch_sub(std::min(before_batches, ps.batches_since.load()),
                             std::memory_order_relaxed);
  info.taken = true;
  info.snapshot_seq = snapshot_seq;
  info.bytes = blob.size();
  info.trimmed_through = trim_through;
  info.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (metrics_ != nullptr) metrics_->RecordSnapshot(name, shard, info.seconds, info.bytes);
  return info;
}

absl::StatusOr<std::vector<SnapshotInfo>> Persistence::SnapshotModel(const Model& model) {
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(
        "this server has no data_dir: there is no store to snapshot into (start it with "
        "--data_dir)");
  }
  std::shared_ptr<ModelLog> logs = Find(model.spec().name);
  if (logs == nullptr) {
    return absl::NotFoundError(absl::StrCat("model '", model.spec().name, "' has no log"));
  }
  std::vector<SnapshotInfo> out;
  for (uint32_t i = 0; i < model.num_shards(); ++i) {
    std::lock_guard<std::mutex> lock(logs->shard(i).snapshot_mu_);
    for (StorePart part : kParts) {
      if (!HasPart(model.spec(), part)) continue;
      absl::StatusOr<SnapshotInfo> info = SnapshotPart(model, i, part);
      if (!info.ok()) {
        return WithContext(info.status(), absl::StrFormat("snapshot of model '%s' shard %d %s",
                                                          model.spec().name, i,
                                                          StorePartName(part)));
      }
      out.push_back(*info);
    }
  }
  (void)RecordFloor();  // logged on failure; the snapshots are committed either way
  return out;
}

absl::Status Persistence::Backup(const std::string& dir) {
  if (store_ == nullptr) {
    return absl::FailedPreconditionError(
        "this server has no data_dir: there is nothing to back up (start it with --data_dir)");
  }
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    return absl::AlreadyExistsError(absl::StrCat("backup directory '", dir, "' already exists"));
  }
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat("backup directory '", dir, "': ", ec.message()));
  }
  if (absl::Status s = store_->Backup((fs::path(dir) / "db").string()); !s.ok()) return s;
  // The secrets a restored server needs; they keep their modes.
  for (const char* file : {"lmu.secret", "audit.key", "audit.pub"}) {
    const fs::path from = fs::path(options_.data_dir) / file;
    if (!fs::exists(from, ec)) continue;
    fs::copy_file(from, fs::path(dir) / file, ec);
    if (ec) {
      return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                          absl::StrCat("backup: copying '", from.string(), "': ", ec.message()));
    }
  }
  spdlog::info("backup written to '{}'", dir);
  return absl::OkStatus();
}

void Persistence::StartSnapshotter(ModelRegistry* registry) {
  if (store_ == nullptr) return;
  if (options_.snapshot_every_steps == 0 && options_.snapshot_interval <= absl::ZeroDuration()) {
    return;
  }
  snapshotter_ = std::thread([this, registry] { SnapshotterLoop(registry); });
}

void Persistence::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stop_) return;
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (snapshotter_.joinable()) snapshotter_.join();
  (void)RecordFloor();
}

void Persistence::SnapshotterLoop(ModelRegistry* registry) {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
        return;
      }
    }
    bool took = false;
    for (const std::shared_ptr<Model>& model : registry->List()) {
      std::shared_ptr<ModelLog> logs = Find(model->spec().name);
      if (logs == nullptr) continue;
      for (uint32_t i = 0; i < model->num_shards(); ++i) {
        ShardLog& log = logs->shard(i);
        uint64_t backlog = 0;  // log entries of the shard's parts not yet covered
        for (StorePart part : kParts) {
          if (!HasPart(model->spec(), part)) continue;
          if (part != StorePart::kSau) {
            // A part a failed write fenced is rebuilt as soon as the store takes writes again,
            // not only at its next batch (its reads then show the committed state again).
            const bool fenced = part == StorePart::kLmu ? model->lmu_shard(i).fenced()
                                                        : model->fuse_shard(i).fenced();
            if (fenced) (void)ReinstateFenced(*model, i, part, registry->secret());
          }
          ShardLog::PartState& ps = log.part(part);
          const uint64_t steps = ps.steps_since.load(std::memory_order_relaxed);
          const bool by_steps =
              options_.snapshot_every_steps > 0 && steps >= options_.snapshot_every_steps;
          const absl::Time last = absl::FromUnixNanos(ps.last_snapshot_ns.load());
          const bool by_time = options_.snapshot_interval > absl::ZeroDuration() && steps > 0 &&
                               absl::Now() - last >= options_.snapshot_interval;
          if (!by_steps && !by_time) continue;
          std::lock_guard<std::mutex> lock(log.snapshot_mu_);
          absl::StatusOr<SnapshotInfo> info = SnapshotPart(*model, i, part);
          if (!info.ok()) {
            spdlog::error("snapshot of model '{}' shard {} {} failed: {}", model->spec().name, i,
                          StorePartName(part), std::string(info.status().message()));
          } else if (info->taken) {
            took = true;
            spdlog::debug("snapshot of model '{}' shard {} {}: {} bytes in {:.3f} s, log "
                          "trimmed through {}",
                          model->spec().name, i, StorePartName(part), info->bytes,
                          info->seconds, info->trimmed_through);
          }
        }
        for (StorePart part : kParts) {
          if (HasPart(model->spec(), part)) {
            backlog += log.part(part).batches_since.load(std::memory_order_relaxed);
          }
        }
        if (metrics_ != nullptr) metrics_->SetLogBacklog(model->spec().name, i, backlog);
      }
    }
    if (took) (void)RecordFloor();  // logged on failure
  }
}

}  // namespace streamlearn::server
