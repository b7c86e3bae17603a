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
// division is the correctly rounded value, the one std::from_chars returns. False, with
// nothing parsed, for any other text (blanks included): give that to ParseFiniteDouble.
inline bool ParsePlainDecimal(std::string_view s, double* out) {
  static constexpr double kExactPow10[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                           1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) i = 1;
  uint64_t m = 0;
  int digits = 0;
  int fraction = -1;  // digits after the point; -1: no point
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (++digits > 15) return false;
      m = m * 10 + static_cast<uint64_t>(c - '0');
      if (fraction >= 0) ++fraction;
    } else if (c == '.' && fraction < 0) {
      fraction = 0;
    } else {
      return false;
    }
  }
  if (digits == 0 || fraction == 0) return false;
  double x = static_cast<double>(m);
  if (fraction > 0) x /= kExactPow10[fraction];  // no division for an integer (most values)
  *out = negative ? -x : x;
  return true;
}

// A decimal unsigned integer that fits in 64 bits.
bool ParseUint64(std::string_view s, uint64_t* out);

// Comma-separated finite doubles ("0.1,0.2"). INVALID_ARGUMENT naming the bad item (1-based).
absl::StatusOr<std::vector<double>> ParseDoubleList(std::string_view s);

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_NUMBER_PARSE_H_
