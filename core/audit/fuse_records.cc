#include "core/audit/fuse_records.h"

namespace streamlearn {

absl::Status AppendFuseLearnBody(const AuditRecord& unit_body, uint64_t log_seq,
                                 const Digest* batch_digest, const Digest* state_digest,
                                 std::string* out) {
  AuditRecord r = unit_body;
  r.Set("log_seq", log_seq);
  if (batch_digest != nullptr) r.Set("batch_digest", ToHex(*batch_digest));
  if (state_digest != nullptr) r.Set("state_digest", ToHex(*state_digest));
  return AppendCanonical(r, out);
}

absl::Status AppendFuseControlBody(uint64_t t, uint64_t log_seq,
                                   std::span<const control::ControlAction> actions,
                                   std::string* out) {
  AuditList list;
  list.reserve(actions.size());
  for (const control::ControlAction& a : actions) {
    AuditRecord e;
    e.Set("action", control::ActionName(a.action))
        .Set("cause", control::CauseName(a.cause))
        .Set("value", a.value);
    list.emplace_back(std::move(e));
  }
  AuditRecord r;
  r.Set("kind", kRecordFuseControl).Set("t", t).Set("log_seq", log_seq).Set("actions",
                                                                            std::move(list));
  return AppendCanonical(r, out);
}

}  // namespace streamlearn
