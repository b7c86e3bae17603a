#include "core/audit/merkle_tree.h"

#include <bit>

#include "absl/strings/str_format.h"

namespace streamlearn {
namespace {

constexpr uint64_t kBlock = uint64_t{1} << MerkleTreeCache::kCachedLevel;

// MTH of leaf hashes held in memory (RFC 6962 2.1), hashes.size() >= 1.
Digest MthOf(std::span<const Digest> hashes) {
  if (hashes.size() == 1) return hashes[0];
  const uint64_t k = SplitPoint(hashes.size());
  return NodeHash(MthOf(hashes.first(k)), MthOf(hashes.subspan(k)));
}

bool IsPowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// PATH(m, D) over leaf hashes held in memory, appended leaf to root.
void PathOf(std::span<const Digest> hashes, uint64_t m, std::vector<Digest>* out) {
  if (hashes.size() == 1) return;
  const uint64_t k = SplitPoint(hashes.size());
  if (m < k) {
    PathOf(hashes.first(k), m, out);
    out->push_back(MthOf(hashes.subspan(k)));
  } else {
    PathOf(hashes.subspan(k), m - k, out);
    out->push_back(MthOf(hashes.first(k)));
  }
}

}  // namespace

Digest LeafHash(std::string_view leaf) {
  Sha256 h;
  const uint8_t prefix = 0x00;
  h.Update(&prefix, 1);
  h.Update(leaf);
  return h.Finish();
}

Digest NodeHash(const Digest& left, const Digest& right) {
  Sha256 h;
  const uint8_t prefix = 0x01;
  h.Update(&prefix, 1);
  h.Update(left.data(), left.size());
  h.Update(right.data(), right.size());
  return h.Finish();
}

Digest EmptyTreeHash() { return Sha256Of(""); }

uint64_t SplitPoint(uint64_t n) { return std::bit_floor(n - 1); }

bool VerifyInclusion(const Digest& leaf_hash, uint64_t index, uint64_t size,
                     std::span<const Digest> proof, const Digest& root) {
  if (index >= size) return false;
  uint64_t fn = index;
  uint64_t sn = size - 1;
  Digest r = leaf_hash;
  for (const Digest& p : proof) {
    if (sn == 0) return false;
    if ((fn & 1) != 0 || fn == sn) {
      r = NodeHash(p, r);
      if ((fn & 1) == 0) {
        while ((fn & 1) == 0 && fn != 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      r = NodeHash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return sn == 0 && r == root;
}

bool VerifyConsistency(uint64_t size1, uint64_t size2, const Digest& root1, const Digest& root2,
                       std::span<const Digest> proof) {
  if (size1 > size2) return false;
  if (size1 == size2) return proof.empty() && root1 == root2;
  if (size1 == 0) return proof.empty() && root1 == EmptyTreeHash();
  if (proof.empty()) return false;
  // RFC 9162 2.1.4.2: a first tree of a power-of-two size is a subtree of the second, and its
  // root is the proof's missing first element.
  std::vector<Digest> path;
  path.reserve(proof.size() + 1);
  if (IsPowerOfTwo(size1)) path.push_back(root1);
  path.insert(path.end(), proof.begin(), proof.end());
  uint64_t fn = size1 - 1;
  uint64_t sn = size2 - 1;
  while ((fn & 1) != 0) {
    fn >>= 1;
    sn >>= 1;
  }
  Digest fr = path[0];
  Digest sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const Digest& c = path[i];
    if (sn == 0) return false;
    if ((fn & 1) != 0 || fn == sn) {
      fr = NodeHash(c, fr);
      sr = NodeHash(c, sr);
      if ((fn & 1) == 0) {
        while ((fn & 1) == 0 && fn != 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      sr = NodeHash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  return fr == root1 && sr == root2 && sn == 0;
}

absl::StatusOr<Digest> MerkleTreeCache::Root(uint64_t size) {
  if (size == 0) return EmptyTreeHash();
  return Range(0, size);
}

absl::StatusOr<std::vector<Digest>> MerkleTreeCache::InclusionProof(uint64_t index,
                                                                    uint64_t size) {
  if (index >= size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "index %d is not in a tree of %d record(s) (the tree's indices are 0..size-1)", index,
        size));
  }
  std::vector<Digest> out;
  absl::Status s = Path(index, 0, size, &out);
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<Digest>> MerkleTreeCache::ConsistencyProof(uint64_t size1,
                                                                      uint64_t size2) {
  if (size1 == 0 || size1 > size2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a consistency proof needs 0 < first size <= second size; got %d and %d", size1,
        size2));
  }
  std::vector<Digest> out;
  if (size1 == size2) return out;
  absl::Status s = SubProof(size1, 0, size2, /*whole=*/true, &out);
  if (!s.ok()) return s;
  return out;
}

size_t MerkleTreeCache::Forget(uint64_t below, int keep_level) {
  MutexLock lock(&mu_);
  size_t dropped = 0;
  // The map orders by level, then by position: the nodes of each level under keep_level lie in
  // one run, and those wholly below `below` at its start.
  for (int level = kCachedLevel; level < keep_level && level < 64; ++level) {
    auto it = nodes_.lower_bound({level, 0});
    while (it != nodes_.end() && it->first.first == level &&
           (it->first.second + 1) <= (below >> level)) {
      it = nodes_.erase(it);
      ++dropped;
    }
  }
  return dropped;
}

size_t MerkleTreeCache::cached() const {
  MutexLock lock(&mu_);
  return nodes_.size();
}

absl::StatusOr<Digest> MerkleTreeCache::Range(uint64_t begin, uint64_t end) {
  const uint64_t n = end - begin;
  if (n < kBlock) return FromLeaves(begin, end);
  if (IsPowerOfTwo(n) && begin % n == 0) {
    const std::pair<int, uint64_t> key(std::countr_zero(n), begin / n);
    {
      MutexLock lock(&mu_);
      auto it = nodes_.find(key);
      if (it != nodes_.end()) return it->second;
    }
    absl::StatusOr<Digest> d;
    if (n == kBlock) {
      d = FromLeaves(begin, end);
    } else {
      absl::StatusOr<Digest> left = Range(begin, begin + n / 2);
      if (!left.ok()) return left.status();
      absl::StatusOr<Digest> right = Range(begin + n / 2, end);
      if (!right.ok()) return right.status();
      d = NodeHash(*left, *right);
    }
    if (!d.ok()) return d.status();
    MutexLock lock(&mu_);
    nodes_.emplace(key, *d);
    return *d;
  }
  const uint64_t k = SplitPoint(n);
  absl::StatusOr<Digest> left = Range(begin, begin + k);
  if (!left.ok()) return left.status();
  absl::StatusOr<Digest> right = Range(begin + k, end);
  if (!right.ok()) return right.status();
  return NodeHash(*left, *right);
}

absl::StatusOr<Digest> MerkleTreeCache::FromLeaves(uint64_t begin, uint64_t end) {
  absl::StatusOr<std::vector<Digest>> hashes = LeafHashes(begin, end);
  if (!hashes.ok()) return hashes.status();
  return MthOf(*hashes);
}

absl::StatusOr<std::vector<Digest>> MerkleTreeCache::LeafHashes(uint64_t begin, uint64_t end) {
  std::vector<Digest> hashes;
  hashes.reserve(end - begin);
  uint64_t expect = begin;
  bool in_order = true;
  absl::Status s = reader_(begin, end, [&](uint64_t index, std::string_view line) {
    if (index != expect) in_order = false;
    ++expect;
    hashes.push_back(LeafHash(line));
  });
  if (!s.ok()) return s;
  if (!in_order || expect != end) {
    return absl::DataLossError(absl::StrFormat(
        "the audit log has a gap: records %d..%d were not all found in order", begin, end - 1));
  }
  return hashes;
}

absl::Status MerkleTreeCache::Path(uint64_t index, uint64_t begin, uint64_t end,
                                   std::vector<Digest>* out) {
  if (end - begin == 1) return absl::OkStatus();
  if (end - begin <= kBlock) {  // one read for the leaf's neighbourhood
    absl::StatusOr<std::vector<Digest>> hashes = LeafHashes(begin, end);
    if (!hashes.ok()) return hashes.status();
    PathOf(*hashes, index - begin, out);
    return absl::OkStatus();
  }
  const uint64_t k = SplitPoint(end - begin);
  absl::StatusOr<Digest> sibling;
  if (index < begin + k) {
    absl::Status s = Path(index, begin, begin + k, out);
    if (!s.ok()) return s;
    sibling = Range(begin + k, end);
  } else {
    absl::Status s = Path(index, begin + k, end, out);
    if (!s.ok()) return s;
    sibling = Range(begin, begin + k);
  }
  if (!sibling.ok()) return sibling.status();
  out->push_back(*sibling);
  return absl::OkStatus();
}

absl::Status MerkleTreeCache::SubProof(uint64_t m, uint64_t begin, uint64_t end, bool whole,
                                       std::vector<Digest>* out) {
  const uint64_t n = end - begin;
  if (m == n) {
    if (whole) return absl::OkStatus();
    absl::StatusOr<Digest> d = Range(begin, end);
    if (!d.ok()) return d.status();
    out->push_back(*d);
    return absl::OkStatus();
  }
  const uint64_t k = SplitPoint(n);
  absl::StatusOr<Digest> sibling;
  if (m <= k) {
    absl::Status s = SubProof(m, begin, begin + k, whole, out);
    if (!s.ok()) return s;
    sibling = Range(begin + k, end);
  } else {
    absl::Status s = SubProof(m - k, begin + k, end, /*whole=*/false, out);
    if (!s.ok()) return s;
    sibling = Range(begin, begin + k);
  }
  if (!sibling.ok()) return sibling.status();
  out->push_back(*sibling);
  return absl::OkStatus();
}

}  // namespace streamlearn
