// Snapshots of one SAU for bit-equivalent restart (docs/DURABILITY.md, "What a snapshot
// holds"): R_t, s_t, H_t with their compensations, whitening mu/sigma^2, the mixture e-process,
// the RJ window, the floor policy, the running median, lambda_* and the counters, plus the
// W digest and the spec parameters that drive the evolution (gamma, tau, clipping, tilt and
// ridge grids, ...). W and U are not stored: they are re-drawn from the spec's seed and the
// re-drawn W must have the stored digest.
//
// Format: a SnapshotContainer (core/common/byte_codec.h) of kind "streamlearn.sau" with two
// sections, the parameters (kSauSectionParams) and the state (kSauSectionState); integers
// little-endian, doubles as IEEE-754 bits.
//
//   std::string bytes = SerializeSauState(est);
//   absl::StatusOr<SauEstimator> back = RestoreSau(est.spec(), bytes);
//   // back->StateDigest() == est.StateDigest(); the same events give the same bits after.
#ifndef STREAMLEARN_CORE_SAU_SAU_SNAPSHOT_H_
#define STREAMLEARN_CORE_SAU_SAU_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/sau_spec.h"

namespace streamlearn::sau {

inline constexpr std::string_view kSauSnapshotKind = "streamlearn.sau";
inline constexpr uint32_t kSauSectionParams = 1;
inline constexpr uint32_t kSauSectionState = 2;
// Optional (older snapshots lack it and restore with the default): the lambda nudge of the
// control plane (SauEstimator::SetLambdaNudge), factor and increment as IEEE-754 bits.
inline constexpr uint32_t kSauSectionControl = 3;
// Present exactly when the spec switches self-regulation on (its parameters gamma_max and
// c_hi_max are then among the spec parameters): the Regulator (core/sau/regulator.h).
inline constexpr uint32_t kSauSectionRegulator = 4;
// Present exactly when the spec keeps an exact window (exact_window > 0, then a spec
// parameter): its entry count (u32) and the entries oldest first, each key (d doubles) then
// value (d_v doubles).
inline constexpr uint32_t kSauSectionWindow = 5;

// The whole mutable state of `est` and what identifies its parameters.
std::string SerializeSauState(const SauEstimator& est);

// Re-creates the estimator from `spec` (INVALID_ARGUMENT if the spec is invalid), then
// restores the state. Errors: DATA_LOSS for a corrupt, truncated or malformed snapshot;
// FAILED_PRECONDITION when the re-drawn W's digest differs from the stored one (another seed,
// dimension or feature kind), or when a spec parameter differs (the message names it).
absl::StatusOr<SauEstimator> RestoreSau(const SauSpec& spec, std::string_view bytes);

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_SAU_SNAPSHOT_H_
