// Fuzz target sample_lines: SampleLineParser (client/lib/sample_parsers.h), the CLI's libsvm
// and Vowpal Wabbit sample lines, over every line SampleFileReader would hand it (non-blank,
// and for libsvm not a comment only). The first byte picks the format (bit 0: VW), hashing of
// string ids (bit 1) and the number of targets m (1..4, bits 2-3).
//
// Invariants: a refusal points at a column of the line (1..size + 1); an accepted sample has
// as many ids as values, m finite targets, finite values and a finite positive weight (1 for
// libsvm).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/lib/number_parse.h"
#include "client/lib/sample_parsers.h"
#include "fuzz/fuzz_check.h"

namespace streamlearn::fuzz {
namespace {

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
    if (!parser.Parse(line, &s, &error)) {
      FUZZ_CHECK(error.column >= 1 && error.column <= line.size() + 1, error.message);
      FUZZ_CHECK(!error.message.empty(), "an error without a message");
      continue;
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
