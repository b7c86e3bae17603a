#include "core/audit/spec_rules.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/audit/audit_record.h"
#include "core/common/status_macros.h"
#include "core/lmu/lmu_table.h"
#include "core/sau/sau_spec.h"

namespace streamlearn {
namespace {

const AuditRecord* Part(const AuditRecord& spec, std::string_view name) {
  const AuditValue* v = spec.Find(name);
  return v == nullptr ? nullptr : v->get_if<AuditRecord>();
}

absl::Status Missing(std::string_view part, std::string_view field) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the genesis model_spec has no numeric ", std::string(part), ".", std::string(field)));
}

absl::StatusOr<double> Number(const AuditRecord& r, std::string_view part,
                              std::string_view field) {
  const AuditValue* v = r.Find(field);
  double x = 0;
  if (v == nullptr || !v->AsNumber(&x) || !std::isfinite(x)) return Missing(part, field);
  return x;
}

absl::StatusOr<SauRuleParams> SauParams(const AuditRecord& sau, std::string_view part) {
  SauRuleParams p;
  absl::StatusOr<double> r = Number(sau, part, "r");
  if (!r.ok()) return r.status();
  if (*r < 1 || *r > (1 << 20) || *r != std::floor(*r)) return Missing(part, "r");
  p.r = static_cast<int>(*r);
  for (auto [field, out] : {std::pair<std::string_view, double*>{"c_rj", &p.c_rj},
                            {"rj_delta", &p.rj_delta},
                            {"alpha", &p.alpha},
                            {"beta_floor", &p.beta_floor}}) {
    absl::StatusOr<double> x = Number(sau, part, field);
    if (!x.ok()) return x.status();
    *out = *x;
  }
  // Self-regulation: a switch the spec does not name is off (specs written before it).
  for (auto [field, out] : {std::pair<std::string_view, bool*>{"regulate_gamma",
                                                               &p.regulate_gamma},
                            {"regulate_clip", &p.regulate_clip}}) {
    const AuditValue* v = sau.Find(field);
    if (v == nullptr) continue;
    const bool* on = v->get_if<bool>();
    if (on == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the genesis model_spec's ", std::string(part), ".", std::string(field),
          " is not a bool"));
    }
    *out = *on;
  }
  if (p.regulate_gamma) {
    ASSIGN_OR_RETURN(p.gamma, Number(sau, part, "gamma"));
    ASSIGN_OR_RETURN(p.gamma_max, Number(sau, part, "gamma_max"));
  }
  if (p.regulate_clip) {
    ASSIGN_OR_RETURN(p.c_hi, Number(sau, part, "c_hi"));
    ASSIGN_OR_RETURN(p.c_hi_max, Number(sau, part, "c_hi_max"));
    // docs/SAU.md (K1): the step is one standard deviation of g in L2_SCALED mode (the
    // default, also for an unspecified mode), 10 in RAW mode.
    const AuditValue* mode = sau.Find("input_mode");
    const std::string* mode_name = mode == nullptr ? nullptr : mode->get_if<std::string>();
    if (mode_name != nullptr && *mode_name == "INPUT_MODE_RAW") {
      p.clip_step = 10.0;
    } else {
      ASSIGN_OR_RETURN(const double a, Number(sau, part, "input_scale"));
      ASSIGN_OR_RETURN(const double tau, Number(sau, part, "tau"));
      if (!(tau > 0)) return Missing(part, "tau");
      p.clip_step = a / std::sqrt(tau);
    }
  }
  const sau::SauSpec defaults;
  p.median_start = static_cast<uint64_t>(defaults.warmup / 2);
  p.warmup = static_cast<uint64_t>(defaults.warmup);
  p.epoch_length = static_cast<uint64_t>(defaults.epoch_length);
  p.log_e_floor = defaults.log_e_floor;
  p.red_floor_frac = defaults.red_floor_frac;
  p.max_floor_frac = defaults.max_floor_frac;
  p.floor_cooldown = static_cast<uint64_t>(defaults.floor_cooldown);
  p.floor_decay = defaults.floor_decay;
  return p;
}

