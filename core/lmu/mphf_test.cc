#include "core/lmu/mphf.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/common/digest.h"
#include "gtest/gtest.h"

namespace streamlearn::lmu {
namespace {

constexpr HashKey kSalt{0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL};

std::vector<uint64_t> RandomDistinctKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> keys;
  keys.reserve(n);
  while (keys.size() < n) {
    const uint64_t k = rng();
    if (seen.insert(k).second) keys.push_back(k);
  }
  return keys;
}

// Every key maps below n and no two keys share a value.
void ExpectMinimalPerfect(const Mphf& f, const std::vector<uint64_t>& keys) {
  ASSERT_EQ(f.size(), keys.size());
  std::vector<bool> hit(keys.size(), false);
  for (uint64_t k : keys) {
    const uint64_t v = f(k);
    ASSERT_LT(v, keys.size()) << k;
    ASSERT_FALSE(hit[v]) << "value " << v << " twice";
    hit[v] = true;
  }
}

std::string Image(const Mphf& f) {
  std::string s;
  f.Serialize(&s);
  return s;
}

// The tests that hold for either key hash (Mphf::KeyHash) run under both.
class MphfKeyHashTest : public testing::TestWithParam<Mphf::KeyHash> {
 protected:
  static absl::StatusOr<Mphf> Build(const std::vector<uint64_t>& keys, const HashKey& salt) {
    Mphf::Options options;
    options.key_hash = GetParam();
    return Mphf::Build(keys, salt, options);
  }
};

INSTANTIATE_TEST_SUITE_P(KeyHashes, MphfKeyHashTest,
                         testing::Values(Mphf::KeyHash::kFold, Mphf::KeyHash::kSipHash13),
                         [](const testing::TestParamInfo<Mphf::KeyHash>& info) {
                           return info.param == Mphf::KeyHash::kFold ? "Fold" : "SipHash13";
                         });

TEST_P(MphfKeyHashTest, MinimalPerfectDeterministicAndRoundTripsAcrossSizes) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{100}, size_t{10000}, size_t{1000000}}) {
    SCOPED_TRACE(n);
    const std::vector<uint64_t> keys = RandomDistinctKeys(n, n + 1);
    absl::StatusOr<Mphf> f = Build(keys, kSalt);
    ASSERT_TRUE(f.ok()) << f.status();
    ExpectMinimalPerfect(*f, keys);
    if (n >= 10000) {
      EXPECT_LE(f->bits_per_key(), 3.5);
    }

    absl::StatusOr<Mphf> again = Build(keys, kSalt);
    ASSERT_TRUE(again.ok()) << again.status();
    const std::string image = Image(*f);
    EXPECT_EQ(Image(*again), image);
    EXPECT_EQ(again->bytes(), f->bytes());

    // The image says which hash it was built on (version 1: SipHash-1-3, 2: FoldHash; the
    // empty function keeps version 1), and the loaded function uses it.
    const Mphf::KeyHash expect_hash = n == 0 ? Mphf::KeyHash::kSipHash13 : GetParam();
    EXPECT_EQ(f->key_hash(), expect_hash);
    EXPECT_EQ(static_cast<uint8_t>(image[8]), expect_hash == Mphf::KeyHash::kFold ? 2 : 1);
    absl::StatusOr<Mphf> loaded = Mphf::Deserialize(image);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->key_hash(), expect_hash);
    EXPECT_EQ(loaded->size(), n);
    EXPECT_EQ(loaded->bytes(), f->bytes());
    EXPECT_EQ(Image(*loaded), image);
    for (uint64_t k : keys) ASSERT_EQ((*loaded)(k), (*f)(k)) << k;

    // The batched lookup gives each key's value, members and others alike.
    std::vector<uint64_t> probe = keys;
    probe.resize(std::min<size_t>(probe.size(), 1000));
    for (uint64_t k : RandomDistinctKeys(7, n + 2)) probe.push_back(k);
    std::vector<uint64_t> batched(probe.size());
    f->Positions(probe.data(), probe.size(), batched.data());
    for (size_t i = 0; i < probe.size(); ++i) ASSERT_EQ(batched[i], (*f)(probe[i])) << i;
  }
}

