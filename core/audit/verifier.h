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
//               probe count without its bound is a failure. With the genesis spec's LMU
//               geometry, each bound must be the one the geometry gives (spec_rules.h).
// Recomputed from the genesis spec (core/audit/spec_rules.h), for the sau_event records of a
// prf SAU part, with the verifier's own count n of such records (docs/AUDIT.md, "What the
// verifier recomputes"):
//   rj_threshold  "rj_threshold" = C_RJ sqrt(log(max(n, e)/delta_RJ)/r), docs/SAU.md (39);
//               "rj_exceeded" then follows from it and "rj_gap" (rule rj_window). Also for a
//               fused model's fuse_learn records, n counting them, with its fuse.sau spec.
//   margin      "margin" = log(1/alpha_j) - "log_e_mix", alpha_j = alpha/(j(j+1)), j =
//               max("epoch", 1).
//   epoch       0 through the warm-up; then epoch j+1 starts exactly at the event after one
//               that ended epoch j (margin < 0, log E_mix below its floor, or the epoch's
//               length reached), and never otherwise. A sau_control record names the next
//               epoch ("epoch_next").
//   beta_floor  the floor policy (docs/SAU.md (28)): on a trigger (RJ red or margin < 0) the
//               raised value from the previous floor and the event's "median_den"; otherwise
//               the previous floor, decayed towards the base after the cooldown. A
//               sau_control record carries the floor of the event before it.
//   saturation  "clip_rate" = (sum of the events' "clipped") / (n r), and "max_exponent" never
//               decreases (a running maximum); "clipped_hi" (format 3) is at most "clipped".
//   regulation  the running median of the logged "den" values (the verifier's own), which a
//               triggered floor's "median_den" must equal (rule beta_floor); the
//               self-regulating actions "raise_gamma", "lower_gamma" and "raise_c_hi" with
//               their values, recomputed from it, the upper clips and the epochs
//               (regulation_rule.h). Also for a fused model's fuse_learn records, whose
//               epochs are not logged (the clip level's raises are then checked by their
//               step and cap).
// Values are compared to 1e-12 relative (a libm of another machine may round differently).
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

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "core/audit/audit_record.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/merkle_chain.h"
#include "core/audit/regulation_rule.h"
#include "core/audit/spec_rules.h"
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
  kRjThreshold,
  kEpoch,
  kBetaFloor,
  kSaturation,
  kEngine,
  kRegulation,
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
  // Fails if the stream ended before a required follow-up (a negative margin's alarm action),
  // or held no record at all (a chain starts with its genesis).
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
  absl::Status CheckGenesisSpec(const std::string& model_spec, bool server_written);
  // A prf sau_event's threshold (before the RJ window) and its margin, epoch and floor (after
  // it, with the window's red count).
  absl::Status CheckSauThreshold(const AuditRecord& body, const SauRuleParams& p, uint64_t n);
  absl::Status CheckSauPolicy(const AuditRecord& body, bool red);
  absl::Status CheckSauControl(const AuditRecord& body);

  AuditVerifierOptions opt_;
  uint64_t next_ = 0;  // position of the next record
  Digest head_{};
  uint64_t since_checkpoint_ = 0;
  bool pending_alarm_ = false;
  double pending_margin_ = 0.0;
  uint32_t rj_window_ = 0;  // bit k = rj_exceeded of the k-th most recent flag
  SpecRules rules_;         // from the genesis spec; empty when it gives none
  struct SauTrack {         // the prf SAU part's policy state, recomputed
    uint64_t events = 0;    // sau_event records so far
    uint64_t epoch = 0;
    uint64_t epoch_events = 0;
    bool restart_pending = false;
    double floor = 0;       // beta_floor after the last event
    uint64_t since_trigger = 0;
    uint64_t clipped = 0;   // log-features clipped so far (the events' "clipped")
    double max_exponent = -HUGE_VAL;
    std::optional<RegulationRule> regulation;  // the median and the self-regulation
  } sau_;
  uint64_t fuse_events_ = 0;  // fuse_learn records so far
  std::optional<RegulationRule> fuse_regulation_;  // a fused model's prf SAU's
  uint64_t record_format_ = 1;  // the genesis's record_format (none: 1; merkle_chain.h)
  absl::Status status_;
  std::optional<ChainId> bound_;
  uint64_t bad_index_ = 0;
  AuditRule rule_ = AuditRule::kNone;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_VERIFIER_H_
