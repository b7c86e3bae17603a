// Signed tree heads of an audit chain's Merkle tree (core/audit/merkle_tree.h), in the
// signed-note form of transparency-log checkpoints (docs/AUDIT.md, "Signed tree heads"):
//
//   streamlearn.audit/<model>/<shard>\n          origin: which chain
//   <size>\n                                     leaves covered, decimal
//   <base64 root>\n                              MTH of those leaves, standard base64
//   \n
//   — <key name> <base64(key id || signature)>\n
//
// The signature is Ed25519 over the three body lines, newlines included. The key id is the
// first 4 bytes of SHA-256(key name || "\n" || 0x01 || the 32 raw public-key bytes), as in the
// signed-note format, so a note verifier that knows the key by name and bytes checks it too.
// A note signed by another key, one whose body was altered, or one with extra lines is
// refused.
//
//   absl::StatusOr<std::string> note = SignTreeHead(key, {origin, size, root});
//   absl::StatusOr<TreeHead> th = OpenTreeHead(*note, key.PublicKey());
//
// Thread safety: pure functions.
#ifndef STREAMLEARN_CORE_AUDIT_TREE_HEAD_H_
#define STREAMLEARN_CORE_AUDIT_TREE_HEAD_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/audit/ed25519_key.h"
#include "core/common/digest.h"

namespace streamlearn {

inline constexpr std::string_view kTreeHeadKeyName = "streamlearn-audit";

struct TreeHead {
  std::string origin;
  uint64_t size = 0;
  Digest root{};
};

// "streamlearn.audit/<model>/<shard>".
std::string TreeHeadOrigin(std::string_view model, uint32_t shard);

// The three body lines (the signed text).
std::string TreeHeadBody(const TreeHead& head);

absl::StatusOr<std::string> SignTreeHead(const Ed25519PrivateKey& key, const TreeHead& head);

// Parses a signed note and checks its signature under `key`. INVALID_ARGUMENT naming what is
// malformed; PERMISSION_DENIED when no signature line is by this key or the signature fails.
absl::StatusOr<TreeHead> OpenTreeHead(std::string_view note, const Ed25519PublicKey& key);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_TREE_HEAD_H_
