// WhiteningStats: per-coordinate EWM mean and variance of phi_t (docs/SAU.md (9)-(10)),
// applied at query time only (docs/SAU.md (11)).
//
// Rates are max(beta, 1/n) for the n-th event, so the first 1/beta events get exact running
// moments instead of a ramp up from zero; the variance uses the West form
//   delta = phi - mu;  mu += b delta;  sig2 = (1 - b) (sig2 + b delta^2),
// and the epsilon of (10)-(11) is added once, at read time: w_i = (sig2_i + eps)^{-1/2}.
// Not thread-safe; a value type copied with the estimator state.
#ifndef STREAMLEARN_CORE_SAU_WHITENING_STATS_H_
#define STREAMLEARN_CORE_SAU_WHITENING_STATS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/common/digest.h"

namespace streamlearn::sau {

class WhiteningStats {
 public:
  WhiteningStats(int r, double beta_mu, double beta_sigma, double eps)
      : mu_(r, 0.0), sig2_(r, 0.0), beta_mu_(beta_mu), beta_sigma_(beta_sigma), eps_(eps) {}

  void Observe(const double* phi) {
    ++n_;
    const double inv_n = 1.0 / static_cast<double>(n_);
    const double bm = std::max(beta_mu_, inv_n);
    const double bs = std::max(beta_sigma_, inv_n);
    for (size_t i = 0; i < mu_.size(); ++i) {
      const double delta = phi[i] - mu_[i];
      mu_[i] += bm * delta;
      sig2_[i] = (1.0 - bs) * (sig2_[i] + bs * delta * delta);
    }
  }

  // out[i] = phi[i] / sqrt(sig2_i + eps)  (docs/SAU.md (11)).
  void Whiten(const double* phi, double* out) const {
    for (size_t i = 0; i < mu_.size(); ++i) out[i] = phi[i] / std::sqrt(sig2_[i] + eps_);
  }

  const std::vector<double>& mu() const { return mu_; }
  const std::vector<double>& sig2() const { return sig2_; }
  size_t Bytes() const { return 2 * mu_.size() * sizeof(double); }
  void Hash(Sha256& h) const {
    h.U64(n_);
    h.F64s(mu_);
    h.F64s(sig2_);
  }

 private:
  friend struct SauSnapshotAccess;  // core/sau/sau_snapshot.cc: snapshot and restore

  std::vector<double> mu_, sig2_;
  double beta_mu_, beta_sigma_, eps_;
  uint64_t n_ = 0;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_WHITENING_STATS_H_
