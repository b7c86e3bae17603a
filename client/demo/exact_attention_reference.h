// ExactAttentionReference: exact decayed softmax attention at a fixed set of probe queries,
// in O(P (d + d_v)) per event, as the demo's yardstick for the server's SAU estimate.
//
//   y_t(q) = sum_j gamma^{t-j} exp(q~ . k~_j / tau) v_j / sum_j gamma^{t-j} exp(q~ . k~_j / tau)
//
// (seed 000 eqs. (1)-(3)) with the model's input conditioning: x~ = a x / ||x|| unless the
// model takes raw inputs. For each probe the two decayed sums are kept in log-sum-exp-safe
// form, sum = exp(m) * (A, B): an event with score s = q~.k~/tau updates
//   m' = max(m + ln gamma, s),  A <- A e^{m + ln gamma - m'} + v e^{s - m'},  B likewise,
// so no exponential overflows however long the stream or sharp the kernel.
//
//   ExactAttentionReference ref({.d = 16, .d_v = 4, .gamma = 0.99, .tau = 4}, {probe});
//   ref.Add(k, v);                 // per event
//   std::vector<double> y = ref.Output(0);
//
// Thread safety: none.
#ifndef STREAMLEARN_CLIENT_DEMO_EXACT_ATTENTION_REFERENCE_H_
#define STREAMLEARN_CLIENT_DEMO_EXACT_ATTENTION_REFERENCE_H_

#include <cstdint>
#include <span>
#include <vector>

namespace streamlearn::demo {

class ExactAttentionReference {
 public:
  struct Options {
    int d = 0;
    int d_v = 0;
    double gamma = 0.99;      // in (0, 1]
    double tau = 1.0;         // > 0
    bool l2_normalize = true;  // false: raw inputs
    double input_scale = 1.0;  // a
  };

  // REQUIRES: every probe has length d; d, d_v >= 1; 0 < gamma <= 1; tau > 0.
  ExactAttentionReference(const Options& options, std::vector<std::vector<double>> probes);

  // REQUIRES: k.size() == d, v.size() == d_v.
  void Add(std::span<const double> k, std::span<const double> v);

  // y at probe p after the events added so far. REQUIRES: events() > 0.
  std::vector<double> Output(size_t p) const;

  uint64_t events() const { return events_; }
  size_t probes() const { return probes_.size(); }

 private:
  struct Sums {
    double log_scale = 0;  // m
    std::vector<double> a;  // numerator / e^m, length d_v
    double b = 0;           // denominator / e^m
  };

  void Condition(std::span<const double> x, std::vector<double>* out) const;

  const Options options_;
  const double log_gamma_;
  std::vector<std::vector<double>> probes_;  // conditioned
  std::vector<Sums> sums_;
  std::vector<double> scratch_;
  uint64_t events_ = 0;
};

// ||y_hat - y|| / (||y|| + 1e-12), seed 000 section 16.
double RelativeError(std::span<const double> y_hat, std::span<const double> y);

}  // namespace streamlearn::demo

#endif  // STREAMLEARN_CLIENT_DEMO_EXACT_ATTENTION_REFERENCE_H_
