#include "core/audit/ed25519_key.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core/common/digest.h"

namespace streamlearn {
namespace {

std::shared_ptr<evp_pkey_st> Own(EVP_PKEY* k) {
  return std::shared_ptr<evp_pkey_st>(k, [](EVP_PKEY* p) { EVP_PKEY_free(p); });
}

absl::StatusOr<std::string> RawPublic(EVP_PKEY* k) {
  std::string raw(32, '\0');
  size_t len = raw.size();
  if (EVP_PKEY_get_raw_public_key(k, reinterpret_cast<unsigned char*>(raw.data()), &len) != 1 ||
      len != 32) {
    return absl::InternalError("ed25519: cannot read the raw public key");
  }
  return raw;
}

// Reads all of a memory BIO into a string.
std::string Drain(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n > 0 ? static_cast<size_t>(n) : 0);
}

}  // namespace

Ed25519PublicKey::Ed25519PublicKey(std::shared_ptr<evp_pkey_st> key) : key_(std::move(key)) {
  absl::StatusOr<std::string> raw = RawPublic(key_.get());
  if (raw.ok()) {
    raw_ = *raw;
    fingerprint_ = ToHex(Sha256Of(*raw));
  }
}

absl::StatusOr<Ed25519PublicKey> Ed25519PublicKey::FromPem(std::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return absl::InternalError("ed25519: BIO_new_mem_buf failed");
  EVP_PKEY* k = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (k == nullptr) return absl::InvalidArgumentError("ed25519: not a PEM public key");
  if (EVP_PKEY_id(k) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(k);
    return absl::InvalidArgumentError("ed25519: PEM public key is not Ed25519");
  }
  return Ed25519PublicKey(Own(k));
}

absl::StatusOr<std::string> Ed25519PublicKey::ToPem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return absl::InternalError("ed25519: BIO_new failed");
  const bool ok = PEM_write_bio_PUBKEY(bio, key_.get()) == 1;
  std::string out = ok ? Drain(bio) : std::string();
  BIO_free(bio);
  if (!ok) return absl::InternalError("ed25519: PEM_write_bio_PUBKEY failed");
  return out;
}

bool Ed25519PublicKey::Verify(std::string_view message, std::string_view signature) const {
  if (signature.size() != 64 || key_ == nullptr) return false;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return false;
  bool ok = EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key_.get()) == 1 &&
            EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                             signature.size(),
                             reinterpret_cast<const unsigned char*>(message.data()),
                             message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

absl::StatusOr<Ed25519PrivateKey> Ed25519PrivateKey::Wrap(EVP_PKEY* owned) {
  std::shared_ptr<evp_pkey_st> key = Own(owned);
  absl::StatusOr<std::string> raw = RawPublic(owned);
  if (!raw.ok()) return raw.status();
  EVP_PKEY* pub = EVP_PKEY_new_raw_public_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw->data()), raw->size());
  if (pub == nullptr) return absl::InternalError("ed25519: cannot build the public key");
  return Ed25519PrivateKey(std::move(key), Ed25519PublicKey(Own(pub)));
}

absl::StatusOr<Ed25519PrivateKey> Ed25519PrivateKey::Generate() {
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr);
  if (ctx == nullptr) return absl::InternalError("ed25519: EVP_PKEY_CTX_new_id failed");
  EVP_PKEY* k = nullptr;
  const bool ok = EVP_PKEY_keygen_init(ctx) == 1 && EVP_PKEY_keygen(ctx, &k) == 1;
  EVP_PKEY_CTX_free(ctx);
  if (!ok) return absl::InternalError("ed25519: key generation failed");
  return Wrap(k);
}

absl::StatusOr<Ed25519PrivateKey> Ed25519PrivateKey::FromPem(std::string_view pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return absl::InternalError("ed25519: BIO_new_mem_buf failed");
  EVP_PKEY* k = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (k == nullptr) return absl::InvalidArgumentError("ed25519: not a PEM private key");
  if (EVP_PKEY_id(k) != EVP_PKEY_ED25519) {
    EVP_PKEY_free(k);
    return absl::InvalidArgumentError("ed25519: PEM private key is not Ed25519");
  }
  return Wrap(k);
}

absl::StatusOr<std::string> Ed25519PrivateKey::ToPem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return absl::InternalError("ed25519: BIO_new failed");
  const bool ok =
      PEM_write_bio_PrivateKey(bio, key_.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  std::string out = ok ? Drain(bio) : std::string();
  BIO_free(bio);
  if (!ok) return absl::InternalError("ed25519: PEM_write_bio_PrivateKey failed");
  return out;
}

absl::StatusOr<std::string> Ed25519PrivateKey::Sign(std::string_view message) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return absl::InternalError("ed25519: EVP_MD_CTX_new failed");
  std::string sig(64, '\0');
  size_t len = sig.size();
  const bool ok = EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key_.get()) == 1 &&
                  EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len,
                                 reinterpret_cast<const unsigned char*>(message.data()),
                                 message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok || len != 64) return absl::InternalError("ed25519: signing failed");
  return sig;
}

}  // namespace streamlearn
