#include "core/control/control_plane.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"

namespace streamlearn::control {

namespace {

// A decaying knob snaps back to its normal value once it is this close (deterministic, so the
// recovery ends after a fixed number of steps).
constexpr double kSnapGate = 1e-3;     // of the gate's [g_min, g_max] range
constexpr double kSnapFactor = 1e-3;   // lambda factor - 1
constexpr double kSnapFrac = 1e-6;     // lambda increment as a fraction of the median den

}  // namespace

std::string_view ActionName(Action a) {
  switch (a) {
    case Action::kClampGate: return "clamp_gate";
    case Action::kReleaseGate: return "release_gate";
    case Action::kRestoreGate: return "restore_gate";
    case Action::kNudgeLambda: return "nudge_lambda";
    case Action::kRaiseLambda: return "raise_lambda";
    case Action::kReleaseLambda: return "release_lambda";
    case Action::kRestoreLambda: return "restore_lambda";
    case Action::kRaiseBetaFloor: return "raise_beta_floor";
    case Action::kRestartEprocess: return "restart_eprocess";
    case Action::kLowerTauLow: return "lower_tau_low";
    case Action::kReduceLmuLr: return "reduce_lmu_lr";
    case Action::kRestoreTauLow: return "restore_tau_low";
    case Action::kRestoreLmuLr: return "restore_lmu_lr";
  }
  return "unknown";
}

std::string_view CauseName(Cause c) {
  switch (c) {
    case Cause::kAlarm: return "alarm";
    case Cause::kRjRed: return "rj_red";
    case Cause::kRjYellow: return "rj_yellow";
    case Cause::kMarginThin: return "margin_thin";
    case Cause::kDenBelowFloor: return "den_below_floor";
    case Cause::kRecovery: return "recovery";
  }
  return "unknown";
}

Observation ObservationOf(const sau::EventDiagnostics& diag, double floor_used,
                          double median_den) {
  Observation o;
  o.margin = diag.margin;
  o.alarm = diag.alarm;
  o.epoch = diag.epoch;
  o.rj_level = diag.rj_level;
  o.den = diag.den;
  o.floor_used = floor_used;
  o.floor_next = diag.beta_floor;
  o.median_den = median_den;
  return o;
}

ControlPlane::ControlPlane(const ControlSpec& spec) : spec_(spec), clamp_(spec.g_max) {
  assert(ValidateControlSpec(spec).ok());
}

Controls ControlPlane::controls() const {
  Controls c;
  c.g_min = spec_.g_min;
  c.g_max = clamp_;
  c.lambda.factor = lambda_factor_;
  c.lambda.increment = lambda_frac_ == 0 ? 0.0 : lambda_frac_ * median_den_;
  if (warn_active_) {
    c.lmu_lr_scale = spec_.warn_lr_scale;
    c.lmu_tau_low = spec_.warn_tau_low;
  }
  return c;
}

std::vector<ControlAction> ControlPlane::TakePending() {
  std::vector<ControlAction> out = std::move(pending_);
  pending_.clear();
  return out;
}

void ControlPlane::Observe(const Observation& obs, std::vector<ControlAction>* own) {
  pending_.clear();
  ++steps_;
  const bool red = obs.rj_level == sau::RjLevel::kRed;
  const bool alarm = obs.alarm;
  // The first events have no denominator to speak of (s = 0, whitening not settled); the SAU
  // starts its median after warm-up / 2, and so does this trigger.
  const bool den_low = obs.median_den > 0 && obs.den < obs.floor_used;
  const bool testing = obs.epoch > 0;
  const bool thin = testing && !alarm && obs.margin < spec_.margin_thin;
  const bool rj_warn = obs.rj_level != sau::RjLevel::kGreen;
  // Yellow and thin margins count once the e-process tests (after the SAU's warm-up): before,
  // the diagnostics rest on a handful of events and are yellow as a rule.
  warn_streak_ = testing && (rj_warn || thin) ? warn_streak_ + 1 : 0;

  // The SAU's floor rule ran inside this step's ingest (docs/SAU.md, "RJ half-split").
  if (red) own->push_back({Action::kRaiseBetaFloor, Cause::kRjRed, obs.floor_next});
  // An alarm: the e-process restarts with the next event, whose step sees the raised floor.
  if (alarm) {
    pending_.push_back(
        {Action::kRestartEprocess, Cause::kAlarm, static_cast<double>(obs.epoch + 1)});
    pending_.push_back({Action::kRaiseBetaFloor, Cause::kAlarm, obs.floor_next});
  }

  StepGate(alarm, red, den_low);
  StepLambda(alarm, red, den_low, obs.median_den);

  std::optional<Cause> warn;
  if (alarm) {
    warn = Cause::kAlarm;
  } else if (red) {
    warn = Cause::kRjRed;
  } else if (warn_streak_ >= spec_.warn_persist) {
    warn = rj_warn ? Cause::kRjYellow : Cause::kMarginThin;
  }
  StepLmu(warn);
}

// docs/FUSE.md K2: on an alarm (m_t < 0) or RJ red the gate's upper clamp drops for a fixed
// window, then recovers geometrically; K3: while den < beta_floor the gate is kept away from
// pure attention.
void ControlPlane::StepGate(bool alarm, bool red, bool den_low) {
  if (alarm || red || den_low) {
    const double target = (alarm || red) ? spec_.alarm_g_max : spec_.den_g_max;
    clamp_ = std::min(clamp_, target);
    clamp_age_ = 0;
    const Cause cause = alarm ? Cause::kAlarm : red ? Cause::kRjRed : Cause::kDenBelowFloor;
    pending_.push_back({Action::kClampGate, cause, clamp_});
    return;
  }
  if (clamp_ == spec_.g_max) return;
  ++clamp_age_;
  if (clamp_age_ <= static_cast<uint64_t>(spec_.clamp_window) - 1) return;
  const bool first = clamp_age_ == static_cast<uint64_t>(spec_.clamp_window);
  clamp_ = spec_.g_max - spec_.recovery_rate * (spec_.g_max - clamp_);
  if (spec_.g_max - clamp_ <= kSnapGate * (spec_.g_max - spec_.g_min)) {
    clamp_ = spec_.g_max;
    pending_.push_back({Action::kRestoreGate, Cause::kRecovery, clamp_});
  } else if (first) {
    pending_.push_back({Action::kReleaseGate, Cause::kRecovery, clamp_});
  }
}

// docs/FUSE.md K3 (den below beta_floor: lambda_* rises by a small increment fixed in advance)
// and K2 (an alarm or RJ red: lambda_* is nudged upward).
void ControlPlane::StepLambda(bool alarm, bool red, bool den_low, double median_den) {
  median_den_ = median_den;
  const bool nudge = (alarm || red) && spec_.lambda_factor > 1;
  const bool raise = den_low && spec_.den_lambda_frac > 0;
  if (nudge) {
    lambda_factor_ = std::min(lambda_factor_ * spec_.lambda_factor, spec_.lambda_factor_max);
    pending_.push_back(
        {Action::kNudgeLambda, alarm ? Cause::kAlarm : Cause::kRjRed, lambda_factor_});
  }
  if (raise) {
    lambda_frac_ = std::max(lambda_frac_, spec_.den_lambda_frac);
    pending_.push_back({Action::kRaiseLambda, Cause::kDenBelowFloor, lambda_frac_ * median_den_});
  }
  if (nudge || raise) {
    lambda_age_ = 0;
    return;
  }
  if (lambda_factor_ == 1 && lambda_frac_ == 0) return;
  ++lambda_age_;
  if (lambda_age_ <= static_cast<uint64_t>(spec_.clamp_window) - 1) return;
  const bool first = lambda_age_ == static_cast<uint64_t>(spec_.clamp_window);
  lambda_factor_ = 1 + spec_.recovery_rate * (lambda_factor_ - 1);
  lambda_frac_ = spec_.recovery_rate * lambda_frac_;
  if (lambda_factor_ - 1 <= kSnapFactor && lambda_frac_ <= kSnapFrac) {
    lambda_factor_ = 1;
    lambda_frac_ = 0;
    pending_.push_back({Action::kRestoreLambda, Cause::kRecovery, 1.0});
  } else if (first) {
    pending_.push_back({Action::kReleaseLambda, Cause::kRecovery, lambda_factor_});
  }
}

// docs/FUSE.md K4 (tau_low lowered for the LMU's next rebuild check, its lr reduced for a
// while), K6, and S2 (tau_low lowered to 0.5 in the worked scenario).
void ControlPlane::StepLmu(std::optional<Cause> cause) {
  if (cause) {
    warn_active_ = true;
    warn_age_ = 0;
    pending_.push_back({Action::kLowerTauLow, *cause, spec_.warn_tau_low});
    pending_.push_back({Action::kReduceLmuLr, *cause, spec_.warn_lr_scale});
    return;
  }
  if (!warn_active_) return;
  ++warn_age_;
  if (warn_age_ < static_cast<uint64_t>(spec_.warn_window)) return;
  warn_active_ = false;
  warn_age_ = 0;
  pending_.push_back({Action::kRestoreTauLow, Cause::kRecovery, 0.0});
  pending_.push_back({Action::kRestoreLmuLr, Cause::kRecovery, 1.0});
}

void ControlPlane::Hash(Sha256& h) const {
  ByteWriter w;
  Write(w);
  h.Update("streamlearn.control.state.v1");
  h.Update(w.data());
}

void ControlPlane::Write(ByteWriter& w) const {
  w.U64(steps_);
  w.F64(clamp_);
  w.U64(clamp_age_);
  w.F64(lambda_factor_);
  w.F64(lambda_frac_);
  w.F64(median_den_);
  w.U64(lambda_age_);
  w.U8(warn_active_ ? 1 : 0);
  w.U64(warn_age_);
  w.U64(static_cast<uint64_t>(warn_streak_));
  w.U64(pending_.size());
  for (const ControlAction& a : pending_) {
    w.U8(static_cast<uint8_t>(a.action));
    w.U8(static_cast<uint8_t>(a.cause));
    w.F64(a.value);
  }
}

absl::Status ControlPlane::Read(ByteReader& r) {
  ControlPlane c(spec_);
  uint8_t active = 0;
  uint64_t streak = 0, n = 0;
  absl::Status s = r.U64(&c.steps_);
  if (s.ok()) s = r.F64(&c.clamp_);
  if (s.ok()) s = r.U64(&c.clamp_age_);
  if (s.ok()) s = r.F64(&c.lambda_factor_);
  if (s.ok()) s = r.F64(&c.lambda_frac_);
  if (s.ok()) s = r.F64(&c.median_den_);
  if (s.ok()) s = r.U64(&c.lambda_age_);
  if (s.ok()) s = r.U8(&active);
  if (s.ok()) s = r.U64(&c.warn_age_);
  if (s.ok()) s = r.U64(&streak);
  if (s.ok()) s = r.U64(&n);
  if (!s.ok()) return s;
  if (active > 1 || streak > 1u << 30 || n > 64) {
    return absl::DataLossError(absl::StrFormat(
        "control snapshot: malformed counters (warning %d, streak %d, %d pending actions)", active,
        streak, n));
  }
  if (!(c.clamp_ >= spec_.g_min && c.clamp_ <= spec_.g_max) || !(c.lambda_factor_ >= 1) ||
      !std::isfinite(c.lambda_factor_) || !(c.lambda_frac_ >= 0 && c.lambda_frac_ <= 1) ||
      !(c.median_den_ >= 0) || !std::isfinite(c.median_den_)) {
    return absl::DataLossError(absl::StrFormat(
        "control snapshot: values out of range (clamp %g, lambda factor %g, increment fraction %g, "
        "median den %g)", c.clamp_, c.lambda_factor_, c.lambda_frac_, c.median_den_));
  }
  c.warn_active_ = active == 1;
  c.warn_streak_ = static_cast<int>(streak);
  for (uint64_t i = 0; i < n; ++i) {
    uint8_t action = 0, cause = 0;
    double value = 0;
    s = r.U8(&action);
    if (s.ok()) s = r.U8(&cause);
    if (s.ok()) s = r.F64(&value);
    if (!s.ok()) return s;
    if (action < 1 || action > kActionCount || cause < 1 || cause > kCauseCount) {
      return absl::DataLossError(absl::StrFormat(
          "control snapshot: pending action %d has action %d, cause %d", i, action, cause));
    }
    c.pending_.push_back({static_cast<Action>(action), static_cast<Cause>(cause), value});
  }
  *this = std::move(c);
  return absl::OkStatus();
}

}  // namespace streamlearn::control
