// The audit chain the audit_line target verifies and its seeds are written with
// (fuzz/make_seeds.cc): a fixed Ed25519 key, made for fuzzing only and used nowhere else, and
// a checkpoint every 4 records, so that short inputs reach the signature rule.
//
//   AuditLogWriter writer(fuzz::AuditKey(), fuzz::kCheckpointEvery);
//
// Thread safety: AuditKey() is safe to call from any thread (a function-local static).
#ifndef STREAMLEARN_FUZZ_AUDIT_FIXTURE_H_
#define STREAMLEARN_FUZZ_AUDIT_FIXTURE_H_

#include <cstdint>
#include <cstdlib>

#include "core/audit/ed25519_key.h"
#include "core/audit/merkle_chain.h"

namespace streamlearn::fuzz {

inline constexpr uint64_t kCheckpointEvery = 4;

// The chain's (model, shard), named by its genesis.
inline ChainId AuditChain() { return ChainId{.model = "m", .shard = 0}; }

inline const Ed25519PrivateKey& AuditKey() {
  static const Ed25519PrivateKey* const key = [] {
    absl::StatusOr<Ed25519PrivateKey> k = Ed25519PrivateKey::FromPem(
        "-----BEGIN PRIVATE KEY-----\n"
        "MC4CAQAwBQYDK2VwBCIEIGeJQGLtcUdeHRuE5OjMLZ0n3s97J/jPT8C5PBE3KBt8\n"
        "-----END PRIVATE KEY-----\n");
    if (!k.ok()) std::abort();
    return new Ed25519PrivateKey(*std::move(k));
  }();
  return *key;
}

}  // namespace streamlearn::fuzz

#endif  // STREAMLEARN_FUZZ_AUDIT_FIXTURE_H_
