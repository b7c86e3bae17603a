#include "client/demo/exact_attention_reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace streamlearn::demo {

ExactAttentionReference::ExactAttentionReference(const Options& options,
                                                 std::vector<std::vector<double>> probes)
    : options_(options), log_gamma_(std::log(options.gamma)) {
  assert(options.d >= 1 && options.d_v >= 1);
  assert(options.gamma > 0 && options.gamma <= 1 && options.tau > 0);
  for (const auto& q : probes) {
    assert(static_cast<int>(q.size()) == options.d);
    std::vector<double> c;
    Condition(q, &c);
    probes_.push_back(std::move(c));
  }
  sums_.assign(probes_.size(), Sums{0.0, std::vector<double>(options.d_v, 0.0), 0.0});
}

void ExactAttentionReference::Condition(std::span<const double> x,
                                        std::vector<double>* out) const {
  out->assign(x.begin(), x.end());
  if (!options_.l2_normalize) return;
  double norm2 = 0;
  for (double xi : x) norm2 += xi * xi;
  const double norm = std::sqrt(norm2);
  if (norm == 0) return;  // the zero vector stays zero
  const double scale = options_.input_scale / norm;
  for (double& xi : *out) xi *= scale;
}

void ExactAttentionReference::Add(std::span<const double> k, std::span<const double> v) {
  assert(static_cast<int>(k.size()) == options_.d);
  assert(static_cast<int>(v.size()) == options_.d_v);
  Condition(k, &scratch_);
  for (size_t p = 0; p < probes_.size(); ++p) {
    double dot = 0;
    for (int i = 0; i < options_.d; ++i) dot += probes_[p][i] * scratch_[i];
    const double score = dot / options_.tau;
    Sums& s = sums_[p];
    if (events_ == 0) {
      s.log_scale = score;
      for (int j = 0; j < options_.d_v; ++j) s.a[j] = v[j];
      s.b = 1.0;
      continue;
    }
    const double decayed = s.log_scale + log_gamma_;
    const double m = std::max(decayed, score);
    const double old_weight = std::exp(decayed - m);
    const double new_weight = std::exp(score - m);
    for (int j = 0; j < options_.d_v; ++j) s.a[j] = s.a[j] * old_weight + v[j] * new_weight;
    s.b = s.b * old_weight + new_weight;
    s.log_scale = m;
  }
  ++events_;
}

std::vector<double> ExactAttentionReference::Output(size_t p) const {
  assert(events_ > 0 && p < sums_.size());
  const Sums& s = sums_[p];
  std::vector<double> y(s.a.size());
  for (size_t j = 0; j < y.size(); ++j) y[j] = s.a[j] / s.b;
  return y;
}

double RelativeError(std::span<const double> y_hat, std::span<const double> y) {
  assert(y_hat.size() == y.size());
  double diff2 = 0, norm2 = 0;
  for (size_t j = 0; j < y.size(); ++j) {
    diff2 += (y_hat[j] - y[j]) * (y_hat[j] - y[j]);
    norm2 += y[j] * y[j];
  }
  return std::sqrt(diff2) / (std::sqrt(norm2) + 1e-12);
}

}  // namespace streamlearn::demo
