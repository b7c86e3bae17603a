#include "server/storage/encrypted_storage.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "core/common/digest.h"
#include "core/common/name_rule.h"
#include "core/common/status_macros.h"
#include "server/storage/file_io.h"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {
namespace {

namespace fs = std::filesystem;

constexpr uint8_t kSealedMagic = 0xff;  // protobuf wire type 7: no plaintext spec starts so
constexpr uint8_t kSealedVersion = 1;
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr size_t kHeaderBytes = 2 + kNonceBytes;

// The place a value is stored at, authenticated with it: a value sealed for one place does
// not open at another.
std::string Place(std::string_view kind, std::string_view model, uint32_t shard,
                  std::string_view part, uint64_t n) {
  std::string out = "streamlearn at rest v1";
  for (std::string_view piece : {kind, model}) {
    out.push_back('\0');
    out.append(piece);
  }
  absl::StrAppend(&out, absl::string_view("\0", 1), shard, absl::string_view("\0", 1),
                  absl::string_view(part.data(), part.size()), absl::string_view("\0", 1), n);
  return out;
}

struct CipherCtx {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  ~CipherCtx() { EVP_CIPHER_CTX_free(ctx); }
};

absl::Status OpenSslError(std::string_view what) {
  return absl::InternalError(absl::StrCat("encryption at rest: OpenSSL failed to ",
                                          absl::string_view(what.data(), what.size())));
}

absl::StatusOr<std::optional<std::array<uint8_t, TenantKey::kBytes>>> ParseKeyFile(
    const std::string& path, std::string bytes) {
  std::array<uint8_t, TenantKey::kBytes> key{};
  if (bytes.size() == key.size()) {
    std::copy(bytes.begin(), bytes.end(), key.begin());
    OPENSSL_cleanse(bytes.data(), bytes.size());
    return key;
  }
  absl::string_view text = absl::StripAsciiWhitespace(bytes);
  bool hex = text.size() == 2 * key.size();
  for (char c : text) hex = hex && absl::ascii_isxdigit(static_cast<unsigned char>(c));
  if (!hex) {
    OPENSSL_cleanse(bytes.data(), bytes.size());
    return absl::InvalidArgumentError(absl::StrCat(
        "tenant key file '", path, "' must hold 32 bytes or their 64 hex digits; it holds ",
        bytes.size(), " bytes (make one with: openssl rand -out KEYFILE 32)"));
  }
  std::string raw = absl::HexStringToBytes(text);
  std::copy(raw.begin(), raw.end(), key.begin());
  OPENSSL_cleanse(raw.data(), raw.size());
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return key;
}

class EncryptedShardStore final : public ShardStore {
 public:
  EncryptedShardStore(std::unique_ptr<ShardStore> inner, std::shared_ptr<const TenantKey> key)
      : ShardStore(inner->model(), inner->shard()), inner_(std::move(inner)),
        key_(std::move(key)) {}

  absl::Status Commit(const ShardWrite& write) override {
    ShardWrite sealed;
    std::string entry;
    if (write.log.has_value()) {
      ASSIGN_OR_RETURN(entry, Seal(*key_, LogPlace(write.log->part, write.log->seq),
                                   write.log->entry));
      sealed.log = LogAppend{.part = write.log->part, .seq = write.log->seq, .entry = entry};
    }
    std::vector<std::string> lines;
    lines.reserve(write.audit.size());
    for (const AuditAppend& a : write.audit) {
      ASSIGN_OR_RETURN(std::string line, Seal(*key_, AuditPlace(a.index), a.line));
      lines.push_back(std::move(line));
    }
    for (size_t i = 0; i < write.audit.size(); ++i) {
      sealed.audit.push_back({.index = write.audit[i].index, .line = lines[i]});
    }
    std::string blob;
    if (write.snapshot.has_value()) {
      const SnapshotPut& s = *write.snapshot;
      ASSIGN_OR_RETURN(blob, Seal(*key_, SnapshotPlace(s.part, s.seq), s.blob));
      ASSIGN_OR_RETURN(std::string manifest, Seal(*key_, ManifestPlace(s.part), s.manifest));
      sealed.snapshot = SnapshotPut{.part = s.part, .seq = s.seq, .blob = blob,
                                    .manifest = std::move(manifest), .dropped = s.dropped,
                                    .trim_log_through = s.trim_log_through};
    }
    sealed.trim_audit_below = write.trim_audit_below;
    return inner_->Commit(sealed);
  }

  absl::Status ResumeWrites() override { return inner_->ResumeWrites(); }

