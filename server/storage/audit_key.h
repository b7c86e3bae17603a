// The Ed25519 key that signs a data directory's audit checkpoints, and its public half for
// verifiers (docs/AUDIT.md).
//
// Thread safety: plain functions.
#ifndef STREAMLEARN_SERVER_STORAGE_AUDIT_KEY_H_
#define STREAMLEARN_SERVER_STORAGE_AUDIT_KEY_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/audit/ed25519_key.h"

namespace streamlearn::storage {

// The audit key: read from `path` (PEM), or generated and written there (0600) with the
// public key beside it (AuditPublicKeyPath, 0644) when the file does not exist. A public key
// file that is not this key's is FAILED_PRECONDITION; an unreadable key DATA_LOSS.
absl::StatusOr<Ed25519PrivateKey> LoadOrCreateAuditKey(const std::string& path);

// <key_path without .key>.pub
std::string AuditPublicKeyPath(const std::string& key_path);

}  // namespace streamlearn::storage

#endif  // STREAMLEARN_SERVER_STORAGE_AUDIT_KEY_H_
