#include "server/storage/spec_conversion.h"

#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/common/status_macros.h"

namespace streamlearn::storage {
namespace {

// Proto zero => keep the core default already in *field.
void KeepDefaultIfZero(double wire, double* field) {
  if (wire != 0.0) *field = wire;
}

absl::Status CopyInt(absl::string_view name, uint32_t wire, int* field) {
  if (wire > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " = ", wire, " is out of range for this server"));
  }
  *field = static_cast<int>(wire);
  return absl::OkStatus();
}

absl::StatusOr<sau::FeatureKind> FeatureKindFromProto(v1::FeatureKind wire,
                                                      absl::string_view part) {
  switch (wire) {
    case v1::FEATURE_KIND_UNSPECIFIED:
    case v1::FEATURE_KIND_ORTHOGONAL:
      return sau::FeatureKind::kOrthogonal;
    case v1::FEATURE_KIND_IID:
      return sau::FeatureKind::kIid;
    case v1::FEATURE_KIND_SRHT:
      return sau::FeatureKind::kSrht;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(part, ".features: unknown FeatureKind value ", static_cast<int>(wire)));
  }
}

absl::StatusOr<sau::InputMode> InputModeFromProto(v1::InputMode wire, absl::string_view part) {
  switch (wire) {
    case v1::INPUT_MODE_UNSPECIFIED:
    case v1::INPUT_MODE_L2_SCALED:
      return sau::InputMode::kL2Scaled;
    case v1::INPUT_MODE_RAW:
      return sau::InputMode::kRaw;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(part, ".input_mode: unknown InputMode value ", static_cast<int>(wire)));
  }
}

v1::FeatureKind FeatureKindToProto(sau::FeatureKind kind) {
  switch (kind) {
    case sau::FeatureKind::kIid:
      return v1::FEATURE_KIND_IID;
    case sau::FeatureKind::kOrthogonal:
      return v1::FEATURE_KIND_ORTHOGONAL;
    case sau::FeatureKind::kSrht:
      return v1::FEATURE_KIND_SRHT;
  }
  return v1::FEATURE_KIND_UNSPECIFIED;
}

v1::InputMode InputModeToProto(sau::InputMode mode) {
  switch (mode) {
    case sau::InputMode::kL2Scaled:
      return v1::INPUT_MODE_L2_SCALED;
    case sau::InputMode::kRaw:
      return v1::INPUT_MODE_RAW;
  }
  return v1::INPUT_MODE_UNSPECIFIED;
}

absl::StatusOr<sau::Engine> EngineFromProto(v1::Engine wire, absl::string_view part) {
  switch (wire) {
    case v1::ENGINE_PRF:
      return sau::Engine::kPrf;
    case v1::ENGINE_RIDGE:
      return sau::Engine::kRidge;
    case v1::ENGINE_VLA:
      return sau::Engine::kVla;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(part, ".engine: unknown Engine value ", static_cast<int>(wire)));
  }
}

// Every field set in `wire` must be one the engine reads: d, d_v, engine and the engine's own
// message (prf: every field but ridge and vla).
absl::Status CheckEngineFields(const v1::SauSpec& wire, sau::Engine engine,
                               absl::string_view part) {
  std::vector<const google::protobuf::FieldDescriptor*> set;
  wire.GetReflection()->ListFields(wire, &set);
  const absl::string_view own = engine == sau::Engine::kRidge ? "ridge"
                               : engine == sau::Engine::kVla ? "vla"
                                                               : "";
  for (const google::protobuf::FieldDescriptor* f : set) {
    const std::string& name = f->name();
    if (name == "d" || name == "d_v" || name == "engine" || name == own) continue;
    const bool engine_message = name == "ridge" || name == "vla";
    if (engine == sau::Engine::kPrf && !engine_message) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        part, ".", name, " is set but the ", sau::EngineName(engine), " engine does not read it",
        engine_message ? absl::StrCat(" (it is the ", name, " engine's; set ", part,
                                      ".engine to use it)")
                       : absl::StrCat(" (a prf parameter; the ", sau::EngineName(engine),
                                      " engine reads d, d_v and ", part, ".", own, ")")));
  }
  return absl::OkStatus();
}

