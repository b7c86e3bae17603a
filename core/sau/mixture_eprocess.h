// MixtureEProcess: the anytime-valid risk monitor of docs/SAU.md (30)-(38) (docs/DECISIONS.md 1-2).
//
// Each event's features phi_t are standardised by predictable estimates (those of step t-1),
//   s*_t = (phi_t - mu~_{t-1}) ./ sqrt(v~_{t-1} + eps),   Z_t = ||s*_t||^2 / r,
// and tested against the null E[Z_t | F_{t-1}] <= b_bar = 1 + kappa with a mixture over a
// grid of tilts lambda_k > 0 (docs/SAU.md (33)-(36)):
//   log E_t(lambda_k) += lambda_k (Z_t - b_bar) - psi(lambda_k),
//   psi(lambda) = nu^2 lambda^2 / (2 (1 - b' lambda)),
//   E_mix(t) = sum_k pi_k E_t(lambda_k),  pi_k = 1/K,  margin m_t = log(1/alpha_j) - log E_mix.
// The envelope (nu^2, b') is estimated predictably from Z_1..Z_{t-1}: nu^2 is an EWM variance
// and b' = M/3 with M a slowly decaying running maximum of |Z - Zbar| (Bernstein's form of
// (33) holds with b' = M/3 for increments bounded by M). Each new deviation is winsorised at
// 1.1 M before it enters the estimates, so a change widens the envelope only gradually and
// does not blunt the test that should detect it. Both learn from the second half of
// the warm-up on, when the standardisation has settled. Each tilt is projected to
// min(lambda_k, (1 - xi)/b'_hat) before use (docs/SAU.md (33a)).
//
// Epochs: testing starts after `warmup` events. An epoch ends at an alarm (m_t < 0), when
// log E_mix falls below `log_e_floor`, or after `epoch_length` events; the next event starts
// epoch j+1 with E reset to 1. Each end is a stopping time and epoch j spends
// alpha_j = alpha / (j (j+1)), so by Ville's inequality (38) per epoch and a union bound the
// probability that a null stream ever alarms is at most sum_j alpha_j = alpha. Without the
// restarts a long null stretch drives log E far below zero (about -0.1 per event) and delays
// detection of a later change without bound; with them the delay is bounded and the price is
// a threshold log(1/alpha_j) that grows like 2 log j.
//
// Not thread-safe; a value type copied with the estimator state.
#ifndef STREAMLEARN_CORE_SAU_MIXTURE_EPROCESS_H_
#define STREAMLEARN_CORE_SAU_MIXTURE_EPROCESS_H_

#include <cstdint>
#include <vector>

#include "core/common/digest.h"
#include "core/sau/sau_spec.h"

namespace streamlearn::sau {

class MixtureEProcess {
 public:
  explicit MixtureEProcess(const SauSpec& spec);

  struct Step {
    bool has_z = false;    // Z_t was computable (at least 2 earlier events)
    double z = 0;
    bool tested = false;   // Z_t entered the e-process (past warmup)
    bool alarm = false;    // m_t < 0
  };

  // Feeds phi_t (r values). Uses only estimates from steps before t, then updates them.
  Step Observe(const double* phi, const SauSpec& spec);

  double margin() const { return margin_; }
  double log_e_mix() const { return log_e_mix_; }
  uint64_t epoch() const { return epoch_; }
  double nu2_hat() const { return nu2_; }
  double bprime_hat() const { return zmax_ / 3.0; }
  bool testing() const { return epoch_ > 0; }
  // The epoch ended at the last Observe: the next tested event starts a new one.
  bool epoch_ending() const { return restart_pending_; }

  // sum_k w_k(t) rho_k with the current mixture weights (docs/SAU.md (36)); the ridge factor of
  // docs/DECISIONS.md 1. 0 before the first epoch.
  double RidgeWeight(const SauSpec& spec) const;

  // The projected tilts in force for the next event.
  std::vector<double> ProjectedTilts(const SauSpec& spec) const;

  void Hash(Sha256& h) const;
  size_t Bytes() const { return (mu_.size() + v_.size() + log_e_.size()) * sizeof(double); }

 private:
  friend struct SauSnapshotAccess;  // core/sau/sau_snapshot.cc: snapshot and restore

  uint64_t observed_ = 0;  // events seen
  uint64_t z_count_ = 0;   // Z values seen
  std::vector<double> mu_, v_;  // mu~, v~ (docs/SAU.md (30)-(31))
  double zbar_ = 0, nu2_ = 0, zmax_ = 0;
  std::vector<double> log_e_;   // log E_t(lambda_k) within the epoch
  uint64_t epoch_ = 0;          // 0 = not started
  uint64_t epoch_events_ = 0;
  bool restart_pending_ = false;
  double log_e_mix_ = 0;
  double margin_ = 0;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_MIXTURE_EPROCESS_H_
