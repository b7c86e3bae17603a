// FuseSpec: everything that defines one model's fused learner (docs/FUSE.md):
// the fusion pattern, the SAU and LMU specs, the gate / meta learner and the control plane,
// with defaults and validation (INVALID_ARGUMENT naming the field).
//
// The fused SAU ingests (k = q, v = y) (docs/DECISIONS.md 7), so sau.d is the query's dimension
// and sau.d_v the target's dimension m, which must equal lmu.m.
#ifndef STREAMLEARN_CORE_FUSE_FUSE_SPEC_H_
#define STREAMLEARN_CORE_FUSE_FUSE_SPEC_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/control/control_spec.h"
#include "core/lmu/lmu_spec.h"
#include "core/sau/sau_spec.h"

namespace streamlearn::fuse {

// docs/FUSE.md, "The patterns". One per model.
enum class FusePattern : uint8_t {
  kMetaLinear = 0,          // y = LMU_meta([y_sau, y_lmu]) (with a bias); the default
  kAttentionAsFeature = 1,  // y = LMU(x ++ z_attn)
  kLinearAsGate = 2,        // y = Gate y_sau + (1 - Gate) y_lmu, Gate learned by an LMU
};
std::string_view PatternName(FusePattern p);  // "meta_linear", "attention_as_feature",
                                              // "linear_as_gate"

// The gate / meta learner: an LmuLearner of its own over a handful of fixed feature ids.
struct GateSpec {
  double lr = 0.05;          // its SGD learning rate (constant schedule)
  double l2 = 0.0;
  double error_rate = 0.05;  // EWM rate of the rolling errors in z_gate (about 20 steps)
  double scale_rate = 0.01;  // EWM rate of the target's running RMS y_scale (about 100 steps)
};

struct FuseSpec {
  FusePattern pattern = FusePattern::kMetaLinear;
  sau::SauSpec sau = DefaultSau();
  lmu::LmuSpec lmu;           // the main linear model over the sample's sparse x
  GateSpec gate;
  control::ControlSpec control;
  bool low_rank = false;      // read y_hat_sau through H (docs/SAU.md (21)); needs sau.r_v > 0

  static sau::SauSpec DefaultSau() {
    sau::SauSpec s;
    s.d_v = 1;  // m = 1, the usual case (docs/DECISIONS.md 7)
    return s;
  }
};

// Feature ids >= this are reserved for the fused features appended to x in the
// attention-as-feature pattern (fuse_features.h); a sample may not use them in any pattern.
inline constexpr uint64_t kReservedIdBase = ~uint64_t{0} - 0xffff;

// Resolves the SAU defaults (tau, clipping, C_RJ), then validates every part: sau.*, lmu.*,
// gate.*, control.*, and the cross-field rules (sau.d_v == lmu.m; control.warn_tau_low <=
// lmu.tau_low; low_rank needs sau.r_v > 0).
absl::StatusOr<FuseSpec> ResolveFuseSpec(const FuseSpec& spec);

// The LmuSpec of the gate / meta learner derived from a resolved FuseSpec: m = 1 (gate) or
// lmu.m (meta-linear); gate.lr, gate.l2; a small delta sized for its fixed ids; inline rebuilds.
lmu::LmuSpec GateLmuSpec(const FuseSpec& spec);

}  // namespace streamlearn::fuse

#endif  // STREAMLEARN_CORE_FUSE_FUSE_SPEC_H_
