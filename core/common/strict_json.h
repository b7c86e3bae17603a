// ParseStrictJson: JSON text to nlohmann::json, for every JSON the project reads from a user
// (the server's config file, JSONL event lines, `streamlearn create --spec-json`).
//
// Stricter than nlohmann::json::parse and never throws:
//   - a number out of the range of a double (1e400) is an error with its position, where
//     nlohmann throws out_of_range (406) rather than parse_error, which callers that catch
//     parse_error only do not catch;
//   - a key given twice in one object ({"t": 1, "t": 2}) is an error naming the key, where
//     nlohmann keeps the last value silently;
//   - objects and arrays nested deeper than kStrictJsonMaxDepth levels are an error, at the
//     bracket that opens one too many: nlohmann parses any depth, but dump(), which callers
//     use to quote a value in an error, recurses once per level and a few hundred KiB of
//     brackets overflowed the stack;
//   - anything else thrown while parsing (std::bad_alloc) becomes a status.
// The rest is nlohmann's: RFC 8259 with well-formed UTF-8, a leading UTF-8 BOM skipped, no
// comments, nothing after the value but whitespace.
//
//   absl::StatusOr<nlohmann::json> doc = ParseStrictJson(text);
//   if (!doc.ok()) return doc.status();   // "line 3, column 14: duplicate key \"t\""
//
// Positions count bytes; lines and columns are 1-based; the column is that of the last byte
// read when the problem showed (for a duplicate key: the key's opening quote).
//
// Thread safety: a plain function without shared state.
#ifndef STREAMLEARN_CORE_COMMON_STRICT_JSON_H_
#define STREAMLEARN_CORE_COMMON_STRICT_JSON_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace streamlearn {

// Where and what, for callers that print positions their own way (a JSONL line's column
// inside "path:line:column").
struct JsonTextError {
  size_t line = 0;      // 1-based
  size_t column = 0;    // 1-based, in bytes
  std::string problem;  // without the position, e.g. "duplicate key \"t\""
};

// Far beyond any document the project reads (a config file nests 4 levels).
inline constexpr int kStrictJsonMaxDepth = 512;

// Errors: INVALID_ARGUMENT "line L, column C: <problem>"; *error (when not null) gets the
// same parts.
absl::StatusOr<nlohmann::json> ParseStrictJson(std::string_view text,
                                               JsonTextError* error = nullptr);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_COMMON_STRICT_JSON_H_
