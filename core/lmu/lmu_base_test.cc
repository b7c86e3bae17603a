#include "core/lmu/lmu_base.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace streamlearn::lmu {
namespace {

HashSecret Secret() {
  HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(3 + 11 * i);
  return s;
}

std::vector<BaseEntry> EntriesOf(const std::vector<uint64_t>& ids) {
  std::vector<BaseEntry> entries;
  for (size_t i = 0; i < ids.size(); ++i) entries.push_back({ids[i], 1000 + i});
  return entries;
}

void ExpectEveryIdAtItsSlot(const LmuBase& base, const std::vector<BaseEntry>& entries) {
  ASSERT_TRUE(base.CheckMembership().ok()) << base.CheckMembership();
  for (const BaseEntry& e : entries) {
    uint64_t slot = 0;
    ASSERT_TRUE(base.Locate(e.id, &slot)) << e.id;
    ASSERT_EQ(slot, e.slot) << e.id;
  }
}

// Ordinary ids: the base's MPHF is built on FoldHash (docs/LMU_MPHF.md, "The key hash").
TEST(LmuBase, BuildsOnFoldHash) {
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 5000; ++i) ids.push_back(i * 7919 + 1);
  const std::vector<BaseEntry> entries = EntriesOf(ids);
  absl::StatusOr<std::shared_ptr<const LmuBase>> base = LmuBase::Build(entries, Secret(), 1);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_EQ((*base)->mphf().key_hash(), Mphf::KeyHash::kFold);
  ExpectEveryIdAtItsSlot(**base, entries);
}

// The attack the fallback answers (docs/LMU_MPHF.md, "Why a weaker hash is safe here"): someone
// who knows the secret derives the generation's FoldHash salts and picks ids that all fall in one
// bucket under each of them. Both FoldHash builds then fail, and the base is built on SipHash-1-3
// instead: it holds every id, and its image says which hash it uses.
TEST(LmuBase, IdsAimedAtTheFoldHashSaltsFallBackToSipHash) {
  const HashSecret secret = Secret();
  const uint64_t generation = 3;
  static_assert(LmuBase::kFoldAttempts == 2);
  ASSERT_EQ(LmuBase::KeyHashOf(1), Mphf::KeyHash::kFold);
  ASSERT_EQ(LmuBase::KeyHashOf(2), Mphf::KeyHash::kSipHash13);
  const HashKey fold_salts[2] = {LmuBase::Salt(secret, generation, 0),
                                 LmuBase::Salt(secret, generation, 1)};

  // Bucket 0 of an n-key function (mphf.cc, "THE FUNCTION"): a dense hash (top 32 bits below
  // 0.6 * 2^32) whose low 32 bits scale to 0 among the D dense buckets.
  const uint64_t n = 300;
  const uint64_t buckets = std::max<uint64_t>(
      {2, std::min<uint64_t>(n, 64), static_cast<uint64_t>(std::ceil(n / 3.5))});
  const uint64_t dense = std::max<uint64_t>(1, buckets * 3 / 10);
  auto in_bucket0 = [&](uint64_t h) {
    return (h >> 32) < 2576980378ULL && (((h & 0xffffffffULL) * dense) >> 32) == 0;
  };
  std::vector<uint64_t> ids;
  for (uint64_t x = 1; ids.size() < n; ++x) {
    if (in_bucket0(FoldHash(fold_salts[0], x)) && in_bucket0(FoldHash(fold_salts[1], x))) {
      ids.push_back(x);
    }
  }

  // The attack works: a bucket of 300 keys has no placement under either FoldHash salt.
  for (const HashKey& salt : fold_salts) {
    Mphf::Options fold;
    fold.key_hash = Mphf::KeyHash::kFold;
    EXPECT_EQ(Mphf::Build(ids, salt, fold).status().code(), absl::StatusCode::kInternal);
  }

  const std::vector<BaseEntry> entries = EntriesOf(ids);
  absl::StatusOr<std::shared_ptr<const LmuBase>> base =
      LmuBase::Build(entries, secret, generation);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_EQ((*base)->mphf().key_hash(), Mphf::KeyHash::kSipHash13);
  ExpectEveryIdAtItsSlot(**base, entries);

  std::string image;
  (*base)->mphf().Serialize(&image);
  EXPECT_EQ(static_cast<uint8_t>(image[8]), 1);  // image version 1: SipHash-1-3
}

}  // namespace
}  // namespace streamlearn::lmu
