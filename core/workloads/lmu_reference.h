// A plain reference for the LMU (docs/LMU.md (L1)-(L2)) and the Zipf id stream the exactness
// checks use, for tests and the experiments.
//   LmuReferenceLearner  std::unordered_map from id to weights, the same operations in the
//                        same order as the LMU: its predictions and weights must be
//                        bit-identical to the LMU's.
//   ZipfIds              Zipf(s = 1.1) ranks over n ids by inversion of a precomputed CDF;
//                        ids are scrambled ranks (CounterRng(seed, 1)).
// Not thread-safe.
#ifndef STREAMLEARN_CORE_WORKLOADS_LMU_REFERENCE_H_
#define STREAMLEARN_CORE_WORKLOADS_LMU_REFERENCE_H_

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/lmu/feature.h"
#include "core/lmu/lmu_spec.h"
#include "core/sau/counter_rng.h"

namespace streamlearn::lmu {

class LmuReferenceLearner {
 public:
  explicit LmuReferenceLearner(const LmuSpec& spec) : spec_(spec), bias_(spec.m, 0.0) {}

  void Predict(std::span<const Feature> x, double* y) const;
  // One SGD step on (x, y) at the spec's learning rate and L2; y_before gets the prediction
  // before the step.
  void Step(std::span<const Feature> x, std::span<const double> y, double* y_before);

  const std::unordered_map<uint64_t, std::vector<double>>& weights() const { return w_; }
  const std::vector<double>& bias() const { return bias_; }

 private:
  LmuSpec spec_;
  std::vector<double> bias_;
  std::unordered_map<uint64_t, std::vector<double>> w_;
  uint64_t t_ = 0;
};

class ZipfIds {
 public:
  ZipfIds(int n, uint64_t seed);
  uint64_t Next();
  double Uniform() { return rng_.NextUniform(); }

 private:
  sau::CounterRng rng_;
  std::vector<double> cdf_;
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_WORKLOADS_LMU_REFERENCE_H_
