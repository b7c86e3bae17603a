#include "core/common/short_sha256.h"

#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "core/common/digest.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

using short_sha256_internal::HasShaExtensions;
using short_sha256_internal::HeadsByOpenSsl;
using short_sha256_internal::HeadsByShaExtensions;

uint64_t HeadOfDigest(const std::string& message) {
  const Digest d = Sha256Of(message);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | d[i];
  return h;
}

// STREAMLEARN_TEST_SEED sets the seed of the random messages below (printed).
uint64_t Seed() {
  const char* env = std::getenv("STREAMLEARN_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20261202;
  std::cout << "STREAMLEARN_TEST_SEED=" << seed << std::endl;
  return seed;
}

TEST(ShortSha256Test, KnownDigests) {
  // FIPS 180-4's examples: SHA-256("abc") = ba7816bf 8f01cfea ..., SHA-256("") = e3b0c442
  // 98fc1c14 ...; and the 56-byte two-block example, 248d6a61 d20638b8 ....
  const std::vector<ShortMessage> m = {
      {"a", "b", "c"},
      {"", "", ""},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "", ""}};
  uint64_t heads[3] = {};
  Sha256Heads(m, heads);
  EXPECT_EQ(heads[0], 0xba7816bf8f01cfeaULL);
  EXPECT_EQ(heads[1], 0xe3b0c44298fc1c14ULL);
  EXPECT_EQ(heads[2], 0x248d6a61d20638b8ULL);
}

// Both ways, and the dispatching one, give the heads of the whole messages' digests: messages
// of 0 to 120 bytes (one block up to 55, OpenSSL beyond) cut into three pieces anywhere, in
// batches of 0 to 9 (full groups of four and every remainder).
TEST(ShortSha256Test, EveryWayGivesTheDigestsHead) {
  std::mt19937_64 rng(Seed());
  for (int round = 0; round < 3000; ++round) {
    const size_t count = rng() % 10;
    std::vector<std::string> whole(count);
    std::vector<ShortMessage> messages(count);
    std::vector<uint64_t> want(count);
    for (size_t i = 0; i < count; ++i) {
      const size_t n = rng() % 4 == 0 ? 50 + rng() % 10 : rng() % 121;  // near 55 often
      whole[i].resize(n);
      for (char& c : whole[i]) c = static_cast<char>(rng());
      size_t cut1 = n == 0 ? 0 : rng() % (n + 1), cut2 = n == 0 ? 0 : rng() % (n + 1);
      if (cut1 > cut2) std::swap(cut1, cut2);
      const std::string_view w = whole[i];
      messages[i] = {w.substr(0, cut1), w.substr(cut1, cut2 - cut1), w.substr(cut2)};
      want[i] = HeadOfDigest(whole[i]);
    }
    std::vector<uint64_t> got(count, 0);
    Sha256Heads(messages, got.data());
    ASSERT_EQ(got, want) << "round " << round;
    std::fill(got.begin(), got.end(), 0);
    HeadsByOpenSsl(messages, got.data());
    ASSERT_EQ(got, want) << "round " << round;
    if (HasShaExtensions()) {
      std::fill(got.begin(), got.end(), 0);
      HeadsByShaExtensions(messages, got.data());
      ASSERT_EQ(got, want) << "round " << round;
    }
  }
  if (!HasShaExtensions()) GTEST_SKIP() << "this CPU has no SHA extensions: only OpenSSL's way ran";
}

}  // namespace
}  // namespace streamlearn
