#include "server/storage/persistence.h"

#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "admin.pb.h"
#include "core/audit/audit_record.h"
#include "core/audit/merkle_chain.h"
#include "core/audit/step_records.h"
#include "core/common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "server/storage/audit_archive.h"
#include "server/storage/audit_key.h"
#include "server/storage/data_dir.h"
#include "server/storage/encrypted_storage.h"
#include "server/storage/file_io.h"
#include "server/storage/part_codec.h"
#include "server/storage/recovery.h"
#include "server/storage/spec_conversion.h"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {
namespace {

namespace fs = std::filesystem;

// The genesis record's model_spec: the effective spec as JSON (all fields, proto names).
std::string SpecJson(const v1::ModelSpec& spec) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opt;
  opt.always_print_primitive_fields = true;
  opt.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(spec, &json, opt);
  return json;
}

absl::Status CheckOptions(const PersistenceOptions& options) {
  if (options.checkpoint_every < 2) {
    return absl::InvalidArgumentError("audit checkpoint_every must be >= 2");
  }
  if (options.audit_segment_records < 1) {
    return absl::InvalidArgumentError("audit_segment_records must be >= 1");
  }
  if (options.keep_snapshots < 1) {
    return absl::InvalidArgumentError("keep_snapshots must be >= 1");
  }
  return absl::OkStatus();
}

// Recovery rebuilds a model from its stored spec (the wire form) and restores its parts'
// snapshots under it: a part that does not restore under the round-tripped spec would come
// back different. The fresh parts of shard 0 are snapshotted and restored under it now.
absl::Status CheckSpecSurvivesStore(const Model& model, const v1::ModelSpec& wire,
                                    const lmu::HashSecret& secret) {
  const auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", model.spec().name, "': the spec cannot be stored as given (a restart would "
        "rebuild it differently): ", why, "; give the parameters the ModelSpec message holds"));
  };
  absl::StatusOr<ModelSpec> stored = ModelSpecFromProto(wire, SpecOrigin::kStored);
  if (!stored.ok()) return refuse(stored.status().message());
  for (const ShardPart* part : model.parts(0)) {
    absl::StatusOr<PartSnapshot> snap = part->TakeSnapshot();
    if (!snap.ok()) return snap.status();
    absl::Status restored = VisitPart(part->kind(), [&]<typename ShardT>(PartType<ShardT>) {
      return PartCodec<ShardT>::Restore(*stored, secret, snap->blob).status();
    });
    if (!restored.ok()) return refuse(restored.message());
  }
  return absl::OkStatus();
}

