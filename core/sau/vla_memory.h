// VlaMemory: the Variational Linear Attention engine (seed 004, corrected; docs/ENGINES.md).
//
// A delta-rule memory S (d_v x d) whose write direction is shaped by a penalty inverse A
// (d x d, double, exactly symmetric), with unit-normalised keys k^ = k / ||k|| as the seed
// README asks (not seed 004's ELU+1 map), and the penalty direction u = k^:
//   z = A k^,  delta = max(1 + k^T z, 1e-4),  A <- A - z z^T / delta      seed 004 (9), (V1)
//   every refresh_period-th write: A <- A + refresh_eta I                 Alg. 1 l. 15-16 (V2)
//   alpha^ = A k^ / ||A k^||  (the post-update A, seed 004 (10))          (V3)
//   e = v - S k^,  S <- S + e alpha^T                                     (V4)
//   y(q) = S q / ||q||                                                    (V5)
// from A_0 = I / lambda_0, S_0 = 0. With u = k^, A_t k^ = z / delta exactly (plus refresh_eta
// k^ after a refresh), so (V3) needs no second matrix-vector product: alpha^ is z / delta
// (+ refresh_eta k^) normalised. Keys with ||k|| < key_eps are not written (counted).
// Propositions 2 and 3 of seed 004 are false as stated (seed README): nothing here relies on
// them; the state norm is measured (docs/ENGINES.md).
//
// State: (d^2 + d d_v) doubles. Write: O(d^2 + d d_v). Query: O(d d_v).
//
// Thread safety: const methods may run concurrently; Write needs exclusive access.
#ifndef STREAMLEARN_CORE_SAU_VLA_MEMORY_H_
#define STREAMLEARN_CORE_SAU_VLA_MEMORY_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/byte_codec.h"
#include "core/common/digest.h"

namespace streamlearn::sau {

struct VlaSpec {
  uint32_t d = 0;                 // key dimension, 1..4096
  uint32_t d_v = 0;               // value dimension, 1..4096
  double lambda0 = 0.1;           // A_0 = I / lambda0 (seed 004: 0.1), (0, 1e6]
  uint32_t refresh_period = 20;   // writes between identity refreshes (seed 004: 20); 0 = never
  double refresh_eta = 1e-3;      // added to A's diagonal at a refresh (seed 004: 1e-3), [0, 1]
  double key_eps = 1e-12;         // keys shorter than this are not written, (0, 1)
};

// What one write did (the seed's diagnostics, docs/ENGINES.md).
struct VlaWrite {
  bool skipped = false;       // ||k|| < key_eps: nothing written
  double residual_norm = 0;   // ||e||
  double alpha_dot_k = 0;     // alpha^T k^, in [-1, 1]: how much of e lands on k^ itself
  bool refreshed = false;     // this write ended with an identity refresh
};

class VlaMemory {
 public:
  // The checks of Create, without building the state (INVALID_ARGUMENT naming the field).
  static absl::Status Validate(const VlaSpec& spec);
  static absl::StatusOr<VlaMemory> Create(const VlaSpec& spec);

  // Dimensions and finiteness, naming the field and index.
  absl::Status CheckWrite(std::span<const double> k, std::span<const double> v) const;
  absl::Status CheckRead(std::span<const double> q) const;

  // REQUIRES: CheckWrite(k, v).ok().
  VlaWrite Write(std::span<const double> k, std::span<const double> v);
  // REQUIRES: CheckRead(q).ok(). Zeros when ||q|| < key_eps.
  std::vector<double> Read(std::span<const double> q) const;

  const VlaSpec& spec() const { return params_->spec; }
  uint64_t writes() const { return writes_; }    // written (not skipped)
  uint64_t skipped() const { return skipped_; }  // keys under key_eps
  double s_norm() const;                          // ||S||_F
  double a_norm() const;                          // ||A||_F
  const std::vector<double>& S() const { return s_; }
  const std::vector<double>& A() const { return a_; }
  size_t state_bytes() const;
  void Hash(Sha256& h) const;
  Digest StateDigest() const;
  // The state in the snapshot layout (docs/ENGINES.md, "Snapshots"): the digest's fields.
  void Encode(ByteWriter& w) const;
  // Reads what Encode wrote into this memory (a fresh one of the same spec). DATA_LOSS naming
  // the field when a size, a value or A's symmetry is not what a write can produce; this
  // memory is unchanged then.
  absl::Status Decode(ByteReader& r);

 private:
  struct Params {
    VlaSpec spec;
  };
  explicit VlaMemory(std::shared_ptr<const Params> params);

  std::shared_ptr<const Params> params_;
  uint64_t writes_ = 0;
  uint64_t skipped_ = 0;
  std::vector<double> s_;  // d_v x d, row-major
  std::vector<double> a_;  // d x d, row-major, exactly symmetric
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_VLA_MEMORY_H_
