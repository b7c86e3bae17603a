// RidgeMemory: the ridge-recall engine (seed 003, the inference math; docs/ENGINES.md).
//
// It keeps the decayed second-order statistics of the stream,
//   G = sum_t gamma^(T-t) k_t k_t^T            (d x d)       docs/ENGINES.md (R1)
//   C = sum_t gamma^(T-t) v_t k_t^T            (d_v x d)     (R2)
//   M = sum_t gamma^(T-t) k_t k_(t-1)^T        (d x d, only with the filter, K > 0)  (R3)
// and the running scale s = max_t ||k_t||^2, each with compensated summation as the SAU's
// statistics (kernels.h). A query answers the ridge regression readout
//   y(q) = C (G + eps s I)^(-1) q                                          (R4)
// computed in the scaled units of seed 003's sequence-max normalisation (keys divided by
// sqrt(s)), by a Cholesky factor of G~ = G/s + eps I that is computed at the first query after
// a write and shared by every later query of the same state (and by its copies). A factor that
// fails (not positive definite in floating point) is retried with jitter added to the
// diagonal, 1e-4, 1e-2, then 1, in G~'s scaled units (seed 003 sec. 3.2.3), and the readout
// says how much was added. With the Koopman power filter (K > 0), seed 003 (13):
//   A_w = L^(-1) (M/s) L^(-T) / max(1, sigma_max),  y = C/sqrt(s) L^(-T) A_w^K L^(-1) q/sqrt(s)
// which maps a key to the value bound *after* it (seed README): random-access recall needs
// K = 0, the default.
//
// State: (2 d^2 + 2 d d_v) doubles (+ 2 d^2 + d with the filter), independent of the stream
// length. Write: O(d (d + d_v)). Query: O(d^2 + d d_v) with a cached factor, O(d^3) when the
// factor must be computed (the first query after a write).
//
//   auto mem = RidgeMemory::Create({.d = 64, .d_v = 16});
//   mem->Write(k, v);
//   RidgeReadout y = mem->Read(q);
//
// Thread safety: const methods may run concurrently (the factor cache has its own lock);
// Write needs exclusive access. Copies share the immutable parameters and the factor cache
// until one of them is written.
#ifndef STREAMLEARN_CORE_SAU_RIDGE_MEMORY_H_
#define STREAMLEARN_CORE_SAU_RIDGE_MEMORY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/byte_codec.h"
#include "core/common/digest.h"

namespace streamlearn::sau {

struct RidgeSpec {
  uint32_t d = 0;             // key dimension, 1..4096
  uint32_t d_v = 0;           // value dimension, 1..4096
  double gamma = 1.0;         // decay of G, C, M in (0, 1]; 1 keeps every binding
  double eps = 1e-3;          // ridge, relative to the scale s (seed 003: 1e-3), (0, 1]
  uint32_t filter_order = 0;  // K of seed 003 (13), 0..8; 0 = plain ridge recall
};

// What one write did.
struct RidgeWrite {
  double key_norm2 = 0;  // ||k||^2
  double scale = 0;      // s after the write
};

// A readout and its diagnostics (seed 003 Corollary C.2: lambda_min(G~) bounds how much
// noise in the statistics is amplified).
struct RidgeReadout {
  std::vector<double> y;    // length d_v
  double lambda_min = 0;    // estimate of the smallest eigenvalue of G~ = G/s + eps I
  double lambda_max = 0;    // estimate of the largest
  double condition = 0;     // lambda_max / lambda_min
  double residual = 0;      // ||G~ x - b|| / ||b|| of the solve behind y (0 when b = 0)
  double jitter = 0;        // added to G~'s diagonal beyond eps after a failed factor
};

class RidgeMemory {
 public:
  static constexpr uint32_t kMaxFilterOrder = 8;

  // The checks of Create, without building the state (INVALID_ARGUMENT naming the field).
  static absl::Status Validate(const RidgeSpec& spec);
  // Validates and builds an empty memory.
  static absl::StatusOr<RidgeMemory> Create(const RidgeSpec& spec);

  // Dimensions and finiteness, naming the field and index.
  absl::Status CheckWrite(std::span<const double> k, std::span<const double> v) const;
  absl::Status CheckRead(std::span<const double> q) const;

  // REQUIRES: CheckWrite(k, v).ok().
  RidgeWrite Write(std::span<const double> k, std::span<const double> v);
  // REQUIRES: CheckRead(q).ok(). Zeros before any key with a non-zero norm.
  RidgeReadout Read(std::span<const double> q) const;

  const RidgeSpec& spec() const { return params_->spec; }
  uint64_t writes() const { return writes_; }
  double scale() const { return scale_; }
  size_t state_bytes() const;
  // The state, in a fixed byte order (docs/ENGINES.md, "State and digest"); not the cache.
  void Hash(Sha256& h) const;
  Digest StateDigest() const;
  // The state in the snapshot layout (docs/ENGINES.md, "Snapshots"): the digest's fields.
  void Encode(ByteWriter& w) const;
  // Reads what Encode wrote into this memory (a fresh one of the same spec). DATA_LOSS naming
  // the field when a size, a value or G's symmetry is not what a write can produce; this
  // memory is unchanged then.
  absl::Status Decode(ByteReader& r);

  // The compensated statistics (value + compensation), for tests and the reference.
  std::vector<double> G() const;
  std::vector<double> C() const;
  std::vector<double> M() const;

 private:
  struct Params {
    RidgeSpec spec;
  };
  struct Factor;
  class FactorCache;

  RidgeMemory(std::shared_ptr<const Params> params);
  std::shared_ptr<const Factor> GetFactor() const;
  Factor ComputeFactor() const;

  std::shared_ptr<const Params> params_;
  uint64_t writes_ = 0;
  double scale_ = 0;                // max ||k||^2
  std::vector<double> g_, g_c_;     // d x d, row-major, exactly symmetric
  std::vector<double> c_, c_c_;     // d_v x d, row-major
  std::vector<double> m_, m_c_;     // d x d (K > 0)
  std::vector<double> prev_;        // the last key (K > 0)
  bool has_prev_ = false;
  std::shared_ptr<FactorCache> cache_;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_RIDGE_MEMORY_H_