// `backend`, with the tenants of options.encryption_keys_dir encrypted at rest.
absl::StatusOr<std::unique_ptr<StorageBackend>> WithTenantKeys(
    const PersistenceOptions& options, std::unique_ptr<StorageBackend> backend) {
  // Wrapped without keys too: a sealed model is then refused with a message naming its
  // tenant's missing key, not as an unreadable spec.
  if (options.encryption_keys_dir.empty()) return EncryptAtRest(std::move(backend), {});
  ASSIGN_OR_RETURN(TenantKeys keys, TenantKeys::LoadDir(options.encryption_keys_dir));
  if (keys.empty()) {
    spdlog::warn("encryption keys directory '{}' holds no <tenant>.key file: no tenant is "
                 "encrypted at rest",
                 options.encryption_keys_dir);
  }
  for (const std::string& tenant : keys.Tenants()) {
    spdlog::info("tenant '{}' is encrypted at rest (key fingerprint {})", tenant,
                 keys.Find(tenant)->Fingerprint());
  }
  return EncryptAtRest(std::move(backend), std::move(keys));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Persistence>> Persistence::Open(PersistenceOptions options,
                                                               StorageObserver* observer) {
  RETURN_IF_ERROR(CheckOptions(options));
  std::string key_path = options.audit_key_file;
  if (key_path.empty() && !options.data_dir.empty()) {
    key_path = (fs::path(options.data_dir) / "audit.key").string();
  }
  absl::StatusOr<Ed25519PrivateKey> key =
      key_path.empty() ? Ed25519PrivateKey::Generate() : LoadOrCreateAuditKey(key_path);
  if (!key.ok()) return key.status();
  if (options.data_dir.empty() && !options.encryption_keys_dir.empty()) {
    spdlog::warn("--encryption_keys is set but there is no data_dir: nothing is stored, so "
                 "nothing is encrypted");
  }
  if (key_path.empty()) {
    spdlog::warn("no data_dir: learned state and audit records live in memory only, and the "
                 "audit signing key (fingerprint {}) lives as long as this process",
                 key->PublicKey().fingerprint());
  }
  std::unique_ptr<Persistence> p(new Persistence(std::move(options), observer, *std::move(key)));
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
      ASSIGN_OR_RETURN(std::unique_ptr<StorageBackend> ro_archived,
                       ArchiveAuditTo(std::make_unique<RocksStorage>(*std::move(ro)),
                                      {.dir = AuditArchiveDir(p->options_.data_dir)}));
      ASSIGN_OR_RETURN(std::unique_ptr<StorageBackend> ro_backend,
                       WithTenantKeys(p->options_, std::move(ro_archived)));
      RETURN_IF_ERROR(CheckStoreFloor(*ro_backend, db_path, **floor));
    }
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(
        {.path = (fs::path(p->options_.data_dir) / "db").string(),
         .durability = p->options_.durability,
         .compress_audit = p->options_.audit_live_records == 0});
    if (!store.ok()) return store.status();
    auto rocks = std::make_unique<RocksStorage>(*std::move(store));
    p->rocks_ = rocks.get();
    p->archiving_ = p->options_.audit_live_records > 0;
    ASSIGN_OR_RETURN(std::unique_ptr<StorageBackend> archived,
                     ArchiveAuditTo(std::move(rocks),
                                    {.dir = AuditArchiveDir(p->options_.data_dir)}));
    ASSIGN_OR_RETURN(p->backend_, WithTenantKeys(p->options_, std::move(archived)));
    Store& db = p->rocks_->store();
    // Every block of the audit table is read once: a chain the server cannot read is refused
    // at start, not found later by an auditor (docs/DURABILITY.md, "Start-up checks").
    const absl::Time verify_start = absl::Now();
    if (absl::Status s = db.VerifyAuditChecksums(); !s.ok()) {
      return absl::DataLossError(absl::StrCat(
          s.message(), "; the audit chains are unreadable and the server will not serve them. "
          "Restore the data directory from a backup (docs/DURABILITY.md)"));
    }
    spdlog::info("audit table checksums verified in {:.3f} s",
                 absl::ToDoubleSeconds(absl::Now() - verify_start));
    spdlog::info("store '{}' open, durability {}; audit key fingerprint {}",
                 db.options().path, DurabilityName(p->options_.durability),
                 p->key_.PublicKey().fingerprint());
  }
  return p;
}

absl::StatusOr<std::unique_ptr<Persistence>> Persistence::OpenWith(
    PersistenceOptions options, std::unique_ptr<StorageBackend> backend,
    StorageObserver* observer) {
  RETURN_IF_ERROR(CheckOptions(options));
  if (!options.data_dir.empty() || backend == nullptr) {
    return absl::InvalidArgumentError(
        "Persistence::OpenWith takes a backend and no data_dir (use Open for a data dir)");
  }
  absl::StatusOr<Ed25519PrivateKey> key =
      options.audit_key_file.empty() ? Ed25519PrivateKey::Generate()
                                     : LoadOrCreateAuditKey(options.audit_key_file);
  if (!key.ok()) return key.status();
  std::unique_ptr<Persistence> p(new Persistence(std::move(options), observer, *std::move(key)));
  if (!p->options_.audit_archive_dir.empty()) {
    // The cluster mode's shared archive: segments every server reads (docs/CLUSTER.md,
    // "Audit archive").
    ASSIGN_OR_RETURN(backend, ArchiveAuditTo(std::move(backend),
                                             {.dir = p->options_.audit_archive_dir}));
    p->archiving_ = p->options_.audit_live_records > 0;
  } else if (p->options_.cluster) {
    spdlog::warn("no --audit_archive_dir: the JetStream archive stream keeps every audit "
                 "record (about 600 bytes per SAU event); give the servers a shared archive "
                 "directory to bound it (docs/CLUSTER.md, \"Audit archive\")");
  }
  ASSIGN_OR_RETURN(p->backend_, WithTenantKeys(p->options_, std::move(backend)));
  spdlog::info("storage: {}", p->backend_->Describe());
  return p;
}

