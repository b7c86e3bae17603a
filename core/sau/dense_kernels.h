// Small dense linear algebra for the memory engines (docs/ENGINES.md): a Cholesky factor and
// its triangular solves, eigenvalue estimates by power iteration, seed 003's whitened
// operator. Row-major d x d matrices in std::vector<double>.
//
// Every inner product goes through Dot (kernels.h), whose summation order is fixed, so the
// results are the same bit for bit in every build (no BLAS or Eigen: their order depends on
// the SIMD width the library picks at run time).
#ifndef STREAMLEARN_CORE_SAU_DENSE_KERNELS_H_
#define STREAMLEARN_CORE_SAU_DENSE_KERNELS_H_

#include <vector>

namespace streamlearn::sau {

struct CholeskyFactor {
  int d = 0;
  std::vector<double> l;   // L, lower triangular, row-major (zeros above the diagonal)
  std::vector<double> lt;  // L^T, row-major (for the back substitution's contiguous rows)
};

// a = L L^T. False (and `out` cleared) when a pivot is not positive and finite.
// REQUIRES: a.size() == d * d, a symmetric (only its lower triangle is read).
bool Cholesky(const std::vector<double>& a, int d, CholeskyFactor* out);

// L y = b, L^T x = y, and both: x = (L L^T)^-1 b.
std::vector<double> ForwardSolve(const CholeskyFactor& f, const std::vector<double>& b);
std::vector<double> BackSolve(const CholeskyFactor& f, const std::vector<double>& y);
std::vector<double> CholeskySolve(const CholeskyFactor& f, const std::vector<double>& b);
// L w.
std::vector<double> LowerTimes(const CholeskyFactor& f, const std::vector<double>& w);

// The largest eigenvalue of the symmetric positive semidefinite `a`, by 8 power iterations
// from a fixed start (a lower estimate that converges from below).
double LargestEigenvalue(const std::vector<double>& a, int d);
// The smallest eigenvalue of L L^T, by 8 inverse iterations through the factor (an upper
// estimate that converges from above).
double SmallestEigenvalue(const CholeskyFactor& f);
// L^-1 m L^-T (seed 003 (22)), row-major. REQUIRES: m.size() == d * d.
std::vector<double> WhitenedOperator(const CholeskyFactor& f, const std::vector<double>& m);
// sigma_max(a) by `iterations` power iterations on a^T a from a fixed start.
double SpectralNorm(const std::vector<double>& a, int d, int iterations);

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_DENSE_KERNELS_H_
