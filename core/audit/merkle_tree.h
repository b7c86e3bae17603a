// The RFC 6962 Merkle tree over an audit chain, beside its hash chain (docs/AUDIT.md, "Merkle
// tree, signed tree heads and proofs").
//
// The leaves are the chain's canonical envelope lines, in index order (the bytes Auditor.Read
// returns). Hashes follow RFC 6962 section 2.1 (RFC 9162 section 2.1 is the same tree):
//   leaf hash        SHA-256(0x00 || line)
//   interior node    SHA-256(0x01 || left || right)
//   MTH({})          SHA-256("")
//   MTH(D[0:n])      leaf hash if n = 1, else NODE(MTH(D[0:k]), MTH(D[k:n])) with k the
//                    largest power of two < n.
// Proofs are RFC 6962's PATH(m, D[n]) (inclusion) and PROOF(m, D[n]) (consistency); the
// verifiers are RFC 9162's algorithms 2.1.3.2 and 2.1.4.2, which use only the proof, the sizes
// and the roots.
//
// MerkleTreeCache computes roots and proofs over a log it reads through a callback, keeping
// the hash of every aligned perfect subtree of >= 256 leaves it has computed (32 bytes per 256
// leaves), so the first proof over a long chain reads it once and a later inclusion proof
// reads at most three runs of <= 256 leaves (the leaf's block, and the tree's right edge).
//
//   MerkleTreeCache tree(reader);               // reader(begin, end, fn) visits lines
//   absl::StatusOr<Digest> root = tree.Root(size);
//   absl::StatusOr<std::vector<Digest>> path = tree.InclusionProof(index, size);
//   bool ok = VerifyInclusion(LeafHash(line), index, size, *path, *root);
//
// Thread safety: MerkleTreeCache is thread-safe (one mutex over its cache; reads of the log
// happen outside it). The free functions are pure.
#ifndef STREAMLEARN_CORE_AUDIT_MERKLE_TREE_H_
#define STREAMLEARN_CORE_AUDIT_MERKLE_TREE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/common/digest.h"
#include "core/common/mutex.h"

namespace streamlearn {

Digest LeafHash(std::string_view leaf);
Digest NodeHash(const Digest& left, const Digest& right);
Digest EmptyTreeHash();  // SHA-256 of nothing

// The largest power of two strictly below n. REQUIRES: n >= 2.
uint64_t SplitPoint(uint64_t n);

// True iff `proof` shows that the leaf with hash `leaf_hash` is leaf `index` of the tree of
// `size` leaves whose root is `root` (RFC 9162 2.1.3.2). False when index >= size.
bool VerifyInclusion(const Digest& leaf_hash, uint64_t index, uint64_t size,
                     std::span<const Digest> proof, const Digest& root);

// True iff `proof` shows that the tree of `size1` leaves with root `root1` is a prefix of the
// tree of `size2` leaves with root `root2` (RFC 9162 2.1.4.2). Sizes with size1 > size2 are
// false; size1 == size2 needs an empty proof and equal roots; size1 == 0 an empty proof.
bool VerifyConsistency(uint64_t size1, uint64_t size2, const Digest& root1, const Digest& root2,
                       std::span<const Digest> proof);

// Reads the leaves [begin, end) of the log in order: calls visit(index, line) for each and
// returns OK only if it visited every one of them.
using LeafReader = std::function<absl::Status(
    uint64_t begin, uint64_t end, const std::function<void(uint64_t, std::string_view)>& visit)>;

class MerkleTreeCache {
 public:
  // Subtrees of 2^kCachedLevel leaves and more are kept.
  static constexpr int kCachedLevel = 8;

  explicit MerkleTreeCache(LeafReader reader) : reader_(std::move(reader)) {}

  // MTH of the first `size` leaves. The caller names only sizes whose leaves are written and
  // never change (the log is append-only).
  absl::StatusOr<Digest> Root(uint64_t size);
  // PATH(index, D[size]), leaf to root. INVALID_ARGUMENT when index >= size.
  absl::StatusOr<std::vector<Digest>> InclusionProof(uint64_t index, uint64_t size);
  // PROOF(size1, D[size2]). INVALID_ARGUMENT unless 0 < size1 <= size2.
  absl::StatusOr<std::vector<Digest>> ConsistencyProof(uint64_t size1, uint64_t size2);

  // Bounds the cache once the leaves below `below` have moved to slower storage (an archive
  // segment): drops the kept hashes of subtrees under level `keep_level` (2^keep_level leaves)
  // that lie wholly below `below`, and keeps the rest. A later root or proof that needs a
  // dropped hash recomputes it from the log (and keeps it until the next call). With
  // keep_level = log2 of the segment size, the cache holds about two hashes per segment for the
  // archived part of the chain instead of two per 2^kCachedLevel records. Returns how many
  // hashes it dropped.
  size_t Forget(uint64_t below, int keep_level) ABSL_LOCKS_EXCLUDED(mu_);

  // How many subtree hashes are kept (for tests and metrics).
  size_t cached() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // MTH(D[begin:end]), end > begin.
  absl::StatusOr<Digest> Range(uint64_t begin, uint64_t end);
  // A run of < 2^kCachedLevel leaves (or one aligned block of exactly that many), hashed
  // from the log.
  absl::StatusOr<Digest> FromLeaves(uint64_t begin, uint64_t end);
  absl::StatusOr<std::vector<Digest>> LeafHashes(uint64_t begin, uint64_t end);
  absl::Status Path(uint64_t index, uint64_t begin, uint64_t end, std::vector<Digest>* out);
  absl::Status SubProof(uint64_t m, uint64_t begin, uint64_t end, bool whole,
                        std::vector<Digest>* out);

  LeafReader reader_;
  mutable Mutex mu_;
  // (level, begin >> level) -> hash of the aligned perfect subtree there.
  std::map<std::pair<int, uint64_t>, Digest> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_MERKLE_TREE_H_
