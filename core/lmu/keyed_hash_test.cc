#include "core/lmu/keyed_hash.h"

#include <cstdint>
#include <random>
#include <set>
#include <cstdio>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace streamlearn::lmu {
namespace {

// A deliberately plain SipHash-c-d over a byte string, written from the paper's description
// (blocks of 8 little-endian bytes; the last block holds the tail bytes and, in its top byte,
// the length mod 256), to check the one-word fast path against.
uint64_t Rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

uint64_t ReferenceSipHash(int c, int d, const HashKey& key, const std::vector<uint8_t>& msg) {
  uint64_t v[4] = {key.k0 ^ 0x736f6d6570736575ULL, key.k1 ^ 0x646f72616e646f6dULL,
                   key.k0 ^ 0x6c7967656e657261ULL, key.k1 ^ 0x7465646279746573ULL};
  auto round = [&v] {
    v[0] += v[1]; v[1] = Rotl(v[1], 13); v[1] ^= v[0]; v[0] = Rotl(v[0], 32);
    v[2] += v[3]; v[3] = Rotl(v[3], 16); v[3] ^= v[2];
    v[0] += v[3]; v[3] = Rotl(v[3], 21); v[3] ^= v[0];
    v[2] += v[1]; v[1] = Rotl(v[1], 17); v[1] ^= v[2]; v[2] = Rotl(v[2], 32);
  };
  const size_t full = msg.size() / 8;
  for (size_t b = 0; b <= full; ++b) {
    uint64_t m = 0;
    if (b < full) {
      for (int i = 0; i < 8; ++i) m |= static_cast<uint64_t>(msg[8 * b + i]) << (8 * i);
    } else {
      for (size_t i = 8 * full; i < msg.size(); ++i) {
        m |= static_cast<uint64_t>(msg[i]) << (8 * (i - 8 * full));
      }
      m |= static_cast<uint64_t>(msg.size() & 0xff) << 56;
    }
    v[3] ^= m;
    for (int i = 0; i < c; ++i) round();
    v[0] ^= m;
  }
  v[2] ^= 0xff;
  for (int i = 0; i < d; ++i) round();
  return v[0] ^ v[1] ^ v[2] ^ v[3];
}

std::vector<uint8_t> Iota(size_t n) {
  std::vector<uint8_t> m(n);
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<uint8_t>(i);
  return m;
}

std::vector<uint8_t> LeBytes(uint64_t x) {
  std::vector<uint8_t> m(8);
  for (int i = 0; i < 8; ++i) m[i] = static_cast<uint8_t>(x >> (8 * i));
  return m;
}

// Key 00 01 .. 0f, as in the paper and the reference implementation's vectors.
constexpr HashKey kReferenceKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};

TEST(SipHashTest, ReferenceImplementationMatchesPublishedSipHash24Vectors) {
  struct Case {
    size_t length;  // message 00 01 .. (length-1)
    uint64_t expected;
  };
  const Case cases[] = {
      {0, 0x726fdb47dd0e0e31ULL},   // vectors table, entry 0
      {8, 0x93f5f5799a932462ULL},   // vectors table, entry 8
      {15, 0xa129ca6149be45e5ULL},  // the paper's worked example (appendix A)
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.length);
    EXPECT_EQ(ReferenceSipHash(2, 4, kReferenceKey, Iota(c.length)), c.expected);
  }
}

TEST(SipHashTest, OneWordSipHash24MatchesPublishedVector) {
  // Message 00 .. 07 read little-endian is the word 0x0706050403020100.
  EXPECT_EQ((internal::SipHashWord<2, 4>(kReferenceKey, 0x0706050403020100ULL)),
            0x93f5f5799a932462ULL);
}

TEST(SipHashTest, SipHash13MatchesReferenceOnRandomWordsAndKeys) {
  std::mt19937_64 rng(13);
  for (int i = 0; i < 2000; ++i) {
    const HashKey key{rng(), rng()};
    const uint64_t x = i < 4 ? static_cast<uint64_t>(i) - 1 : rng();  // includes ~0, 0, 1, 2
    SCOPED_TRACE(i);
    ASSERT_EQ(SipHash13(key, x), ReferenceSipHash(1, 3, key, LeBytes(x)));
    ASSERT_EQ((internal::SipHashWord<2, 4>(key, x)), ReferenceSipHash(2, 4, key, LeBytes(x)));
  }
}

// The batched form (four words per AVX2 register, the rest one by one) gives the scalar
// function's values, for every count around the vector width and any alignment of the input.
TEST(SipHashTest, SipHash13ManyIsSipHash13ForEveryCountAndOffset) {
  std::mt19937_64 rng(31);
  std::vector<uint64_t> words(80);
  for (uint64_t& w : words) w = rng();
  words[0] = 0;
  words[1] = ~uint64_t{0};
  for (int trial = 0; trial < 20; ++trial) {
    const HashKey key{rng(), rng()};
    for (size_t offset = 0; offset < 4; ++offset) {
      for (size_t n = 0; n + offset <= 37; ++n) {
        std::vector<uint64_t> out(n + 1, 0xdeadbeef);
        SipHash13Many(key, words.data() + offset, n, out.data());
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[i], SipHash13(key, words[offset + i])) << "n " << n << " i " << i;
        }
        ASSERT_EQ(out[n], 0xdeadbeef) << "wrote past n = " << n;
      }
    }
  }
}

