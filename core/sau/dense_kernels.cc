#include "core/sau/dense_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/sau/kernels.h"

namespace streamlearn::sau {
namespace {

// A fixed start vector with no special direction (a power iteration from all-ones misses an
// eigenvector orthogonal to it): splitmix64 of the index, mapped to [0.5, 1.5).
std::vector<double> StartVector(int d) {
  std::vector<double> x(d);
  for (int i = 0; i < d; ++i) {
    uint64_t z = static_cast<uint64_t>(i) + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    x[i] = 0.5 + static_cast<double>(z >> 11) * 0x1.0p-53;
  }
  return x;
}

double Normalize(std::vector<double>& x) {
  const double n = std::sqrt(Dot(x.data(), x.data(), static_cast<int>(x.size())));
  if (n > 0) {
    for (double& v : x) v /= n;
  }
  return n;
}

std::vector<double> Times(const std::vector<double>& a, int d, const std::vector<double>& x) {
  std::vector<double> y(d);
  for (int i = 0; i < d; ++i) y[i] = Dot(&a[static_cast<size_t>(i) * d], x.data(), d);
  return y;
}

// Power and inverse iterations per eigenvalue estimate: a diagnostic, so a few; each costs
// O(d^2), against the factor's d^3 / 3.
constexpr int kEigenIterations = 8;

}  // namespace

bool Cholesky(const std::vector<double>& a, int d, CholeskyFactor* out) {
  out->d = d;
  out->l.assign(static_cast<size_t>(d) * d, 0.0);
  double* l = out->l.data();
  for (int j = 0; j < d; ++j) {
    const double* lj = l + static_cast<size_t>(j) * d;
    const double pivot = a[static_cast<size_t>(j) * d + j] - Dot(lj, lj, j);
    if (!(pivot > 0) || !std::isfinite(pivot)) {
      out->l.clear();
      out->lt.clear();
      return false;
    }
    const double ljj = std::sqrt(pivot);
    l[static_cast<size_t>(j) * d + j] = ljj;
    for (int i = j + 1; i < d; ++i) {
      double* li = l + static_cast<size_t>(i) * d;
      li[j] = (a[static_cast<size_t>(i) * d + j] - Dot(li, lj, j)) / ljj;
    }
  }
  out->lt.assign(out->l.size(), 0.0);
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j <= i; ++j) out->lt[static_cast<size_t>(j) * d + i] = l[static_cast<size_t>(i) * d + j];
  }
  return true;
}

std::vector<double> ForwardSolve(const CholeskyFactor& f, const std::vector<double>& b) {
  const int d = f.d;
  std::vector<double> y(d);
  for (int i = 0; i < d; ++i) {
    const double* li = &f.l[static_cast<size_t>(i) * d];
    y[i] = (b[i] - Dot(li, y.data(), i)) / li[i];
  }
  return y;
}

std::vector<double> BackSolve(const CholeskyFactor& f, const std::vector<double>& y) {
  const int d = f.d;
  std::vector<double> x(d);
  for (int i = d - 1; i >= 0; --i) {
    const double* ui = &f.lt[static_cast<size_t>(i) * d];
    x[i] = (y[i] - Dot(ui + i + 1, x.data() + i + 1, d - i - 1)) / ui[i];
  }
  return x;
}

std::vector<double> CholeskySolve(const CholeskyFactor& f, const std::vector<double>& b) {
  return BackSolve(f, ForwardSolve(f, b));
}

std::vector<double> LowerTimes(const CholeskyFactor& f, const std::vector<double>& w) {
  const int d = f.d;
  std::vector<double> y(d);
  for (int i = 0; i < d; ++i) y[i] = Dot(&f.l[static_cast<size_t>(i) * d], w.data(), i + 1);
  return y;
}

double LargestEigenvalue(const std::vector<double>& a, int d) {
  std::vector<double> x = StartVector(d);
  Normalize(x);
  double lambda = 0;
  for (int it = 0; it < kEigenIterations; ++it) {
    std::vector<double> y = Times(a, d, x);
    lambda = Dot(x.data(), y.data(), d);  // Rayleigh quotient of the unit x
    if (Normalize(y) == 0) return 0;
    x.swap(y);
  }
  return lambda;
}

double SmallestEigenvalue(const CholeskyFactor& f) {
  const int d = f.d;
  std::vector<double> x = StartVector(d);
  Normalize(x);
  double mu = 0;  // the largest eigenvalue of (L L^T)^-1
  for (int it = 0; it < kEigenIterations; ++it) {
    std::vector<double> y = CholeskySolve(f, x);
    mu = Dot(x.data(), y.data(), d);
    if (Normalize(y) == 0) return 0;
    x.swap(y);
  }
  return mu > 0 ? 1.0 / mu : 0;
}

std::vector<double> WhitenedOperator(const CholeskyFactor& f, const std::vector<double>& m) {
  const int d = f.d;
  // T = L^-1 m, a column of m at a time; then row j of L^-1 m L^-T is L^-1 (row j of T).
  std::vector<double> t(static_cast<size_t>(d) * d), col(d);
  for (int j = 0; j < d; ++j) {
    for (int i = 0; i < d; ++i) col[i] = m[static_cast<size_t>(i) * d + j];
    const std::vector<double> c = ForwardSolve(f, col);
    for (int i = 0; i < d; ++i) t[static_cast<size_t>(i) * d + j] = c[i];
  }
  std::vector<double> out(static_cast<size_t>(d) * d);
  for (int j = 0; j < d; ++j) {
    const std::vector<double> row(t.begin() + static_cast<std::ptrdiff_t>(j) * d,
                                  t.begin() + static_cast<std::ptrdiff_t>(j + 1) * d);
    const std::vector<double> r = ForwardSolve(f, row);
    std::copy(r.begin(), r.end(), out.begin() + static_cast<std::ptrdiff_t>(j) * d);
  }
  return out;
}

double SpectralNorm(const std::vector<double>& a, int d, int iterations) {
  std::vector<double> x = StartVector(d);
  Normalize(x);
  double sigma = 0;
  std::vector<double> at(a.size());
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j) at[static_cast<size_t>(j) * d + i] = a[static_cast<size_t>(i) * d + j];
  }
  for (int it = 0; it < iterations; ++it) {
    std::vector<double> y = Times(a, d, x);
    sigma = std::sqrt(Dot(y.data(), y.data(), d));
    std::vector<double> z = Times(at, d, y);
    if (Normalize(z) == 0) return sigma;
    x.swap(z);
  }
  return sigma;
}

}  // namespace streamlearn::sau
