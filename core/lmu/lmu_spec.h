// LmuSpec: everything that defines one Linear Memory Unit (docs/LMU.md, docs/LMU_DELTA.md), with
// defaults and validation (INVALID_ARGUMENT naming the field and its range).
#ifndef STREAMLEARN_CORE_LMU_LMU_SPEC_H_
#define STREAMLEARN_CORE_LMU_LMU_SPEC_H_

#include <cstdint>

#include "absl/status/status.h"

namespace streamlearn::lmu {

enum class LrSchedule { kConstant, kInverseSqrt };  // eta_t = lr or lr / sqrt(t)

struct LmuSpec {
  int m = 1;                  // outputs per id (docs/DECISIONS.md 7)
  double lr = 0.05;           // eta
  LrSchedule schedule = LrSchedule::kConstant;
  double l2 = 0.0;            // lambda of the L2 shrinkage

  // The delta (docs/LMU_DELTA.md defaults): capacity C = delta_buckets * bucket_size.
  uint32_t delta_buckets = 4096;  // a power of two
  // How far the delta may grow (docs/LMU.md, "Growing the delta"): a rebuild cycle under
  // pressure (an insert found the delta above tau_high, or needed the emergency slot)
  // publishes a delta of twice the buckets, up to this many. 0: it never grows.
  // Otherwise a power of two in [delta_buckets, 2^24].
  uint32_t max_delta_buckets = 0;
  int bucket_size = 4;            // b
  int stash = 8;                  // S
  int max_relocations = 8;        // L
  int ring = 16;                  // Q

  // Rebuild scheduling: a rebuild starts when the delta's load reaches tau_low (or the ring or
  // the emergency slot is used); it must publish before the load reaches tau_high. At model
  // creation the scheduling inequality C (tau_high - tau_low) >= lambda_max T_rb + margin is
  // checked (docs/LMU.md (L3)).
  double tau_low = 0.6;
  double tau_high = 0.8;
  double lambda_max = 1000;     // novel ids per second, at most
  double rebuild_seconds = 1.0; // T_rb, the rebuild-and-publish bound assumed
  double margin = 512;          // ids of headroom (>= the p99.9 novelty burst)

  // Build the new base in a background thread (default) or inline on the writer (stable mode:
  // the table layout then depends only on the events, docs/LMU.md, "Determinism and digests").
  bool background_rebuild = true;
};

absl::Status ValidateLmuSpec(const LmuSpec& spec);

// The smallest power of two >= at_least (a power of two) for delta_buckets whose capacity
// satisfies the scheduling inequality (L3) with the spec's other fields: what a spec that
// leaves delta_buckets unset gets, so that a declared novelty rate lambda_max and rebuild
// bound T_rb size the delta instead of failing validation. at_least when the tau range is
// invalid or no size up to 2^24 buckets suffices (ValidateLmuSpec then says why).
uint32_t SolveDeltaBuckets(const LmuSpec& spec, uint32_t at_least);

// The growth cap a new model gets when its request leaves it unset: kDefaultDeltaGrowth times
// delta_buckets, at most 2^24 buckets.
inline constexpr uint32_t kDefaultDeltaGrowth = 4;
uint32_t DefaultMaxDeltaBuckets(uint32_t delta_buckets);

// The most buckets the spec's delta can reach (delta_buckets when it never grows): what its
// memory budget charges.
inline uint32_t DeltaBucketsCap(const LmuSpec& s) {
  return s.max_delta_buckets > s.delta_buckets ? s.max_delta_buckets : s.delta_buckets;
}

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_LMU_SPEC_H_
