// Philox4x32-10: the counter-based generator that draws W and U (docs/DECISIONS.md 9).
//
// Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3" (SC'11). Output
// block n of stream (seed, stream) is Philox4x32-10 with key (seed_lo, seed_hi) applied to the
// counter (n_lo, n_hi, stream_lo, stream_hi). A block gives two 64-bit words, word = lo | hi<<32.
// Uniforms take the top 53 bits of a word; normals come from Box-Muller on two uniforms
// (u1 in (0, 1], u2 in [0, 1)): z0 = sqrt(-2 ln u1) cos(2 pi u2), z1 = ... sin(2 pi u2), used
// in that order. Any implementation of these few lines reproduces W from the seed; the digest
// of W (FeatureMap::digest) tells whether it did.
#ifndef STREAMLEARN_CORE_SAU_COUNTER_RNG_H_
#define STREAMLEARN_CORE_SAU_COUNTER_RNG_H_

#include <array>
#include <cstdint>

namespace streamlearn::sau {

std::array<uint32_t, 4> Philox4x32x10(std::array<uint32_t, 4> counter,
                                      std::array<uint32_t, 2> key);

// Sequential reader over one stream. Not thread-safe.
class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}

  uint64_t NextU64();
  double NextUniform();        // [0, 1)
  double NextUniformOpen0();   // (0, 1]
  double NextNormal();         // N(0, 1) by Box-Muller, cached second value

 private:
  uint64_t seed_;
  uint64_t stream_;
  uint64_t block_ = 0;
  std::array<uint64_t, 2> words_{};
  int word_index_ = 2;  // 2 => refill
  bool has_spare_ = false;
  double spare_ = 0;
};

// Documented stream identifiers: one per purpose, so draws never overlap.
inline constexpr uint64_t kStreamW = 1;         // Gaussian entries of W (or the QR blocks)
inline constexpr uint64_t kStreamChiNorms = 2;  // Gaussian vectors whose norms are chi(d)
inline constexpr uint64_t kStreamU = 3;         // Gaussian entries of U before orthonormalising
inline constexpr uint64_t kStreamSrhtSigns = 4;  // Rademacher signs of the SRHT blocks' D1, D2, D3

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_COUNTER_RNG_H_
