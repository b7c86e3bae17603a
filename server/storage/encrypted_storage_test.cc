// Encryption at rest (encrypted_storage.h): sealing and opening, every way a sealed value can
// be wrong, the key directory's forms and errors, and the rule that a model's form (sealed or
// plaintext) must match its tenant's key. The ShardStore contract over an encrypted backend
// is in shard_store_contract_test.cc ("encrypted_rocks").
#include "server/storage/encrypted_storage.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fake_storage.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace streamlearn::storage {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::array<uint8_t, TenantKey::kBytes> KeyBytes(uint8_t first) {
  std::array<uint8_t, TenantKey::kBytes> k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(first + 7 * i);
  return k;
}

TEST(SealTest, OpensWhatItSealedAndHidesIt) {
  const TenantKey key(KeyBytes(1));
  const std::string plain = "{\"note\":\"the plaintext of a record\"}";
  absl::StatusOr<std::string> sealed = Seal(key, "place 1", plain);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(sealed->size(), plain.size() + 30);
  EXPECT_TRUE(LooksSealed(*sealed));
  EXPECT_FALSE(absl::StrContains(*sealed, "plaintext"));
  absl::StatusOr<std::string> opened = Open(key, "place 1", *sealed, "the record");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, plain);
  // A fresh nonce each time: the same value sealed twice differs.
  absl::StatusOr<std::string> again = Seal(key, "place 1", plain);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(*again, *sealed);
  // The empty value too.
  absl::StatusOr<std::string> empty = Seal(key, "p", "");
  ASSERT_TRUE(empty.ok());
  absl::StatusOr<std::string> empty_opened = Open(key, "p", *empty, "x");
  ASSERT_TRUE(empty_opened.ok()) << empty_opened.status();
  EXPECT_EQ(*empty_opened, "");
}

TEST(SealTest, EveryAlterationFailsWithDataLoss) {
  const TenantKey key(KeyBytes(1));
  const TenantKey other(KeyBytes(2));
  absl::StatusOr<std::string> sealed = Seal(key, "place 1", "a value of some length");
  ASSERT_TRUE(sealed.ok());
  // Each byte flipped in turn: the header, the nonce, the ciphertext, the tag.
  for (size_t i = 0; i < sealed->size(); ++i) {
    std::string bad = *sealed;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    absl::StatusOr<std::string> r = Open(key, "place 1", bad, "the value");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << "byte " << i;
    EXPECT_THAT(r.status().message(), HasSubstr("the value"));
  }
  // Another place, another key, truncated, plaintext.
  EXPECT_EQ(Open(key, "place 2", *sealed, "v").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Open(other, "place 1", *sealed, "v").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Open(key, "place 1", sealed->substr(0, sealed->size() - 1), "v").status().code(),
            absl::StatusCode::kDataLoss);
  absl::StatusOr<std::string> plain = Open(key, "place 1", "a plaintext value", "v");
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(plain.status().message(), HasSubstr("not encrypted"));
}

class KeyDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/tenant_keys_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& file, const std::string& bytes) {
    std::ofstream(dir_ + "/" + file, std::ios::binary) << bytes;
    chmod((dir_ + "/" + file).c_str(), 0600);
  }
  std::string dir_;
};

TEST_F(KeyDirTest, ReadsRawAndHexKeysAndSkipsDotFiles) {
  const auto raw = KeyBytes(3);
  Write("acme.key", std::string(raw.begin(), raw.end()));
  const auto hex_bytes = KeyBytes(9);
  Write("globex.key",
        absl::BytesToHexString(std::string(hex_bytes.begin(), hex_bytes.end())) + "\n");
  fs::create_directories(dir_ + "/..data");  // a Kubernetes Secret volume's internals
  Write(".hidden", "ignored");
  absl::StatusOr<TenantKeys> keys = TenantKeys::LoadDir(dir_);
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->Tenants(), (std::vector<std::string>{"acme", "globex"}));
  ASSERT_NE(keys->Find("acme"), nullptr);
  EXPECT_TRUE(std::equal(raw.begin(), raw.end(), keys->Find("acme")->data()));
  EXPECT_TRUE(std::equal(hex_bytes.begin(), hex_bytes.end(), keys->Find("globex")->data()));
  EXPECT_EQ(keys->Find("initech"), nullptr);
  // The fingerprint names the key without showing it.
  const std::string fp = keys->Find("acme")->Fingerprint();
  EXPECT_EQ(fp.size(), 16u);
  EXPECT_FALSE(absl::StrContains(
      absl::BytesToHexString(std::string(raw.begin(), raw.end())), fp));
}

