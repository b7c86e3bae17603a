// Fuzz target tree_head: OpenTreeHead (core/audit/tree_head.h), the parser of the signed tree
// heads an auditor is handed (docs/AUDIT.md, "Merkle tree, signed tree heads and proofs"),
// then the proof verifiers on the same bytes read as a proof.
//
// Invariants: a note is refused with INVALID_ARGUMENT "malformed signed tree head..." or
// PERMISSION_DENIED, or it opens; one that opens re-encodes to the same body and is signed by
// the fixture's key (so the signature line it carries verifies, and re-signing its head gives
// a note that opens to the same head). The verifiers never accept a proof for an index
// outside the tree, nor one whose sizes are reversed.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "core/audit/merkle_tree.h"
#include "core/audit/tree_head.h"
#include "fuzz/audit_fixture.h"
#include "fuzz/fuzz_check.h"

namespace streamlearn::fuzz {
namespace {

void Run(std::string_view text) {
  const Ed25519PrivateKey& key = AuditKey();
  absl::StatusOr<TreeHead> head = OpenTreeHead(text, key.PublicKey());
  if (!head.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(head.status()) || absl::IsPermissionDenied(head.status()),
               head.status().ToString());
    if (absl::IsInvalidArgument(head.status())) {
      FUZZ_CHECK(absl::StartsWith(head.status().message(), "malformed signed tree head"),
                 head.status().ToString());
    }
  } else {
    FUZZ_CHECK(absl::StartsWith(absl::string_view(text.data(), text.size()), TreeHeadBody(*head)),
               std::string(text));
    absl::StatusOr<std::string> again = SignTreeHead(key, *head);
    FUZZ_CHECK(again.ok(), again.status().ToString());
    absl::StatusOr<TreeHead> reopened = OpenTreeHead(*again, key.PublicKey());
    FUZZ_CHECK(reopened.ok() && reopened->origin == head->origin &&
                   reopened->size == head->size && reopened->root == head->root,
               *again);
  }

  // The bytes as a proof: two sizes, an index and hashes.
  if (text.size() < 24) return;
  uint64_t a = 0, b = 0, index = 0;
  std::memcpy(&a, text.data(), 8);
  std::memcpy(&b, text.data() + 8, 8);
  std::memcpy(&index, text.data() + 16, 8);
  a %= 1u << 20;
  b %= 1u << 20;
  std::vector<Digest> proof;
  for (size_t at = 24; at + 32 <= text.size() && proof.size() < 64; at += 32) {
    Digest d;
    std::memcpy(d.data(), text.data() + at, 32);
    proof.push_back(d);
  }
  const Digest root = proof.empty() ? EmptyTreeHash() : proof.back();
  if (index >= b) FUZZ_CHECK(!VerifyInclusion(root, index, b, proof, root), "index outside");
  if (a > b) FUZZ_CHECK(!VerifyConsistency(a, b, root, root, proof), "reversed sizes");
  VerifyInclusion(root, index, b, proof, root);
  VerifyConsistency(a, b, root, root, proof);
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