// `part` names the message in errors ("sau" or "fuse.sau").
absl::StatusOr<sau::SauSpec> SauSpecFromProto(const v1::SauSpec& wire, absl::string_view part,
                                              SpecOrigin origin) {
  sau::SauSpec s;  // core defaults
  RETURN_IF_ERROR(CopyInt(absl::StrCat(part, ".d"), wire.d(), &s.d));
  if (absl::Status st = CopyInt(absl::StrCat(part, ".d_v"), wire.d_v(), &s.d_v); !st.ok())
    return st;
  ASSIGN_OR_RETURN(s.engine, EngineFromProto(wire.engine(), part));
  RETURN_IF_ERROR(CheckEngineFields(wire, s.engine, part));
  if (s.engine == sau::Engine::kRidge) {
    KeepDefaultIfZero(wire.ridge().gamma(), &s.ridge_engine.gamma);
    KeepDefaultIfZero(wire.ridge().eps(), &s.ridge_engine.eps);
    s.ridge_engine.filter_order = wire.ridge().filter_order();
    return s;
  }
  if (s.engine == sau::Engine::kVla) {
    KeepDefaultIfZero(wire.vla().lambda0(), &s.vla_engine.lambda0);
    if (wire.vla().refresh_period() != 0) s.vla_engine.refresh_period = wire.vla().refresh_period();
    KeepDefaultIfZero(wire.vla().refresh_eta(), &s.vla_engine.refresh_eta);
    KeepDefaultIfZero(wire.vla().key_eps(), &s.vla_engine.key_eps);
    return s;
  }
  RETURN_IF_ERROR(CopyInt(absl::StrCat(part, ".r"), wire.r(), &s.r));
  if (absl::Status st = CopyInt(absl::StrCat(part, ".r_v"), wire.r_v(), &s.r_v); !st.ok())
    return st;
  KeepDefaultIfZero(wire.tau(), &s.tau);
  KeepDefaultIfZero(wire.gamma(), &s.gamma);
  absl::StatusOr<sau::FeatureKind> features = FeatureKindFromProto(wire.features(), part);
  if (!features.ok()) return features.status();
  s.features = *features;
  // Unset: paired when the rows can be (docs/SAU.md R8) for a new spec; off for a stored one
  // written before that default (every stored spec since says which).
  s.antithetic = wire.has_antithetic() ? wire.antithetic()
                                       : origin == SpecOrigin::kRequest && s.r % 4 == 0;
  if (wire.seed() != 0) s.seed = wire.seed();
  absl::StatusOr<sau::InputMode> mode = InputModeFromProto(wire.input_mode(), part);
  if (!mode.ok()) return mode.status();
  s.input_mode = *mode;
  KeepDefaultIfZero(wire.input_scale(), &s.input_scale);
  KeepDefaultIfZero(wire.c_lo(), &s.c_lo);
  KeepDefaultIfZero(wire.c_hi(), &s.c_hi);
  s.u.assign(wire.u().begin(), wire.u().end());
  KeepDefaultIfZero(wire.beta_mu(), &s.beta_mu);
  KeepDefaultIfZero(wire.beta_sigma(), &s.beta_sigma);
  KeepDefaultIfZero(wire.alpha(), &s.alpha);
  KeepDefaultIfZero(wire.kappa(), &s.kappa);
  KeepDefaultIfZero(wire.c_rj(), &s.c_rj);
  KeepDefaultIfZero(wire.rj_delta(), &s.rj_delta);
  KeepDefaultIfZero(wire.beta_floor(), &s.beta_floor);
  s.regulate_gamma = wire.regulate_gamma();
  s.gamma_max = wire.gamma_max();
  s.regulate_clip = wire.regulate_clip();
  s.c_hi_max = wire.c_hi_max();
  if (wire.exact_window() > static_cast<uint32_t>(sau::kMaxExactWindow)) {
    return absl::InvalidArgumentError(absl::StrCat(part, ".exact_window = ", wire.exact_window(),
                                                   " is out of range; allowed 0..",
                                                   sau::kMaxExactWindow, " (0 = off)"));
  }
  s.exact_window = static_cast<int>(wire.exact_window());
  return s;
}

