// ExactWindow: the last W conditioned keys and values an SAU ingested, and exact decayed
// softmax over them (docs/SAU.md, "The exact window"; seed 001 F1's last resort):
//
//   (X1)  y = sum_i w_i v_i / sum_i w_i,  w_i = exp(q . k_i / tau + age_i log gamma - M),
//
// age 0 the newest entry, M the largest exponent (so no term overflows). Sums run from the
// oldest entry to the newest, in double. A ring of W (d + d_v) doubles, part of the state:
// the digest and the snapshot read it oldest first, whatever slot the ring starts at.
// Not thread-safe for writes; Readout is const.
#ifndef STREAMLEARN_CORE_SAU_EXACT_WINDOW_H_
#define STREAMLEARN_CORE_SAU_EXACT_WINDOW_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "core/common/digest.h"

namespace streamlearn::sau {

class ExactWindow {
 public:
  // capacity 0: off (holds nothing, costs nothing).
  ExactWindow(int capacity, int d, int d_v)
      : cap_(capacity),
        d_(d),
        dv_(d_v),
        x_(static_cast<size_t>(capacity) * d),
        v_(static_cast<size_t>(capacity) * d_v) {}

  int capacity() const { return cap_; }
  int size() const { return n_; }

  void Push(const double* x, const double* v) {
    if (cap_ == 0) return;
    std::copy(x, x + d_, &x_[static_cast<size_t>(head_) * d_]);
    std::copy(v, v + dv_, &v_[static_cast<size_t>(head_) * dv_]);
    head_ = head_ + 1 == cap_ ? 0 : head_ + 1;
    n_ = std::min(n_ + 1, cap_);
  }

  // Entry i in age order, 0 the oldest. REQUIRES: 0 <= i < size().
  const double* key(int i) const { return &x_[static_cast<size_t>(Slot(i)) * d_]; }
  const double* value(int i) const { return &v_[static_cast<size_t>(Slot(i)) * dv_]; }

  // (X1) at the conditioned query q into y[0..d_v); false (y untouched) when the largest
  // exponent is not finite (q . k / tau beyond double: a tiny tau), so the caller keeps its
  // own answer. REQUIRES: size() > 0.
  bool Readout(const double* q, double tau, double gamma, double* y) const {
    const double log_gamma = std::log(gamma);
    std::vector<double> logit(static_cast<size_t>(n_));
    double top = -HUGE_VAL;
    for (int i = 0; i < n_; ++i) {
      const double* k = key(i);
      double dot = 0;
      for (int l = 0; l < d_; ++l) dot += q[l] * k[l];
      logit[static_cast<size_t>(i)] = dot / tau + (n_ - 1 - i) * log_gamma;
      top = std::max(top, logit[static_cast<size_t>(i)]);
    }
    if (!std::isfinite(top)) return false;
    std::fill(y, y + dv_, 0.0);
    double total = 0;
    for (int i = 0; i < n_; ++i) {
      const double w = std::exp(logit[static_cast<size_t>(i)] - top);
      total += w;
      const double* v = value(i);
      for (int j = 0; j < dv_; ++j) y[j] += w * v[j];
    }
    for (int j = 0; j < dv_; ++j) y[j] /= total;  // total >= 1: the top term is exp(0)
    return true;
  }

  size_t Bytes() const { return (x_.size() + v_.size()) * sizeof(double); }

  // Nothing when off, so that a model without a window keeps the digest of docs/SAU.md.
  void Hash(Sha256& h) const {
    if (cap_ == 0) return;
    h.Update("streamlearn.sau.exact_window.v1");
    h.U64(static_cast<uint64_t>(n_));
    for (int i = 0; i < n_; ++i) {
      for (int l = 0; l < d_; ++l) h.F64(key(i)[l]);
      for (int j = 0; j < dv_; ++j) h.F64(value(i)[j]);
    }
  }

 private:
  friend struct SauSnapshotAccess;  // core/sau/sau_snapshot.cc: snapshot and restore

  int Slot(int i) const {
    int s = head_ - n_ + i;
    return s < 0 ? s + cap_ : s;
  }

  int cap_, d_, dv_;
  int n_ = 0;
  int head_ = 0;  // the slot the next Push writes
  std::vector<double> x_, v_;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_EXACT_WINDOW_H_