Persistence::~Persistence() { Stop(); }

std::unique_ptr<ShardWriter> Persistence::MakeWriter(const Model& model, uint32_t shard) {
  return std::make_unique<ShardWriter>(
      backend_ != nullptr ? backend_->OpenShard(model.spec().name, shard) : nullptr,
      model.spec().name, shard, key_, options_, observer_);
}

std::shared_ptr<ModelWriters> Persistence::MakeWriters(const Model& model, bool serving) {
  std::vector<std::unique_ptr<ShardWriter>> shards;
  for (uint32_t i = 0; i < model.num_shards(); ++i) shards.push_back(MakeWriter(model, i));
  return std::make_shared<ModelWriters>(std::move(shards), serving);
}

std::shared_ptr<ModelWriters> Persistence::Find(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = writers_.find(name);
  return it == writers_.end() ? nullptr : it->second;
}

absl::Status Persistence::OnCreate(const std::shared_ptr<Model>& model,
                                   const lmu::HashSecret& secret) {
  const ModelSpec& spec = model->spec();
  const v1::ModelSpec wire = ModelSpecToProto(spec);
  RETURN_IF_ERROR(CheckSpecSurvivesStore(*model, wire, secret));
  // In the cluster mode a new model's shards serve once a server takes their lease.
  std::shared_ptr<ModelWriters> writers = MakeWriters(*model, /*serving=*/!options_.cluster);
  // Genesis records and the spec in one write: a model exists on disk with its chains or not
  // at all. Each genesis names its (model, shard), so no chain passes as another's.
  const std::string spec_json = SpecJson(wire);
  std::vector<std::string> genesis_lines;
  std::vector<ChainHead> heads;
  for (uint32_t i = 0; i < model->num_shards(); ++i) {
    const ChainId id{.model = spec.name, .shard = i};
    std::string genesis;
    if (absl::Status s = AppendCanonical(GenesisBody(spec_json, model->w_digest(), &id), &genesis);
        !s.ok()) {
      return s;
    }
    MerkleChain chain;
    genesis_lines.push_back(chain.AppendCanonical(genesis));
    heads.push_back({.next_index = 1, .head = chain.head()});
  }
  if (backend_ != nullptr) {
    if (absl::Status s =
            backend_->CreateModel(spec.name, wire.SerializeAsString(), genesis_lines);
        !s.ok()) {
      return WithContext(s, absl::StrCat("model '", spec.name, "': storing its spec"));
    }
  }
  // The writers continue after their genesis, which counts toward the first checkpoint.
  for (uint32_t i = 0; i < model->num_shards(); ++i) {
    writers->shard(i).chain().ResumeAt(heads[i], /*since_checkpoint=*/1);
  }
  MutexLock lock(&mu_);
  writers_[spec.name] = std::move(writers);
  return absl::OkStatus();
}

absl::Status Persistence::Recover(ModelRegistry* registry) {
  if (backend_ == nullptr) return absl::OkStatus();
  if (options_.cluster) return RegisterStoredModels(registry).status();
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs = backend_->ListSpecs();
  if (!specs.ok()) return specs.status();
  for (const auto& [name, bytes] : *specs) {
    if (absl::Status s = RecoverModel(registry, name, bytes); !s.ok()) {
      return WithContext(s, absl::StrCat("recovering model '", name, "'"));
    }
  }
  if (!specs->empty()) {
    spdlog::info("recovered {} model(s) from {}", specs->size(), backend_->Describe());
  }
  return RecordFloor();
}