  absl::Status ScanLog(PartKind part, uint64_t from, const LogVisitor& fn) const override {
    absl::Status failed;
    RETURN_IF_ERROR(inner_->ScanLog(part, from, [&](uint64_t seq, std::string_view entry) {
      absl::StatusOr<std::string> plain =
          Open(*key_, LogPlace(part, seq), entry, Name("log entry", part, seq));
      if (!plain.ok()) {
        failed = plain.status();
        return false;
      }
      return fn(seq, *plain);
    }));
    return failed;
  }

  absl::StatusOr<std::optional<uint64_t>> LastLogSeq(PartKind part) const override {
    return inner_->LastLogSeq(part);
  }

  absl::StatusOr<std::optional<std::string>> GetSnapshot(PartKind part,
                                                         uint64_t seq) const override {
    ASSIGN_OR_RETURN(std::optional<std::string> blob, inner_->GetSnapshot(part, seq));
    if (!blob.has_value()) return blob;
    ASSIGN_OR_RETURN(std::string plain, Open(*key_, SnapshotPlace(part, seq), *blob,
                                             Name("snapshot", part, seq)));
    return std::optional<std::string>(std::move(plain));
  }

  absl::StatusOr<std::optional<std::string>> GetManifest(PartKind part) const override {
    ASSIGN_OR_RETURN(std::optional<std::string> manifest, inner_->GetManifest(part));
    if (!manifest.has_value()) return manifest;
    ASSIGN_OR_RETURN(std::string plain, Open(*key_, ManifestPlace(part), *manifest,
                                             Name("manifest", part, 0)));
    return std::optional<std::string>(std::move(plain));
  }

  absl::Status ScanAudit(uint64_t from, const AuditVisitor& fn) const override {
    absl::Status failed;
    RETURN_IF_ERROR(inner_->ScanAudit(from, [&](uint64_t index, std::string_view line) {
      absl::StatusOr<std::string> plain =
          Open(*key_, AuditPlace(index), line, AuditName(index));
      if (!plain.ok()) {
        failed = plain.status();
        return false;
      }
      return fn(index, *plain);
    }));
    return failed;
  }

  absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> LastAudit() const override {
    ASSIGN_OR_RETURN(auto last, inner_->LastAudit());
    if (!last.has_value()) return last;
    ASSIGN_OR_RETURN(std::string plain, Open(*key_, AuditPlace(last->first), last->second,
                                             AuditName(last->first)));
    return std::optional<std::pair<uint64_t, std::string>>({last->first, std::move(plain)});
  }

  // The archive (below this decorator) keeps the sealed lines as they are; the seal, a signed
  // tree head, holds only hashes, sizes and the model's name, which the store's keys show.
  absl::Status ArchiveAudit(uint64_t below, std::string_view seal) override {
    return inner_->ArchiveAudit(below, seal);
  }
  uint64_t ArchivedBelow() const override { return inner_->ArchivedBelow(); }
  void NoteArchivedBelow(uint64_t below) override { inner_->NoteArchivedBelow(below); }

 private:
  std::string LogPlace(PartKind part, uint64_t seq) const {
    return Place("log", model(), shard(), PartName(part), seq);
  }
  std::string SnapshotPlace(PartKind part, uint64_t seq) const {
    return Place("snapshot", model(), shard(), PartName(part), seq);
  }
  std::string ManifestPlace(PartKind part) const {
    return Place("manifest", model(), shard(), PartName(part), 0);
  }
  std::string AuditPlace(uint64_t index) const {
    return Place("audit", model(), shard(), "", index);
  }
  std::string Name(std::string_view what, PartKind part, uint64_t seq) const {
    return absl::StrCat(absl::string_view(what.data(), what.size()), " ",
                        absl::string_view(PartName(part).data(), PartName(part).size()), "/",
                        seq, " of model '", model(), "' shard ", shard());
  }
  std::string AuditName(uint64_t index) const {
    return absl::StrCat("audit record ", index, " of model '", model(), "' shard ", shard());
  }

