// ControlSpec: the settings of one model's control plane (docs/FUSE.md, "The control plane"), with
// defaults and validation (INVALID_ARGUMENT naming the field and its allowed range).
//
// Every setting acts through a predictable rule (control_plane.h, docs/FUSE.md): a trigger
// observed at step t changes the controls of step t+1 on, never of step t.
#ifndef STREAMLEARN_CORE_CONTROL_CONTROL_SPEC_H_
#define STREAMLEARN_CORE_CONTROL_CONTROL_SPEC_H_

#include "absl/status/status.h"

namespace streamlearn::control {

struct ControlSpec {
  // Gate clamp (docs/FUSE.md K2, K3: lowered for a fixed window, then recovering
  // geometrically; at most 0.4 after an alarm, as in the worked scenario's S2).
  double g_min = 0.0;          // the gate never goes below this
  double g_max = 1.0;          // the gate's upper clamp in normal operation
  double alarm_g_max = 0.4;    // upper clamp after an alarm or RJ red
  double den_g_max = 0.8;      // upper clamp after den < beta_floor ("away from pure attention")
  int clamp_window = 50;  // W: steps a clamp holds after its last trigger (= SAU floor_cooldown)
  double recovery_rate = 0.95; // then per step: g_max - clamp <- recovery_rate * (g_max - clamp)

  // lambda_* (docs/FUSE.md K2: nudged upward on an alarm or RJ red; K3: a small increment fixed
  // in advance on den < beta_floor). The SAU applies lambda_*(t) * factor + frac * median_den.
  double lambda_factor = 1.5;      // multiplicative nudge per alarm / RJ-red trigger
  double lambda_factor_max = 4.0;  // cap of the compounded nudge
  double den_lambda_frac = 0.01;   // den < beta_floor: increment = frac * median den (1% =
                                   // the middle of the ridge grid, docs/DECISIONS.md 1)
  // The nudge holds clamp_window steps after its last trigger, then decays with recovery_rate.

  // SAU -> LMU early warning (docs/FUSE.md K4): on an alarm, RJ red, or RJ yellow-or-red
  // / a thin margin persisting warn_persist steps, the LMU's tau_low is lowered (from its next
  // rebuild trigger check) and its learning rate scaled, for warn_window steps after the last
  // trigger; then both are restored.
  int warn_persist = 5;          // consecutive steps, counted once the e-process tests
  double margin_thin = 1.0;      // nats; "thin" = 0 <= m_t < margin_thin while testing
  double warn_tau_low = 0.5;     // docs/FUSE.md S2: tau_low drops to 0.5
  double warn_lr_scale = 0.5;    // LMU lr multiplier during a warning
  int warn_window = 200;         // steps
};

// INVALID_ARGUMENT naming the field ("control.<field> = <value> is out of range; allowed ...").
absl::Status ValidateControlSpec(const ControlSpec& spec);

}  // namespace streamlearn::control

#endif  // STREAMLEARN_CORE_CONTROL_CONTROL_SPEC_H_