absl::Status Persistence::RecordFloor() {
  if (rocks_ == nullptr) return absl::OkStatus();
  // The writers are copied out first: a snapshot holds a shard's snapshot_mu() and then takes
  // mu_ (Find), so mu_ is never held while a snapshot_mu() is taken.
  std::map<std::string, std::shared_ptr<ModelWriters>, std::less<>> models;
  {
    MutexLock lock(&mu_);
    models = writers_;
  }
  StoreFloor floor;
  for (const auto& [name, writers] : models) {
    for (uint32_t i = 0; i < writers->num_shards(); ++i) {
      ShardWriter& writer = writers->shard(i);
      floor.chains[{name, i}] = writer.chain().head().next_index;
      MutexLock snapshot_lock(&writer.snapshot_mu());
      for (PartKind part : kPartKinds) {
        const std::vector<ManifestEntry>& m = writer.manifest(part);
        if (!m.empty()) floor.snapshots[{name, i, part}] = m.front().log_seq;
      }
    }
  }
  // The values were read first: once the WAL is synced they are all durable.
  MutexLock lock(&floor_mu_);
  absl::Status s = rocks_->store().SyncWal();
  if (s.ok()) s = MarkDataDir(options_.data_dir, floor);
  if (!s.ok()) {
    spdlog::warn("could not record the store's floor in {}: {}", kDataDirMarker,
                 std::string(s.message()));
  }
  return s;
}

absl::Status Persistence::RecoverModel(ModelRegistry* registry, const std::string& name,
                                       const std::string& spec_bytes) {
  const absl::Time start = absl::Now();
  v1::ModelSpec wire;
  if (!wire.ParseFromString(spec_bytes))
    return absl::DataLossError("the stored spec is unreadable");
  absl::StatusOr<ModelSpec> spec = ModelSpecFromProto(wire, SpecOrigin::kStored);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::shared_ptr<Model>> model = Model::Create(*spec, registry->secret());
  if (!model.ok()) return model.status();
  Model& m = **model;
  std::shared_ptr<ModelWriters> writers = MakeWriters(m, /*serving=*/true);
  for (uint32_t i = 0; i < m.num_shards(); ++i) {
    ShardWriter& writer = writers->shard(i);
    absl::StatusOr<uint64_t> replayed =
        RecoverShard(writer, m, i, registry->secret(), options_.keep_snapshots);
    if (!replayed.ok()) return replayed.status();
    if (observer_ != nullptr) {
      observer_->RecordRecovery(name, i, *replayed, absl::ToDoubleSeconds(absl::Now() - start));
    }
    spdlog::info("model '{}' shard {}: recovered (replayed {} logged batches; audit chain at {})",
                 name, i, *replayed, writer.chain().head().next_index);
  }
  RETURN_IF_ERROR(registry->Add(*model));
  MutexLock lock(&mu_);
  writers_[name] = std::move(writers);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> Persistence::RegisterStoredModels(
    ModelRegistry* registry) {
  std::vector<std::string> added;
  if (backend_ == nullptr) return added;
  ASSIGN_OR_RETURN(auto specs, backend_->ListSpecs());
  for (const auto& [name, bytes] : specs) {
    if (registry->Find(name).ok()) continue;
    v1::ModelSpec wire;
    if (!wire.ParseFromString(bytes)) {
      return absl::DataLossError(absl::StrCat("model '", name, "': the stored spec is unreadable"));
    }
    absl::StatusOr<ModelSpec> spec = ModelSpecFromProto(wire, SpecOrigin::kStored);
    if (!spec.ok()) return WithContext(spec.status(), absl::StrCat("model '", name, "'"));
    ASSIGN_OR_RETURN(std::shared_ptr<Model> model, Model::Create(*spec, registry->secret()));
    std::shared_ptr<ModelWriters> writers = MakeWriters(*model, /*serving=*/false);
    if (absl::Status s = registry->Add(model); !s.ok()) {
      if (absl::IsAlreadyExists(s)) continue;  // created here meanwhile
      return s;
    }
    {
      MutexLock lock(&mu_);
      writers_.try_emplace(name, std::move(writers));
    }
    added.push_back(name);
  }
  return added;
}

absl::StatusOr<uint64_t> Persistence::LoadShard(Model& model, uint32_t shard,
                                                const lmu::HashSecret& secret) {
  const std::string& name = model.spec().name;
  std::shared_ptr<ModelWriters> writers = Find(name);
  if (writers == nullptr) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no writers"));
  }
  const absl::Time start = absl::Now();
  return writers->Exclusive(shard, [&]() -> absl::StatusOr<uint64_t> {
    writers->set_serving(shard, false);
    // Fresh parts: what this server held of the shard before is stale.
    for (ShardPart* part : model.parts(shard)) {
      absl::StatusOr<std::unique_ptr<ShardPart>> fresh =
          VisitPart(part->kind(), [&]<typename ShardT>(PartType<ShardT>)
                                      -> absl::StatusOr<std::unique_ptr<ShardPart>> {
            ASSIGN_OR_RETURN(std::unique_ptr<ShardT> p, PartCodec<ShardT>::Fresh(model.spec(), secret));
            return std::unique_ptr<ShardPart>(std::move(p));
          });
      if (!fresh.ok()) return fresh.status();
      model.Replace(shard, *std::move(fresh));
    }
    std::unique_ptr<ShardWriter> writer = MakeWriter(model, shard);
    absl::StatusOr<uint64_t> replayed =
        RecoverShard(*writer, model, shard, secret, options_.keep_snapshots);
    if (!replayed.ok()) {
      return WithContext(replayed.status(),
                         absl::StrCat("loading model '", name, "' shard ", shard));
    }
    writers->Replace(shard, std::move(writer));
    writers->set_serving(shard, true);
    if (observer_ != nullptr) {
      observer_->RecordRecovery(name, shard, *replayed,
                                absl::ToDoubleSeconds(absl::Now() - start));
    }
    spdlog::info("model '{}' shard {}: loaded (replayed {} logged batches; audit chain at {}); "
                 "serving",
                 name, shard, *replayed, writers->shard(shard).chain().head().next_index);
    return *replayed;
  });
}

