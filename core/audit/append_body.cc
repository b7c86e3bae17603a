#include "core/audit/append_body.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/audit/audit_record.h"
#include "core/audit/certificate.h"

namespace streamlearn {

absl::StatusOr<std::string> EncodeAppendBody(std::string_view json) {
  absl::StatusOr<AuditRecord> payload =
      ParseAuditJson(json, {.max_bytes = kAppendMaxBytes, .max_depth = kAppendMaxDepth});
  if (!payload.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("json: ", payload.status().message()));
  }
  if (const AuditValue* c = payload->Find("certificate")) {
    const AuditRecord* cert = c->get_if<AuditRecord>();
    if (cert == nullptr) {
      return absl::InvalidArgumentError("json: \"certificate\" must be an object");
    }
    if (absl::Status s = CheckCertificateRecord(*cert); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("certificate refused: ", s.message()));
    }
  }
  AuditRecord body;
  body.Set("kind", "append").Set("payload", *std::move(payload));
  std::string out;
  if (absl::Status s = AppendCanonical(body, &out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("json: ", s.message()));
  }
  return out;
}

}  // namespace streamlearn