void SauSpecToProto(const sau::SauSpec& s, v1::SauSpec* w) {
  w->set_d(static_cast<uint32_t>(s.d));
  w->set_d_v(static_cast<uint32_t>(s.d_v));
  w->set_engine(EngineToProto(s.engine));
  if (s.engine == sau::Engine::kRidge) {
    w->mutable_ridge()->set_gamma(s.ridge_engine.gamma);
    w->mutable_ridge()->set_eps(s.ridge_engine.eps);
    w->mutable_ridge()->set_filter_order(s.ridge_engine.filter_order);
    return;
  }
  if (s.engine == sau::Engine::kVla) {
    w->mutable_vla()->set_lambda0(s.vla_engine.lambda0);
    w->mutable_vla()->set_refresh_period(s.vla_engine.refresh_period);
    w->mutable_vla()->set_refresh_eta(s.vla_engine.refresh_eta);
    w->mutable_vla()->set_key_eps(s.vla_engine.key_eps);
    return;
  }
  w->set_r(static_cast<uint32_t>(s.r));
  w->set_tau(s.tau);
  w->set_gamma(s.gamma);
  w->set_features(FeatureKindToProto(s.features));
  w->set_antithetic(s.antithetic);
  w->set_seed(s.seed);
  w->set_input_mode(InputModeToProto(s.input_mode));
  w->set_input_scale(s.input_scale);
  w->set_c_lo(s.c_lo);
  w->set_c_hi(s.c_hi);
  w->set_r_v(static_cast<uint32_t>(s.r_v));
  w->mutable_u()->Add(s.u.begin(), s.u.end());
  w->set_beta_mu(s.beta_mu);
  w->set_beta_sigma(s.beta_sigma);
  w->set_alpha(s.alpha);
  w->set_kappa(s.kappa);
  w->set_c_rj(s.c_rj);
  w->set_rj_delta(s.rj_delta);
  w->set_beta_floor(s.beta_floor);
  w->set_regulate_gamma(s.regulate_gamma);
  w->set_gamma_max(s.gamma_max);
  w->set_regulate_clip(s.regulate_clip);
  w->set_c_hi_max(s.c_hi_max);
  w->set_exact_window(static_cast<uint32_t>(s.exact_window));
}

absl::StatusOr<lmu::LrSchedule> LrScheduleFromProto(v1::LrSchedule wire, absl::string_view part) {
  switch (wire) {
    case v1::LR_SCHEDULE_CONSTANT:
      return lmu::LrSchedule::kConstant;
    case v1::LR_SCHEDULE_INVERSE_SQRT:
      return lmu::LrSchedule::kInverseSqrt;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(part, ".schedule: unknown LrSchedule value ", static_cast<int>(wire)));
  }
}

v1::LrSchedule LrScheduleToProto(lmu::LrSchedule schedule) {
  switch (schedule) {
    case lmu::LrSchedule::kConstant:
      return v1::LR_SCHEDULE_CONSTANT;
    case lmu::LrSchedule::kInverseSqrt:
      return v1::LR_SCHEDULE_INVERSE_SQRT;
  }
  return v1::LR_SCHEDULE_CONSTANT;
}

// Proto zero => keep the core default already in *field.
absl::Status KeepDefaultIfZero(absl::string_view name, uint32_t wire, int* field) {
  if (wire == 0) return absl::OkStatus();
  return CopyInt(name, wire, field);
}

