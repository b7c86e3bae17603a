// Internal: UTF-8 validation shared by the audit encoder and parser.
#ifndef STREAMLEARN_CORE_AUDIT_UTF8_H_
#define STREAMLEARN_CORE_AUDIT_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace streamlearn {
namespace audit_internal {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid (overlong forms,
// surrogates and code points above U+10FFFF are invalid).
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

}  // namespace audit_internal
}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_UTF8_H_
