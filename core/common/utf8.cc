#include "core/common/utf8.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace streamlearn {

size_t FindInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    // The length of the sequence and the range of its second byte (RFC 3629, section 4).
    size_t n = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      n = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 3;
      if (b == 0xE0) lo = 0xA0;  // no overlong forms
      if (b == 0xED) hi = 0x9F;  // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 4;
      if (b == 0xF0) lo = 0x90;  // no overlong forms
      if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return i;  // a continuation byte, 0xC0, 0xC1 or 0xF5..0xFF
    }
    if (i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k) {
      const uint8_t c = static_cast<uint8_t>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return i;
    }
    i += n;
  }
  return std::string_view::npos;
}

absl::Status CheckUtf8(std::string_view what, std::string_view s) {
  const size_t bad = FindInvalidUtf8(s);
  if (bad == std::string_view::npos) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat("%s is not valid UTF-8 (byte %d is 0x%02x)",
                                                    what, bad + 1,
                                                    static_cast<uint8_t>(s[bad])));
}

}  // namespace streamlearn
