// ScenarioTally: the per-phase figures of a scenario run (core/workloads/scenario.h) from what a
// fused learner reports: each sample's prequential predictions (y_hat, y_hat_sau, y_hat_lmu,
// Gate) and its health (the gate clamp g_max, RJ red steps, alarms, beta_floor, lambda_*, the
// LMU's delta load and ring). The shape tests assert these figures and the demo prints them;
// FuseUnit::Learn (one step) and a Fuse.Learn ack (one batch) both map onto it.
//
//   ScenarioTally tally(scenario);
//   tally.AddPrediction(s.t, s.y[0], p.y_hat[0], p.y_hat_sau[0], p.y_hat_lmu[0], p.gate, p.g_max);
//   tally.AddHealth(s.t, health);
//   const PhaseFigures& f = tally.phase(ScenarioPhase::kNovelty);
//   f.MseFused(), f.MseSau(), f.MseLmu(), f.MeanGate(), f.TailGate(), f.red_steps, ...
//
// Pure C++; not thread-safe.
#ifndef STREAMLEARN_CORE_WORKLOADS_SCENARIO_TALLY_H_
#define STREAMLEARN_CORE_WORKLOADS_SCENARIO_TALLY_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/workloads/scenario.h"

namespace streamlearn::workloads {

struct PhaseFigures {
  // Predictions (m = 1), squared errors summed.
  uint64_t samples = 0;
  double se_fused = 0, se_sau = 0, se_lmu = 0;
  double gate_sum = 0;
  uint64_t tail_samples = 0;  // the last `tail_fraction` of the phase
  double tail_gate_sum = 0;
  double min_gate = std::numeric_limits<double>::infinity();
  // Samples whose gate clamp in force was at or below the alarm clamp, and the largest gate
  // among them (the clamp holding).
  uint64_t clamped_samples = 0;
  double max_gate_clamped = -std::numeric_limits<double>::infinity();
  // Health.
  uint64_t red_steps = 0;  // steps whose RJ window was red
  uint64_t alarms = 0;     // steps with a negative margin
  double min_g_max = std::numeric_limits<double>::infinity();
  double max_beta_floor = 0;
  double max_lambda_star = 0;
  double max_delta_load = 0;
  uint32_t max_ring_used = 0;

  double MseFused() const { return samples ? se_fused / samples : NAN; }
  double MseSau() const { return samples ? se_sau / samples : NAN; }
  double MseLmu() const { return samples ? se_lmu / samples : NAN; }
  double MeanGate() const { return samples ? gate_sum / samples : NAN; }
  double TailGate() const { return tail_samples ? tail_gate_sum / tail_samples : NAN; }
};

// The health observed at one step (FuseUnit) or over one batch ending at a step (Fuse.Learn).
struct HealthPoint {
  double g_max = NAN;       // the gate clamp in force (NaN: unknown)
  uint64_t red_steps = 0;   // steps with RJ red in the step / batch
  uint64_t alarms = 0;      // steps with margin < 0
  double beta_floor = NAN;
  double lambda_star = NAN;
  double delta_load = NAN;
  uint32_t ring_used = 0;
};

class ScenarioTally {
 public:
  // alarm_g_max: the clamp an alarm or RJ red sets (control.alarm_g_max); tail_fraction: the
  // share of each phase that TailGate() averages over.
  explicit ScenarioTally(const Scenario& scenario, double alarm_g_max = 0.4,
                         double tail_fraction = 0.2);

  // Sample t's prequential prediction; g_max = the clamp in force for it (NaN: unknown).
  void AddPrediction(uint64_t t, double y, double y_hat, double y_sau, double y_lmu, double gate,
                     double g_max = NAN);
  // Health of the step (or batch) ending at sample t.
  void AddHealth(uint64_t t, const HealthPoint& h);

  const PhaseFigures& phase(ScenarioPhase p) const { return phases_[Index(p)]; }
  PhaseFigures& mutable_phase(ScenarioPhase p) { return phases_[Index(p)]; }
  PhaseFigures Total() const;  // predictions and health over the whole run

 private:
  static size_t Index(ScenarioPhase p) { return static_cast<size_t>(p) - 1; }

  const Scenario& scenario_;
  const double alarm_g_max_;
  const double tail_fraction_;
  std::array<PhaseFigures, 3> phases_;
};

}  // namespace streamlearn::workloads

#endif  // STREAMLEARN_CORE_WORKLOADS_SCENARIO_TALLY_H_
