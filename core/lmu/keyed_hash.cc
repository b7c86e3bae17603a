#include "core/lmu/keyed_hash.h"

#include <cstddef>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace streamlearn::lmu {

namespace {

// Little-endian 64-bit word from 8 bytes, as SipHash reads its key.
uint64_t LoadLe64(const uint8_t* p) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; --i) x = (x << 8) | p[i];
  return x;
}

HashKey KeyFromBytes(const uint8_t* p) { return HashKey{LoadLe64(p), LoadLe64(p + 8)}; }

}  // namespace

uint64_t SipHash13(const HashKey& key, uint64_t x) { return internal::SipHashWord<1, 3>(key, x); }

#if defined(__AVX2__)
namespace {

// internal::SipRound on four independent states, one per 64-bit lane. AVX2 has no 64-bit
// rotate: the rotations by 32 and 16 are byte shuffles, the others two shifts and an or.
template <int kBits>
inline __m256i Rotl(__m256i x) {
  if constexpr (kBits == 32) {
    return _mm256_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1));
  } else if constexpr (kBits == 16) {
    const __m256i by16 = _mm256_setr_epi8(6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8, 9, 10, 11, 12, 13,
                                          6, 7, 0, 1, 2, 3, 4, 5, 14, 15, 8, 9, 10, 11, 12, 13);
    return _mm256_shuffle_epi8(x, by16);
  } else {
    return _mm256_or_si256(_mm256_slli_epi64(x, kBits), _mm256_srli_epi64(x, 64 - kBits));
  }
}

inline void SipRound4(__m256i& v0, __m256i& v1, __m256i& v2, __m256i& v3) {
  v0 = _mm256_add_epi64(v0, v1);
  v1 = Rotl<13>(v1);
  v1 = _mm256_xor_si256(v1, v0);
  v0 = Rotl<32>(v0);
  v2 = _mm256_add_epi64(v2, v3);
  v3 = Rotl<16>(v3);
  v3 = _mm256_xor_si256(v3, v2);
  v0 = _mm256_add_epi64(v0, v3);
  v3 = Rotl<21>(v3);
  v3 = _mm256_xor_si256(v3, v0);
  v2 = _mm256_add_epi64(v2, v1);
  v1 = Rotl<17>(v1);
  v1 = _mm256_xor_si256(v1, v2);
  v2 = Rotl<32>(v2);
}

