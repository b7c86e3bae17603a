// The audit records of a fused shard's steps (docs/DECISIONS.md 5; docs/FUSE.md
// "The audit body" and "Service"), as canonical JSON bodies ready for the Merkle chain.
//
//   fuse_learn    one per applied sample: the FuseUnit's body (t, pattern, input_digest,
//                 versions, y_hat / y_hat_sau / y_hat_lmu, gate and its clamps, margin, RJ,
//                 den, beta_floor, lambda_star, clip_rate, probe counts and bounds, delta_load,
//                 y_scale, actions) plus log_seq; "batch_digest" (SHA-256 of the log entry that
//                 carries the sample) on the first sample of a batch; "state_digest"
//                 (FuseUnit::StateDigest) on the last sample of a batch that crossed a multiple
//                 of the digest cadence.
//   fuse_control  right after every fuse_learn record whose margin is negative: t, log_seq and
//                 the actions decided at that step, in force from the next one (the alarm's
//                 restart_eprocess, clamp_gate, ... with "cause":"alarm"). The next fuse_learn
//                 record lists them again (the record of the step from which they are in
//                 force); this one makes the alarm's action follow the alarm at once, as the
//                 verifier's margin rule asks, even when the alarm is the last sample before a
//                 snapshot record or the end of the chain.
//
// Thread safety: free functions over plain data.
#ifndef STREAMLEARN_CORE_AUDIT_FUSE_RECORDS_H_
#define STREAMLEARN_CORE_AUDIT_FUSE_RECORDS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/audit/audit_record.h"
#include "core/common/digest.h"
#include "core/control/control_plane.h"
#include "core/fuse/fuse_unit.h"

namespace streamlearn {

inline constexpr std::string_view kRecordFuseLearn = fuse::kRecordFuseLearn;  // "fuse_learn"
inline constexpr std::string_view kRecordFuseControl = "fuse_control";

// Appends the canonical fuse_learn body: `unit_body` (FuseStep::record) with log_seq and the
// optional digests added. INVALID_ARGUMENT if the body holds a non-finite number.
absl::Status AppendFuseLearnBody(const AuditRecord& unit_body, uint64_t log_seq,
                                 const Digest* batch_digest, const Digest* state_digest,
                                 std::string* out);

// Appends the canonical fuse_control body.
absl::Status AppendFuseControlBody(uint64_t t, uint64_t log_seq,
                                   std::span<const control::ControlAction> actions,
                                   std::string* out);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_FUSE_RECORDS_H_
