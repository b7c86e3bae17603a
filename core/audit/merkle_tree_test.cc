// The Merkle tree, its proofs and signed tree heads against a second implementation written
// here from RFC 6962 section 2.1's definitions (MTH, PATH, PROOF/SUBPROOF) as plain recursion
// over a list of leaves, with no cache and no shared code beyond SHA-256.
#include "core/audit/merkle_tree.h"

#include <openssl/sha.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/audit/tree_head.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

// ---- The reference: RFC 6962 2.1, literally, over D[begin:end) of a list of leaves. ----
Digest RefSha(const std::string& bytes) {
  Digest d;
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d.data());
  return d;
}
std::string Bytes(const Digest& d) { return std::string(d.begin(), d.end()); }

using Leaves = std::vector<std::string>;

// D[begin:end), the list the definitions recurse on (a view: no copies of the leaves).
struct D {
  const Leaves* leaves;
  size_t begin, end;
  size_t size() const { return end - begin; }
  D Sub(size_t from, size_t to) const { return {leaves, begin + from, begin + to}; }
  const std::string& operator[](size_t i) const { return (*leaves)[begin + i]; }
};
D All(const Leaves& l, size_t n) { return {&l, 0, n}; }

size_t RefK(size_t n) {  // the largest power of two smaller than n
  size_t k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}
Digest RefMth(D d) {
  if (d.size() == 0) return RefSha("");
  if (d.size() == 1) return RefSha(std::string(1, '\0') + d[0]);
  const size_t k = RefK(d.size());
  return RefSha("\x01" + Bytes(RefMth(d.Sub(0, k))) + Bytes(RefMth(d.Sub(k, d.size()))));
}
std::vector<Digest> RefPath(size_t m, D d) {
  if (d.size() == 1) return {};
  const size_t k = RefK(d.size());
  std::vector<Digest> out;
  if (m < k) {
    out = RefPath(m, d.Sub(0, k));
    out.push_back(RefMth(d.Sub(k, d.size())));
  } else {
    out = RefPath(m - k, d.Sub(k, d.size()));
    out.push_back(RefMth(d.Sub(0, k)));
  }
  return out;
}
std::vector<Digest> RefSubProof(size_t m, D d, bool b) {
  if (m == d.size()) {
    if (b) return {};
    return {RefMth(d)};
  }
  const size_t k = RefK(d.size());
  std::vector<Digest> out;
  if (m <= k) {
    out = RefSubProof(m, d.Sub(0, k), b);
    out.push_back(RefMth(d.Sub(k, d.size())));
  } else {
    out = RefSubProof(m - k, d.Sub(k, d.size()), false);
    out.push_back(RefMth(d.Sub(0, k)));
  }
  return out;
}

// ---- The log the cache reads, and a count of its reads. ----
struct Log {
  Leaves lines;
  size_t reads = 0;
  LeafReader Reader() {
    return [this](uint64_t begin, uint64_t end,
                  const std::function<void(uint64_t, std::string_view)>& visit) {
      ++reads;
      for (uint64_t i = begin; i < end && i < lines.size(); ++i) visit(i, lines[i]);
      return absl::OkStatus();
    };
  }
};

Leaves MakeLines(size_t n) {
  Leaves d;
  for (size_t i = 0; i < n; ++i) d.push_back(absl::StrCat("{\"index\":", i, ",\"r\":", i * 7919 % 13, "}"));
  return d;
}

