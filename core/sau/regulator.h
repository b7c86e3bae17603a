// Regulator: the self-regulating actions of an SAU (docs/SAU.md, "Self-regulation"), each
// behind its own spec switch, each a deterministic function of the stream so far, in force
// from the next event on (predictable), and part of the state (digest, snapshot).
//
//   gamma (seed 001 F1, "raise gamma to thicken mu_eff"): events are counted in blocks of
//     kBlock. An event is thin when its raw whitened denominator is below kThinFrac times the
//     running median of the denominators (the floor policy's reference, docs/SAU.md (28)). A block
//     with at least kThinRaise thin events doubles the effective window one level up: at level
//     k, gamma = min(gamma_max, 1 - (1 - gamma_spec) / 2^k), so level 0 is the spec's gamma
//     bit for bit. After a cooldown of blocks in a row without a thin event, gamma steps one
//     level back (seed 001 C5: "restore after cooldown"; at level 0 healthy blocks are not
//     counted). The cooldown is kCooldownBlocks
//     blocks, doubled by every step back taken so far (at most 2^10 times): a stream whose
//     thin spells come back once the window is short again backs off ever more slowly,
//     instead of swinging at a fixed period.
//   clip (seed 001 C4, F2, F4, "raise c"): at the end of every e-process epoch, if more than
//     kClipTarget of that epoch's log-features were clipped from above, c_hi rises by
//     ClipStep(spec), up to c_hi_max. It never comes down: a lower c would clip more.
//
// Not thread-safe; owned by SauState.
#ifndef STREAMLEARN_CORE_SAU_REGULATOR_H_
#define STREAMLEARN_CORE_SAU_REGULATOR_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/common/digest.h"
#include "core/sau/sau_spec.h"

namespace streamlearn::sau {

class Regulator {
 public:
  static constexpr int kBlock = 100;
  static constexpr int kThinRaise = 3;        // >= 3% thin events in a block: widen
  static constexpr double kThinFrac = 0.1;    // thin: den < kThinFrac * median den
  static constexpr int kCooldownBlocks = 20;  // healthy blocks in a row before a step back
  static constexpr double kClipTarget = 0.01;  // seed 001 C4: pi_c <= 1%

  explicit Regulator(const SauSpec& spec)
      : enabled_(spec.regulate_gamma || spec.regulate_clip),
        gamma_(spec.gamma),
        c_hi_(spec.c_hi) {}

  // What one event changed, for the diagnostics and the audit record.
  struct Change {
    int gamma = 0;  // +1 widened, -1 stepped back, 0 unchanged
    bool c_hi = false;
  };

  // After the event's statistics moved on: `thin` as above, `clipped_hi` its log-features
  // clipped from above out of r, `epoch_ending` true when the e-process ends its epoch at
  // this event (the next event starts a new one).
  Change AfterEvent(const SauSpec& spec, bool thin, int clipped_hi, bool epoch_ending) {
    Change change;
    if (spec.regulate_gamma) {
      thin_ += thin ? 1 : 0;
      if (++block_events_ == kBlock) {
        if (thin_ >= kThinRaise) {
          healthy_blocks_ = 0;
          if (gamma_ < spec.gamma_max) {
            gamma_ = GammaAt(spec, ++level_);
            change.gamma = 1;
            ++gamma_raises_;
          }
        } else if (thin_ == 0) {
          // At level 0 there is nothing to step back from, and nothing to count towards.
          if (level_ > 0 && ++healthy_blocks_ >= Cooldown()) {
            healthy_blocks_ = 0;
            gamma_ = GammaAt(spec, --level_);
            change.gamma = -1;
            ++gamma_lowers_;
          }
        } else {
          healthy_blocks_ = 0;
        }
        block_events_ = 0;
        thin_ = 0;
      }
    }
    if (spec.regulate_clip) {
      epoch_clipped_hi_ += static_cast<uint64_t>(clipped_hi);
      epoch_features_ += static_cast<uint64_t>(spec.r);
      if (epoch_ending) {
        const double rate =
            static_cast<double>(epoch_clipped_hi_) / static_cast<double>(epoch_features_);
        if (rate > kClipTarget && c_hi_ < spec.c_hi_max) {
          c_hi_ = std::min(spec.c_hi_max, c_hi_ + ClipStep(spec));
          change.c_hi = true;
          ++c_hi_raises_;
        }
        epoch_clipped_hi_ = 0;
        epoch_features_ = 0;
      }
    }
    return change;
  }

  // The gamma of level k (above); level 0 is the spec's.
  static double GammaAt(const SauSpec& spec, int level) {
    if (level == 0) return spec.gamma;
    return std::min(spec.gamma_max, 1.0 - std::ldexp(1.0 - spec.gamma, -level));
  }
  // The first level whose gamma is gamma_max: the highest a regulator reaches.
  static int TopLevel(const SauSpec& spec) {
    int level = 0;
    while (level < 1100 && GammaAt(spec, level) < spec.gamma_max) ++level;
    return level;
  }
  // Healthy blocks in a row before the next step back.
  uint64_t Cooldown() const {
    return static_cast<uint64_t>(kCooldownBlocks) << std::min<uint64_t>(gamma_lowers_, 10);
  }

  bool enabled() const { return enabled_; }
  int level() const { return level_; }
  double gamma() const { return gamma_; }  // in force for the next event
  double c_hi() const { return c_hi_; }    // in force for the next event and query
  uint64_t gamma_raises() const { return gamma_raises_; }
  uint64_t gamma_lowers() const { return gamma_lowers_; }
  uint64_t c_hi_raises() const { return c_hi_raises_; }

  // Appended to the state digest only when a switch is on, so that an unregulated model keeps
  // the digest of docs/SAU.md.
  void Hash(Sha256& h) const {
    if (!enabled_) return;
    h.Update("streamlearn.sau.regulator.v1");
    h.F64(gamma_);
    h.U64(static_cast<uint64_t>(level_));
    h.F64(c_hi_);
    h.U64(static_cast<uint64_t>(block_events_));
    h.U64(static_cast<uint64_t>(thin_));
    h.U64(healthy_blocks_);
    h.U64(epoch_clipped_hi_);
    h.U64(epoch_features_);
    h.U64(gamma_raises_);
    h.U64(gamma_lowers_);
    h.U64(c_hi_raises_);
  }

 private:
  friend struct SauSnapshotAccess;  // core/sau/sau_snapshot.cc: snapshot and restore

  bool enabled_;
  double gamma_;
  int level_ = 0;
  double c_hi_;
  int block_events_ = 0;
  int thin_ = 0;
  uint64_t healthy_blocks_ = 0;
  uint64_t epoch_clipped_hi_ = 0;
  uint64_t epoch_features_ = 0;
  uint64_t gamma_raises_ = 0;
  uint64_t gamma_lowers_ = 0;
  uint64_t c_hi_raises_ = 0;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_REGULATOR_H_
