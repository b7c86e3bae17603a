// SHA-256 of many short messages at once: the first 8 bytes of each digest, read big-endian
// (the 64-bit ids of string features, client/lib/sample_parsers.h FeatureHash).
//
// A message of at most 55 bytes is one padded block. Where the CPU has the SHA extensions
// (x86 SHA-NI), four such blocks are compressed side by side: one compression is a chain of
// dependent rounds, and four independent chains fill the time each round waits for the one
// before it (about 30 ns a message against OpenSSL's 90, which is mostly per-call overhead).
// Longer messages, and every message on a CPU without the extensions, go through OpenSSL. The
// digests are SHA-256's either way (FIPS 180-4); only the speed differs.
//
//   ShortMessage m[2] = {{"user", "^", "age"}, {"", "^", "tall"}};
//   uint64_t heads[2];
//   Sha256Heads(m, heads);   // heads[i] = first 8 bytes of SHA-256(m[i].a + m[i].b + m[i].c)
//
// Thread safety: plain functions, no state (the CPU check is a constant).
#ifndef STREAMLEARN_CORE_COMMON_SHORT_SHA256_H_
#define STREAMLEARN_CORE_COMMON_SHORT_SHA256_H_

#include <cstdint>
#include <span>
#include <string_view>

namespace streamlearn {

// A message given in three pieces, hashed as their concatenation a + b + c.
struct ShortMessage {
  std::string_view a, b, c;
};

// heads[i] = the first 8 bytes, big-endian, of SHA-256(messages[i]). REQUIRES: room for
// messages.size() heads.
void Sha256Heads(std::span<const ShortMessage> messages, uint64_t* heads);

namespace short_sha256_internal {
// Whether Sha256Heads uses the SHA extensions on this CPU.
bool HasShaExtensions();
// The two ways, for tests that compare them: every message through OpenSSL, and the SHA
// extensions' path (REQUIRES: HasShaExtensions()).
void HeadsByOpenSsl(std::span<const ShortMessage> messages, uint64_t* heads);
void HeadsByShaExtensions(std::span<const ShortMessage> messages, uint64_t* heads);
}  // namespace short_sha256_internal

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_SHORT_SHA256_H_
