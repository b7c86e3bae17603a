// EncodeAppendBody: the audit body of a client's Auditor.Append (docs/AUDIT.md), from the
// JSON text of its request; what the server checks before it touches a chain.
//
//   absl::StatusOr<std::string> body = EncodeAppendBody(request.json());
//   if (!body.ok()) return body.status();   // INVALID_ARGUMENT, nothing appended
//   // *body == {"kind":"append","payload":<the object, canonical>}
//
// The text must be one JSON object (RFC 8259) of at most kAppendMaxBytes bytes and
// kAppendMaxDepth nested levels (ParseAuditJson's rules: no null, no duplicate key; errors
// name the byte offset); a "certificate" member must be an object that passes
// CheckCertificateRecord (certificate.h, docs/AUDIT.md (43), (44'), (45)). Every error is
// INVALID_ARGUMENT: "json: ..." or "certificate refused: ...".
//
// Thread safety: a plain function.
#ifndef STREAMLEARN_CORE_AUDIT_APPEND_BODY_H_
#define STREAMLEARN_CORE_AUDIT_APPEND_BODY_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace streamlearn {

inline constexpr size_t kAppendMaxBytes = 64 << 10;
inline constexpr int kAppendMaxDepth = 16;

absl::StatusOr<std::string> EncodeAppendBody(std::string_view json);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_APPEND_BODY_H_