TEST_F(KeyDirTest, RefusesWhatIsNotAKeyNamingTheFile) {
  Write("acme.key", "too short");
  absl::StatusOr<TenantKeys> keys = TenantKeys::LoadDir(dir_);
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(keys.status().message(), HasSubstr("acme.key"));
  EXPECT_THAT(keys.status().message(), HasSubstr("32 bytes"));
  EXPECT_FALSE(absl::StrContains(keys.status().message(), "too short"));  // never the content

  fs::remove(dir_ + "/acme.key");
  Write("Bad Tenant.key", std::string(32, 'x'));
  keys = TenantKeys::LoadDir(dir_);
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(keys.status().message(), HasSubstr("Bad Tenant.key"));

  fs::remove(dir_ + "/Bad Tenant.key");
  Write("acme.pem", std::string(32, 'x'));
  keys = TenantKeys::LoadDir(dir_);
  EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(keys.status().message(), HasSubstr("<tenant>.key"));

  EXPECT_EQ(TenantKeys::LoadDir(dir_ + "/missing").status().code(),
            absl::StatusCode::kNotFound);
}

TenantKeys Keys(std::initializer_list<std::pair<std::string, uint8_t>> tenants) {
  TenantKeys keys;
  for (const auto& [tenant, first] : tenants) keys.Add(tenant, KeyBytes(first));
  return keys;
}

// What a tenant with a key stores is sealed all the way down; what it reads back is the
// plaintext; another tenant's models are untouched.
TEST(EncryptedStorageTest, SealsEveryValueOfAKeyedTenantAndOnlyThose) {
  FakeStorage fake;
  std::unique_ptr<StorageBackend> b = EncryptAtRest(fake.Share(), Keys({{"acme", 1}}));
  const std::vector<std::string> genesis = {"genesis 0", "genesis 1"};
  ASSERT_TRUE(b->CreateModel("acme/m", "spec bytes", genesis).ok());
  ASSERT_TRUE(b->CreateModel("other/m", "other spec", genesis).ok());
  std::unique_ptr<ShardStore> s = b->OpenShard("acme/m", 1);
  ShardWrite w;
  w.log = LogAppend{.part = PartKind::kSau, .seq = 1, .entry = "entry one"};
  w.audit.push_back({.index = 1, .line = "line one"});
  w.snapshot = SnapshotPut{.part = PartKind::kSau, .seq = 1, .blob = "blob one",
                           .manifest = "manifest one", .dropped = {}};
  ASSERT_TRUE(s->Commit(w).ok());

  // Underneath: sealed for acme, plain for the other tenant.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> raw =
      fake.Share()->ListSpecs();
  ASSERT_TRUE(raw.ok());
  ASSERT_EQ(raw->size(), 2u);
  EXPECT_TRUE(LooksSealed((*raw)[0].second));
  EXPECT_EQ((*raw)[1].second, "other spec");
  std::unique_ptr<ShardStore> under = fake.Share()->OpenShard("acme/m", 1);
  ASSERT_TRUE(under->ScanLog(PartKind::kSau, 0, [](uint64_t, std::string_view e) {
    EXPECT_TRUE(LooksSealed(e));
    EXPECT_FALSE(absl::StrContains(absl::string_view(e.data(), e.size()), "entry"));
    return true;
  }).ok());
  ASSERT_TRUE(under->ScanAudit(0, [](uint64_t, std::string_view line) {
    EXPECT_TRUE(LooksSealed(line));
    const absl::string_view l(line.data(), line.size());
    EXPECT_FALSE(absl::StrContains(l, "line") || absl::StrContains(l, "genesis"));
    return true;
  }).ok());
  absl::StatusOr<std::optional<std::string>> blob = under->GetSnapshot(PartKind::kSau, 1);
  ASSERT_TRUE(blob.ok() && blob->has_value());
  EXPECT_TRUE(LooksSealed(**blob));
  absl::StatusOr<std::optional<std::string>> manifest = under->GetManifest(PartKind::kSau);
  ASSERT_TRUE(manifest.ok() && manifest->has_value());
  EXPECT_TRUE(LooksSealed(**manifest));

  // Through the wrapper: the plaintext.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs = b->ListSpecs();
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ((*specs)[0].second, "spec bytes");
  std::vector<std::string> lines;
  ASSERT_TRUE(s->ScanAudit(0, [&](uint64_t, std::string_view line) {
    lines.emplace_back(line);
    return true;
  }).ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"genesis 1", "line one"}));
  absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> last = s->LastAudit();
  ASSERT_TRUE(last.ok() && last->has_value());
  EXPECT_EQ((*last)->second, "line one");
  EXPECT_EQ(*s->GetSnapshot(PartKind::kSau, 1), std::optional<std::string>("blob one"));
  EXPECT_EQ(*s->GetManifest(PartKind::kSau), std::optional<std::string>("manifest one"));
  std::vector<std::string> entries;
  ASSERT_TRUE(s->ScanLog(PartKind::kSau, 0, [&](uint64_t, std::string_view e) {
    entries.emplace_back(e);
    return true;
  }).ok());
  EXPECT_EQ(entries, (std::vector<std::string>{"entry one"}));
}

