// FeatureMap: positive random features phi(x) with input conditioning and log-domain clipping.
//
//   phi_i(x) = r^{-1/2} exp(clamp(g_i(x), c_lo, c_hi)),
//   g_i(x)   = w_i^T x / sqrt(tau) - ||x||^2 / (2 tau)            docs/SAU.md (4)
//
// where x is the conditioned input: a * x / ||x|| in kL2Scaled mode (docs/SAU.md A1, C2; a zero
// vector stays zero), x itself in kRaw mode. W is r x d, drawn from the spec's seed by the
// counter-based generator (counter_rng.h):
//   kIid:        w_i ~ N(0, I_d), entries in row-major order from stream kStreamW.
//   kOrthogonal: blocks of d rows; each block is a d x d Gaussian matrix (stream kStreamW,
//                row-major) orthonormalised by modified Gram-Schmidt (two passes), row i then
//                scaled by the norm of a fresh N(0, I_d) vector (stream kStreamChiNorms), so
//                its norm is chi(d)-distributed as for a Gaussian row; the last block may be cut.
//   kSrht:       blocks of d' rows, d' the smallest power of two >= d: each block is
//                M = H D3 H D2 H D1 with H the normalised d' x d' Walsh-Hadamard matrix and
//                D1, D2, D3 diagonal random signs (stream kStreamSrhtSigns: D1, D2, D3 of a block
//                in turn, one NextU64 per sign, its low bit 1 => -1); row i of M, cut to its first
//                d coordinates, is scaled to the norm of a fresh N(0, I_d) vector (stream
//                kStreamChiNorms) as for kOrthogonal; the last block may be cut. Seed 001 R8's
//                structured features: rows orthogonal when d is a power of two (nearly so when
//                cut), drawn in O(d'^2 log d') a block instead of QR's O(d^3). W is stored
//                dense, so reading it costs as the other kinds do (docs/SAU.md, "SRHT").
//   antithetic:  the draw above makes r/2 rows w_j, laid out as adjacent pairs (w_j, -w_j).
//
// Immutable after Draw; thread-safe for concurrent use.
#ifndef STREAMLEARN_CORE_SAU_FEATURE_MAP_H_
#define STREAMLEARN_CORE_SAU_FEATURE_MAP_H_

#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/common/digest.h"
#include "core/sau/sau_spec.h"

namespace streamlearn::sau {

// The input conditioning of docs/SAU.md A1, C2 (docs/DECISIONS.md 8) into out[0..x.size()):
//   kL2Scaled: a * x / ||x||, computed as a * y / ||y|| with y = x / max_i |x_i| so that no
//              square overflows; the zero vector stays zero.
//   kRaw:      x itself.
// The one definition: FeatureMap::Condition (hence the estimator) calls it, and so does any
// reference that must see inputs as a model does (ExactAttentionProbes takes conditioned q, k).
// REQUIRES: every x_i finite (FeatureMap::CheckInput); out has x.size() entries.
void ConditionInput(InputMode mode, double input_scale, std::span<const double> x, double* out);

class FeatureMap {
 public:
  // REQUIRES: spec is resolved and valid.
  static FeatureMap Draw(const SauSpec& spec);

  int r() const { return r_; }
  int d() const { return d_; }
  const std::vector<double>& w() const { return w_; }  // r x d, row-major
  const Digest& digest() const { return digest_; }     // SHA-256 of r, d and W's bits

  // Size d, every entry finite, and (kRaw) a finite ||x||^2. `what` names the input in errors.
  absl::Status CheckInput(std::span<const double> x, std::string_view what) const;

  // ConditionInput with the spec's input mode and scale.
  // REQUIRES: CheckInput(x).ok(); out has d entries.
  void Condition(std::span<const double> x, double* out) const;

  struct ClipStats {
    int clipped = 0;     // below c_lo or above c_hi
    int clipped_hi = 0;  // above c_hi
    double max_exponent = -std::numeric_limits<double>::infinity();  // before clipping
  };
  // phi of an already conditioned input into phi[0..r), clipped at the spec's c_hi or at
  // `c_hi` (a self-regulated model's, core/sau/regulator.h).
  ClipStats Features(const double* x_cond, double* phi) const {
    return Features(x_cond, phi, c_hi_);
  }
  ClipStats Features(const double* x_cond, double* phi, double c_hi) const;

 private:
  FeatureMap() = default;

  int r_ = 0;
  int d_ = 0;
  InputMode mode_ = InputMode::kL2Scaled;
  double input_scale_ = 1;
  double inv_sqrt_tau_ = 1;
  double inv_two_tau_ = 0.5;
  double inv_sqrt_r_ = 1;
  double c_lo_ = 0;
  double c_hi_ = 0;
  std::vector<double> w_;    // r x d, row-major (the documented layout; digested)
  std::vector<double> w_t_;  // d x r: W transposed, so g = W x is d vectorised axpys
  Digest digest_{};
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_FEATURE_MAP_H_
