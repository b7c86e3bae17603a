// Keyed hashing for the LMU (seed 002 sec. 9.1, 12): SipHash-1-3 over 64-bit feature ids.
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
#include <cstdint>

namespace streamlearn::lmu {

struct HashKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
  bool operator==(const HashKey&) const = default;
};

// SipHash-1-3 of one 64-bit word (8 message bytes, little-endian) under `key`.
uint64_t SipHash13(const HashKey& key, uint64_t x);

// 32 bytes of secret material.
using HashSecret = std::array<uint8_t, 32>;

enum class HashPurpose : uint64_t { kMphf = 1, kCuckooA = 2, kCuckooB = 3, kCuckooStash = 4 };

HashKey DeriveHashKey(const HashSecret& secret, HashPurpose purpose, uint64_t generation);

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_KEYED_HASH_H_
