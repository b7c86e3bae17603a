#include "core/fuse/fuse_spec.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/sau/memory.h"

namespace streamlearn::fuse {

std::string_view PatternName(FusePattern p) {
  switch (p) {
    case FusePattern::kMetaLinear: return "meta_linear";
    case FusePattern::kAttentionAsFeature: return "attention_as_feature";
    case FusePattern::kLinearAsGate: return "linear_as_gate";
  }
  return "unknown";
}

lmu::LmuSpec GateLmuSpec(const FuseSpec& spec) {
  lmu::LmuSpec g;
  g.m = spec.pattern == FusePattern::kLinearAsGate ? 1 : spec.lmu.m;
  g.lr = spec.gate.lr;
  g.l2 = spec.gate.l2;
  // At most 2m + 8 ids ever (fuse_features.h): the delta takes them all below tau_low, so the
  // gate learner never rebuilds; the scheduling inequality holds with lambda_max = 0.
  const int ids = 2 * spec.lmu.m + 8;
  uint32_t buckets = 16;
  while (buckets * 4 * (0.8 - 0.6) < 2.0 * ids) buckets *= 2;
  g.delta_buckets = buckets;
  g.lambda_max = 0;
  g.margin = ids;
  g.background_rebuild = false;
  return g;
}

absl::StatusOr<FuseSpec> ResolveFuseSpec(const FuseSpec& raw) {
  FuseSpec s = raw;
  if (static_cast<int>(s.pattern) > 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pattern = %d is out of range; allowed meta_linear, attention_as_feature, linear_as_gate",
        static_cast<int>(s.pattern)));
  }
  if (s.sau.engine == sau::Engine::kPrf) {
    s.sau = sau::ResolveDefaults(s.sau);
    RETURN_IF_ERROR(sau::ValidateSpec(s.sau));
  } else {
    // ridge or vla (docs/FUSE.md, "Other engines"): their own fields; the prf ones are unused.
    RETURN_IF_ERROR(sau::Memory::Validate(s.sau));
  }
  RETURN_IF_ERROR(lmu::ValidateLmuSpec(s.lmu));
  RETURN_IF_ERROR(control::ValidateControlSpec(s.control));
  if (s.sau.d_v != s.lmu.m) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sau.d_v = %d must equal lmu.m = %d: both are the target's dimension m", s.sau.d_v,
        s.lmu.m));
  }
  if (!(std::isfinite(s.gate.lr) && s.gate.lr > 0 && s.gate.lr <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gate.lr = %g is out of range; allowed (0, 10]", s.gate.lr));
  }
  if (!(std::isfinite(s.gate.l2) && s.gate.l2 >= 0 && s.gate.l2 * s.gate.lr < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gate.l2 = %g is out of range; allowed [0, 1/gate.lr)", s.gate.l2));
  }
  if (!(std::isfinite(s.gate.error_rate) && s.gate.error_rate > 0 && s.gate.error_rate <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "gate.error_rate = %g is out of range; allowed (0, 1]", s.gate.error_rate));
  }
  if (!(std::isfinite(s.gate.scale_rate) && s.gate.scale_rate > 0 && s.gate.scale_rate <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "gate.scale_rate = %g is out of range; allowed (0, 1]", s.gate.scale_rate));
  }
  if (s.control.warn_tau_low > s.lmu.tau_low) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "control.warn_tau_low = %g is out of range; allowed (0, lmu.tau_low = %g] (a warning "
        "lowers tau_low)", s.control.warn_tau_low, s.lmu.tau_low));
  }
  if (s.low_rank && s.sau.engine != sau::Engine::kPrf) {
    return absl::InvalidArgumentError(absl::StrCat(
        "low_rank = true needs the prf engine; sau.engine = ", sau::EngineName(s.sau.engine),
        " has one readout"));
  }
  if (s.low_rank && s.sau.r_v <= 0) {
    return absl::InvalidArgumentError("low_rank = true needs sau.r_v > 0");
  }
  if (absl::Status st = lmu::ValidateLmuSpec(GateLmuSpec(s)); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("gate learner: ", st.message()));
  }
  return s;
}

}  // namespace streamlearn::fuse