absl::StatusOr<lmu::LmuSpec> LmuSpecFromProto(const v1::LmuSpec& wire, absl::string_view part,
                                              SpecOrigin origin) {
  lmu::LmuSpec s;  // core defaults
  if (absl::Status st = KeepDefaultIfZero(absl::StrCat(part, ".m"), wire.m(), &s.m); !st.ok())
    return st;
  KeepDefaultIfZero(wire.lr(), &s.lr);
  absl::StatusOr<lmu::LrSchedule> schedule = LrScheduleFromProto(wire.schedule(), part);
  if (!schedule.ok()) return schedule.status();
  s.schedule = *schedule;
  KeepDefaultIfZero(wire.l2(), &s.l2);
  if (wire.delta_buckets() != 0) s.delta_buckets = wire.delta_buckets();
  if (absl::Status st =
          KeepDefaultIfZero(absl::StrCat(part, ".bucket_size"), wire.bucket_size(), &s.bucket_size);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = KeepDefaultIfZero(absl::StrCat(part, ".stash"), wire.stash(), &s.stash);
      !st.ok())
    return st;
  if (absl::Status st = KeepDefaultIfZero(absl::StrCat(part, ".max_relocations"),
                                          wire.max_relocations(), &s.max_relocations);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = KeepDefaultIfZero(absl::StrCat(part, ".ring"), wire.ring(), &s.ring);
      !st.ok())
    return st;
  KeepDefaultIfZero(wire.tau_low(), &s.tau_low);
  KeepDefaultIfZero(wire.tau_high(), &s.tau_high);
  KeepDefaultIfZero(wire.lambda_max(), &s.lambda_max);
  KeepDefaultIfZero(wire.rebuild_seconds(), &s.rebuild_seconds);
  KeepDefaultIfZero(wire.margin(), &s.margin);
  s.background_rebuild = !wire.inline_rebuild();
  // Unset delta_buckets: the server sizes the delta from the declared novelty rate and rebuild
  // bound, the default (4096) or the smallest power of two above it that satisfies (L3).
  if (wire.delta_buckets() == 0) s.delta_buckets = lmu::SolveDeltaBuckets(s, s.delta_buckets);
  // Unset: a new spec's delta may grow 4x under pressure (docs/LMU.md, "Growing the delta");
  // a stored one written before growth existed never grows (every stored spec since says).
  if (wire.has_max_delta_buckets()) {
    s.max_delta_buckets = wire.max_delta_buckets() == s.delta_buckets ? 0 : wire.max_delta_buckets();
  } else if (origin == SpecOrigin::kRequest) {
    s.max_delta_buckets = lmu::DefaultMaxDeltaBuckets(s.delta_buckets);
  }
  return s;
}

void LmuSpecToProto(const lmu::LmuSpec& s, v1::LmuSpec* w) {
  w->set_m(static_cast<uint32_t>(s.m));
  w->set_lr(s.lr);
  w->set_schedule(LrScheduleToProto(s.schedule));
  w->set_l2(s.l2);
  w->set_delta_buckets(s.delta_buckets);
  w->set_bucket_size(static_cast<uint32_t>(s.bucket_size));
  w->set_stash(static_cast<uint32_t>(s.stash));
  w->set_max_relocations(static_cast<uint32_t>(s.max_relocations));
  w->set_ring(static_cast<uint32_t>(s.ring));
  w->set_tau_low(s.tau_low);
  w->set_tau_high(s.tau_high);
  w->set_lambda_max(s.lambda_max);
  w->set_rebuild_seconds(s.rebuild_seconds);
  w->set_margin(s.margin);
  w->set_inline_rebuild(!s.background_rebuild);
  w->set_max_delta_buckets(lmu::DeltaBucketsCap(s));
}


