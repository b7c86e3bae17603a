// RjWindow: the persistence rule of the RJ half-split policy (docs/SAU.md (39)).
//
// Remembers whether RJ_gap exceeded its threshold on each of the last 10 events: "yellow" when
// at least 3 of them did, "red" when at least 5 did. Plain value type; not thread-safe.
#ifndef STREAMLEARN_CORE_SAU_RJ_WINDOW_H_
#define STREAMLEARN_CORE_SAU_RJ_WINDOW_H_

#include <bit>
#include <cstdint>

#include "core/sau/sau_spec.h"

namespace streamlearn::sau {

class RjWindow {
 public:
  static constexpr int kLength = 10;
  static constexpr int kYellow = 3;
  static constexpr int kRed = 5;

  RjLevel Push(bool exceeded) {
    bits_ = static_cast<uint16_t>(((bits_ << 1) | (exceeded ? 1u : 0u)) & kMask);
    return level();
  }
  int exceedances() const { return std::popcount(static_cast<unsigned>(bits_)); }
  RjLevel level() const {
    const int n = exceedances();
    return n >= kRed ? RjLevel::kRed : n >= kYellow ? RjLevel::kYellow : RjLevel::kGreen;
  }
  uint16_t bits() const { return bits_; }  // bit 0 = newest event

 private:
  friend struct SauSnapshotAccess;  // core/sau/sau_snapshot.cc: snapshot and restore

  static constexpr uint16_t kMask = (1u << kLength) - 1;
  uint16_t bits_ = 0;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_RJ_WINDOW_H_
