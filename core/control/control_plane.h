// ControlPlane: the predictable control plane of one shard's fused learner (docs/FUSE.md,
// "The control plane"): it turns the SAU's health signals into actions on the gate clamp, the
// SAU's ridge lambda_*, and the LMU's rebuild threshold and learning rate.
//
// Predictability (docs/FUSE.md K1): every control that affects step t is computed from what
// was observed up to step t-1. Structurally: controls() and the pending actions are recomputed
// only by Observe, which the caller runs at the end of a step with that step's observation;
// the next step then runs with them.
//
//   ControlPlane cp(spec);                                        // spec validated
//   for each step t:
//     std::vector<ControlAction> actions = cp.TakePending();      // decided at t-1, in force now
//     const Controls& c = cp.controls();                          // use c for step t
//     ... predict, update, SAU ingest -> diagnostics ...
//     cp.Observe(ObservationOf(diag, floor_used), &actions);      // step t's own actions
//     log {..., "actions": actions} as step t's record
//
// Which record an action appears in (docs/FUSE.md): an action is logged in the record of the
// step from which it is in force, so its cause names an observation of the step before
// ("alarm" = margin < 0 at the previous step) -- with one exception, the SAU's own floor rule
// on RJ red, which runs inside the ingest of the red step itself and is logged in that step's
// record ({"action":"raise_beta_floor","cause":"rj_red"}, value = the floor from the next step),
// as the audit verifier requires.
//
// Not thread-safe; plain value type (copying it copies the state).
#ifndef STREAMLEARN_CORE_CONTROL_CONTROL_PLANE_H_
#define STREAMLEARN_CORE_CONTROL_CONTROL_PLANE_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/common/byte_codec.h"
#include "core/common/digest.h"
#include "core/control/control_spec.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/sau_spec.h"

namespace streamlearn::control {

enum class Action : uint8_t {
  kClampGate = 1,     // value: the gate's upper clamp from this step
  kReleaseGate,       // recovery of the clamp starts; value: the clamp
  kRestoreGate,       // the clamp is back at g_max; value: g_max
  kNudgeLambda,       // value: the multiplicative factor on lambda_*
  kRaiseLambda,       // value: the additive increment (frac * median den)
  kReleaseLambda,     // the nudge starts decaying; value: the factor
  kRestoreLambda,     // factor 1, increment 0; value: 1
  kRaiseBetaFloor,    // the SAU's floor rule fired; value: the floor from the next step (rj_red)
                      // or from this step (alarm)
  kRestartEprocess,   // a new test epoch starts with this step's event; value: its number
  kLowerTauLow,       // value: the LMU's tau_low from its next rebuild trigger check
  kReduceLmuLr,       // value: the LMU's lr scale
  kRestoreTauLow,     // value: 0 (the override is removed: the LMU spec's tau_low again)
  kRestoreLmuLr,      // value: 1
};
inline constexpr int kActionCount = 13;

enum class Cause : uint8_t {
  kAlarm = 1,     // margin < 0 at the previous step
  kRjRed,         // RJ window red (>= 5 of the last 10)
  kRjYellow,      // RJ window yellow or red for warn_persist steps (while testing)
  kMarginThin,    // 0 <= margin < margin_thin for warn_persist steps (while testing)
  kDenBelowFloor, // the raw denominator fell below the beta_floor in force
  kRecovery,      // a window ran out
};
inline constexpr int kCauseCount = 6;

std::string_view ActionName(Action a);  // "clamp_gate", "raise_beta_floor", ...
std::string_view CauseName(Cause c);    // "alarm", "rj_red", "rj_yellow", "margin_thin",
                                        // "den_below_floor", "recovery"

struct ControlAction {
  Action action;
  Cause cause;
  double value = 0;
  bool operator==(const ControlAction&) const = default;
};

// The controls in force for one step.
struct Controls {
  double g_min = 0;
  double g_max = 1;
  sau::LambdaNudge lambda;            // the SAU's ridge: lambda_* * factor + increment
  double lmu_lr_scale = 1;
  std::optional<double> lmu_tau_low;  // nullopt: the LMU spec's tau_low
};

// What one step observed: the SAU diagnostics of the step's event (docs/DECISIONS.md 3).
struct Observation {
  double margin = 0;
  bool alarm = false;          // margin < 0 at this step
  uint64_t epoch = 0;          // 0 before the e-process starts testing
  sau::RjLevel rj_level = sau::RjLevel::kGreen;
  double den = 0;              // raw whitened denominator at k_t
  double floor_used = 0;       // beta_floor in force at this step
  double floor_next = 0;       // beta_floor in force from the next step
  double median_den = 0;       // running median of the raw denominators, after this step
};

// diag from SauEstimator::Ingest; floor_used read from the SAU before the ingest.
Observation ObservationOf(const sau::EventDiagnostics& diag, double floor_used,
                          double median_den);

class ControlPlane {
 public:
  // REQUIRES: ValidateControlSpec(spec).ok().
  explicit ControlPlane(const ControlSpec& spec);

  const ControlSpec& spec() const { return spec_; }

  // The controls in force for the next step.
  Controls controls() const;

  // The actions decided by the last Observe, in force from the next step (to be logged in its
  // record). TakePending moves them out.
  const std::vector<ControlAction>& pending() const { return pending_; }
  std::vector<ControlAction> TakePending();

  // End of a step: observes it, appends the step's own actions (the floor rule on RJ red) to
  // *own, and computes the controls and pending actions of the next step.
  void Observe(const Observation& obs, std::vector<ControlAction>* own);

  uint64_t steps() const { return steps_; }
  int warn_streak() const { return warn_streak_; }
  bool warning_active() const { return warn_active_; }

  // The state in a fixed byte layout (spec excluded): for digests and snapshots.
  void Hash(Sha256& h) const;
  void Write(ByteWriter& w) const;
  // Reads what Write wrote into this plane (same spec). DATA_LOSS naming the problem.
  absl::Status Read(ByteReader& r);

 private:
  void StepGate(bool alarm, bool red, bool den_low);
  void StepLambda(bool alarm, bool red, bool den_low, double median_den);
  void StepLmu(std::optional<Cause> cause);

  ControlSpec spec_;
  uint64_t steps_ = 0;
  // Gate clamp.
  double clamp_;             // upper clamp for the next step; spec_.g_max when not clamped
  uint64_t clamp_age_ = 0;   // steps since the last trigger
  // lambda_* nudge.
  double lambda_factor_ = 1;
  double lambda_frac_ = 0;   // increment = lambda_frac_ * median_den_
  double median_den_ = 0;
  uint64_t lambda_age_ = 0;
  // LMU warning.
  bool warn_active_ = false;
  uint64_t warn_age_ = 0;
  int warn_streak_ = 0;
  std::vector<ControlAction> pending_;
};

}  // namespace streamlearn::control

#endif  // STREAMLEARN_CORE_CONTROL_CONTROL_PLANE_H_
