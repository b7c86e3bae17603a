// RegulationRule: the audit verifier's own recomputation of an SAU's self-regulation
// (docs/SAU.md, "Self-regulation", (G1)-(G3) and (K1)) and of the running median of the
// denominators it reads, from the logged records alone (docs/AUDIT.md, "What the verifier
// recomputes"; core/audit/verifier.h).
//
// The records of a prf SAU (sau_event) and of a fused model's prf SAU (fuse_learn) log each
// event's raw denominator `den` exactly. The running median (core/sau/streaming_median.h) is a
// deterministic function of those values, so the verifier keeps its own copy of it; from it,
// an event is thin (G1), and the block counts, the window level and the doubling cooldown
// (G2)-(G3) follow. The clip rule (K1) needs each event's upper clips (`clipped_hi`, record
// format 3) and where the e-process epochs end (sau_event records give both); with less, the
// rule checks what it can: a raise only where an epoch ends (when known) and by exactly one
// step, never above the cap.
//
//   RegulationRule rule(params);            // a prf SAU part's SauRuleParams
//   std::string why = rule.Observe(event, body);   // per event, in order; "" = agrees
//
// O(1) memory. Not thread-safe.
#ifndef STREAMLEARN_CORE_AUDIT_REGULATION_RULE_H_
#define STREAMLEARN_CORE_AUDIT_REGULATION_RULE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "core/audit/audit_record.h"
#include "core/audit/spec_rules.h"
#include "core/sau/streaming_median.h"

namespace streamlearn {

// What one event's record gives the rule.
struct RegulationEvent {
  uint64_t n = 0;    // the event's position among the part's events, from 1
  double den = 0;    // its logged raw denominator
  // Its log-features clipped above c_hi, when the records log them (format 3 sau_event;
  // absent from the record means 0).
  std::optional<uint64_t> clipped_hi;
  // Whether its e-process epoch ends at it, when the records give the epochs (sau_event).
  std::optional<bool> epoch_ending;
};

class RegulationRule {
 public:
  explicit RegulationRule(const SauRuleParams& p);

  // Feeds the event into the median and the recomputed regulator, then compares the record's
  // regulation actions (`raise_gamma`, `lower_gamma`, `raise_c_hi` in its "actions", each
  // with its "value") with the recomputed ones. Returns "" when they agree, else what differs.
  // REQUIRES: events fed in order, once each.
  std::string Observe(const RegulationEvent& e, const AuditRecord& body);

  // The running median after the last event fed: the floor policy's input (median_den).
  double median() const { return median_.value(); }

 private:
  SauRuleParams p_;
  sau::StreamingMedian median_;
  // (G2)-(G3)
  double gamma_;
  int level_ = 0;
  int block_events_ = 0;
  int thin_ = 0;
  uint64_t healthy_blocks_ = 0;
  uint64_t gamma_lowers_ = 0;
  // (K1)
  double c_hi_;
  uint64_t epoch_clipped_hi_ = 0;
  uint64_t epoch_features_ = 0;
  bool clip_counts_known_ = true;  // every event of the epoch logged its upper clips
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_REGULATION_RULE_H_
