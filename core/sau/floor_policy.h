// FloorPolicy: the deterministic beta_floor rule of the RJ policy (docs/SAU.md (28),
// "RJ half-split").
//
// On a trigger (RJ red, or an e-process alarm) the floor rises at once to
//   clamp(max(2 * floor, red_floor_frac * median_den), base, max_floor_frac * median_den);
// after `floor_cooldown` events without a trigger it decays by `floor_decay` per event back
// to the base. The new floor applies from the next event on (predictable). Not thread-safe.
#ifndef STREAMLEARN_CORE_SAU_FLOOR_POLICY_H_
#define STREAMLEARN_CORE_SAU_FLOOR_POLICY_H_

#include <algorithm>
#include <cstdint>

#include "core/sau/sau_spec.h"

namespace streamlearn::sau {

class FloorPolicy {
 public:
  explicit FloorPolicy(double base) : floor_(base) {}

  // Returns true when the floor was raised by this call.
  bool Update(bool trigger, double median_den, const SauSpec& spec) {
    if (trigger) {
      since_trigger_ = 0;
      double raised = std::max(2 * floor_, spec.red_floor_frac * median_den);
      if (median_den > 0) raised = std::min(raised, spec.max_floor_frac * median_den);
      raised = std::max(raised, spec.beta_floor);
      const bool up = raised > floor_;
      floor_ = raised;
      return up;
    }
    ++since_trigger_;
    if (since_trigger_ > static_cast<uint64_t>(spec.floor_cooldown)) {
      floor_ = std::max(spec.beta_floor, floor_ * spec.floor_decay);
    }
    return false;
  }

  double floor() const { return floor_; }
  uint64_t since_trigger() const { return since_trigger_; }

 private:
  friend struct SauSnapshotAccess;  // core/sau/sau_snapshot.cc: snapshot and restore

  double floor_;
  uint64_t since_trigger_ = 0;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_FLOOR_POLICY_H_
