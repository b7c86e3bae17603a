#include "core/common/short_sha256.h"

#include <cstring>

#include "core/common/digest.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace streamlearn {
namespace short_sha256_internal {
namespace {

uint64_t HeadOf(const Digest& d) {
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | d[i];
  return h;
}

size_t SizeOf(const ShortMessage& m) { return m.a.size() + m.b.size() + m.c.size(); }

// One block holds the message, the 0x80 byte and the 8-byte length.
constexpr size_t kMaxOneBlock = 55;

#if defined(__x86_64__)

// The round constants of FIPS 180-4, 4.2.2.
alignas(16) constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

// The heads of L single-block messages (padded already), compressed side by side from the
// initial hash value. The instructions keep the state as two words of four: (A, B, E, F) and
// (C, D, G, H), lane 3 first; each sha256rnds2 does two rounds, each sha256msg1/msg2 pair
// extends the message schedule by four words (FIPS 180-4, 6.2.2).
template <int L>
__attribute__((target("sha,sse4.1,ssse3"))) void HeadsOfBlocks(const uint8_t (*blocks)[64],
                                                               uint64_t* heads) {
  const __m128i kByteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  const __m128i kAbef = _mm_set_epi32(0x6a09e667, 0xbb67ae85, 0x510e527f, 0x9b05688c);
  const __m128i kCdgh = _mm_set_epi32(0x3c6ef372, 0xa54ff53a, 0x1f83d9ab, 0x5be0cd19);
  __m128i abef[L], cdgh[L], w[L][4];
  for (int l = 0; l < L; ++l) {
    abef[l] = kAbef;
    cdgh[l] = kCdgh;
    for (int i = 0; i < 4; ++i) {
      w[l][i] = _mm_shuffle_epi8(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[l] + 16 * i)), kByteSwap);
    }
  }
  for (int r = 0; r < 16; ++r) {  // rounds 4r .. 4r+3
    const __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(kRoundConstants + 4 * r));
    for (int l = 0; l < L; ++l) {
      __m128i& cur = w[l][r & 3];  // W[4r-16 .. 4r-13], becomes W[4r .. 4r+3]
      if (r >= 4) {
        __m128i t = _mm_sha256msg1_epu32(cur, w[l][(r + 1) & 3]);
        t = _mm_add_epi32(t, _mm_alignr_epi8(w[l][(r + 3) & 3], w[l][(r + 2) & 3], 4));
        cur = _mm_sha256msg2_epu32(t, w[l][(r + 3) & 3]);
      }
      __m128i wk = _mm_add_epi32(cur, k);
      cdgh[l] = _mm_sha256rnds2_epu32(cdgh[l], abef[l], wk);
      wk = _mm_shuffle_epi32(wk, 0x0E);
      abef[l] = _mm_sha256rnds2_epu32(abef[l], cdgh[l], wk);
    }
  }
  for (int l = 0; l < L; ++l) {
    const __m128i h = _mm_add_epi32(abef[l], kAbef);  // lanes 3, 2: H0, H1 of the digest
    heads[l] = (uint64_t{static_cast<uint32_t>(_mm_extract_epi32(h, 3))} << 32) |
               static_cast<uint32_t>(_mm_extract_epi32(h, 2));
  }
}

// The padded block of a message of at most kMaxOneBlock bytes (FIPS 180-4, 5.1.1).
void PadInto(const ShortMessage& m, uint8_t (&block)[64]) {
  std::memset(block, 0, sizeof(block));
  uint8_t* p = block;
  for (std::string_view s : {m.a, m.b, m.c}) {
    if (!s.empty()) std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
  const size_t n = static_cast<size_t>(p - block);
  block[n] = 0x80;
  const uint64_t bits = uint64_t{n} * 8;
  for (int i = 0; i < 8; ++i) block[63 - i] = static_cast<uint8_t>(bits >> (8 * i));
}

bool DetectShaExtensions() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
  const bool ssse3 = (c & (1u << 9)) != 0, sse41 = (c & (1u << 19)) != 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  const bool sha = (b & (1u << 29)) != 0;
  return ssse3 && sse41 && sha;
}

#endif  // __x86_64__

}  // namespace

bool HasShaExtensions() {
#if defined(__x86_64__)
  static const bool has = DetectShaExtensions();
  return has;
#else
  return false;
#endif
}

void HeadsByOpenSsl(std::span<const ShortMessage> messages, uint64_t* heads) {
  thread_local Sha256 sha;  // one context per thread: making one per message costs as much
  for (size_t i = 0; i < messages.size(); ++i) {
    sha.Reset();
    sha.Update(messages[i].a);
    sha.Update(messages[i].b);
    sha.Update(messages[i].c);
    heads[i] = HeadOf(sha.Finish());
  }
}

void HeadsByShaExtensions(std::span<const ShortMessage> messages, uint64_t* heads) {
#if defined(__x86_64__)
  constexpr int kLanes = 4;
  uint8_t blocks[kLanes][64];
  size_t lane_of[kLanes];  // the message in each lane
  int filled = 0;
  uint64_t out[kLanes];
  for (size_t i = 0; i < messages.size(); ++i) {
    if (SizeOf(messages[i]) > kMaxOneBlock) {
      HeadsByOpenSsl(messages.subspan(i, 1), heads + i);
      continue;
    }
    PadInto(messages[i], blocks[filled]);
    lane_of[filled++] = i;
    if (filled == kLanes) {
      HeadsOfBlocks<kLanes>(blocks, out);
      for (int l = 0; l < kLanes; ++l) heads[lane_of[l]] = out[l];
      filled = 0;
    }
  }
  // The last one to three: three go as four (the fourth lane repeats the third; four side by
  // side cost less than two and one), two as two, one alone.
  if (filled == 3) {
    std::memcpy(blocks[3], blocks[2], sizeof(blocks[3]));
    HeadsOfBlocks<4>(blocks, out);
  } else if (filled == 2) {
    HeadsOfBlocks<2>(blocks, out);
  } else if (filled == 1) {
    HeadsOfBlocks<1>(blocks, out);
  }
  for (int l = 0; l < filled; ++l) heads[lane_of[l]] = out[l];
#else
  HeadsByOpenSsl(messages, heads);
#endif
}

}  // namespace short_sha256_internal

void Sha256Heads(std::span<const ShortMessage> messages, uint64_t* heads) {
  if (short_sha256_internal::HasShaExtensions()) {
    short_sha256_internal::HeadsByShaExtensions(messages, heads);
  } else {
    short_sha256_internal::HeadsByOpenSsl(messages, heads);
  }
}

}  // namespace streamlearn
