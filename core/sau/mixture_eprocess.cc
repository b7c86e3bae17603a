#include "core/sau/mixture_eprocess.h"

#include <algorithm>
#include <cmath>

namespace streamlearn::sau {

namespace {

double LogSumExp(const std::vector<double>& x) {
  const double m = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (double v : x) s += std::exp(v - m);
  return m + std::log(s);
}

constexpr double kEnvelopeGrowth = 0.1;

double EpochAlpha(const SauSpec& spec, uint64_t epoch) {
  const double j = static_cast<double>(std::max<uint64_t>(epoch, 1));
  return spec.alpha / (j * (j + 1));
}

}  // namespace

MixtureEProcess::MixtureEProcess(const SauSpec& spec)
    : mu_(spec.r, 0.0), v_(spec.r, 0.0), log_e_(spec.tilts.size(), 0.0) {
  margin_ = std::log(1.0 / EpochAlpha(spec, 1));
}

std::vector<double> MixtureEProcess::ProjectedTilts(const SauSpec& spec) const {
  std::vector<double> out(spec.tilts);
  const double bprime = bprime_hat();
  if (bprime > 0) {
    const double cap = (1.0 - spec.xi) / bprime;
    for (double& l : out) l = std::min(l, cap);
  }
  return out;
}

MixtureEProcess::Step MixtureEProcess::Observe(const double* phi, const SauSpec& spec) {
  Step step;
  const int r = spec.r;
  ++observed_;
  // Z_t from the standardisation of step t-1 (needs two earlier events for a variance).
  if (observed_ >= 3) {
    const double eps = spec.whiten_eps / r;
    double z = 0;
    for (int i = 0; i < r; ++i) {
      const double dlt = phi[i] - mu_[i];
      z += dlt * dlt / (v_[i] + eps);
    }
    step.has_z = true;
    step.z = z / r;
  }
  if (step.has_z && observed_ > static_cast<uint64_t>(spec.warmup)) {
    if (epoch_ == 0 || restart_pending_) {
      ++epoch_;
      epoch_events_ = 0;
      restart_pending_ = false;
      std::fill(log_e_.begin(), log_e_.end(), 0.0);
    }
    // Tilts projected with the envelope of step t-1 (predictable), docs/SAU.md (33a).
    const double bprime = bprime_hat();
    const double cap = bprime > 0 ? (1.0 - spec.xi) / bprime : HUGE_VAL;
    const double b_bar = 1.0 + spec.kappa;
    for (size_t k = 0; k < spec.tilts.size(); ++k) {
      const double l = std::min(spec.tilts[k], cap);
      const double psi = nu2_ * l * l / (2.0 * (1.0 - bprime * l));  // docs/SAU.md (33)
      log_e_[k] += l * (step.z - b_bar) - psi;                        // docs/SAU.md (34)
    }
    ++epoch_events_;
    log_e_mix_ = LogSumExp(log_e_) - std::log(static_cast<double>(log_e_.size()));  // (35)
    margin_ = std::log(1.0 / EpochAlpha(spec, epoch_)) - log_e_mix_;
    step.tested = true;
    step.alarm = margin_ < 0;
    if (step.alarm || log_e_mix_ < spec.log_e_floor ||
        epoch_events_ >= static_cast<uint64_t>(spec.epoch_length)) {
      restart_pending_ = true;
    }
  }
  // Envelope update with Z_t, for use from t+1 on. The first Z values standardise by
  // variances of a handful of events and say nothing about the envelope, so the estimates
  // learn only from the second half of the warm-up on.
  if (step.has_z && observed_ > static_cast<uint64_t>(spec.warmup / 2)) {
    ++z_count_;
    const double beta = std::max(spec.beta_envelope, 1.0 / static_cast<double>(z_count_));
    // Winsorised at (1 + kEnvelopeGrowth) M: the envelope describes the null, so one extreme
    // Z (typically the change the test is looking for) may widen it only gradually.
    double dz = step.z - zbar_;
    if (z_count_ > 1) {
      const double cap = (1.0 + kEnvelopeGrowth) * zmax_;
      dz = std::clamp(dz, -cap, cap);
    }
    const double decay = 1.0 - spec.beta_envelope / 10.0;
    zmax_ = z_count_ == 1 ? std::fabs(dz) : std::max(zmax_ * decay, std::fabs(dz));
    zbar_ += beta * dz;
    nu2_ = (1.0 - beta) * (nu2_ + beta * dz * dz);
  }
  // mu~, v~ (docs/SAU.md (30)-(31)) with rate max(beta~, 1/n): exact running moments at first.
  const double beta = std::max(spec.beta_tilde, 1.0 / static_cast<double>(observed_));
  for (int i = 0; i < r; ++i) {
    const double dlt = phi[i] - mu_[i];
    mu_[i] += beta * dlt;
    v_[i] = (1.0 - beta) * (v_[i] + beta * dlt * dlt);
  }
  return step;
}

double MixtureEProcess::RidgeWeight(const SauSpec& spec) const {
  if (epoch_ == 0) return 0.0;
  const double lse = LogSumExp(log_e_);
  double w = 0;
  for (size_t k = 0; k < log_e_.size(); ++k) w += std::exp(log_e_[k] - lse) * spec.ridge[k];
  return w;  // docs/SAU.md (36)-(37), docs/DECISIONS.md 1
}

void MixtureEProcess::Hash(Sha256& h) const {
  h.U64(observed_);
  h.U64(z_count_);
  h.F64s(mu_);
  h.F64s(v_);
  h.F64(zbar_);
  h.F64(nu2_);
  h.F64(zmax_);
  h.F64s(log_e_);
  h.U64(epoch_);
  h.U64(epoch_events_);
  h.U64(restart_pending_ ? 1 : 0);
  h.F64(log_e_mix_);
  h.F64(margin_);
}

}  // namespace streamlearn::sau
