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

// A decimal unsigned integer that fits in 64 bits.
bool ParseUint64(std::string_view s, uint64_t* out);

// Comma-separated finite doubles ("0.1,0.2"). INVALID_ARGUMENT naming the bad item (1-based).
absl::StatusOr<std::vector<double>> ParseDoubleList(std::string_view s);

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_NUMBER_PARSE_H_
