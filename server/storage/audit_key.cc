#include "server/storage/audit_key.h"

#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/storage/file_io.h"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {

namespace fs = std::filesystem;

std::string AuditPublicKeyPath(const std::string& key_path) {
  std::string pub = key_path;
  if (pub.size() > 4 && pub.ends_with(".key")) pub.resize(pub.size() - 4);
  return pub + ".pub";
}

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

}  // namespace streamlearn::storage
