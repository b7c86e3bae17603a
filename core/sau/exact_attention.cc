#include "core/sau/exact_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/sau/kernels.h"

namespace streamlearn::sau {

ExactAttentionCache::ExactAttentionCache(int d, int d_v, double tau, double gamma)
    : d_(d), d_v_(d_v), tau_(tau), log_gamma_(std::log(gamma)) {}

void ExactAttentionCache::Add(std::span<const double> k, std::span<const double> v) {
  keys_.insert(keys_.end(), k.begin(), k.end());
  values_.insert(values_.end(), v.begin(), v.end());
  ++n_;
}

std::vector<double> ExactAttentionCache::Query(std::span<const double> q) const {
  std::vector<double> y(d_v_, 0.0);
  if (n_ == 0) return y;
  logits_.resize(n_);
  double m = -std::numeric_limits<double>::infinity();
  for (size_t j = 0; j < n_; ++j) {
    logits_[j] = Dot(q.data(), &keys_[j * d_], d_) / tau_ +
                 static_cast<double>(n_ - 1 - j) * log_gamma_;
    m = std::max(m, logits_[j]);
  }
  double b = 0;
  for (size_t j = 0; j < n_; ++j) {
    const double w = std::exp(logits_[j] - m);
    b += w;
    Axpy(w, &values_[j * d_v_], y.data(), d_v_);
  }
  for (double& x : y) x /= b;
  return y;
}

ExactAttentionProbes::ExactAttentionProbes(std::vector<std::vector<double>> probes, int d_v,
                                           double tau, double gamma)
    : q_(std::move(probes)),
      d_v_(d_v),
      tau_(tau),
      log_gamma_(std::log(gamma)),
      m_(q_.size(), -std::numeric_limits<double>::infinity()),
      b_(q_.size(), 0.0),
      a_(q_.size() * d_v, 0.0) {}

void ExactAttentionProbes::Add(std::span<const double> k, std::span<const double> v) {
  for (size_t p = 0; p < q_.size(); ++p) {
    const double s = Dot(q_[p].data(), k.data(), static_cast<int>(k.size())) / tau_;
    const double decayed = m_[p] + log_gamma_;
    const double m = std::max(decayed, s);
    const double old_scale = std::isinf(decayed) ? 0.0 : std::exp(decayed - m);
    const double w = std::exp(s - m);
    b_[p] = b_[p] * old_scale + w;
    double* a = &a_[p * d_v_];
    for (int j = 0; j < d_v_; ++j) a[j] = a[j] * old_scale + w * v[j];
    m_[p] = m;
  }
}

std::vector<double> ExactAttentionProbes::Value(size_t p) const {
  std::vector<double> y(d_v_, 0.0);
  if (b_[p] == 0) return y;
  for (int j = 0; j < d_v_; ++j) y[j] = a_[p * d_v_ + j] / b_[p];
  return y;
}

double RelativeError(std::span<const double> y_hat, std::span<const double> y) {
  double diff2 = 0, norm2 = 0;
  for (size_t j = 0; j < y.size(); ++j) {
    diff2 += (y_hat[j] - y[j]) * (y_hat[j] - y[j]);
    norm2 += y[j] * y[j];
  }
  return std::sqrt(diff2) / (std::sqrt(norm2) + 1e-12);
}

}  // namespace streamlearn::sau
