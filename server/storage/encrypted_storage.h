// Encryption at rest, per tenant (seed 002 sec. 12; docs/SECURITY.md, "Encryption at rest").
//
// A tenant with a key of its own has every value of its models sealed with AES-256-GCM before
// it reaches the store: the spec, every audit line, every log entry, every snapshot and every
// manifest. EncryptAtRest wraps any StorageBackend (the embedded RocksDB store, the cluster's
// JetStream store), so the files on disk, the JetStream streams and a backup of either hold
// ciphertext for those models; what the server computes and answers is unchanged.
//
//   ASSIGN_OR_RETURN(TenantKeys keys, TenantKeys::LoadDir("/etc/streamlearn/tenant-keys"));
//   std::unique_ptr<StorageBackend> b = EncryptAtRest(std::move(rocks), std::move(keys));
//
// Keys: a directory with one file per tenant, `<tenant>.key`, holding 32 random bytes (or
// their 64 hex digits); `openssl rand -out acme.key 32` makes one. The tenant `default` is the
// unscoped namespace (core/common/name_rule.h). Files whose names start with '.' are skipped
// (a Kubernetes Secret volume's `..data`); symbolic links to regular files are followed.
//
// What is sealed and what is not: every value is sealed under a fresh 96-bit random nonce,
// with the value's place (model, shard, part, kind, sequence number or chain index) as the
// associated data, so a sealed value moved to another place, altered or truncated fails to
// open with DATA_LOSS. The keys (the model's name, the shard, the part, sequence numbers), the
// values' sizes and the times of writes are not hidden.
//
// A model is encrypted when its tenant has a key at its creation: the rule is checked at
// every start, and a model whose form does not match its tenant's key is refused with
// FAILED_PRECONDITION naming the model and the tenant (a sealed model whose tenant has no key
// here; a plaintext model of a tenant that has a key, i.e. a key added after the tenant's
// first model: docs/SECURITY.md says what to do). A plaintext spec can never look sealed: a
// sealed value starts with the byte 0xff, whose protobuf wire type (7) does not exist.
//
// Thread safety: TenantKeys is immutable once loaded; the wrapped backend and its shard stores
// are as thread-safe as the backend they wrap (they add no state but the keys).
#ifndef STREAMLEARN_SERVER_STORAGE_ENCRYPTED_STORAGE_H_
#define STREAMLEARN_SERVER_STORAGE_ENCRYPTED_STORAGE_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/storage/shard_store.h"

namespace streamlearn::storage {

// One tenant's 256-bit key; wiped when destroyed.
class TenantKey {
 public:
  static constexpr size_t kBytes = 32;
  explicit TenantKey(const std::array<uint8_t, kBytes>& bytes) : bytes_(bytes) {}
  ~TenantKey();
  TenantKey(const TenantKey&) = delete;
  TenantKey& operator=(const TenantKey&) = delete;

  const uint8_t* data() const { return bytes_.data(); }
  // The first 8 bytes of SHA-256("streamlearn tenant key" || key), in hex: names the key in
  // logs without revealing it.
  std::string Fingerprint() const;

 private:
  std::array<uint8_t, kBytes> bytes_;
};

class TenantKeys {
 public:
  TenantKeys() = default;

  // Every `<tenant>.key` file of `dir`. Errors name the file: NOT_FOUND (no such directory),
  // INVALID_ARGUMENT (a file name that is not a valid tenant name, a file that holds neither
  // 32 bytes nor 64 hex digits), errno's code from the file system. A key file readable by
  // group or others is accepted with a warning.
  static absl::StatusOr<TenantKeys> LoadDir(const std::string& dir);

  void Add(std::string tenant, const std::array<uint8_t, TenantKey::kBytes>& bytes);
  // nullptr when the tenant has no key.
  const TenantKey* Find(std::string_view tenant) const;
  std::shared_ptr<const TenantKey> Share(std::string_view tenant) const;
  bool empty() const { return keys_.empty(); }
  std::vector<std::string> Tenants() const;

 private:
  std::map<std::string, std::shared_ptr<const TenantKey>, std::less<>> keys_;
};

// Seals `plaintext` under `key`: 0xff, a version byte, a 12-byte nonce, the ciphertext and the
// 16-byte GCM tag (30 bytes more than the plaintext). `aad` is authenticated, not stored.
// INTERNAL when OpenSSL fails.
absl::StatusOr<std::string> Seal(const TenantKey& key, std::string_view aad,
                                 std::string_view plaintext);
// The plaintext of a sealed value; DATA_LOSS when it is not sealed, was altered, or was sealed
// for another place (`aad`) or under another key. `what` names the value in the error.
absl::StatusOr<std::string> Open(const TenantKey& key, std::string_view aad,
                                 std::string_view sealed, std::string_view what);
// Whether `bytes` has the form of a sealed value (its first byte).
bool LooksSealed(std::string_view bytes);

// `inner` with the models of the tenants in `keys` encrypted. With no keys it adds nothing to
// a plaintext model's reads and writes, and refuses a sealed model clearly (ListSpecs).
std::unique_ptr<StorageBackend> EncryptAtRest(std::unique_ptr<StorageBackend> inner,
                                              TenantKeys keys);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_ENCRYPTED_STORAGE_H_
