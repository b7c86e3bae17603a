#include "core/workloads/lmu_reference.h"

#include <algorithm>
#include <cmath>

namespace streamlearn::lmu {

void LmuReferenceLearner::Predict(std::span<const Feature> x, double* y) const {
  for (int o = 0; o < spec_.m; ++o) y[o] = bias_[o];
  for (const Feature& f : x) {
    auto it = w_.find(f.id);
    if (it == w_.end()) continue;
    for (int o = 0; o < spec_.m; ++o) y[o] += it->second[o] * f.val;
  }
}

void LmuReferenceLearner::Step(std::span<const Feature> x, std::span<const double> y,
                               double* y_before) {
  Predict(x, y_before);
  ++t_;
  double eta = spec_.lr;
  if (spec_.schedule == LrSchedule::kInverseSqrt) eta = eta / std::sqrt(static_cast<double>(t_));
  const double shrink = 1.0 - eta * spec_.l2;
  for (const Feature& f : x) {
    auto [it, inserted] = w_.try_emplace(f.id, std::vector<double>(spec_.m, 0.0));
    for (int o = 0; o < spec_.m; ++o) {
      const double e = y[o] - y_before[o];
      it->second[o] = shrink * it->second[o] + (eta * e) * f.val;
    }
  }
  for (int o = 0; o < spec_.m; ++o) bias_[o] = bias_[o] + eta * (y[o] - y_before[o]);
}

ZipfIds::ZipfIds(int n, uint64_t seed) : rng_(seed, 1), cdf_(n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) cdf_[i] = (sum += 1.0 / std::pow(i + 1.0, 1.1));
  for (double& c : cdf_) c /= sum;
}

uint64_t ZipfIds::Next() {
  const double u = rng_.NextUniform();
  const uint64_t rank = std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
  return (rank + 1) * 0x9E3779B97F4A7C15ULL;  // spread over 64 bits
}

}  // namespace streamlearn::lmu
