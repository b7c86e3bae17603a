// SauState: the mutable state of one SAU, O(r (d_v + r_v)) doubles, independent of the
// stream length (docs/SAU.md, "State and its digest").
//
// Each decayed statistic is a pair (value, compensation) whose sum is the compensated value:
// R/R_c (r x d_v, row-major), s/s_c (r), H/H_c (r x r_v). Plain value type: copying it is how a
// shard publishes a version.
#ifndef STREAMLEARN_CORE_SAU_SAU_STATE_H_
#define STREAMLEARN_CORE_SAU_SAU_STATE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/common/digest.h"
#include "core/sau/floor_policy.h"
#include "core/sau/exact_window.h"
#include "core/sau/mixture_eprocess.h"
#include "core/sau/regulator.h"
#include "core/sau/rj_window.h"
#include "core/sau/sau_spec.h"
#include "core/sau/streaming_median.h"
#include "core/sau/whitening_stats.h"

namespace streamlearn::sau {

// sizeof(SauState) on a 64-bit build: SauState::AssignAllButSums checks it.
inline constexpr size_t kSauStateBytes = 624;

struct SauState {
  explicit SauState(const SauSpec& spec);

  uint64_t events = 0;
  std::vector<double> R, R_c;  // docs/SAU.md (6)
  std::vector<double> s, s_c;  // (7)
  std::vector<double> H, H_c;  // (8), empty when r_v == 0
  WhiteningStats whitening;    // (9)-(10)
  MixtureEProcess eprocess;    // (30)-(38)
  RjWindow rj;                 // (39)
  FloorPolicy floor;           // (28)
  StreamingMedian median_den;  // docs/DECISIONS.md 1
  double lambda_star = 0;      // in force for the next event / query
  uint64_t clipped = 0;        // clipped log-features at ingest
  uint64_t features = 0;       // log-features computed at ingest
  double max_exponent = -std::numeric_limits<double>::infinity();
  uint64_t den_below_floor = 0;  // events whose raw denominator was under beta_floor
  double den_min = std::numeric_limits<double>::infinity();
  Regulator regulator;  // gamma and c_hi in force (the spec's unless self-regulated)
  ExactWindow window;   // the last exact_window keys and values (empty when off)

  // Makes this state a copy of `src` in every member except the values of the six decayed
  // sums (R, R_c, s, s_c, H, H_c), which are only sized: the caller writes every one of them
  // next, from src's (SauEstimator::IngestFrom). Copying the sums is most of a state's bytes
  // (docs/SAU.md, "Versions without a copy").
  void AssignAllButSums(const SauState& src);

  double clip_rate() const {
    return features == 0 ? 0.0 : static_cast<double>(clipped) / static_cast<double>(features);
  }
  size_t Bytes() const;
  void Hash(Sha256& h) const;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_SAU_STATE_H_