absl::StatusOr<fuse::FusePattern> FusePatternFromProto(v1::FusePattern wire) {
  switch (wire) {
    case v1::FUSE_PATTERN_META_LINEAR:
      return fuse::FusePattern::kMetaLinear;
    case v1::FUSE_PATTERN_ATTENTION_AS_FEATURE:
      return fuse::FusePattern::kAttentionAsFeature;
    case v1::FUSE_PATTERN_LINEAR_AS_GATE:
      return fuse::FusePattern::kLinearAsGate;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("fuse.pattern: unknown FusePattern value ", static_cast<int>(wire)));
  }
}

v1::FusePattern FusePatternToProto(fuse::FusePattern p) {
  switch (p) {
    case fuse::FusePattern::kMetaLinear:
      return v1::FUSE_PATTERN_META_LINEAR;
    case fuse::FusePattern::kAttentionAsFeature:
      return v1::FUSE_PATTERN_ATTENTION_AS_FEATURE;
    case fuse::FusePattern::kLinearAsGate:
      return v1::FUSE_PATTERN_LINEAR_AS_GATE;
  }
  return v1::FUSE_PATTERN_META_LINEAR;
}

absl::StatusOr<control::ControlSpec> ControlSpecFromProto(const v1::ControlSpec& wire) {
  control::ControlSpec s;  // core defaults
  s.g_min = wire.g_min();  // its default is 0
  KeepDefaultIfZero(wire.g_max(), &s.g_max);
  KeepDefaultIfZero(wire.alarm_g_max(), &s.alarm_g_max);
  KeepDefaultIfZero(wire.den_g_max(), &s.den_g_max);
  if (absl::Status st =
          KeepDefaultIfZero("fuse.control.clamp_window", wire.clamp_window(), &s.clamp_window);
      !st.ok()) {
    return st;
  }
  KeepDefaultIfZero(wire.recovery_rate(), &s.recovery_rate);
  KeepDefaultIfZero(wire.lambda_factor(), &s.lambda_factor);
  KeepDefaultIfZero(wire.lambda_factor_max(), &s.lambda_factor_max);
  KeepDefaultIfZero(wire.den_lambda_frac(), &s.den_lambda_frac);
  if (absl::Status st =
          KeepDefaultIfZero("fuse.control.warn_persist", wire.warn_persist(), &s.warn_persist);
      !st.ok()) {
    return st;
  }
  KeepDefaultIfZero(wire.margin_thin(), &s.margin_thin);
  KeepDefaultIfZero(wire.warn_tau_low(), &s.warn_tau_low);
  KeepDefaultIfZero(wire.warn_lr_scale(), &s.warn_lr_scale);
  if (absl::Status st =
          KeepDefaultIfZero("fuse.control.warn_window", wire.warn_window(), &s.warn_window);
      !st.ok()) {
    return st;
  }
  return s;
}

void ControlSpecToProto(const control::ControlSpec& s, v1::ControlSpec* w) {
  w->set_g_min(s.g_min);
  w->set_g_max(s.g_max);
  w->set_alarm_g_max(s.alarm_g_max);
  w->set_den_g_max(s.den_g_max);
  w->set_clamp_window(static_cast<uint32_t>(s.clamp_window));
  w->set_recovery_rate(s.recovery_rate);
  w->set_lambda_factor(s.lambda_factor);
  w->set_lambda_factor_max(s.lambda_factor_max);
  w->set_den_lambda_frac(s.den_lambda_frac);
  w->set_warn_persist(static_cast<uint32_t>(s.warn_persist));
  w->set_margin_thin(s.margin_thin);
  w->set_warn_tau_low(s.warn_tau_low);
  w->set_warn_lr_scale(s.warn_lr_scale);
  w->set_warn_window(static_cast<uint32_t>(s.warn_window));
}

