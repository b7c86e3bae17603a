// Fuzz target audit_line: canonical audit lines (docs/AUDIT.md) as `streamlearn audit verify`
// reads an exported chain: each line parsed with require_canonical, and the whole chain fed
// line by line to the one-pass AuditVerifier (core/audit/verifier.h) with the fixture's key
// and checkpoint cadence (fuzz/audit_fixture.h).
//
// Invariants: a line accepted as canonical is byte-identical to the encoding of what it parses
// to; the verifier's first failure is DATA_LOSS naming the record and a rule, at the position
// of the record that broke it, and every later call returns the same status; records() counts
// the records that passed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/audit/audit_record.h"
#include "core/audit/verifier.h"
#include "fuzz/audit_fixture.h"
#include "fuzz/fuzz_check.h"

namespace streamlearn::fuzz {
namespace {

void Run(std::string_view text) {
  const std::vector<std::string_view> lines = SplitLines(text);
  for (std::string_view line : lines) {
    absl::StatusOr<AuditRecord> r = ParseAuditJson(line, {.require_canonical = true});
    if (!r.ok()) {
      FUZZ_CHECK(absl::IsInvalidArgument(r.status()), r.status().ToString());
      continue;
    }
    absl::StatusOr<std::string> canon = EncodeCanonical(*r);
    FUZZ_CHECK(canon.ok() && *canon == line, line);
  }

  AuditVerifier verifier({.public_key = &AuditKey().PublicKey(),
                          .checkpoint_every = kCheckpointEvery,
                          .chain = AuditChain(),
                          .parse = {.require_canonical = true}});
  absl::Status first;
  for (std::string_view line : lines) {
    const uint64_t before = verifier.records();
    absl::Status s = verifier.Feed(line);
    if (!first.ok()) {
      FUZZ_CHECK(s == first, s.ToString());
      continue;
    }
    if (s.ok()) {
      FUZZ_CHECK(verifier.records() == before + 1, "a record passed uncounted");
      continue;
    }
    first = s;
    FUZZ_CHECK(absl::IsDataLoss(s), s.ToString());
    FUZZ_CHECK(verifier.first_bad_index() == before, s.ToString());
    FUZZ_CHECK(verifier.failed_rule() != AuditRule::kNone, s.ToString());
    const std::string rule(AuditRuleName(verifier.failed_rule()));
    FUZZ_CHECK(absl::StartsWith(s.message(),
                                absl::StrCat("audit record ", before, " breaks rule ", rule)),
               s.ToString());
  }
  absl::Status end = verifier.Finish();
  if (!first.ok()) FUZZ_CHECK(end == first, end.ToString());
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
