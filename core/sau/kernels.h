// Inner-loop kernels of the SAU: dot products and the compensated decayed rank-1 update.
//
// Every kernel fixes its summation order (kLanes independent partial sums, combined pairwise),
// and uses only explicit std::fma, so the result is the same bit for bit whether the build uses
// hardware FMA (-mfma: GCC vectorises the lanes) or the correctly rounded libm fallback. The
// build passes -ffp-contract=off so the compiler adds no contractions of its own.
#ifndef STREAMLEARN_CORE_SAU_KERNELS_H_
#define STREAMLEARN_CORE_SAU_KERNELS_H_

#include <cmath>

namespace streamlearn::sau {

inline constexpr int kLanes = 8;

// sum_i a[i] * b[i] in a fixed order. REQUIRES: n >= 0.
inline double Dot(const double* a, const double* b, int n) {
  double acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
  }
  const int tail = n - i;  // < kLanes
  for (int l = 0; l < tail && l < kLanes; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
  const double s01 = acc[0] + acc[1], s23 = acc[2] + acc[3];
  const double s45 = acc[4] + acc[5], s67 = acc[6] + acc[7];
  return (s01 + s23) + (s45 + s67);
}

// acc[j] += a * x[j] for j < n (one fma each; vectorises across j).
inline void Axpy(double a, const double* x, double* acc, int n) {
  for (int j = 0; j < n; ++j) acc[j] = std::fma(a, x[j], acc[j]);
}

// One compensated decayed update of a row: for each j the pair (s[j], c[j]) represents
// s + c, and becomes gamma * (s + c) + a * x[j] with the rounding error of the decay product
// (exact, by fma) and of the addition (TwoSum, exact) carried into c; c itself decays by gamma.
// docs/SAU.md (6)-(8) with the compensation of (40) carried through the decay.
// One element of it: the pair (s, c) and the increment a * x give (*s_out, *c_out).
inline void CompensatedDecayStep(double gamma, double a, double x, double s, double c,
                                 double* s_out, double* c_out) {
  const double p = gamma * s;
  const double e_mul = std::fma(gamma, s, -p);  // gamma*s - p, exactly
  const double inc = a * x;
  const double t = p + inc;                     // TwoSum(p, inc)
  const double z = t - p;
  const double e_add = (p - (t - z)) + (inc - z);
  *s_out = t;
  *c_out = std::fma(gamma, c, e_mul + e_add);
}

inline void CompensatedDecayAdd(double gamma, double a, const double* x, double* s, double* c,
                                int n) {
  for (int j = 0; j < n; ++j) CompensatedDecayStep(gamma, a, x[j], s[j], c[j], &s[j], &c[j]);
}

// CompensatedDecayAdd out of place: (s_out[j], c_out[j]) becomes the update of (s_in[j],
// c_in[j]) by the same CompensatedDecayStep, so the result is the same bit for bit; the
// inputs are left as they were. This is how a shard writes its next version while
// it reads the current one, instead of copying the current one first (SauEstimator::
// IngestFrom). REQUIRES: the outputs overlap neither input.
inline void CompensatedDecayAddTo(double gamma, double a, const double* x, const double* s_in,
                                  const double* c_in, double* __restrict s_out,
                                  double* __restrict c_out, int n) {
  for (int j = 0; j < n; ++j) {
    CompensatedDecayStep(gamma, a, x[j], s_in[j], c_in[j], &s_out[j], &c_out[j]);
  }
}

// The same update without compensation (the plain sums that the Kahan test compares against).
inline void PlainDecayAdd(double gamma, double a, const double* x, double* s, int n) {
  for (int j = 0; j < n; ++j) s[j] = gamma * s[j] + a * x[j];
}

// The `count` vectors of length n stored one after another from m (vector a at m + a n) made
// orthonormal by modified Gram-Schmidt, in two passes over all of them for orthogonality to
// working precision. REQUIRES: count <= n and the vectors linearly independent.
inline void OrthonormaliseVectors(double* m, int count, int n) {
  for (int pass = 0; pass < 2; ++pass) {
    for (int a = 0; a < count; ++a) {
      double* va = m + static_cast<size_t>(a) * n;
      for (int b = 0; b < a; ++b) {
        const double* vb = m + static_cast<size_t>(b) * n;
        const double proj = Dot(va, vb, n);
        for (int l = 0; l < n; ++l) va[l] -= proj * vb[l];
      }
      const double norm = std::sqrt(Dot(va, va, n));
      for (int l = 0; l < n; ++l) va[l] /= norm;
    }
  }
}

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_KERNELS_H_