TEST(MerkleTree, HashesFollowRfc6962) {
  EXPECT_EQ(LeafHash("abc"), RefSha(std::string("\0abc", 4)));
  Digest a = RefSha("a"), b = RefSha("b");
  EXPECT_EQ(NodeHash(a, b), RefSha("\x01" + Bytes(a) + Bytes(b)));
  // RFC 6962's empty tree: SHA-256 of nothing, e3b0c442...
  EXPECT_EQ(ToHex(EmptyTreeHash()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(SplitPoint(2), 1u);
  EXPECT_EQ(SplitPoint(3), 2u);
  EXPECT_EQ(SplitPoint(4), 2u);
  EXPECT_EQ(SplitPoint(5), 4u);
  EXPECT_EQ(SplitPoint(uint64_t{1} << 40), uint64_t{1} << 39);
}

// Every size 1..70, every index and every pair of sizes: the roots and the proofs equal the
// reference's, and the verifiers accept them.
TEST(MerkleTree, RootsAndProofsEqualTheReferenceAndVerify) {
  Log log;
  log.lines = MakeLines(70);
  MerkleTreeCache tree(log.Reader());
  for (size_t n = 1; n <= log.lines.size(); ++n) {
    const D d = All(log.lines, n);
    const Digest root = RefMth(d);
    ASSERT_EQ(*tree.Root(n), root) << "size " << n;
    for (size_t m = 0; m < n; ++m) {
      absl::StatusOr<std::vector<Digest>> path = tree.InclusionProof(m, n);
      ASSERT_TRUE(path.ok()) << path.status();
      ASSERT_EQ(*path, RefPath(m, d)) << "index " << m << " size " << n;
      EXPECT_TRUE(VerifyInclusion(LeafHash(d[m]), m, n, *path, root)) << m << " of " << n;
    }
    for (size_t m = 1; m <= n; ++m) {
      absl::StatusOr<std::vector<Digest>> proof = tree.ConsistencyProof(m, n);
      ASSERT_TRUE(proof.ok()) << proof.status();
      const std::vector<Digest> want =
          m == n ? std::vector<Digest>{} : RefSubProof(m, d, true);
      ASSERT_EQ(*proof, want) << m << " -> " << n;
      EXPECT_TRUE(VerifyConsistency(m, n, RefMth(d.Sub(0, m)), root, *proof))
          << m << " -> " << n;
    }
  }
  EXPECT_TRUE(VerifyConsistency(0, 5, EmptyTreeHash(), *tree.Root(5), {}));
}

// Anything altered fails: each proof element, the leaf, the index, the size, the root; and a
// proof cut short or lengthened.
TEST(MerkleTree, AlteredProofsFail) {
  Log log;
  log.lines = MakeLines(41);
  MerkleTreeCache tree(log.Reader());
  for (size_t n : {2u, 7u, 8u, 9u, 16u, 33u, 41u}) {
    const Digest root = *tree.Root(n);
    for (size_t m = 0; m < n; ++m) {
      std::vector<Digest> path = *tree.InclusionProof(m, n);
      const Digest leaf = LeafHash(log.lines[m]);
      for (size_t i = 0; i < path.size(); ++i) {
        std::vector<Digest> bad = path;
        bad[i][i % 32] ^= 0x01;
        EXPECT_FALSE(VerifyInclusion(leaf, m, n, bad, root)) << m << " " << n << " " << i;
      }
      EXPECT_FALSE(VerifyInclusion(LeafHash(log.lines[m] + " "), m, n, path, root));
      if (n > 1) {
        EXPECT_FALSE(VerifyInclusion(leaf, (m + 1) % n, n, path, root)) << m << " " << n;
      }
      // The path of size n against the tree of size n + 1 (a size alone is not checked: a
      // signed tree head binds a size to its root, and the root is what fails).
      if (n < log.lines.size()) {
        EXPECT_FALSE(VerifyInclusion(leaf, m, n + 1, path, *tree.Root(n + 1)));
      }
      EXPECT_FALSE(VerifyInclusion(leaf, m, n, path, *tree.Root(n - 1 == 0 ? 2 : n - 1)));
      if (!path.empty()) {
        std::vector<Digest> shorter(path.begin(), path.end() - 1);
        EXPECT_FALSE(VerifyInclusion(leaf, m, n, shorter, root));
      }
      std::vector<Digest> longer = path;
      longer.push_back(root);
      EXPECT_FALSE(VerifyInclusion(leaf, m, n, longer, root));
      EXPECT_FALSE(VerifyInclusion(leaf, n, n, path, root));  // index outside the tree
    }
    for (size_t m = 1; m < n; ++m) {
      const Digest old_root = *tree.Root(m);
      std::vector<Digest> proof = *tree.ConsistencyProof(m, n);
      for (size_t i = 0; i < proof.size(); ++i) {
        std::vector<Digest> bad = proof;
        bad[i][0] ^= 0x80;
        EXPECT_FALSE(VerifyConsistency(m, n, old_root, root, bad)) << m << " " << n << " " << i;
      }
      Digest other = old_root;
      other[31] ^= 1;
      EXPECT_FALSE(VerifyConsistency(m, n, other, root, proof));
      EXPECT_FALSE(VerifyConsistency(m, n, old_root, other, proof));
      EXPECT_FALSE(VerifyConsistency(n, m, root, old_root, proof));
      EXPECT_FALSE(VerifyConsistency(m, n, old_root, root, {}));
      std::vector<Digest> longer = proof;
      longer.push_back(root);
      EXPECT_FALSE(VerifyConsistency(m, n, old_root, root, longer));
    }
  }
}

// A log whose leaf changed after a tree head is inconsistent with it: the new root differs and
// no proof from the old tree verifies against the altered leaf.
TEST(MerkleTree, AnAlteredLeafBreaksTheRootAndItsInclusionProof) {
  Log log;
  log.lines = MakeLines(300);
  const Digest root = *MerkleTreeCache(log.Reader()).Root(300);
  const std::vector<Digest> path = *MerkleTreeCache(log.Reader()).InclusionProof(123, 300);
  Log altered = log;
  altered.lines[123][2] = 'X';
  MerkleTreeCache tree(altered.Reader());
  EXPECT_NE(*tree.Root(300), root);
  EXPECT_FALSE(VerifyInclusion(LeafHash(altered.lines[123]), 123, 300, path, root));
  const std::vector<Digest> new_path = *tree.InclusionProof(123, 300);
  EXPECT_FALSE(VerifyInclusion(LeafHash(altered.lines[123]), 123, 300, new_path, root));
}

// Large trees: the cache keeps one hash per aligned block of 256 leaves (and their parents),
// later proofs read at most two short runs, and everything still equals the reference.
TEST(MerkleTree, CacheKeepsBlocksAndAgreesWithTheReference) {
  Log log;
  log.lines = MakeLines(5000);
  MerkleTreeCache tree(log.Reader());
  const Digest root = *tree.Root(5000);
  EXPECT_EQ(root, RefMth(All(log.lines, log.lines.size())));
  // 19 blocks of 256 below 5000 and their complete parents (9 + 4 + 2 + 1).
  EXPECT_EQ(tree.cached(), 19u + 9u + 4u + 2u + 1u);
  const char* env = std::getenv("STREAMLEARN_MERKLE_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20261126;
  std::printf("STREAMLEARN_MERKLE_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 16; ++trial) {
    const uint64_t n = 1 + rng() % 5000;
    const uint64_t m = rng() % n;
    log.reads = 0;
    const std::vector<Digest> path = *tree.InclusionProof(m, n);
    EXPECT_LE(log.reads, 3u) << m << " " << n;
    const D d = All(log.lines, n);
    EXPECT_TRUE(VerifyInclusion(LeafHash(log.lines[m]), m, n, path, RefMth(d)));
    const uint64_t m2 = 1 + rng() % n;
    const std::vector<Digest> proof = *tree.ConsistencyProof(m2, n);
    EXPECT_TRUE(VerifyConsistency(m2, n, RefMth(d.Sub(0, m2)), RefMth(d), proof))
        << m2 << " -> " << n;
  }
}

// Forget bounds the cache for an archived prefix: it drops exactly the hashes under the kept
// level that lie wholly below the bound, and later roots and proofs, which recompute what they
// need from the log, still equal the reference.
TEST(MerkleTree, ForgetDropsOnlyLowSubtreesBelowTheBoundAndProofsStillAgree) {
  Log log;
  log.lines = MakeLines(5000);
  MerkleTreeCache tree(log.Reader());
  const Digest root = *tree.Root(5000);
  ASSERT_EQ(tree.cached(), 19u + 9u + 4u + 2u + 1u);
  // Below 1000 with levels >= 16 kept: the blocks [0, 256), [256, 512), [512, 768) and the
  // level-9 node [0, 512); [768, 1024) straddles the bound and stays.
  EXPECT_EQ(tree.Forget(1000, 16), 4u);
  // Below 4096 with levels >= 10 kept: the other 13 blocks of level 8 and 7 of level 9 below
  // 4096; the nodes of levels 10-12 stay, and so do those at or above 4096.
  EXPECT_EQ(tree.Forget(4096, 10), 13u + 7u);
  EXPECT_EQ(tree.cached(), 35u - 24u);
  // The root needs nothing that was dropped: one read, of the leaves past the last block.
  log.reads = 0;
  EXPECT_EQ(*tree.Root(5000), root);
  EXPECT_EQ(log.reads, 1u);
  const D d = All(log.lines, 5000);
  for (uint64_t m : {0u, 100u, 1023u, 2047u, 4095u, 4096u, 4999u}) {
    const std::vector<Digest> path = *tree.InclusionProof(m, 5000);
    EXPECT_TRUE(VerifyInclusion(LeafHash(log.lines[m]), m, 5000, path, RefMth(d))) << m;
    const uint64_t first = m + 1;
    const std::vector<Digest> proof = *tree.ConsistencyProof(first, 5000);
    EXPECT_TRUE(VerifyConsistency(first, 5000, RefMth(d.Sub(0, first)), RefMth(d), proof))
        << first;
  }
}

TEST(MerkleTree, BadRequestsAndGapsAreErrors) {
  Log log;
  log.lines = MakeLines(10);
  MerkleTreeCache tree(log.Reader());
  EXPECT_EQ(tree.InclusionProof(10, 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tree.ConsistencyProof(0, 10).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tree.ConsistencyProof(6, 5).status().code(), absl::StatusCode::kInvalidArgument);
  // The log has 10 leaves; a tree of 12 cannot be computed from it.
  EXPECT_EQ(tree.Root(12).status().code(), absl::StatusCode::kDataLoss);
}

TEST(TreeHead, SignedNotesOpenAndAlteredOnesAreRefused) {
  absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::Generate();
  ASSERT_TRUE(key.ok());
  Log log;
  log.lines = MakeLines(9);
  TreeHead head{TreeHeadOrigin("acme/clicks", 2), 9, *MerkleTreeCache(log.Reader()).Root(9)};
  absl::StatusOr<std::string> note = SignTreeHead(*key, head);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(note->substr(0, note->find('\n')), "streamlearn.audit/acme/clicks/2");
  absl::StatusOr<TreeHead> opened = OpenTreeHead(*note, key->PublicKey());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->origin, head.origin);
  EXPECT_EQ(opened->size, 9u);
  EXPECT_EQ(opened->root, head.root);

  // Another key's note, and a note checked against another key.
  absl::StatusOr<Ed25519PrivateKey> other = Ed25519PrivateKey::Generate();
  EXPECT_EQ(OpenTreeHead(*note, other->PublicKey()).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Every body byte altered (in a way that keeps the note well formed) fails the signature.
  const size_t body_end = note->find("\n\n");
  for (size_t i = 0; i < body_end; ++i) {
    std::string bad = *note;
    if (bad[i] == '\n') continue;
    if (bad[i] >= '0' && bad[i] <= '8') {
      bad[i] += 1;
    } else if (bad[i] == 'a') {
      bad[i] = 'b';
    } else {
      continue;
    }
    absl::StatusOr<TreeHead> t = OpenTreeHead(bad, key->PublicKey());
    EXPECT_FALSE(t.ok()) << "byte " << i;
  }
  // The signature altered, cut, or gone; extra lines; garbage.
  std::string bad_sig = *note;
  bad_sig[bad_sig.size() - 5] = bad_sig[bad_sig.size() - 5] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(OpenTreeHead(bad_sig, key->PublicKey()).ok());
  EXPECT_EQ(OpenTreeHead(note->substr(0, body_end + 2), key->PublicKey()).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string extra = *note;
  extra.insert(body_end + 1, "extension\n");
  EXPECT_FALSE(OpenTreeHead(extra, key->PublicKey()).ok());
  EXPECT_EQ(OpenTreeHead("hello", key->PublicKey()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenTreeHead(std::string(5000, 'a'), key->PublicKey()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A second signature by an unknown key is ignored; ours still verifies.
  std::string cosigned = *note + "\xe2\x80\x94 witness AAAAAAAAAAAAAAAA\n";
  EXPECT_TRUE(OpenTreeHead(cosigned, key->PublicKey()).ok());
}

}  // namespace
}  // namespace streamlearn
