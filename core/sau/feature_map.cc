#include "core/sau/feature_map.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/sau/counter_rng.h"
#include "core/sau/kernels.h"

namespace streamlearn::sau {

namespace {

// Rows of g (n x n, row-major) made orthonormal (modified Gram-Schmidt, two passes).
void OrthonormaliseRows(std::vector<double>& g, int n) { OrthonormaliseVectors(g.data(), n, n); }

// The normalised Walsh-Hadamard transform of v (length a power of two), in place:
// v <- H v with H symmetric, H H = I.
void Hadamard(std::vector<double>& v) {
  const size_t n = v.size();
  for (size_t h = 1; h < n; h *= 2) {
    for (size_t i = 0; i < n; i += 2 * h) {
      for (size_t j = i; j < i + h; ++j) {
        const double a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
    }
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(n));
  for (double& x : v) x *= scale;
}

// The norm of a fresh N(0, I_d) vector: chi(d)-distributed.
double ChiNorm(CounterRng& chi, int d) {
  double norm2 = 0;
  for (int l = 0; l < d; ++l) {
    const double z = chi.NextNormal();
    norm2 += z * z;
  }
  return std::sqrt(norm2);
}

// kSrht (feature_map.h): blocks M = H D3 H D2 H D1, rows cut to d and given chi(d) norms.
std::vector<double> DrawSrhtRows(const SauSpec& spec, int rows) {
  const int d = spec.d;
  int n = 1;
  while (n < d) n *= 2;
  std::vector<double> w(static_cast<size_t>(rows) * d);
  CounterRng signs(spec.seed, kStreamSrhtSigns);
  CounterRng chi(spec.seed, kStreamChiNorms);
  std::vector<double> m(static_cast<size_t>(n) * n);  // the block, row-major
  std::vector<double> d123(3 * static_cast<size_t>(n));
  std::vector<double> col(n);
  for (int start = 0; start < rows; start += n) {
    for (double& s : d123) s = (signs.NextU64() & 1) != 0 ? -1.0 : 1.0;
    // Column l of M is M e_l.
    for (int l = 0; l < n; ++l) {
      std::fill(col.begin(), col.end(), 0.0);
      col[l] = 1.0;
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < n; ++i) col[i] *= d123[static_cast<size_t>(round) * n + i];
        Hadamard(col);
      }
      for (int i = 0; i < n; ++i) m[static_cast<size_t>(i) * n + l] = col[i];
    }
    const int take = std::min(n, rows - start);
    for (int i = 0; i < take; ++i) {
      const double* row = &m[static_cast<size_t>(i) * n];
      double cut2 = 0;
      for (int l = 0; l < d; ++l) cut2 += row[l] * row[l];
      const double norm = ChiNorm(chi, d);
      double* out = &w[static_cast<size_t>(start + i) * d];
      if (cut2 > 0) {
        const double scale = norm / std::sqrt(cut2);
        for (int l = 0; l < d; ++l) out[l] = scale * row[l];
      } else {
        out[i % d] = norm;  // the cut row is zero (possible only when d < d'): an axis
      }
    }
  }
  return w;
}

std::vector<double> DrawRows(const SauSpec& spec, int rows) {
  const int d = spec.d;
  if (spec.features == FeatureKind::kSrht) return DrawSrhtRows(spec, rows);
  std::vector<double> w(static_cast<size_t>(rows) * d);
  CounterRng gauss(spec.seed, kStreamW);
  if (spec.features == FeatureKind::kIid) {
    for (double& x : w) x = gauss.NextNormal();
    return w;
  }
  CounterRng chi(spec.seed, kStreamChiNorms);
  std::vector<double> block(static_cast<size_t>(d) * d);
  for (int start = 0; start < rows; start += d) {
    for (double& x : block) x = gauss.NextNormal();
    OrthonormaliseRows(block, d);
    const int take = std::min(d, rows - start);
    for (int i = 0; i < take; ++i) {
      const double norm = ChiNorm(chi, d);
      for (int l = 0; l < d; ++l) {
        w[static_cast<size_t>(start + i) * d + l] = norm * block[static_cast<size_t>(i) * d + l];
      }
    }
  }
  return w;
}

}  // namespace