void Persistence::ReleaseShard(const std::string& model, uint32_t shard) {
  std::shared_ptr<ModelWriters> writers = Find(model);
  if (writers == nullptr || shard >= writers->num_shards()) return;
  writers->Exclusive(shard, [&] {
    if (writers->serving(shard)) {
      spdlog::info("model '{}' shard {}: released; no longer served here", model, shard);
    }
    writers->set_serving(shard, false);
  });
}

absl::Status Persistence::NotServed(const std::string& model, uint32_t shard) const {
  OwnerLookup lookup;
  {
    MutexLock lock(&mu_);
    lookup = owner_lookup_;
  }
  std::pair<std::string, std::string> owner;
  if (lookup) owner = lookup(model, shard);
  if (owner.first.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "NOT-OWNER: model '", model, "' shard ", shard,
        " is not served by this server and no server holds it yet (a takeover is under way); "
        "retry shortly"));
  }
  absl::Status s = absl::UnavailableError(
      absl::StrCat("NOT-OWNER: model '", model, "' shard ", shard, " is served by server '",
                   owner.first, "' at ", owner.second));
  s.SetPayload(kOwnerPayload, absl::Cord(owner.second));
  return s;
}

void Persistence::StopServing(const std::string& model, uint32_t shard) {
  std::shared_ptr<ModelWriters> writers = Find(model);
  if (writers == nullptr || shard >= writers->num_shards()) return;
  if (writers->serving(shard)) {
    spdlog::warn("model '{}' shard {}: another server wrote its journal; no longer served here",
                 model, shard);
  }
  writers->set_serving(shard, false);
}

