// SHA-256 digests (OpenSSL EVP) and the byte-exact serialisation used to feed them.
//
// Digests identify state and inputs in acks, model info and (later) the audit chain. Doubles
// are hashed as their IEEE-754 bit patterns in little-endian order, so equal digests mean
// bit-identical values.
#ifndef STREAMLEARN_CORE_COMMON_DIGEST_H_
#define STREAMLEARN_CORE_COMMON_DIGEST_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace streamlearn {

using Digest = std::array<uint8_t, 32>;

std::string ToHex(const Digest& d);
// The 64 lowercase hex digits of `d` at `out` (room for 64 chars); returns the end.
char* WriteHex(const Digest& d, char* out);

// Incremental SHA-256. Not thread-safe; one hasher per thread.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  void U64(uint64_t x);           // little-endian
  void F64(double x);             // IEEE-754 bits, little-endian
  void F64s(std::span<const double> xs);
  Digest Finish();
  // Starts a new digest on the same context (cheaper than a new hasher).
  void Reset();

 private:
  void* ctx_;  // EVP_MD_CTX*
};

Digest Sha256Of(std::string_view bytes);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_DIGEST_H_
