// Strict parsing of numbers from text (event files, command-line flags).
//
// "Strict" means the whole field must be the number (surrounding blanks allowed), doubles
// must be finite, and nothing is silently truncated. Locale-independent (std::from_chars).
//
//   double x;
//   if (!ParseFiniteDouble(" 0.25", &x)) ...
//   absl::StatusOr<std::vector<double>> q = ParseDoubleList("0.1, 0.2,0.3");
//
// Thread safety: plain functions, no state.
#ifndef STREAMLEARN_CLIENT_LIB_NUMBER_PARSE_H_
#define STREAMLEARN_CLIENT_LIB_NUMBER_PARSE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace streamlearn {

// Removes leading and trailing spaces, tabs and carriage returns.
std::string_view TrimBlanks(std::string_view s);

// A finite double, optionally with a leading '+'. False for empty, partial or non-finite.
bool ParseFiniteDouble(std::string_view s, double* out);

// The fast path of ParseFiniteDouble (Clinger's): a plain decimal [-]digits[.digits] of at
// most 15 digits is M / 10^k with M < 2^53 and k <= 15, both exact doubles, so the one IEEE
// division is the correctly rounded value, the one std::from_chars returns.
//
// PlainDecimalPrefix reads such a decimal at the start of [p, end) and returns how many bytes
// it took, stopping at the first byte that cannot continue it; 0, with nothing parsed, when
// there is none there (or it has more than 15 digits, or ends in the point). The caller
// decides whether what follows may end a number (a blank, the end of a token).
inline size_t PlainDecimalPrefix(const char* p, const char* end, double* out) {
  static constexpr double kExactPow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                           1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  const char* q = p;
  const bool negative = q < end && *q == '-';
  if (negative) ++q;
  uint64_t m = 0;
  int digits = 0;
  int fraction = -1;  // digits after the point; -1: no point
  for (; q < end; ++q) {
    const char c = *q;
    if (c >= '0' && c <= '9') {
      if (++digits > 15) return 0;
      m = m * 10 + static_cast<uint64_t>(c - '0');
      if (fraction >= 0) ++fraction;
    } else if (c == '.' && fraction < 0) {
      fraction = 0;
    } else {
      break;
    }
  }
  if (digits == 0 || fraction == 0) return 0;
  double x = static_cast<double>(m);
  if (fraction > 0) x /= kExactPow10[fraction];  // no division for an integer (most values)
  *out = negative ? -x : x;
  return static_cast<size_t>(q - p);
}

// The whole of `s` as a plain decimal (above). False, with nothing parsed, for any other text
// (blanks included): give that to ParseFiniteDouble.
inline bool ParsePlainDecimal(std::string_view s, double* out) {
  double x = 0;
  if (s.empty() || PlainDecimalPrefix(s.data(), s.data() + s.size(), &x) != s.size()) {
    return false;
  }
  *out = x;
  return true;
}

// A decimal unsigned integer that fits in 64 bits.
bool ParseUint64(std::string_view s, uint64_t* out);

// Comma-separated finite doubles ("0.1,0.2"). INVALID_ARGUMENT naming the bad item (1-based).
absl::StatusOr<std::vector<double>> ParseDoubleList(std::string_view s);

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_NUMBER_PARSE_H_
