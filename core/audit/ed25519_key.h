// Ed25519 keys (OpenSSL EVP, EVP_PKEY_ED25519) for signing audit checkpoints.
//
// Keys move in and out as PEM (PKCS#8 "PRIVATE KEY" / SubjectPublicKeyInfo "PUBLIC KEY").
// A key's fingerprint is the lowercase hex SHA-256 of its 32 raw public-key bytes.
//
// Example:
//   absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::Generate();
//   absl::StatusOr<std::string> sig = key->Sign("message");     // 64 raw bytes
//   bool ok = key->PublicKey().Verify("message", *sig);
//
// Thread safety: a key is immutable after construction; copies share the EVP_PKEY. Sign and
// Verify create their own EVP_MD_CTX, so concurrent use is safe.
#ifndef STREAMLEARN_CORE_AUDIT_ED25519_KEY_H_
#define STREAMLEARN_CORE_AUDIT_ED25519_KEY_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace streamlearn {

class Ed25519PublicKey {
 public:
  static absl::StatusOr<Ed25519PublicKey> FromPem(std::string_view pem);

  absl::StatusOr<std::string> ToPem() const;
  // True iff `signature` (64 raw bytes) is a valid signature of `message` under this key.
  bool Verify(std::string_view message, std::string_view signature) const;
  const std::string& fingerprint() const { return fingerprint_; }
  const std::string& raw() const { return raw_; }  // the 32 raw public-key bytes

 private:
  friend class Ed25519PrivateKey;
  explicit Ed25519PublicKey(std::shared_ptr<evp_pkey_st> key);

  std::shared_ptr<evp_pkey_st> key_;
  std::string raw_;
  std::string fingerprint_;
};

class Ed25519PrivateKey {
 public:
  static absl::StatusOr<Ed25519PrivateKey> Generate();
  static absl::StatusOr<Ed25519PrivateKey> FromPem(std::string_view pem);

  absl::StatusOr<std::string> ToPem() const;
  absl::StatusOr<std::string> Sign(std::string_view message) const;  // 64 raw bytes
  const Ed25519PublicKey& PublicKey() const { return public_; }

 private:
  static absl::StatusOr<Ed25519PrivateKey> Wrap(evp_pkey_st* owned);
  Ed25519PrivateKey(std::shared_ptr<evp_pkey_st> key, Ed25519PublicKey pub)
      : key_(std::move(key)), public_(std::move(pub)) {}

  std::shared_ptr<evp_pkey_st> key_;
  Ed25519PublicKey public_;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_ED25519_KEY_H_
