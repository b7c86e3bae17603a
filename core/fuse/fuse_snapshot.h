// Snapshots of one fused learner for bit-equivalent restart (docs/DURABILITY.md): the SAU, the
// main LMU and the gate / meta LMU as their own snapshots (sau_snapshot.h, lmu_snapshot.h,
// nested byte for byte), the control plane's state, and the unit's counters and rolling errors.
//
// Format: a SnapshotContainer (core/common/byte_codec.h) of kind "streamlearn.fuse" with five
// sections: the unit (pattern, steps, last t, rolling errors), the SAU, the main LMU, the gate
// LMU and the control plane.
//
//   std::string bytes = SerializeFuse(unit);            // the writer's: no concurrent Learn
//   auto back = RestoreFuse(unit.spec(), secret, bytes);
//   // (*back)->StateDigest() == unit.StateDigest(); the same samples give the same bits after.
#ifndef STREAMLEARN_CORE_FUSE_FUSE_SNAPSHOT_H_
#define STREAMLEARN_CORE_FUSE_FUSE_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/fuse/fuse_spec.h"
#include "core/fuse/fuse_unit.h"
#include "core/lmu/keyed_hash.h"

namespace streamlearn::fuse {

inline constexpr std::string_view kFuseSnapshotKind = "streamlearn.fuse";
inline constexpr uint32_t kFuseSectionUnit = 1;
inline constexpr uint32_t kFuseSectionSau = 2;
inline constexpr uint32_t kFuseSectionMainLmu = 3;
inline constexpr uint32_t kFuseSectionGateLmu = 4;
inline constexpr uint32_t kFuseSectionControl = 5;

std::string SerializeFuse(const FuseUnit& unit);

// Errors: INVALID_ARGUMENT if the spec is invalid; DATA_LOSS for a corrupt or malformed
// snapshot; FAILED_PRECONDITION when the pattern, a part's spec or the secret differs from the
// snapshot's (the parts' own restores name the field).
absl::StatusOr<std::unique_ptr<FuseUnit>> RestoreFuse(const FuseSpec& spec,
                                                      const lmu::HashSecret& secret,
                                                      std::string_view bytes);

}  // namespace streamlearn::fuse

#endif  // STREAMLEARN_CORE_FUSE_FUSE_SNAPSHOT_H_
