// UTF-8 validity, for text a client sends as a proto `string` (model names, routing keys):
// protobuf refuses to parse a string field that is not UTF-8, so the CLI checks first and
// names the field instead of getting an opaque error back from the server.
//
//   if (absl::Status s = CheckUtf8("--routing-key", key); !s.ok()) return s;
//
// Thread safety: plain functions without shared state.
#ifndef STREAMLEARN_CORE_COMMON_UTF8_H_
#define STREAMLEARN_CORE_COMMON_UTF8_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace streamlearn {

// The offset of the first byte of `s` that does not start a well-formed UTF-8 sequence
// (RFC 3629: no overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF, no
// truncated sequence), or npos when all of `s` is well formed.
size_t FindInvalidUtf8(std::string_view s);

inline bool IsValidUtf8(std::string_view s) {
  return FindInvalidUtf8(s) == std::string_view::npos;
}

// OK, or INVALID_ARGUMENT "<what> is not valid UTF-8 (byte B is 0xHH)" with B 1-based.
absl::Status CheckUtf8(std::string_view what, std::string_view s);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_UTF8_H_