  std::unique_ptr<ShardStore> inner_;
  std::shared_ptr<const TenantKey> key_;
};

class EncryptedStorage final : public StorageBackend {
 public:
  EncryptedStorage(std::unique_ptr<StorageBackend> inner, TenantKeys keys)
      : inner_(std::move(inner)), keys_(std::move(keys)) {}

  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListSpecs() const override {
    ASSIGN_OR_RETURN(auto specs, inner_->ListSpecs());
    for (auto& [name, bytes] : specs) {
      const std::string_view tenant = TenantOfScoped(name);
      const TenantKey* key = keys_.Find(tenant);
      const bool sealed = LooksSealed(bytes);
      if (sealed && key == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model '", name, "' is encrypted with the key of tenant '",
            absl::string_view(tenant.data(), tenant.size()),
            "', and this server has no key for it: give it the tenant's key as '",
            absl::string_view(tenant.data(), tenant.size()),
            ".key' in its --encryption_keys directory (docs/SECURITY.md)"));
      }
      if (!sealed && key != nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model '", name, "' of tenant '", absl::string_view(tenant.data(), tenant.size()),
            "' is stored in plaintext, but the tenant has an encryption key: a tenant's models "
            "are encrypted from its first one, so the key was added later. Remove the key, or "
            "move the tenant's models to a new tenant that has it (docs/SECURITY.md)"));
      }
      if (sealed) {
        ASSIGN_OR_RETURN(bytes, Open(*key, SpecPlace(name), bytes,
                                     absl::StrCat("the spec of model '", name, "'")));
      }
    }
    return specs;
  }

  absl::Status CreateModel(std::string_view name, std::string_view spec_bytes,
                           std::span<const std::string> genesis_lines) override {
    const TenantKey* key = keys_.Find(TenantOfScoped(name));
    if (key == nullptr) return inner_->CreateModel(name, spec_bytes, genesis_lines);
    ASSIGN_OR_RETURN(std::string spec, Seal(*key, SpecPlace(name), spec_bytes));
    std::vector<std::string> genesis;
    genesis.reserve(genesis_lines.size());
    for (size_t shard = 0; shard < genesis_lines.size(); ++shard) {
      ASSIGN_OR_RETURN(std::string line,
                       Seal(*key, Place("audit", name, static_cast<uint32_t>(shard), "", 0),
                            genesis_lines[shard]));
      genesis.push_back(std::move(line));
    }
    return inner_->CreateModel(name, spec, genesis);
  }

  std::unique_ptr<ShardStore> OpenShard(std::string_view model, uint32_t shard) override {
    std::unique_ptr<ShardStore> store = inner_->OpenShard(model, shard);
    std::shared_ptr<const TenantKey> key = keys_.Share(TenantOfScoped(model));
    if (store == nullptr || key == nullptr) return store;
    return std::make_unique<EncryptedShardStore>(std::move(store), std::move(key));
  }

  std::string Describe() const override {
    if (keys_.empty()) return inner_->Describe();
    return absl::StrCat(inner_->Describe(), ", tenants encrypted at rest: ",
                        absl::StrJoin(keys_.Tenants(), ", "));
  }

 private:
  static std::string SpecPlace(std::string_view name) { return Place("spec", name, 0, "", 0); }

  std::unique_ptr<StorageBackend> inner_;
  const TenantKeys keys_;
};

}  // namespace

TenantKey::~TenantKey() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

std::string TenantKey::Fingerprint() const {
  std::string in = "streamlearn tenant key";
  in.append(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
  const std::string hex = ToHex(Sha256Of(in));
  OPENSSL_cleanse(in.data(), in.size());
  return hex.substr(0, 16);
}

absl::StatusOr<TenantKeys> TenantKeys::LoadDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("encryption keys directory '", dir, "' does not exist"));
  }
  TenantKeys keys;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().filename().string();
    if (file.empty() || file[0] == '.') continue;
    files.push_back(e.path());
  }
  if (ec) {
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat("encryption keys directory '", dir, "': ", ec.message()));
  }
  for (const fs::path& path : files) {
    const std::string file = path.filename().string();
    if (!fs::is_regular_file(path, ec)) continue;  // follows symbolic links
    if (path.extension() != ".key") {
      return absl::InvalidArgumentError(absl::StrCat(
          "encryption keys directory '", dir, "' holds '", file,
          "': every file is <tenant>.key"));
    }
    const std::string tenant = path.stem().string();
    if (absl::Status s = CheckTenantName(tenant); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tenant key file '", path.string(), "': ", s.message()));
    }
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      spdlog::warn("tenant key file '{}' is accessible to group or others (mode {:o}); "
                   "chmod 600 it",
                   path.string(), st.st_mode & 0777);
    }
    ASSIGN_OR_RETURN(std::string bytes, ReadFile(path.string()));
    ASSIGN_OR_RETURN(auto key, ParseKeyFile(path.string(), std::move(bytes)));
    keys.Add(tenant, *key);
    OPENSSL_cleanse(key->data(), key->size());
  }
  return keys;
}

void TenantKeys::Add(std::string tenant, const std::array<uint8_t, TenantKey::kBytes>& bytes) {
  keys_[std::move(tenant)] = std::make_shared<const TenantKey>(bytes);
}

