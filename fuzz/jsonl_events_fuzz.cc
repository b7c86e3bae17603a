// Fuzz target jsonl_events: JsonlEventParser (client/lib/jsonl_events.h), the CLI's JSON
// Lines event reader, over every non-blank line as EventFileReader feeds them. The first
// byte picks the model's dimensions (d, d_v in 1..4).
//
// Invariants: a refusal points at a column of the line (1..size + 1) and says what is wrong;
// an accepted line has d finite keys and d_v finite values, and a valid UTF-8 key if any.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/lib/jsonl_events.h"
#include "client/lib/number_parse.h"
#include "core/common/utf8.h"
#include "fuzz/fuzz_check.h"

namespace streamlearn::fuzz {
namespace {

void Run(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const int d = 1 + (data[0] & 3), d_v = 1 + ((data[0] >> 2) & 3);
  const JsonlEventParser parser(d, d_v);
  for (std::string_view line : SplitLines(AsText(data + 1, size - 1))) {
    if (TrimBlanks(line).empty()) continue;
    EventRecord e;
    LineError error;
    if (!parser.ParseLine(line, &e, &error)) {
      FUZZ_CHECK(error.column >= 1 && error.column <= line.size() + 1, error.message);
      FUZZ_CHECK(!error.message.empty(), "an error without a message");
      continue;
    }
    FUZZ_CHECK(e.k.size() == static_cast<size_t>(d) && e.v.size() == static_cast<size_t>(d_v),
               line);
    for (double x : e.k) FUZZ_CHECK(std::isfinite(x), line);
    for (double x : e.v) FUZZ_CHECK(std::isfinite(x), line);
    if (e.has_key) FUZZ_CHECK(CheckUtf8("key", e.key).ok(), line);
  }
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(data, size);
  return 0;
}