TEST_P(MphfKeyHashTest, KeyOrderDoesNotChangeTheFunction) {
  std::vector<uint64_t> keys = RandomDistinctKeys(5000, 7);
  absl::StatusOr<Mphf> f = Build(keys, kSalt);
  ASSERT_TRUE(f.ok());
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(8));
  absl::StatusOr<Mphf> g = Build(keys, kSalt);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(Image(*g), Image(*f));
}

TEST_P(MphfKeyHashTest, SaltChangesTheFunctionAndEachSaltWorks) {
  const std::vector<uint64_t> keys = RandomDistinctKeys(5000, 9);
  absl::StatusOr<Mphf> f = Build(keys, kSalt);
  absl::StatusOr<Mphf> g = Build(keys, HashKey{kSalt.k0, kSalt.k1 + 1});
  ASSERT_TRUE(f.ok() && g.ok());
  ExpectMinimalPerfect(*g, keys);
  EXPECT_NE(Image(*f), Image(*g));
  int differ = 0;
  for (uint64_t k : keys) differ += (*f)(k) != (*g)(k);
  EXPECT_GT(differ, 4900);
}

// Small sets stress the placement most (few positions to evict into): many salts, no failure.
TEST_P(MphfKeyHashTest, SmallSetsBuildUnderManySalts) {
  for (size_t n = 1; n <= 64; ++n) {
    const std::vector<uint64_t> keys = RandomDistinctKeys(n, 1000 + n);
    for (uint64_t s = 0; s < 50; ++s) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " salt=" << s);
      absl::StatusOr<Mphf> f = Build(keys, HashKey{s, ~s});
      ASSERT_TRUE(f.ok()) << f.status();
      ExpectMinimalPerfect(*f, keys);
    }
  }
}

// The keyed hash, not the keys, spreads them: consecutive and strided ids work alike.
TEST_P(MphfKeyHashTest, StructuredKeys) {
  struct Case {
    const char* name;
    uint64_t first, stride;
  };
  const Case cases[] = {{"consecutive", 0, 1}, {"stride 2^32", 5, uint64_t{1} << 32},
                        {"top bits", 0, uint64_t{1} << 44}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<uint64_t> keys(20000);
    for (size_t i = 0; i < keys.size(); ++i) keys[i] = c.first + i * c.stride;
    absl::StatusOr<Mphf> f = Build(keys, kSalt);
    ASSERT_TRUE(f.ok()) << f.status();
    ExpectMinimalPerfect(*f, keys);
  }
}

TEST(MphfTest, ForeignKeysMapBelowN) {
  const std::vector<uint64_t> keys = RandomDistinctKeys(1000, 11);
  absl::StatusOr<Mphf> f = Mphf::Build(keys, kSalt);
  ASSERT_TRUE(f.ok());
  std::mt19937_64 rng(12);
  for (int i = 0; i < 100000; ++i) ASSERT_LT((*f)(rng()), 1000u);
}

TEST(MphfTest, EmptyFunction) {
  const Mphf empty;
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.bytes(), 0u);
  EXPECT_EQ(empty.bits_per_key(), 0.0);
  EXPECT_EQ(empty(42), 0u);
  absl::StatusOr<Mphf> loaded = Mphf::Deserialize(Image(empty));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->size(), 0u);
}

