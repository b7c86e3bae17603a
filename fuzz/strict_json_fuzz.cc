// Fuzz target strict_json: ParseStrictJson (core/common/strict_json.h), the reader of every
// JSON a user hands the project (the server's config file, the access policy, JSONL event
// lines, `streamlearn create --spec-json`).
//
// Invariants: it never throws; a refusal is INVALID_ARGUMENT "line L, column C: ..." with the
// same position in JsonTextError, inside the text; what it accepts nlohmann accepts too, with
// the same value, and the value's own dump parses back to it (dump() recurses once per level:
// the depth limit keeps it safe).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/strict_json.h"
#include "fuzz/fuzz_check.h"
#include "nlohmann/json.hpp"

namespace streamlearn::fuzz {
namespace {

void Run(std::string_view text) {
  JsonTextError error;
  absl::StatusOr<nlohmann::json> doc = ParseStrictJson(text, &error);
  if (!doc.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(doc.status()), doc.status().ToString());
    FUZZ_CHECK(absl::StartsWith(doc.status().message(),
                                absl::StrCat("line ", error.line, ", column ", error.column,
                                             ": ", error.problem)),
               doc.status().ToString());
    const size_t lines = 1 + static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    FUZZ_CHECK(error.line >= 1 && error.line <= lines, doc.status().ToString());
    FUZZ_CHECK(error.column >= 1 && error.column <= text.size() + 1, doc.status().ToString());
    return;
  }
  FUZZ_CHECK(nlohmann::json::accept(text), "accepted what nlohmann refuses");
  FUZZ_CHECK(nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false) == *doc,
             "a value other than nlohmann's");
  const std::string dumped = doc->dump();
  absl::StatusOr<nlohmann::json> back = ParseStrictJson(dumped);
  FUZZ_CHECK(back.ok(), absl::StrCat(dumped, ": ", back.status().ToString()));
  FUZZ_CHECK(*back == *doc, dumped);
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
