// Fuzz target audit_append: the JSON of Auditor.Append (core/audit/append_body.h: ParseAuditJson
// under Append's limits, the "certificate" member's check, the canonical body), and
// ParseAuditJson with its default limits, as the chain readers call it.
//
// Invariants: a refusal is INVALID_ARGUMENT, "json: ..." or "certificate refused: ..."; an
// accepted body is canonical (it parses back with require_canonical and encodes to the same
// bytes), is {"kind":"append","payload":<object>} and its certificate, if any, still passes
// when read back from the stored bytes, as the verifier reads it. Whatever ParseAuditJson
// accepts encodes canonically, and the encoding is a fixed point.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/audit/append_body.h"
#include "core/audit/audit_record.h"
#include "core/audit/certificate.h"
#include "fuzz/fuzz_check.h"

namespace streamlearn::fuzz {
namespace {

// Any record ParseAuditJson accepted: canonical encoding exists and is a fixed point.
std::string CheckCanonicalRoundTrip(const AuditRecord& r, int max_depth) {
  absl::StatusOr<std::string> canon = EncodeCanonical(r);
  FUZZ_CHECK(canon.ok(), canon.status().ToString());
  absl::StatusOr<AuditRecord> back =
      ParseAuditJson(*canon, {.max_bytes = canon->size(), .max_depth = max_depth,
                              .require_canonical = true});
  FUZZ_CHECK(back.ok(), absl::StrCat(*canon, ": ", back.status().ToString()));
  absl::StatusOr<std::string> again = EncodeCanonical(*back);
  FUZZ_CHECK(again.ok() && *again == *canon, *canon);
  return *canon;
}

void Run(std::string_view text) {
  // The chain readers' parse (default limits).
  if (absl::StatusOr<AuditRecord> r = ParseAuditJson(text); r.ok()) {
    CheckCanonicalRoundTrip(*r, AuditParseOptions().max_depth);
  } else {
    FUZZ_CHECK(absl::IsInvalidArgument(r.status()), r.status().ToString());
  }

  absl::StatusOr<std::string> body = EncodeAppendBody(text);
  if (!body.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(body.status()), body.status().ToString());
    FUZZ_CHECK(absl::StartsWith(body.status().message(), "json: ") ||
                   absl::StartsWith(body.status().message(), "certificate refused: "),
               body.status().ToString());
    return;
  }
  FUZZ_CHECK(text.size() <= kAppendMaxBytes, "accepted an oversize json");
  // The body nests the payload one level down.
  absl::StatusOr<AuditRecord> stored =
      ParseAuditJson(*body, {.max_bytes = body->size(), .max_depth = kAppendMaxDepth + 1,
                             .require_canonical = true});
  FUZZ_CHECK(stored.ok(), absl::StrCat(*body, ": ", stored.status().ToString()));
  FUZZ_CHECK(stored->size() == 2, *body);
  const AuditValue* kind = stored->Find("kind");
  FUZZ_CHECK(kind != nullptr && kind->get_if<std::string>() != nullptr &&
                 *kind->get_if<std::string>() == "append",
             *body);
  const AuditValue* payload = stored->Find("payload");
  FUZZ_CHECK(payload != nullptr && payload->get_if<AuditRecord>() != nullptr, *body);
  if (const AuditValue* c = payload->get_if<AuditRecord>()->Find("certificate")) {
    FUZZ_CHECK(c->get_if<AuditRecord>() != nullptr, *body);
    absl::Status again = CheckCertificateRecord(*c->get_if<AuditRecord>());
    FUZZ_CHECK(again.ok(), absl::StrCat(*body, ": ", again.ToString()));
  }
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