TEST(MphfTest, DuplicateKeysInvalidArgument) {
  std::vector<uint64_t> keys = RandomDistinctKeys(1000, 13);
  keys.push_back(keys[17]);
  const std::vector<std::vector<uint64_t>> cases = {keys, {5, 5}, {1, 2, 3, 2}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.size());
    EXPECT_EQ(Mphf::Build(c, kSalt).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(MphfTest, OptionsOutOfRangeInvalidArgument) {
  const std::vector<uint64_t> keys = RandomDistinctKeys(100, 14);
  const Mphf::Options cases[] = {{0.5, 0.99}, {4.0, 0.99}, {3.5, 1.0}, {3.5, 0.3}};
  for (const Mphf::Options& o : cases) {
    SCOPED_TRACE(testing::Message() << o.keys_per_bucket << " " << o.alpha);
    EXPECT_EQ(Mphf::Build(keys, kSalt, o).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(MphfTest, OtherOptionsInRangeWork) {
  const std::vector<uint64_t> keys = RandomDistinctKeys(20000, 15);
  const Mphf::Options cases[] = {{1.0, 0.5}, {2.0, 0.9}, {3.0, 0.99}, {3.75, 0.995}};
  for (const Mphf::Options& o : cases) {
    SCOPED_TRACE(testing::Message() << o.keys_per_bucket << " " << o.alpha);
    absl::StatusOr<Mphf> f = Mphf::Build(keys, kSalt, o);
    ASSERT_TRUE(f.ok()) << f.status();
    ExpectMinimalPerfect(*f, keys);
  }
}

TEST(MphfTest, CorruptImageDataLoss) {
  const std::vector<uint64_t> keys = RandomDistinctKeys(3000, 16);
  absl::StatusOr<Mphf> f = Mphf::Build(keys, kSalt);
  ASSERT_TRUE(f.ok());
  const std::string image = Image(*f);
  // Every byte of the header, a stride through the payload, and the checksum.
  std::vector<size_t> at;
  for (size_t i = 0; i < 64; ++i) at.push_back(i);
  for (size_t i = 64; i < image.size(); i += 37) at.push_back(i);
  for (size_t i = image.size() - 32; i < image.size(); ++i) at.push_back(i);
  for (size_t i : at) {
    SCOPED_TRACE(i);
    std::string bad = image;
    bad[i] ^= 0x10;
    EXPECT_EQ(Mphf::Deserialize(bad).status().code(), absl::StatusCode::kDataLoss);
  }
  for (size_t len : {size_t{0}, size_t{10}, size_t{95}, image.size() - 1}) {
    SCOPED_TRACE(len);
    EXPECT_EQ(Mphf::Deserialize(image.substr(0, len)).status().code(),
              absl::StatusCode::kDataLoss);
  }
  EXPECT_EQ(Mphf::Deserialize(image + "x").status().code(), absl::StatusCode::kDataLoss);
}

// An image whose checksum is right but whose fields disagree (a bug, not bit rot).
TEST(MphfTest, ResignedInconsistentImageDataLoss) {
  const std::vector<uint64_t> keys = RandomDistinctKeys(3000, 17);
  absl::StatusOr<Mphf> f = Mphf::Build(keys, kSalt);
  ASSERT_TRUE(f.ok());
  const std::string image = Image(*f);
  const size_t pilots = 64;  // offset of the pilots; the remap bases follow them
  struct Case {
    const char* name;
    size_t offset;
    uint8_t value;
  };
  const size_t buckets = static_cast<uint8_t>(image[32]) | static_cast<uint8_t>(image[33]) << 8;
  const Case cases[] = {
      {"n + 1", 16, static_cast<uint8_t>(image[16] + 1)},
      {"m = n", 24, static_cast<uint8_t>(image[16])},
      {"dense buckets", 40, static_cast<uint8_t>(image[40] + 1)},
      {"width 33", 12, 33},
      {"version 0", 8, 0},
      {"version 3", 8, 3},
      {"remap base past n", pilots + buckets + 3, 0x7f},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string bad = image.substr(0, image.size() - 32);
    bad[c.offset] = static_cast<char>(c.value);
    const Digest d = Sha256Of(bad);
    bad.append(reinterpret_cast<const char*>(d.data()), d.size());
    EXPECT_EQ(Mphf::Deserialize(bad).status().code(), absl::StatusCode::kDataLoss);
  }
}

}  // namespace
}  // namespace streamlearn::lmu