// A sealed value moved to another place (another shard, another sequence number) is refused.
TEST(EncryptedStorageTest, AValueMovedToAnotherPlaceIsDataLoss) {
  FakeStorage fake;
  std::unique_ptr<StorageBackend> b = EncryptAtRest(fake.Share(), Keys({{"acme", 1}}));
  ASSERT_TRUE(b->CreateModel("acme/m", "spec", std::vector<std::string>{"g0", "g1"}).ok());
  // Shard 0's genesis, sealed for shard 0, written under shard 1 by hand.
  std::string shard0_genesis;
  ASSERT_TRUE(fake.Share()->OpenShard("acme/m", 0)->ScanAudit(0, [&](uint64_t,
                                                                       std::string_view l) {
    shard0_genesis = std::string(l);
    return false;
  }).ok());
  FakeStorage moved;
  ASSERT_TRUE(moved.Share()->CreateModel("acme/m", (*fake.Share()->ListSpecs())[0].second,
                                         std::vector<std::string>{shard0_genesis,
                                                                  shard0_genesis}).ok());
  std::unique_ptr<StorageBackend> mb = EncryptAtRest(moved.Share(), Keys({{"acme", 1}}));
  absl::Status st = mb->OpenShard("acme/m", 1)->ScanAudit(0, [](uint64_t, std::string_view) {
    return true;
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("audit record 0 of model 'acme/m' shard 1"));
  EXPECT_TRUE(mb->OpenShard("acme/m", 0)->ScanAudit(0, [](uint64_t, std::string_view) {
    return true;
  }).ok());
}

TEST(EncryptedStorageTest, AModelWhoseFormDoesNotMatchItsTenantsKeyIsRefusedAtListing) {
  FakeStorage fake;
  {
    std::unique_ptr<StorageBackend> b = EncryptAtRest(fake.Share(), Keys({{"acme", 1}}));
    ASSERT_TRUE(b->CreateModel("acme/m", "spec", std::vector<std::string>{"g"}).ok());
    ASSERT_TRUE(b->CreateModel("plain", "spec", std::vector<std::string>{"g"}).ok());
  }
  // The key is missing.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs =
      fake.Share()->ListSpecs();  // no wrapper at all: the spec stays sealed
  ASSERT_TRUE(specs.ok());
  EXPECT_TRUE(LooksSealed((*specs)[0].second));
  specs = EncryptAtRest(fake.Share(), Keys({{"globex", 2}}))->ListSpecs();
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(specs.status().message(), HasSubstr("'acme/m'"));
  EXPECT_THAT(specs.status().message(), HasSubstr("acme.key"));
  // A key for the tenant of a plaintext model (the default tenant's): a key added later.
  specs = EncryptAtRest(fake.Share(), Keys({{"acme", 1}, {"default", 3}}))->ListSpecs();
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(specs.status().message(), HasSubstr("'plain'"));
  EXPECT_THAT(specs.status().message(), HasSubstr("plaintext"));
  // The wrong key for the tenant.
  specs = EncryptAtRest(fake.Share(), Keys({{"acme", 9}}))->ListSpecs();
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kDataLoss);
  // The right one.
  specs = EncryptAtRest(fake.Share(), Keys({{"acme", 1}}))->ListSpecs();
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ((*specs)[0].second, "spec");
}

TEST(EncryptedStorageTest, WithoutKeysPlaintextPassesAndASealedModelNamesTheMissingKey) {
  FakeStorage fake;
  ASSERT_TRUE(EncryptAtRest(fake.Share(), Keys({{"acme", 1}}))
                  ->CreateModel("acme/m", "spec", std::vector<std::string>{"g"}).ok());
  std::unique_ptr<StorageBackend> none = EncryptAtRest(fake.Share(), TenantKeys());
  ASSERT_TRUE(none->CreateModel("plain", "plain spec", std::vector<std::string>{"g"}).ok());
  std::unique_ptr<ShardStore> s = none->OpenShard("plain", 0);
  ASSERT_TRUE(s->ScanAudit(0, [](uint64_t, std::string_view line) {
    EXPECT_EQ(line, "g");
    return true;
  }).ok());
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs = none->ListSpecs();
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(specs.status().message(), HasSubstr("acme.key"));
}

}  // namespace
}  // namespace streamlearn::storage
