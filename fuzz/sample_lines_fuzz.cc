// Fuzz target sample_lines: SampleLineParser (client/lib/sample_parsers.h), the CLI's libsvm
// and Vowpal Wabbit sample lines, over every line SampleFileReader would hand it (non-blank,
// and for libsvm not a comment only). The first byte picks the format (bit 0: VW), hashing of
// string ids (bit 1) and the number of targets m (1..4, bits 2-3).
//
// Invariants: a refusal points at a column of the line (1..size + 1); an accepted sample has
// as many ids as values, m finite targets, finite values and a finite positive weight (1 for
// libsvm). A libsvm line with integer ids is read in one pass; it must give what reading it
// token by token gives (ReferenceLibsvm, its values read by std::from_chars, so the number
// parser's fast path is checked too): the same ids and values, or a refusal of both.
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "client/lib/number_parse.h"
#include "client/lib/sample_parsers.h"
#include "fuzz/fuzz_check.h"

namespace streamlearn::fuzz {
namespace {

// A finite double as std::from_chars reads it, optionally after a '+' (ParseFiniteDouble
// without its fast path, which this checks).
bool ReferenceDouble(std::string_view s, double* out) {
  s = TrimBlanks(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  double x = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(x)) return false;
  *out = x;
  return true;
}

// The libsvm features of a line with integer ids, read token by token with the number
// parsers alone (the values by std::from_chars); false where a token is not id:value.
// Targets are not read.
bool ReferenceLibsvm(std::string_view line, std::vector<uint64_t>* ids,
                     std::vector<double>* vals) {
  line = line.substr(0, line.find('#'));
  bool first = true;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t begin = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i == begin) break;
    const std::string_view token = line.substr(begin, i - begin);
    if (first) {  // y
      first = false;
      continue;
    }
    const size_t colon = token.find(':');
    uint64_t id = 0;
    double val = 0;
    if (colon == std::string_view::npos || colon == 0 || token.front() == '+' ||
        !ParseUint64(token.substr(0, colon), &id) ||
        !ReferenceDouble(token.substr(colon + 1), &val)) {
      return false;
    }
    ids->push_back(id);
    vals->push_back(val);
  }
  return true;
}

void Run(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const SampleFormat format = (data[0] & 1) != 0 ? SampleFormat::kVw : SampleFormat::kLibsvm;
  const bool hash_strings = (data[0] & 2) != 0;
  const int m = 1 + ((data[0] >> 2) & 3);
  const SampleLineParser parser(format, m, hash_strings);
  for (std::string_view line : SplitLines(AsText(data + 1, size - 1))) {
    std::string_view content = line;
    if (format == SampleFormat::kLibsvm) content = content.substr(0, content.find('#'));
    if (TrimBlanks(content).empty()) continue;
    SampleRecord s;
    LineError error;
    std::vector<uint64_t> ref_ids;
    std::vector<double> ref_vals;
    const bool integer_ids = format == SampleFormat::kLibsvm && !hash_strings;
    const bool ref_ok = integer_ids && ReferenceLibsvm(line, &ref_ids, &ref_vals);
    if (!parser.Parse(line, &s, &error)) {
      FUZZ_CHECK(error.column >= 1 && error.column <= line.size() + 1, error.message);
      FUZZ_CHECK(!error.message.empty(), "an error without a message");
      // A refusal of the features themselves: the reference refuses them too (a line the
      // reference accepts may still fail on its targets or have no features).
      if (ref_ok && !ref_ids.empty()) {
        const size_t y_begin = line.find_first_not_of(" \t");
        const size_t y_end = std::min(line.find_first_of(" \t", y_begin), line.size());
        FUZZ_CHECK(error.column <= y_end + 1,
                   "features the token-by-token reading accepts were refused: " + error.message);
      }
      continue;
    }
    if (integer_ids) {
      FUZZ_CHECK(ref_ok, "a libsvm line accepted that token by token is refused");
      FUZZ_CHECK(ref_ids == s.ids, "the one-pass ids differ from the token-by-token ones");
      FUZZ_CHECK(ref_vals.size() == s.vals.size(), line);
      for (size_t k = 0; k < ref_vals.size(); ++k) {
        FUZZ_CHECK(std::bit_cast<uint64_t>(ref_vals[k]) == std::bit_cast<uint64_t>(s.vals[k]),
                   "the one-pass values differ from the token-by-token ones");
      }
    }
    FUZZ_CHECK(s.ids.size() == s.vals.size(), line);
    FUZZ_CHECK(s.y.size() == static_cast<size_t>(m), line);
    for (double x : s.y) FUZZ_CHECK(std::isfinite(x), line);
    for (double x : s.vals) FUZZ_CHECK(std::isfinite(x), line);
    FUZZ_CHECK(std::isfinite(s.weight) && s.weight > 0, line);
    if (format == SampleFormat::kLibsvm) FUZZ_CHECK(s.weight == 1, line);
  }
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(data, size);
  return 0;
}