const TenantKey* TenantKeys::Find(std::string_view tenant) const {
  auto it = keys_.find(tenant);
  return it == keys_.end() ? nullptr : it->second.get();
}

std::shared_ptr<const TenantKey> TenantKeys::Share(std::string_view tenant) const {
  auto it = keys_.find(tenant);
  return it == keys_.end() ? nullptr : it->second;
}

std::vector<std::string> TenantKeys::Tenants() const {
  std::vector<std::string> out;
  for (const auto& [tenant, key] : keys_) out.push_back(tenant);
  return out;
}

bool LooksSealed(std::string_view bytes) {
  return !bytes.empty() && static_cast<uint8_t>(bytes[0]) == kSealedMagic;
}

absl::StatusOr<std::string> Seal(const TenantKey& key, std::string_view aad,
                                 std::string_view plaintext) {
  std::string out(kHeaderBytes + plaintext.size() + kTagBytes, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  o[0] = kSealedMagic;
  o[1] = kSealedVersion;
  unsigned char* nonce = o + 2;
  if (RAND_bytes(nonce, kNonceBytes) != 1) return OpenSslError("make a nonce");
  CipherCtx c;
  int len = 0;
  if (c.ctx == nullptr ||
      EVP_EncryptInit_ex(c.ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
      EVP_EncryptInit_ex(c.ctx, nullptr, nullptr, key.data(), nonce) != 1 ||
      EVP_EncryptUpdate(c.ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()),
                        static_cast<int>(aad.size())) != 1) {
    return OpenSslError("start sealing");
  }
  unsigned char* ct = o + kHeaderBytes;
  if (!plaintext.empty() &&
      EVP_EncryptUpdate(c.ctx, ct, &len, reinterpret_cast<const unsigned char*>(plaintext.data()),
                        static_cast<int>(plaintext.size())) != 1) {
    return OpenSslError("seal");
  }
  int tail = 0;
  if (EVP_EncryptFinal_ex(c.ctx, ct + plaintext.size(), &tail) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_GET_TAG, kTagBytes,
                          ct + plaintext.size()) != 1) {
    return OpenSslError("finish sealing");
  }
  return out;
}

absl::StatusOr<std::string> Open(const TenantKey& key, std::string_view aad,
                                 std::string_view sealed, std::string_view what) {
  const absl::string_view what_v(what.data(), what.size());
  if (sealed.size() < kHeaderBytes + kTagBytes || !LooksSealed(sealed)) {
    return absl::DataLossError(absl::StrCat(
        what_v, " is not encrypted, though its tenant's models are (", sealed.size(),
        " bytes): the store was altered"));
  }
  if (static_cast<uint8_t>(sealed[1]) != kSealedVersion) {
    return absl::DataLossError(absl::StrCat(what_v, " is sealed in an unknown format (version ",
                                            static_cast<uint8_t>(sealed[1]), ")"));
  }
  const auto* s = reinterpret_cast<const unsigned char*>(sealed.data());
  const size_t n = sealed.size() - kHeaderBytes - kTagBytes;
  std::string out(n, '\0');
  CipherCtx c;
  int len = 0;
  if (c.ctx == nullptr ||
      EVP_DecryptInit_ex(c.ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_IVLEN, kNonceBytes, nullptr) != 1 ||
      EVP_DecryptInit_ex(c.ctx, nullptr, nullptr, key.data(), s + 2) != 1 ||
      EVP_DecryptUpdate(c.ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()),
                        static_cast<int>(aad.size())) != 1) {
    return OpenSslError("start opening a sealed value");
  }
  if (n > 0 && EVP_DecryptUpdate(c.ctx, reinterpret_cast<unsigned char*>(out.data()), &len,
                                 s + kHeaderBytes, static_cast<int>(n)) != 1) {
    return OpenSslError("open a sealed value");
  }
  std::array<unsigned char, kTagBytes> tag;
  std::copy(s + kHeaderBytes + n, s + sealed.size(), tag.begin());
  int tail = 0;
  if (EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) != 1 ||
      EVP_DecryptFinal_ex(c.ctx, reinterpret_cast<unsigned char*>(out.data()) + n, &tail) != 1) {
    OPENSSL_cleanse(out.data(), out.size());
    return absl::DataLossError(absl::StrCat(
        what_v, " fails its authentication: it was altered, moved from another place, or "
        "sealed under another key than its tenant's"));
  }
  return out;
}

std::unique_ptr<StorageBackend> EncryptAtRest(std::unique_ptr<StorageBackend> inner,
                                              TenantKeys keys) {
  if (inner == nullptr) return inner;
  return std::make_unique<EncryptedStorage>(std::move(inner), std::move(keys));
}

}  // namespace streamlearn::storage