absl::StatusOr<fuse::FuseSpec> FuseSpecFromProto(const v1::FuseSpec& wire, SpecOrigin origin) {
  fuse::FuseSpec s;  // core defaults
  absl::StatusOr<fuse::FusePattern> pattern = FusePatternFromProto(wire.pattern());
  if (!pattern.ok()) return pattern.status();
  s.pattern = *pattern;
  absl::StatusOr<lmu::LmuSpec> lmu = LmuSpecFromProto(wire.lmu(), "fuse.lmu", origin);
  if (!lmu.ok()) return lmu.status();
  s.lmu = *std::move(lmu);
  absl::StatusOr<sau::SauSpec> sau = SauSpecFromProto(wire.sau(), "fuse.sau", origin);
  if (!sau.ok()) return sau.status();
  s.sau = *std::move(sau);
  // d_v is the target's dimension m: zero takes lmu.m (1 by default).
  if (wire.sau().d_v() == 0) s.sau.d_v = s.lmu.m;
  KeepDefaultIfZero(wire.gate().lr(), &s.gate.lr);
  s.gate.l2 = wire.gate().l2();  // its default is 0
  KeepDefaultIfZero(wire.gate().error_rate(), &s.gate.error_rate);
  KeepDefaultIfZero(wire.gate().scale_rate(), &s.gate.scale_rate);
  absl::StatusOr<control::ControlSpec> control = ControlSpecFromProto(wire.control());
  if (!control.ok()) return control.status();
  s.control = *control;
  s.low_rank = wire.low_rank();
  return s;
}

void FuseSpecToProto(const fuse::FuseSpec& s, v1::FuseSpec* w) {
  w->set_pattern(FusePatternToProto(s.pattern));
  SauSpecToProto(s.sau, w->mutable_sau());
  LmuSpecToProto(s.lmu, w->mutable_lmu());
  v1::GateSpec* g = w->mutable_gate();
  g->set_lr(s.gate.lr);
  g->set_l2(s.gate.l2);
  g->set_error_rate(s.gate.error_rate);
  g->set_scale_rate(s.gate.scale_rate);
  ControlSpecToProto(s.control, w->mutable_control());
  w->set_low_rank(s.low_rank);
}

}  // namespace

v1::Engine EngineToProto(sau::Engine engine) {
  switch (engine) {
    case sau::Engine::kPrf:
      return v1::ENGINE_PRF;
    case sau::Engine::kRidge:
      return v1::ENGINE_RIDGE;
    case sau::Engine::kVla:
      return v1::ENGINE_VLA;
  }
  return v1::ENGINE_PRF;
}

absl::StatusOr<ModelSpec> ModelSpecFromProto(const v1::ModelSpec& wire, SpecOrigin origin) {
  ModelSpec spec;
  spec.name = wire.name();
  if (wire.shards() != 0) spec.shards = wire.shards();
  // A part is present when its message is (message-field presence), even if empty.
  spec.has_sau = wire.has_sau();
  if (spec.has_sau) {
    absl::StatusOr<sau::SauSpec> sau = SauSpecFromProto(wire.sau(), "sau", origin);
    if (!sau.ok()) return sau.status();
    spec.sau = *std::move(sau);
  }
  spec.has_lmu = wire.has_lmu();
  if (spec.has_lmu) {
    absl::StatusOr<lmu::LmuSpec> lmu = LmuSpecFromProto(wire.lmu(), "lmu", origin);
    if (!lmu.ok()) return lmu.status();
    spec.lmu = *std::move(lmu);
  }
  spec.has_fuse = wire.has_fuse();
  if (spec.has_fuse) {
    absl::StatusOr<fuse::FuseSpec> fuse = FuseSpecFromProto(wire.fuse(), origin);
    if (!fuse.ok()) return fuse.status();
    spec.fuse = *std::move(fuse);
  }
  return spec;
}

v1::ModelSpec ModelSpecToProto(const ModelSpec& spec) {
  v1::ModelSpec wire;
  wire.set_name(spec.name);
  wire.set_shards(spec.shards);
  if (spec.has_sau) SauSpecToProto(spec.sau, wire.mutable_sau());
  if (spec.has_lmu) LmuSpecToProto(spec.lmu, wire.mutable_lmu());
  if (spec.has_fuse) FuseSpecToProto(spec.fuse, wire.mutable_fuse());
  return wire;
}

}  // namespace streamlearn::storage