absl::Status Persistence::ReinstateFenced(Model& model, uint32_t shard, PartKind part,
                                          const lmu::HashSecret& secret) {
  const std::string& name = model.spec().name;
  const ShardPart* p = model.part(shard, part);
  if (p == nullptr || !p->fenced()) return absl::OkStatus();
  if (backend_ == nullptr) {
    return absl::FailedPreconditionError(
        "this shard part was fenced by a failed rebuild and there is no store to rebuild it "
        "from; restart the server");
  }
  std::shared_ptr<ModelWriters> writers = Find(name);
  if (writers == nullptr) {
    return absl::NotFoundError(absl::StrCat("model '", name, "' has no writers"));
  }
  ShardWriter& writer = writers->shard(shard);
  if (absl::Status s = writer.store()->ResumeWrites(); !s.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "the shard's last write failed and the store still fails (", s.message(),
        "); retry once the cause (a full disk, say) is fixed"));
  }
  // No snapshot of the part runs meanwhile (it would fail on the fence anyway).
  MutexLock lock(&writer.snapshot_mu());
  const absl::Time start = absl::Now();
  absl::StatusOr<uint64_t> replayed = RebuildFencedPart(*writer.store(), model, shard, part,
                                                        secret, options_.keep_snapshots);
  if (!replayed.ok()) {
    // Another call reinstated it first (then it is no longer fenced), or the part committed
    // more since: this rebuild is stale and is dropped.
    return p->fenced() ? replayed.status() : absl::OkStatus();
  }
  spdlog::warn("model '{}' shard {} {}: rebuilt from the store after a failed write (replayed "
               "{} logged batches in {:.3f} s); writes resume",
               name, shard, PartName(part), *replayed,
               absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SnapshotInfo>> Persistence::SnapshotModel(const Model& model) {
  if (backend_ == nullptr) {
    return absl::FailedPreconditionError(
        "this server has no data_dir: there is no store to snapshot into (start it with "
        "--data_dir)");
  }
  std::shared_ptr<ModelWriters> writers = Find(model.spec().name);
  if (writers == nullptr) {
    return absl::NotFoundError(absl::StrCat("model '", model.spec().name, "' has no writers"));
  }
  std::vector<SnapshotInfo> out;
  for (uint32_t i = 0; i < model.num_shards(); ++i) {
    ModelWriters::Use use;
    if (!writers->TryUse(i, &use)) continue;  // cluster mode: served by another server
    ShardWriter& writer = writers->shard(i);
    MutexLock lock(&writer.snapshot_mu());
    for (const ShardPart* part : model.parts(i)) {
      absl::StatusOr<SnapshotInfo> info = SnapshotPart(writer, *part, options_, observer_);
      if (!info.ok()) {
        return WithContext(info.status(), absl::StrFormat("snapshot of model '%s' shard %d %s",
                                                          model.spec().name, i,
                                                          PartName(part->kind())));
      }
      out.push_back(*info);
    }
  }
  (void)RecordFloor();  // logged on failure; the snapshots are committed either way
  // Bounded audit storage: the chains' old records go to the archive beside the snapshots
  // (outside the snapshot locks, which RecordFloor takes too).
  for (uint32_t i = 0; i < model.num_shards(); ++i) {
    ModelWriters::Use use;
    if (!writers->TryUse(i, &use)) continue;
    if (absl::Status s = ArchiveChain(model.spec().name, i, writers->shard(i)); !s.ok()) {
      return WithContext(s, absl::StrFormat("the snapshots of model '%s' are taken, but "
                                            "archiving the audit chain of shard %d failed",
                                            model.spec().name, i));
    }
  }
  return out;
}

absl::Status Persistence::Backup(const std::string& dir) {
  if (options_.cluster) {
    return absl::FailedPreconditionError(
        "the cluster mode keeps every shard in NATS JetStream, not on this server: back up "
        "the streams and buckets with JetStream's own backup (docs/CLUSTER.md, \"Backup\")");
  }
  if (rocks_ == nullptr) {
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
  if (absl::Status s = rocks_->store().Backup((fs::path(dir) / "db").string()); !s.ok()) {
    return s;
  }
  // The public key, for verifying the backup's audit chains; never the secrets (the audit
  // signing key, the LMU hash secret): a backup leaves the machine more often than the key
  // files should. A restored server is given the original key files (docs/DURABILITY.md).
  const fs::path pub = fs::path(AuditPublicKeyPath(
      options_.audit_key_file.empty() ? (fs::path(options_.data_dir) / "audit.key").string()
                                      : options_.audit_key_file));
  if (fs::exists(pub, ec)) {
    fs::copy_file(pub, fs::path(dir) / "audit.pub", ec);
    if (ec) {
      return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                          absl::StrCat("backup: copying '", pub.string(), "': ", ec.message()));
    }
  }
  // The archive's segments, copied (not linked: as for the store's files, damage to a live
  // segment must not reach the backup). Copied after the store, so every segment the copied
  // store relies on is there (a newer one only repeats records the copied store still holds).
  const fs::path archive = AuditArchiveDir(options_.data_dir);
  if (fs::exists(archive, ec)) {
    fs::copy(archive, fs::path(dir) / "audit-archive", fs::copy_options::recursive, ec);
    if (ec) {
      return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                          absl::StrCat("backup: copying the audit archive '", archive.string(),
                                       "': ", ec.message()));
    }
  }
  spdlog::info("backup written to '{}'", dir);
  return absl::OkStatus();
}