// Each vector path on its own: the AVX-512 one (where the CPU has it) and the AVX2 one.
TEST(SipHashTest, EachVectorPathGivesTheScalarValues) {
  std::mt19937_64 rng(47);
  std::vector<uint64_t> words(64), out(64);
  for (uint64_t& w : words) w = rng();
  const HashKey key{rng(), rng()};
  for (const auto& [name, path] :
       {std::pair<const char*, size_t (*)(const HashKey&, const uint64_t*, size_t, uint64_t*)>{
            "avx512", &internal::SipHash13ManyWide},
        {"avx2", &internal::SipHash13ManyAvx2}}) {
    const size_t done = path(key, words.data(), words.size(), out.data());
    std::printf("%s path: %zu of %zu words\n", name, done, words.size());
    for (size_t i = 0; i < done; ++i) ASSERT_EQ(out[i], SipHash13(key, words[i])) << name << i;
  }
}

TEST(SipHashTest, SipHash13DiffersFromSipHash24) {
  EXPECT_NE(SipHash13(kReferenceKey, 0x0706050403020100ULL), 0x93f5f5799a932462ULL);
}

TEST(SipHashTest, KeyChangesOutput) {
  const HashKey a{1, 2}, b{1, 3}, c{2, 2};
  EXPECT_NE(SipHash13(a, 42), SipHash13(b, 42));
  EXPECT_NE(SipHash13(a, 42), SipHash13(c, 42));
}

// FoldHash's values are part of the MPHF image format (version 2): a base built on them is
// read back by recomputing them, so changing the function needs a new image version. These
// values pin it.
TEST(FoldHashTest, ValuesArePinnedByTheImageFormat) {
  struct Case {
    HashKey key;
    uint64_t x, h;
  };
  const Case cases[] = {
      {{0, 0}, 1, 0xf90109d2335f6b4fULL},
      {{0, 0}, 0x0123456789abcdefULL, 0x411bc2045a41486fULL},
      {kReferenceKey, 0, 0x79572778404d21a0ULL},
      {kReferenceKey, 1, 0x899d1baeb271194fULL},
      {kReferenceKey, ~uint64_t{0}, 0xf4660e7f7eb3304aULL},
      {kReferenceKey, 0x0123456789abcdefULL, 0x945b61bf0370ff56ULL},
  };
  for (const Case& c : cases) EXPECT_EQ(FoldHash(c.key, c.x), c.h) << c.x;
}

TEST(FoldHashTest, KeyChangesOutput) {
  const HashKey a{1, 2}, b{1, 3}, c{2, 2};
  EXPECT_NE(FoldHash(a, 42), FoldHash(b, 42));
  EXPECT_NE(FoldHash(a, 42), FoldHash(c, 42));
}

HashSecret TestSecret() {
  HashSecret s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(7 * i + 1);
  return s;
}

TEST(SipHashDeriveTest, DerivedKeyIsSipHash13OfPurposeAndGenerationUnderSecretHalves) {
  const HashSecret secret = TestSecret();
  auto le = [&](size_t at) {
    uint64_t x = 0;
    for (int i = 0; i < 8; ++i) x |= static_cast<uint64_t>(secret[at + i]) << (8 * i);
    return x;
  };
  const HashKey a{le(0), le(8)}, b{le(16), le(24)};
  const uint64_t message = 2 ^ (uint64_t{5} << 8);
  const HashKey expected{ReferenceSipHash(1, 3, a, LeBytes(message)),
                         ReferenceSipHash(1, 3, b, LeBytes(message))};
  EXPECT_EQ(DeriveHashKey(secret, HashPurpose::kCuckooA, 5), expected);
}

TEST(SipHashDeriveTest, DeterministicAndDistinctPerPurposeGenerationAndSecret) {
  const HashSecret secret = TestSecret();
  HashSecret other = secret;
  other[31] ^= 1;
  EXPECT_EQ(DeriveHashKey(secret, HashPurpose::kMphf, 3),
            DeriveHashKey(secret, HashPurpose::kMphf, 3));
  EXPECT_NE(DeriveHashKey(secret, HashPurpose::kMphf, 3),
            DeriveHashKey(other, HashPurpose::kMphf, 3));
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (HashPurpose p : {HashPurpose::kMphf, HashPurpose::kCuckooA, HashPurpose::kCuckooB,
                        HashPurpose::kCuckooStash}) {
    for (uint64_t g = 0; g < 64; ++g) {
      const HashKey k = DeriveHashKey(secret, p, g);
      EXPECT_TRUE(seen.insert({k.k0, k.k1}).second) << static_cast<int>(p) << " " << g;
    }
  }
}

}  // namespace
}  // namespace streamlearn::lmu
