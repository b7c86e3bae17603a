// Keyed hashing for the LMU (docs/LMU.md, "Hashing"): SipHash-1-3 over 64-bit feature ids, and
// FoldHash (below) for the base's MPHF only.
//
// SipHash is a pseudorandom function: without the 128-bit key a client cannot predict where
// an id lands, so it cannot aim ids at one bucket (hash flooding). Exact membership never rests
// on the hash (Keys_base and the delta store the ids themselves), so a collision costs a probe,
// never a wrong weight.
//
// Keys come from a secret (32 bytes, e.g. a file under the data directory) and are derived per
// purpose and generation, so that every rebuild rotates them deterministically:
//   key(purpose, generation) = (SipHash13(secret_a, purpose ^ (generation << 8)),
//                               SipHash13(secret_b, purpose ^ (generation << 8)))
// with secret_a, secret_b the two 128-bit halves of the secret. The same secret and the same
// events give the same keys, so LMU state stays bit-reproducible. Keys are never logged.
#ifndef STREAMLEARN_CORE_LMU_KEYED_HASH_H_
#define STREAMLEARN_CORE_LMU_KEYED_HASH_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace streamlearn::lmu {

struct HashKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
  bool operator==(const HashKey&) const = default;
};

// SipHash-1-3 of one 64-bit word (8 message bytes, little-endian) under `key`.
uint64_t SipHash13(const HashKey& key, uint64_t x);

// SipHash13(key, x[i]) into out[i] for i < n, several words at a time in the 64-bit lanes
// of a vector register: eight with AVX-512 where the CPU has it (chosen at run time), four
// with AVX2 where the build targets it, the rest one at a time. Every path does the same
// integer operations, so the values are the scalar function's, bit for bit, on any CPU.
void SipHash13Many(const HashKey& key, const uint64_t* x, size_t n, uint64_t* out);

// FoldHash: two 64x64->128-bit multiplies, each folded to 64 bits by xoring the halves of the
// product, keyed by both halves of the key:
//   FoldHash(k, x) = fold((fold((x ^ k0) * ((k1 ^ C1) | 1)) ^ k1) * C2)
// with C1, C2 the fractional parts of sqrt(2) and sqrt(3). About 10 instructions against
// SipHash-1-3's ~90. It is keyed but NOT a PRF: use it only where a structural collision costs
// time and cannot cost correctness, and where SipHash stays as the fallback (the MPHF of the
// base, docs/LMU_MPHF.md "Why a weaker hash is safe here").
inline uint64_t FoldMultiply(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}
inline uint64_t FoldHash(const HashKey& key, uint64_t x) {
  constexpr uint64_t kC1 = 0x6a09e667f3bcc908ULL;
  constexpr uint64_t kC2 = 0xbb67ae8584caa73bULL;  // odd
  return FoldMultiply(FoldMultiply(x ^ key.k0, (key.k1 ^ kC1) | 1) ^ key.k1, kC2);
}

// 32 bytes of secret material.
using HashSecret = std::array<uint8_t, 32>;

enum class HashPurpose : uint64_t { kMphf = 1, kCuckooA = 2, kCuckooB = 3, kCuckooStash = 4 };

HashKey DeriveHashKey(const HashSecret& secret, HashPurpose purpose, uint64_t generation);

namespace internal {

// The vector paths of SipHash13Many, for its tests: each hashes a prefix of x[0..n) and
// returns its length (0 where the CPU or the build lacks the instructions).
size_t SipHash13ManyWide(const HashKey& key, const uint64_t* x, size_t n, uint64_t* out);
size_t SipHash13ManyAvx2(const HashKey& key, const uint64_t* x, size_t n, uint64_t* out);

// SipHash-c-d (Aumasson & Bernstein 2012) of one 64-bit message word: the word is the only
// full block and the final block is the length byte alone (8 << 56). Inline so that hot paths
// (Mphf lookup) can fold it in; SipHash13 above is SipHashWord<1, 3>. The test checks the
// c=2, d=4 instance against the reference vectors (SipHash-1-3 has no official vectors).
inline void SipRound(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
  v0 += v1;
  v1 = std::rotl(v1, 13);
  v1 ^= v0;
  v0 = std::rotl(v0, 32);
  v2 += v3;
  v3 = std::rotl(v3, 16);
  v3 ^= v2;
  v0 += v3;
  v3 = std::rotl(v3, 21);
  v3 ^= v0;
  v2 += v1;
  v1 = std::rotl(v1, 17);
  v1 ^= v2;
  v2 = std::rotl(v2, 32);
}

template <int kCompressionRounds, int kFinalizationRounds>
inline uint64_t SipHashWord(const HashKey& key, uint64_t x) {
  // "somepseudorandomlygeneratedbytes", the initialisation constants of the paper.
  uint64_t v0 = key.k0 ^ 0x736f6d6570736575ULL;
  uint64_t v1 = key.k1 ^ 0x646f72616e646f6dULL;
  uint64_t v2 = key.k0 ^ 0x6c7967656e657261ULL;
  uint64_t v3 = key.k1 ^ 0x7465646279746573ULL;
  auto absorb = [&](uint64_t m) {
    v3 ^= m;
    for (int i = 0; i < kCompressionRounds; ++i) SipRound(v0, v1, v2, v3);
    v0 ^= m;
  };
  absorb(x);
  absorb(uint64_t{8} << 56);  // message length 8, no tail bytes
  v2 ^= 0xff;
  for (int i = 0; i < kFinalizationRounds; ++i) SipRound(v0, v1, v2, v3);
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace internal

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_KEYED_HASH_H_
