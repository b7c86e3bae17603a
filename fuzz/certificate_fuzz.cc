// Fuzz target certificate: CheckCertificateRecord (core/audit/certificate.h), the check of a
// Farkas certificate (docs/AUDIT.md (43), (44'), (45)) that Auditor.Append runs on a client's
// "certificate" and the verifier runs again on the stored record. The input is the
// certificate object's JSON.
//
// Invariants: the verdict is OK or INVALID_ARGUMENT "certificate..."; the stored (canonical)
// form gets the same verdict, so an accepted append never fails verification; an accepted
// certificate has finite scalars with kappa >= 0, epsilon > 0 and kappa epsilon >
// 10 (eta_c + eta_d), (45), and its d is above kappa sum alpha_i b_i by at least
// kappa epsilon, recomputed in long double (the corrected (44'): a certificate never proves a
// bound below what its multipliers give).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/audit/audit_record.h"
#include "core/audit/certificate.h"
#include "fuzz/fuzz_check.h"

namespace streamlearn::fuzz {
namespace {

double Number(const AuditRecord& r, std::string_view key) {
  double x = NAN;
  const AuditValue* v = r.Find(key);
  FUZZ_CHECK(v != nullptr && v->AsNumber(&x), key);
  return x;
}

void Run(std::string_view text) {
  absl::StatusOr<AuditRecord> cert = ParseAuditJson(text);
  if (!cert.ok()) return;  // the audit_append target covers the parser
  const absl::Status verdict = CheckCertificateRecord(*cert);
  if (!verdict.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(verdict), verdict.ToString());
    FUZZ_CHECK(absl::StartsWith(verdict.message(), "certificate"), verdict.ToString());
  }
  absl::StatusOr<std::string> canon = EncodeCanonical(*cert);
  FUZZ_CHECK(canon.ok(), canon.status().ToString());
  absl::StatusOr<AuditRecord> stored = ParseAuditJson(*canon, {.max_bytes = canon->size()});
  FUZZ_CHECK(stored.ok(), stored.status().ToString());
  const absl::Status again = CheckCertificateRecord(*stored);
  FUZZ_CHECK(again == verdict, absl::StrCat(verdict.ToString(), " then ", again.ToString()));
  if (!verdict.ok()) return;

  const double kappa = Number(*cert, "kappa"), epsilon = Number(*cert, "epsilon");
  const double eta_c = Number(*cert, "eta_c"), eta_d = Number(*cert, "eta_d");
  const double d = Number(*cert, "d");
  for (double x : {kappa, epsilon, eta_c, eta_d, d}) FUZZ_CHECK(std::isfinite(x), *canon);
  FUZZ_CHECK(kappa >= 0 && epsilon > 0 && eta_c >= 0 && eta_d >= 0, *canon);
  FUZZ_CHECK(kappa * epsilon > 10.0 * (eta_c + eta_d), *canon);
  long double sum_b = 0;
  const AuditValue* rows_v = cert->Find("rows");
  for (const AuditValue& row_v : *rows_v->get_if<AuditList>()) {
    const AuditRecord& row = *row_v.get_if<AuditRecord>();
    sum_b += static_cast<long double>(Number(row, "alpha")) * Number(row, "b");
  }
  const long double margin = static_cast<long double>(d) - kappa * sum_b;
  FUZZ_CHECK(margin >= static_cast<long double>(kappa) * epsilon * (1 - 1e-12L), *canon);
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
