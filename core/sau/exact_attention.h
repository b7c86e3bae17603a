// Exact decayed softmax attention, the estimand of docs/SAU.md (1)-(3):
//   y_t(q) = sum_j gamma^{t-j} exp(q^T k_j / tau) v_j / sum_j gamma^{t-j} exp(q^T k_j / tau).
//
// Two forms, both over already conditioned inputs (FeatureMap::Condition):
//   ExactAttentionCache   keeps every key and value; O(n) per query. The baseline that SAU
//                         replaces (benchmarks), and a reference for arbitrary queries.
//   ExactAttentionProbes  follows a fixed set of probe queries in O(P (d + d_v)) per event,
//                         in max-shifted form so no exponential overflows; a reference for
//                         long streams in tests and the demo.
// Not thread-safe.
#ifndef STREAMLEARN_CORE_SAU_EXACT_ATTENTION_H_
#define STREAMLEARN_CORE_SAU_EXACT_ATTENTION_H_

#include <span>
#include <vector>

namespace streamlearn::sau {

class ExactAttentionCache {
 public:
  ExactAttentionCache(int d, int d_v, double tau, double gamma);
  void Add(std::span<const double> k, std::span<const double> v);
  std::vector<double> Query(std::span<const double> q) const;
  size_t size() const { return n_; }

 private:
  int d_, d_v_;
  double tau_, log_gamma_;
  size_t n_ = 0;
  std::vector<double> keys_, values_;
  mutable std::vector<double> logits_;
};

class ExactAttentionProbes {
 public:
  ExactAttentionProbes(std::vector<std::vector<double>> probes, int d_v, double tau,
                       double gamma);
  void Add(std::span<const double> k, std::span<const double> v);
  std::vector<double> Value(size_t probe) const;  // y_t(q_probe); zeros before any event
  size_t probes() const { return q_.size(); }
  const std::vector<double>& probe(size_t i) const { return q_[i]; }

 private:
  std::vector<std::vector<double>> q_;
  int d_v_;
  double tau_, log_gamma_;
  std::vector<double> m_;  // per probe: log of the scale of a_ and b_
  std::vector<double> b_;  // per probe: B_t / exp(m)
  std::vector<double> a_;  // per probe, d_v: A_t / exp(m)
};

// The error measure of docs/SAU.md (RelErr): ||y_hat - y|| / (||y|| + 1e-12).
// REQUIRES: y_hat.size() == y.size().
double RelativeError(std::span<const double> y_hat, std::span<const double> y);

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_EXACT_ATTENTION_H_