absl::StatusOr<LmuRuleParams> LmuParams(const AuditRecord& lmu, std::string_view part) {
  lmu::CuckooDelta::Options o;
  for (auto [field, out] : {std::pair<std::string_view, int*>{"bucket_size", &o.bucket_size},
                            {"stash", &o.stash},
                            {"max_relocations", &o.max_relocations},
                            {"ring", &o.ring}}) {
    absl::StatusOr<double> x = Number(lmu, part, field);
    if (!x.ok()) return x.status();
    if (*x < 0 || *x > 64 || *x != std::floor(*x)) return Missing(part, field);
    *out = static_cast<int>(*x);
  }
  return LmuRuleParams{.locate_bound = lmu::LmuTable::LocateBound(o),
                       .insert_bound = lmu::LmuTable::InsertBound(o)};
}

// The engine of an SAU part (the model's or the fuse part's) as its records name it: "prf" for
// no engine field or the wire enum's prf or unspecified name, "ridge", "vla"; INVALID_ARGUMENT
// for anything else.
absl::StatusOr<std::string> EngineOf(const AuditRecord& sau, std::string_view part) {
  const AuditValue* engine = sau.Find("engine");
  if (engine == nullptr) return std::string("prf");
  const std::string* name = engine->get_if<std::string>();
  if (name != nullptr) {
    if (*name == "ENGINE_PRF" || *name == "ENGINE_UNSPECIFIED") return std::string("prf");
    if (*name == "ENGINE_RIDGE") return std::string("ridge");
    if (*name == "ENGINE_VLA") return std::string("vla");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the genesis model_spec's ", std::string(part), ".engine is not a known engine"));
}

}  // namespace

absl::StatusOr<SpecRules> SpecRulesFromModelSpec(std::string_view model_spec) {
  absl::StatusOr<AuditRecord> spec = ParseAuditJson(model_spec);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the genesis model_spec is not a JSON object: ",
                                                   spec.status().message()));
  }
  SpecRules rules;
  // An SAU part's engine and, for prf, its rule parameters. A fused model over the ridge or
  // vla engine has no prf rules: its fuse_learn records carry the engine's diagnostics instead
  // (docs/FUSE.md, "Other engines").
  const auto read_sau = [](const AuditRecord& part, std::string_view name,
                           std::optional<std::string>* engine,
                           std::optional<SauRuleParams>* params) -> absl::Status {
    absl::StatusOr<std::string> e = EngineOf(part, name);
    if (!e.ok()) return e.status();
    *engine = *e;
    if (*e != "prf") return absl::OkStatus();
    absl::StatusOr<SauRuleParams> p = SauParams(part, name);
    if (!p.ok()) return p.status();
    *params = *p;
    return absl::OkStatus();
  };
  if (const AuditRecord* sau = Part(*spec, "sau")) {
    if (absl::Status st = read_sau(*sau, "sau", &rules.sau_engine, &rules.sau); !st.ok()) {
      return st;
    }
  }
  const AuditRecord* fuse = Part(*spec, "fuse");
  if (const AuditRecord* fsau = fuse == nullptr ? nullptr : Part(*fuse, "sau")) {
    if (absl::Status st = read_sau(*fsau, "fuse.sau", &rules.fuse_engine, &rules.fuse_sau);
        !st.ok()) {
      return st;
    }
  }
  const AuditRecord* lmu = Part(*spec, "lmu");
  std::string_view lmu_name = "lmu";
  if (lmu == nullptr && fuse != nullptr) {
    lmu = Part(*fuse, "lmu");
    lmu_name = "fuse.lmu";
  }
  if (lmu != nullptr) {
    absl::StatusOr<LmuRuleParams> p = LmuParams(*lmu, lmu_name);
    if (!p.ok()) return p.status();
    rules.lmu = *p;
  }
  return rules;
}

double RjThresholdAt(const SauRuleParams& p, uint64_t n) {
  const double events = static_cast<double>(n);
  return p.c_rj * std::sqrt(std::log(std::max(events, std::numbers::e) / p.rj_delta) / p.r);
}

double MarginOf(const SauRuleParams& p, uint64_t epoch, double log_e_mix) {
  const double j = static_cast<double>(std::max<uint64_t>(epoch, 1));
  return std::log(1.0 / (p.alpha / (j * (j + 1)))) - log_e_mix;
}

}  // namespace streamlearn
