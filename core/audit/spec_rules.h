// What the audit verifier recomputes from a chain's genesis spec instead of trusting the
// records (docs/AUDIT.md, "What the verifier recomputes"; core/audit/verifier.h).
//
// The genesis record's model_spec is the model's effective spec as protobuf JSON
// (proto/admin.proto). From it:
//   SAU (a prf SAU part; a fused model's fuse.sau for its threshold and its self-regulation):
//     r, C_RJ, delta_RJ, alpha, the base beta_floor, and the self-regulation's switches,
//     gamma, gamma_max, c_hi, c_hi_max and clip step,
//     with the estimator's fixed constants (warm-up, epoch length, log E floor, the floor
//     policy's fractions, cooldown and decay; core/sau/sau_spec.h), which are not part of the
//     spec and so are the verifier's own;
//   LMU (a plain or a fused model's): the probe bounds of the delta table's geometry,
//     LmuTable::LocateBound / InsertBound (core/lmu/lmu_table.h).
//
//   absl::StatusOr<SpecRules> rules = SpecRulesFromModelSpec(genesis_model_spec);
//
// Thread safety: pure functions.
#ifndef STREAMLEARN_CORE_AUDIT_SPEC_RULES_H_
#define STREAMLEARN_CORE_AUDIT_SPEC_RULES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace streamlearn {

struct SauRuleParams {
  int r = 0;
  double c_rj = 0;
  double rj_delta = 0;
  double alpha = 0;
  double beta_floor = 0;  // the base floor
  // The estimator's constants (sau::SauSpec defaults).
  uint64_t warmup = 0;
  uint64_t epoch_length = 0;
  double log_e_floor = 0;
  double red_floor_frac = 0;
  double max_floor_frac = 0;
  uint64_t floor_cooldown = 0;
  double floor_decay = 0;
  // Self-regulation (docs/SAU.md, "Self-regulation"): the switches and the values the
  // regulator starts from and is capped at, from the spec (a spec written before the
  // switches existed has neither: both off). clip_step is ClipStep of the spec: a / sqrt(tau)
  // in L2_SCALED mode, 10 in RAW mode.
  bool regulate_gamma = false;
  bool regulate_clip = false;
  double gamma = 0;
  double gamma_max = 0;
  double c_hi = 0;
  double c_hi_max = 0;
  double clip_step = 0;
  // The running median of the denominators takes an event's den once this many events came
  // before it (warm-up / 2; core/sau/sau_estimator.cc).
  uint64_t median_start = 0;
};

struct LmuRuleParams {
  int locate_bound = 0;
  int insert_bound = 0;
};

struct SpecRules {
  std::optional<SauRuleParams> sau;  // a prf SAU part (the ridge and vla engines have none)
  std::optional<SauRuleParams> fuse_sau;  // a fused model's SAU (its threshold only)
  std::optional<LmuRuleParams> lmu;  // an LMU part, plain or fused
  // The engine of the SAU part and of the fused model's SAU ("prf", "ridge" or "vla"), when
  // the spec has the part: each of the part's records must name the same (rule "engine"; no
  // name means prf), so that no record escapes the prf rules by naming another.
  std::optional<std::string> sau_engine;
  std::optional<std::string> fuse_engine;
};

// INVALID_ARGUMENT naming what is missing or malformed: the spec is not a JSON object, or a
// part lacks a field its rules need.
absl::StatusOr<SpecRules> SpecRulesFromModelSpec(std::string_view model_spec);

// docs/SAU.md (39): C_RJ sqrt(log(max(n, e) / delta_RJ) / r) at the n-th event.
double RjThresholdAt(const SauRuleParams& p, uint64_t n);
// docs/SAU.md (37)-(38): log(1/alpha_j) - log E_mix, alpha_j = alpha / (j (j+1)), j >= 1.
double MarginOf(const SauRuleParams& p, uint64_t epoch, double log_e_mix);

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_SPEC_RULES_H_
