#include "core/audit/merkle_chain.h"

#include <limits>
#include <string>

#include "core/audit/checkpoint.h"
#include "core/audit/ed25519_key.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

Digest WDigest() { return Sha256Of("W matrix bytes"); }

TEST(MerkleChainTest, StepIsShaOfPrevThenCanonicalBody) {
  Digest prev{};
  prev[0] = 0xab;
  const std::string body = "{\"t\":1}";
  std::string concat(reinterpret_cast<const char*>(prev.data()), prev.size());
  concat += body;
  EXPECT_EQ(MerkleStep(prev, body), Sha256Of(concat));
}

TEST(MerkleChainTest, GenesisCommitsToSpecAndWDigest) {
  MerkleChain chain;
  absl::StatusOr<ChainEntry> g = chain.AppendGenesis("sau:r=256", WDigest());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->index, 0u);
  EXPECT_EQ(g->merkle_prev, Digest{});
  const std::string canon =
      "{\"kind\":\"genesis\",\"model_spec\":\"sau:r=256\",\"record_format\":3,\"w_digest\":\"" +
      ToHex(WDigest()) + "\"}";
  EXPECT_EQ(g->merkle_curr, MerkleStep(Digest{}, canon));
  EXPECT_EQ(chain.head(), g->merkle_curr);

  MerkleChain other;
  ASSERT_TRUE(other.AppendGenesis("sau:r=512", WDigest()).ok());
  EXPECT_NE(other.head(), chain.head());
}

TEST(MerkleChainTest, AppendLinksRecordsAndRejectsUnencodableBodies) {
  MerkleChain chain;
  ASSERT_TRUE(chain.AppendGenesis("spec", WDigest()).ok());
  Digest head = chain.head();
  for (int t = 1; t <= 5; ++t) {
    AuditRecord body;
    body.Set("t", t).Set("margin", 0.5 * t);
    absl::StatusOr<ChainEntry> e = chain.Append(body);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->index, static_cast<uint64_t>(t));
    EXPECT_EQ(e->merkle_prev, head);
    EXPECT_EQ(e->merkle_curr, MerkleStep(head, *EncodeCanonical(body)));
    EXPECT_EQ(*e->envelope.Find("merkle_curr")->get_if<std::string>(), ToHex(e->merkle_curr));
    head = e->merkle_curr;
  }
  AuditRecord bad;
  bad.Set("margin", std::numeric_limits<double>::quiet_NaN());
  EXPECT_FALSE(chain.Append(bad).ok());
  EXPECT_EQ(chain.size(), 6u);
  EXPECT_EQ(chain.head(), head);
}

TEST(MerkleChainTest, HexDigestParsing) {
  Digest d;
  EXPECT_TRUE(ParseHexDigest(ToHex(WDigest()), &d));
  EXPECT_EQ(d, WDigest());
  EXPECT_FALSE(ParseHexDigest("abc", &d));
  EXPECT_FALSE(ParseHexDigest(std::string(64, 'g'), &d));
}

TEST(AuditSigningTest, SignVerifyAndPemRoundTrip) {
  absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::Generate();
  ASSERT_TRUE(key.ok()) << key.status();
  absl::StatusOr<std::string> sig = key->Sign("hello");
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->size(), 64u);
  EXPECT_TRUE(key->PublicKey().Verify("hello", *sig));
  EXPECT_FALSE(key->PublicKey().Verify("hellp", *sig));
  EXPECT_EQ(key->PublicKey().fingerprint().size(), 64u);

  absl::StatusOr<std::string> priv_pem = key->ToPem();
  absl::StatusOr<std::string> pub_pem = key->PublicKey().ToPem();
  ASSERT_TRUE(priv_pem.ok() && pub_pem.ok());
  absl::StatusOr<Ed25519PrivateKey> key2 = Ed25519PrivateKey::FromPem(*priv_pem);
  absl::StatusOr<Ed25519PublicKey> pub2 = Ed25519PublicKey::FromPem(*pub_pem);
  ASSERT_TRUE(key2.ok() && pub2.ok());
  EXPECT_EQ(pub2->fingerprint(), key->PublicKey().fingerprint());
  EXPECT_EQ(*key2->Sign("hello"), *sig);  // Ed25519 is deterministic
  EXPECT_TRUE(pub2->Verify("hello", *sig));

  absl::StatusOr<Ed25519PrivateKey> other = Ed25519PrivateKey::Generate();
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->PublicKey().fingerprint(), key->PublicKey().fingerprint());
  EXPECT_FALSE(other->PublicKey().Verify("hello", *sig));
  EXPECT_FALSE(Ed25519PublicKey::FromPem("not a pem").ok());
}

TEST(AuditSigningTest, WriterInterleavesSignedCheckpoints) {
  absl::StatusOr<Ed25519PrivateKey> key = Ed25519PrivateKey::Generate();
  ASSERT_TRUE(key.ok());
  AuditLogWriter writer(*key, /*every=*/3);
  std::vector<std::string> lines;
  ASSERT_TRUE(writer.AppendGenesis("spec", WDigest(), &lines).ok());
  for (int t = 1; t <= 5; ++t) {
    AuditRecord body;
    body.Set("t", t);
    ASSERT_TRUE(writer.Append(body, &lines).ok());
  }
  // genesis, 1, 2, cp, 3, 4, 5, cp
  ASSERT_EQ(lines.size(), 8u);
  for (int cp_line : {3, 7}) {
    absl::StatusOr<AuditRecord> env = ParseAuditJson(lines[cp_line], {.require_canonical = true});
    ASSERT_TRUE(env.ok()) << env.status();
    const AuditRecord& cp =
        *env->Find("body")->get_if<AuditRecord>()->Find("checkpoint")->get_if<AuditRecord>();
    int64_t index;
    ASSERT_TRUE(cp.Find("index")->AsInt64(&index));
    EXPECT_EQ(index, cp_line - 1);
    absl::StatusOr<AuditRecord> prev_env = ParseAuditJson(lines[cp_line - 1]);
    EXPECT_EQ(*cp.Find("head")->get_if<std::string>(),
              *prev_env->Find("merkle_curr")->get_if<std::string>());
    std::string sig;
    ASSERT_TRUE(HexDecode(*cp.Find("signature")->get_if<std::string>(), &sig));
    Digest head;
    ASSERT_TRUE(ParseHexDigest(*cp.Find("head")->get_if<std::string>(), &head));
    EXPECT_TRUE(key->PublicKey().Verify(CheckpointMessage(index, head), sig));
  }
}

}  // namespace
}  // namespace streamlearn
