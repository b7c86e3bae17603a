#include "core/workloads/scenario_tally.h"

#include <algorithm>

namespace streamlearn::workloads {

ScenarioTally::ScenarioTally(const Scenario& scenario, double alarm_g_max, double tail_fraction)
    : scenario_(scenario), alarm_g_max_(alarm_g_max), tail_fraction_(tail_fraction) {}

void ScenarioTally::AddPrediction(uint64_t t, double y, double y_hat, double y_sau, double y_lmu,
                                  double gate, double g_max) {
  const ScenarioPhase p = scenario_.PhaseOf(t);
  PhaseFigures& f = phases_[Index(p)];
  ++f.samples;
  f.se_fused += (y - y_hat) * (y - y_hat);
  f.se_sau += (y - y_sau) * (y - y_sau);
  f.se_lmu += (y - y_lmu) * (y - y_lmu);
  f.gate_sum += gate;
  f.min_gate = std::min(f.min_gate, gate);
  const uint64_t begin = scenario_.PhaseBegin(p), end = scenario_.PhaseEnd(p);
  const uint64_t tail = static_cast<uint64_t>(std::ceil(tail_fraction_ * (end - begin + 1)));
  if (t + tail > end) {
    ++f.tail_samples;
    f.tail_gate_sum += gate;
  }
  if (!std::isnan(g_max)) {
    f.min_g_max = std::min(f.min_g_max, g_max);
    if (g_max <= alarm_g_max_) {
      ++f.clamped_samples;
      f.max_gate_clamped = std::max(f.max_gate_clamped, gate);
    }
  }
}

void ScenarioTally::AddHealth(uint64_t t, const HealthPoint& h) {
  PhaseFigures& f = phases_[Index(scenario_.PhaseOf(t))];
  f.red_steps += h.red_steps;
  f.alarms += h.alarms;
  if (!std::isnan(h.g_max)) f.min_g_max = std::min(f.min_g_max, h.g_max);
  if (!std::isnan(h.beta_floor)) f.max_beta_floor = std::max(f.max_beta_floor, h.beta_floor);
  if (!std::isnan(h.lambda_star)) f.max_lambda_star = std::max(f.max_lambda_star, h.lambda_star);
  if (!std::isnan(h.delta_load)) f.max_delta_load = std::max(f.max_delta_load, h.delta_load);
  f.max_ring_used = std::max(f.max_ring_used, h.ring_used);
}

PhaseFigures ScenarioTally::Total() const {
  PhaseFigures t;
  for (const PhaseFigures& f : phases_) {
    t.samples += f.samples;
    t.se_fused += f.se_fused;
    t.se_sau += f.se_sau;
    t.se_lmu += f.se_lmu;
    t.gate_sum += f.gate_sum;
    t.tail_samples += f.tail_samples;
    t.tail_gate_sum += f.tail_gate_sum;
    t.min_gate = std::min(t.min_gate, f.min_gate);
    t.clamped_samples += f.clamped_samples;
    t.max_gate_clamped = std::max(t.max_gate_clamped, f.max_gate_clamped);
    t.red_steps += f.red_steps;
    t.alarms += f.alarms;
    t.min_g_max = std::min(t.min_g_max, f.min_g_max);
    t.max_beta_floor = std::max(t.max_beta_floor, f.max_beta_floor);
    t.max_lambda_star = std::max(t.max_lambda_star, f.max_lambda_star);
    t.max_delta_load = std::max(t.max_delta_load, f.max_delta_load);
    t.max_ring_used = std::max(t.max_ring_used, f.max_ring_used);
  }
  return t;
}

}  // namespace streamlearn::workloads