// internal::SipHashWord<1, 3> of x[0..4).
inline void SipHash13x4(const HashKey& key, const uint64_t* x, uint64_t* out) {
  const auto splat = [](uint64_t v) { return _mm256_set1_epi64x(static_cast<long long>(v)); };
  __m256i v0 = splat(key.k0 ^ 0x736f6d6570736575ULL);
  __m256i v1 = splat(key.k1 ^ 0x646f72616e646f6dULL);
  __m256i v2 = splat(key.k0 ^ 0x6c7967656e657261ULL);
  __m256i v3 = splat(key.k1 ^ 0x7465646279746573ULL);
  const __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  v3 = _mm256_xor_si256(v3, m);
  SipRound4(v0, v1, v2, v3);
  v0 = _mm256_xor_si256(v0, m);
  const __m256i length = splat(uint64_t{8} << 56);
  v3 = _mm256_xor_si256(v3, length);
  SipRound4(v0, v1, v2, v3);
  v0 = _mm256_xor_si256(v0, length);
  v2 = _mm256_xor_si256(v2, splat(0xff));
  SipRound4(v0, v1, v2, v3);
  SipRound4(v0, v1, v2, v3);
  SipRound4(v0, v1, v2, v3);
  const __m256i h = _mm256_xor_si256(_mm256_xor_si256(v0, v1), _mm256_xor_si256(v2, v3));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), h);
}

}  // namespace
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define STREAMLEARN_SIPHASH_AVX512 1
namespace {

// The same with eight lanes of AVX-512, which rotates 64-bit lanes in one instruction. Built
// for AVX-512 whatever the build's target, and called only where the CPU has it.
#define STREAMLEARN_AVX512 __attribute__((target("avx512f")))

STREAMLEARN_AVX512 inline void SipRound8(__m512i& v0, __m512i& v1, __m512i& v2, __m512i& v3) {
  v0 = _mm512_add_epi64(v0, v1);
  v1 = _mm512_rol_epi64(v1, 13);
  v1 = _mm512_xor_si512(v1, v0);
  v0 = _mm512_rol_epi64(v0, 32);
  v2 = _mm512_add_epi64(v2, v3);
  v3 = _mm512_rol_epi64(v3, 16);
  v3 = _mm512_xor_si512(v3, v2);
  v0 = _mm512_add_epi64(v0, v3);
  v3 = _mm512_rol_epi64(v3, 21);
  v3 = _mm512_xor_si512(v3, v0);
  v2 = _mm512_add_epi64(v2, v1);
  v1 = _mm512_rol_epi64(v1, 17);
  v1 = _mm512_xor_si512(v1, v2);
  v2 = _mm512_rol_epi64(v2, 32);
}

STREAMLEARN_AVX512 size_t SipHash13x8(const HashKey& key, const uint64_t* x, size_t n,
                                      uint64_t* out) {
  const __m512i s0 = _mm512_set1_epi64(static_cast<long long>(key.k0 ^ 0x736f6d6570736575ULL));
  const __m512i s1 = _mm512_set1_epi64(static_cast<long long>(key.k1 ^ 0x646f72616e646f6dULL));
  const __m512i s2 = _mm512_set1_epi64(static_cast<long long>(key.k0 ^ 0x6c7967656e657261ULL));
  const __m512i s3 = _mm512_set1_epi64(static_cast<long long>(key.k1 ^ 0x7465646279746573ULL));
  const __m512i length = _mm512_set1_epi64(static_cast<long long>(uint64_t{8} << 56));
  const __m512i ff = _mm512_set1_epi64(0xff);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512i v0 = s0, v1 = s1, v2 = s2, v3 = s3;
    const __m512i m = _mm512_loadu_si512(x + i);
    v3 = _mm512_xor_si512(v3, m);
    SipRound8(v0, v1, v2, v3);
    v0 = _mm512_xor_si512(v0, m);
    v3 = _mm512_xor_si512(v3, length);
    SipRound8(v0, v1, v2, v3);
    v0 = _mm512_xor_si512(v0, length);
    v2 = _mm512_xor_si512(v2, ff);
    SipRound8(v0, v1, v2, v3);
    SipRound8(v0, v1, v2, v3);
    SipRound8(v0, v1, v2, v3);
    _mm512_storeu_si512(out + i,
                        _mm512_xor_si512(_mm512_xor_si512(v0, v1), _mm512_xor_si512(v2, v3)));
  }
  return i;
}

bool CpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

}  // namespace
#endif

namespace internal {

size_t SipHash13ManyWide(const HashKey& key, const uint64_t* x, size_t n, uint64_t* out) {
#if defined(STREAMLEARN_SIPHASH_AVX512)
  if (CpuHasAvx512()) return SipHash13x8(key, x, n, out);
#else
  (void)key, (void)x, (void)n, (void)out;
#endif
  return 0;
}

size_t SipHash13ManyAvx2(const HashKey& key, const uint64_t* x, size_t n, uint64_t* out) {
  size_t i = 0;
#if defined(__AVX2__)
  for (; i + 4 <= n; i += 4) SipHash13x4(key, x + i, out + i);
#else
  (void)key, (void)x, (void)out;
#endif
  return i;
}

}  // namespace internal

void SipHash13Many(const HashKey& key, const uint64_t* x, size_t n, uint64_t* out) {
  size_t i = internal::SipHash13ManyWide(key, x, n, out);
  i += internal::SipHash13ManyAvx2(key, x + i, n - i, out + i);
  for (; i < n; ++i) out[i] = internal::SipHashWord<1, 3>(key, x[i]);
}

HashKey DeriveHashKey(const HashSecret& secret, HashPurpose purpose, uint64_t generation) {
  const HashKey secret_a = KeyFromBytes(secret.data());
  const HashKey secret_b = KeyFromBytes(secret.data() + 16);
  const uint64_t message = static_cast<uint64_t>(purpose) ^ (generation << 8);
  return HashKey{SipHash13(secret_a, message), SipHash13(secret_b, message)};
}

}  // namespace streamlearn::lmu