FeatureMap FeatureMap::Draw(const SauSpec& spec) {
  FeatureMap m;
  m.r_ = spec.r;
  m.d_ = spec.d;
  m.mode_ = spec.input_mode;
  m.input_scale_ = spec.input_scale;
  m.inv_sqrt_tau_ = 1.0 / std::sqrt(spec.tau);
  m.inv_two_tau_ = 1.0 / (2.0 * spec.tau);
  m.inv_sqrt_r_ = 1.0 / std::sqrt(static_cast<double>(spec.r));
  m.c_lo_ = spec.c_lo;
  m.c_hi_ = spec.c_hi;
  if (spec.antithetic) {
    const std::vector<double> half = DrawRows(spec, spec.r / 2);
    m.w_.resize(static_cast<size_t>(spec.r) * spec.d);
    for (int j = 0; j < spec.r / 2; ++j) {
      for (int l = 0; l < spec.d; ++l) {
        const double x = half[static_cast<size_t>(j) * spec.d + l];
        m.w_[static_cast<size_t>(2 * j) * spec.d + l] = x;
        m.w_[static_cast<size_t>(2 * j + 1) * spec.d + l] = -x;
      }
    }
  } else {
    m.w_ = DrawRows(spec, spec.r);
  }
  m.w_t_.resize(m.w_.size());
  for (int i = 0; i < spec.r; ++i) {
    for (int l = 0; l < spec.d; ++l) {
      m.w_t_[static_cast<size_t>(l) * spec.r + i] = m.w_[static_cast<size_t>(i) * spec.d + l];
    }
  }
  Sha256 h;
  h.Update("streamlearn.sau.W.v1");
  h.U64(static_cast<uint64_t>(m.r_));
  h.U64(static_cast<uint64_t>(m.d_));
  h.F64s(m.w_);
  m.digest_ = h.Finish();
  return m;
}

absl::Status FeatureMap::CheckInput(std::span<const double> x, std::string_view what) const {
  if (static_cast<int>(x.size()) != d_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has %d values; the model expects d = %d", what, x.size(), d_));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s[%d] is %s; inputs must be finite", what, i, std::isnan(x[i]) ? "NaN" : "Inf"));
    }
  }
  if (mode_ == InputMode::kRaw) {
    double norm2 = 0;
    for (double v : x) norm2 += v * v;
    if (!std::isfinite(norm2)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "||%s||^2 overflows a double; scale the input or use L2_SCALED inputs", what));
    }
  }
  return absl::OkStatus();
}

void ConditionInput(InputMode mode, double input_scale, std::span<const double> x, double* out) {
  if (mode == InputMode::kRaw) {
    std::copy(x.begin(), x.end(), out);
    return;
  }
  // a * x / ||x||, computed as a * y / ||y|| with y = x / max|x_i| so that no square overflows.
  const size_t n = x.size();
  double max_abs = 0;
  for (double v : x) max_abs = std::max(max_abs, std::fabs(v));
  if (max_abs == 0) {
    std::fill(out, out + n, 0.0);
    return;
  }
  double norm2 = 0;
  for (size_t i = 0; i < n; ++i) {
    out[i] = x[i] / max_abs;
    norm2 += out[i] * out[i];
  }
  const double scale = input_scale / std::sqrt(norm2);
  for (size_t i = 0; i < n; ++i) out[i] *= scale;
}

void FeatureMap::Condition(std::span<const double> x, double* out) const {
  ConditionInput(mode_, input_scale_, x, out);
}

FeatureMap::ClipStats FeatureMap::Features(const double* x, double* phi, double c_hi) const {
  ClipStats stats;
  const double half_norm2 = Dot(x, x, d_) * inv_two_tau_;
  // g = W x accumulated as d axpys over the rows of W^T (for each i, the terms in order
  // l = 0..d-1): one fixed order, vectorised across the r features.
  std::fill(phi, phi + r_, 0.0);
  for (int l = 0; l < d_; ++l) Axpy(x[l], &w_t_[static_cast<size_t>(l) * r_], phi, r_);
  for (int i = 0; i < r_; ++i) {
    const double g = phi[i] * inv_sqrt_tau_ - half_norm2;
    stats.max_exponent = std::max(stats.max_exponent, g);
    double gc = g;
    if (g > c_hi) {
      gc = c_hi;
      ++stats.clipped;
      ++stats.clipped_hi;
    } else if (g < c_lo_) {
      gc = c_lo_;
      ++stats.clipped;
    }
    phi[i] = std::exp(gc) * inv_sqrt_r_;
  }
  return stats;
}

}  // namespace streamlearn::sau
