// Snapshots of one LMU for bit-equivalent restart (docs/DURABILITY.md): the spec parameters
// (m, lr, schedule, l2, the delta's geometry b, S, L, Q, C, tau_low, tau_high), a fingerprint
// of the hash secret (never the secret or a derived key), the published base (its generation,
// the MPHF blob and Keys_base with each id's slot, in hash order), the delta dump (id, slot,
// in the delta's deterministic ForEach order), every weight-arena row, the bias, the sample
// count, ver_base/ver_delta, whether a rebuild was pending and the rebuild counters.
//
// Format: a SnapshotContainer (core/common/byte_codec.h) of kind "streamlearn.lmu".
//
// Restore: the arena rows are re-appended in slot order (so every id keeps its slot), the base
// is rebuilt from the MPHF blob (each entry must sit at its hash position) and the delta is a
// fresh delta of the same generation (same derived salts) into which the dumped entries are
// re-inserted: its layout may differ, the logical state (LmuLearner::StateDigest) is equal.
// Salts derive from (secret, generation), so later rebuilds use the same salts as the
// original would have.
//
// A rebuild in flight at snapshot time: the snapshot holds the published generation g, whose
// delta already holds every id inserted since the rebuild began, plus a "rebuild pending" flag.
// Restore then starts a rebuild of generation g + 1 over base g plus that whole delta; the
// original builds g + 1 over base g plus the delta at trigger time and moves the ids inserted
// meanwhile into a fresh delta of g + 1. Both publish g + 1 with the same ids and slots (the
// split between base and delta may differ), so weights, predictions and digests continue
// bit-identically. A frozen table (tripwire) is restored frozen with its rebuild pending.
#ifndef STREAMLEARN_CORE_LMU_LMU_SNAPSHOT_H_
#define STREAMLEARN_CORE_LMU_LMU_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_learner.h"
#include "core/lmu/lmu_spec.h"

namespace streamlearn::lmu {

inline constexpr std::string_view kLmuSnapshotKind = "streamlearn.lmu";
inline constexpr uint32_t kLmuSectionParams = 1;
inline constexpr uint32_t kLmuSectionLearner = 2;
inline constexpr uint32_t kLmuSectionBase = 3;
inline constexpr uint32_t kLmuSectionDelta = 4;
inline constexpr uint32_t kLmuSectionWeights = 5;
// Optional (older snapshots lack it and restore with the defaults): the control inputs of the
// fused control plane, lr scale (f64) and tau_low override (u8 present, f64 value).
inline constexpr uint32_t kLmuSectionControl = 6;
// Optional (older snapshots lack it: their delta has the spec's delta_buckets and never grew):
// the delta's growth (docs/LMU.md, "Growing the delta"): the published delta's buckets (u64),
// the growths so far (u64), and whether the current rebuild cycle is under pressure (u8).
inline constexpr uint32_t kLmuSectionGrowth = 7;

// Writer side: call from the learner's writer (no concurrent Step or Poll). Does not wait for
// a rebuild in flight (see above).
std::string SerializeLmu(const LmuLearner& lmu);

// Errors: INVALID_ARGUMENT if the spec is invalid; DATA_LOSS for a corrupt, truncated or
// inconsistent snapshot (the message names the problem); FAILED_PRECONDITION when a spec
// parameter or the secret differs from the snapshot's (named); INTERNAL if the delta cannot
// take its entries back or a pending rebuild fails to start.
absl::StatusOr<std::unique_ptr<LmuLearner>> RestoreLmu(const LmuSpec& spec,
                                                       const HashSecret& secret,
                                                       std::string_view bytes);

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_LMU_SNAPSHOT_H_
