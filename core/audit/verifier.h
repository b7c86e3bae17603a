// AuditVerifier: one-pass, O(1)-memory verifier of an audit log (docs/DECISIONS.md 6,
// docs/AUDIT.md, "Verifier").
//
// Records are fed one at a time, in log order, as canonical envelope lines (merkle_chain.h).
// Memory is a fixed set of scalars (head, counters, a 10-bit RJ window) plus the record being
// checked. Rules, in the order they are checked for each record (field names are body fields):
//   index       envelope "index" equals the record's position (catches drops, swaps, inserts).
//   chain       envelope "merkle_prev" equals the running head, and
//               SHA-256(head || canonical(body)) equals envelope "merkle_curr".
//   genesis     record 0 has kind "genesis", a string "model_spec" and a hex "w_digest" (equal
//               to the expected values when the options give them); no later record is genesis.
//   checkpoint  with checkpoint_every = M > 0, at most M non-checkpoint records pass between
//               checkpoints; a checkpoint's "index" is the previous record and its "head" that
//               record's merkle_curr.
//   signature   a checkpoint's "key_fingerprint" is the configured key's and "signature" (hex)
//               verifies over CheckpointMessage(index, head) (checkpoint.h).
//   margin      a record with numeric "margin" < 0 must be followed by a non-checkpoint record
//               whose "actions" include an entry with "cause":"alarm" (the policy action).
//   rj_window   a record with bool "rj_exceeded" enters the window of the last 10 such flags;
//               when >= 5 of them are true (red), that record's "actions" must include
//               {"action":"raise_beta_floor","cause":"rj_red"}. A string "rj_level", when
//               present, must equal the recomputed level: "red" (>= 5), "yellow" (>= 3) or
//               "green".
//   lmu_probe   "c_lookup_p100" <= "locate_bound" and "c_insert_p100" <= "insert_bound"; a
//               probe count without its bound is a failure.
//   certificate a nested record "certificate" (in the body, or in the body's "payload" record of
//               a client append) passes CheckCertificateRecord (certificate.h).
// "actions" is a list of records {"action":<string>,"cause":<string>}.
//
// On the first failure, Feed returns DATA_LOSS naming the record's position and the rule, e.g.
// "audit record 17 breaks rule chain: ...", and every later call returns the same status.
//
// Example:
//   AuditVerifier v({.public_key = &pub, .checkpoint_every = 64});
//   for (const std::string& line : log) if (!v.Feed(line).ok()) break;
//   absl::Status st = v.Finish();
//
// Thread safety: not thread-safe.
#ifndef STREAMLEARN_CORE_AUDIT_VERIFIER_H_
#define STREAMLEARN_CORE_AUDIT_VERIFIER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/audit/audit_record.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/merkle_chain.h"
#include "core/common/digest.h"

namespace streamlearn {

enum class AuditRule {
  kNone,
  kParse,
  kEnvelope,
  kIndex,
  kChain,
  kGenesis,
  kCheckpoint,
  kSignature,
  kMargin,
  kRjWindow,
  kLmuProbe,
  kCertificate,
};

std::string_view AuditRuleName(AuditRule rule);

struct AuditVerifierOptions {
  const Ed25519PublicKey* public_key =
      nullptr;  // must outlive the verifier; needed for checkpoints
  uint64_t checkpoint_every = 0;                 // 0: checkpoint cadence not enforced
  std::optional<std::string> model_spec = {};       // expected genesis values, when given
  std::optional<Digest> w_digest = {};
  // The (model, shard) the chain must be bound to (its genesis names them); when given, a
  // genesis that names another chain, or none, fails the genesis rule.
  std::optional<ChainId> chain = {};
  AuditParseOptions parse = {};
};

class AuditVerifier {
 public:
  explicit AuditVerifier(AuditVerifierOptions options) : opt_(std::move(options)) {}

  absl::Status Feed(std::string_view line);
  absl::Status FeedEnvelope(const AuditRecord& envelope);
  // Fails if the stream ended before a required follow-up (a negative margin's alarm action).
  absl::Status Finish();

  uint64_t records() const { return next_; }
  // merkle_curr of the last record fed (all zero before the first).
  const Digest& head() const { return head_; }
  // The (model, shard) the genesis binds the chain to; nullopt before it, or if it names none.
  const std::optional<ChainId>& bound_chain() const { return bound_; }
  // After a failure: the position of the first bad record and the rule it breaks.
  uint64_t first_bad_index() const { return bad_index_; }
  AuditRule failed_rule() const { return rule_; }

 private:
  absl::Status Fail(uint64_t index, AuditRule rule, absl::string_view what);
  absl::Status CheckBody(const AuditRecord& body, const Digest& prev_head);

  AuditVerifierOptions opt_;
  uint64_t next_ = 0;  // position of the next record
  Digest head_{};
  uint64_t since_checkpoint_ = 0;
  bool pending_alarm_ = false;
  double pending_margin_ = 0.0;
  uint32_t rj_window_ = 0;  // bit k = rj_exceeded of the k-th most recent flag
  absl::Status status_;
  std::optional<ChainId> bound_;
  uint64_t bad_index_ = 0;
  AuditRule rule_ = AuditRule::kNone;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_VERIFIER_H_
