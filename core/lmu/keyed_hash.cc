#include "core/lmu/keyed_hash.h"

#include <cstddef>

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

HashKey DeriveHashKey(const HashSecret& secret, HashPurpose purpose, uint64_t generation) {
  const HashKey secret_a = KeyFromBytes(secret.data());
  const HashKey secret_b = KeyFromBytes(secret.data() + 16);
  const uint64_t message = static_cast<uint64_t>(purpose) ^ (generation << 8);
  return HashKey{SipHash13(secret_a, message), SipHash13(secret_b, message)};
}

}  // namespace streamlearn::lmu