absl::Status Persistence::ArchiveChain(const std::string& model, uint32_t shard,
                                       ShardWriter& writer) {
  if (!archiving_) return absl::OkStatus();
  const absl::Time start = absl::Now();
  const absl::StatusOr<uint64_t> archived_now =
      writer.chain().Archive(options_.audit_live_records, options_.audit_segment_records);
  if (observer_ != nullptr) {
    // Also after a failure: the live count then shows how far the store grows past its bound.
    if (!archived_now.ok()) observer_->RecordAuditArchiveFailure(model, shard);
    const uint64_t archived = writer.chain().store()->ArchivedBelow();
    observer_->SetAuditArchive(model, shard, archived, writer.chain().head().next_index - archived,
                               options_.audit_live_records + options_.audit_segment_records);
  }
  if (!archived_now.ok()) return archived_now.status();
  const uint64_t n = *archived_now;
  if (n > 0) {
    const uint64_t from = writer.chain().store()->ArchivedBelow();
    const uint64_t next = writer.chain().head().next_index;
    spdlog::info("audit chain of model '{}' shard {}: {} record(s) archived in {:.3f} s; the "
                 "store keeps records {}..{} ({})",
                 model, shard, n, absl::ToDoubleSeconds(absl::Now() - start), from, next - 1,
                 next - from);
  }
  return absl::OkStatus();
}

void Persistence::StartSnapshotter(ModelRegistry* registry) {
  if (backend_ == nullptr) return;
  if (options_.snapshot_every_steps == 0 && options_.snapshot_interval <= absl::ZeroDuration() &&
      !archiving_) {
    return;
  }
  snapshotter_ = std::thread([this, registry] { SnapshotterLoop(registry); });
}

void Persistence::Stop() {
  {
    MutexLock lock(&stop_mu_);
    if (stop_) return;
    stop_ = true;
  }
  stop_cv_.SignalAll();
  if (snapshotter_.joinable()) snapshotter_.join();
  (void)RecordFloor();
}

void Persistence::SnapshotterLoop(ModelRegistry* registry) {
  for (;;) {
    {
      MutexLock lock(&stop_mu_);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (!stop_) {
        if (!stop_cv_.WaitUntil(&stop_mu_, deadline)) break;  // 200 ms passed
      }
      if (stop_) return;
    }
    bool took = false;
    for (const std::shared_ptr<Model>& model : registry->List()) {
      std::shared_ptr<ModelWriters> writers = Find(model->spec().name);
      if (writers == nullptr) continue;
      for (uint32_t i = 0; i < model->num_shards(); ++i) {
        ModelWriters::Use use;
        if (!writers->TryUse(i, &use)) continue;  // cluster mode: not served here
        ShardWriter& writer = writers->shard(i);
        uint64_t backlog = 0;  // log entries of the shard's parts not yet covered
        for (const ShardPart* part : model->parts(i)) {
          // A part a failed write fenced is rebuilt as soon as the store takes writes again,
          // not only at its next batch (its reads then show the committed state again).
          if (part->fenced()) (void)ReinstateFenced(*model, i, part->kind(), registry->secret());
          ShardWriter::PartState& ps = writer.part(part->kind());
          if (SnapshotDue(ps, options_, absl::Now())) {
            MutexLock lock(&writer.snapshot_mu());
            absl::StatusOr<SnapshotInfo> info = SnapshotPart(writer, *part, options_, observer_);
            if (!info.ok()) {
              spdlog::error("snapshot of model '{}' shard {} {} failed: {}", model->spec().name,
                            i, PartName(part->kind()), std::string(info.status().message()));
            } else if (info->taken) {
              took = true;
              spdlog::debug("snapshot of model '{}' shard {} {}: {} bytes in {:.3f} s, log "
                            "trimmed through {}",
                            model->spec().name, i, PartName(part->kind()), info->bytes,
                            info->seconds, info->trimmed_through);
            }
          }
          backlog += ps.batches_since.load(std::memory_order_relaxed);
        }
        if (observer_ != nullptr) observer_->SetLogBacklog(model->spec().name, i, backlog);
        if (absl::Status s = ArchiveChain(model->spec().name, i, writer); !s.ok()) {
          spdlog::error("archiving the audit chain of model '{}' shard {} failed: {}",
                        model->spec().name, i, std::string(s.message()));
        }
      }
    }
    if (took) (void)RecordFloor();  // logged on failure
  }
}

}  // namespace streamlearn::storage
