// The audit records the service writes for each state-changing step (docs/DECISIONS.md 5;
// docs/AUDIT.md, "What the server writes"), as canonical JSON bodies ready for the Merkle
// chain.
//
// Record kinds and their fields (all bodies are canonical: keys sorted, no whitespace):
//   sau_event    one per applied SAU event: t, log_seq, ver_sau, margin, log_e_mix, epoch,
//                rj_gap, rj_gap_eq16, rj_threshold, rj_exceeded, rj_level, beta_floor,
//                lambda_star, nu2_hat, bprime_hat, den, shr, clip_rate (rho_clip),
//                max_exponent; "clipped" (log-features clipped, seed 000's saturation events)
//                on an event that clipped, and "clipped_hi" (those above c_hi) when some
//                were; "median_den" (the floor policy's input) on an event where RJ
//                red or an alarm raised the floor; "actions" when the policy acted at this event
//                ({"action":"raise_beta_floor","cause":"rj_red"} on every red event);
//                "batch_digest" (SHA-256 of the log entry that carries the event) on the first
//                event of a batch; on the last event of a batch that crossed a multiple of the
//                digest cadence: "state_digest", "den_min", "den_below_floor" and
//                "kahan_residual_max" (largest |compensation| over R, s, H).
//                The ridge and vla engines (docs/ENGINES.md) write sau_event records too, with
//                "engine" and their own fields instead of the prf ones: ridge key_norm2 and
//                scale; vla residual_norm, alpha_dot_k, refreshed and skipped, and s_norm,
//                a_norm beside a state_digest.
//   sau_control  right after an event whose margin went negative: the alarm's actions
//                ({"action":"raise_beta_floor","cause":"alarm"},
//                 {"action":"restart_eprocess","cause":"alarm"}), t and the floor now in force.
//   lmu_update   one per applied LMU batch: t_first, t_last, applied, duplicates, log_seq,
//                ver_base, ver_delta, c_lookup_p100 <= locate_bound, c_insert_p100 <=
//                insert_bound, inserted, base_keys, delta_keys, delta_load, ring_used,
//                stash_used, emergency_used, batch_digest, and "state_digest" when due.
//   snapshot     one per snapshot of a shard part: part, log_seq, snapshot_seq, version or
//                samples, blob_digest, state_digest.
// Spec constants (r, r_v, tau, gamma, seeds, table geometry) are fixed per model and are
// committed once, by the genesis record's model_spec; they are not repeated per step.
//
// Thread safety: free functions over plain data.
#ifndef STREAMLEARN_CORE_AUDIT_STEP_RECORDS_H_
#define STREAMLEARN_CORE_AUDIT_STEP_RECORDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/common/digest.h"
#include "core/lmu/lmu_table.h"
#include "core/sau/memory.h"
#include "core/sau/sau_estimator.h"

namespace streamlearn {

inline constexpr std::string_view kRecordSauEvent = "sau_event";
inline constexpr std::string_view kRecordSauControl = "sau_control";
inline constexpr std::string_view kRecordLmuUpdate = "lmu_update";
inline constexpr std::string_view kRecordSnapshot = "snapshot";

// The full-state fields of a digest record.
struct SauStateSummary {
  Digest digest{};
  double den_min = 0;
  uint64_t den_below_floor = 0;
  double kahan_residual_max = 0;
  sau::EngineStateSummary engine;  // ridge and vla
};
SauStateSummary SummarizeSau(const sau::Memory& mem);

struct SauEventRecord {
  sau::Engine engine = sau::Engine::kPrf;
  uint64_t t = 0;
  uint64_t log_seq = 0;
  uint64_t ver_sau = 0;
  const sau::EventDiagnostics* diag = nullptr;
  const Digest* batch_digest = nullptr;     // first event of a batch
  const SauStateSummary* state = nullptr;   // when a state digest is due
};
// Appends the canonical body of a sau_event record to *out.
void AppendSauEventBody(const SauEventRecord& rec, std::string* out);
// Appends the canonical body of the sau_control record that follows an alarm.
void AppendSauAlarmBody(uint64_t t, uint64_t log_seq, const sau::EventDiagnostics& diag,
                        std::string* out);

struct LmuUpdateRecord {
  uint64_t t_first = 0;
  uint64_t t_last = 0;
  uint64_t applied = 0;
  uint64_t duplicates = 0;
  uint64_t log_seq = 0;
  uint64_t inserted = 0;
  int c_lookup_p100 = 0;
  int c_insert_p100 = 0;
  const lmu::LmuTableStats* table = nullptr;
  const Digest* batch_digest = nullptr;
  const Digest* state_digest = nullptr;     // when due
};
void AppendLmuUpdateBody(const LmuUpdateRecord& rec, std::string* out);

struct SnapshotRecord {
  std::string_view part;          // "sau" / "lmu"
  uint64_t log_seq = 0;           // the last log entry the snapshot includes
  uint64_t snapshot_seq = 0;
  uint64_t steps = 0;             // events (SAU) or samples (LMU) in the state
  Digest blob_digest{};           // SHA-256 of the stored snapshot bytes
  Digest state_digest{};
};
void AppendSnapshotBody(const SnapshotRecord& rec, std::string* out);

// "green" / "yellow" / "red".
std::string_view RjLevelName(sau::RjLevel level);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_STEP_RECORDS_H_
