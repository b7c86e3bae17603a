#include "server/spec_conversion.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace streamlearn::server {
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

absl::StatusOr<sau::FeatureKind> FeatureKindFromProto(v1::FeatureKind wire) {
  switch (wire) {
    case v1::FEATURE_KIND_UNSPECIFIED:
    case v1::FEATURE_KIND_ORTHOGONAL:
      return sau::FeatureKind::kOrthogonal;
    case v1::FEATURE_KIND_IID:
      return sau::FeatureKind::kIid;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("sau.features: unknown FeatureKind value ", static_cast<int>(wire)));
  }
}

absl::StatusOr<sau::InputMode> InputModeFromProto(v1::InputMode wire) {
  switch (wire) {
    case v1::INPUT_MODE_UNSPECIFIED:
    case v1::INPUT_MODE_L2_SCALED:
      return sau::InputMode::kL2Scaled;
    case v1::INPUT_MODE_RAW:
      return sau::InputMode::kRaw;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("sau.input_mode: unknown InputMode value ", static_cast<int>(wire)));
  }
}

v1::FeatureKind FeatureKindToProto(sau::FeatureKind kind) {
  switch (kind) {
    case sau::FeatureKind::kIid:
      return v1::FEATURE_KIND_IID;
    case sau::FeatureKind::kOrthogonal:
      return v1::FEATURE_KIND_ORTHOGONAL;
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

absl::StatusOr<sau::SauSpec> SauSpecFromProto(const v1::SauSpec& wire) {
  sau::SauSpec s;  // core defaults
  if (absl::Status st = CopyInt("sau.d", wire.d(), &s.d); !st.ok()) return st;
  if (absl::Status st = CopyInt("sau.d_v", wire.d_v(), &s.d_v); !st.ok()) return st;
  if (absl::Status st = CopyInt("sau.r", wire.r(), &s.r); !st.ok()) return st;
  if (absl::Status st = CopyInt("sau.r_v", wire.r_v(), &s.r_v); !st.ok()) return st;
  KeepDefaultIfZero(wire.tau(), &s.tau);
  KeepDefaultIfZero(wire.gamma(), &s.gamma);
  absl::StatusOr<sau::FeatureKind> features = FeatureKindFromProto(wire.features());
  if (!features.ok()) return features.status();
  s.features = *features;
  s.antithetic = wire.antithetic();
  if (wire.seed() != 0) s.seed = wire.seed();
  absl::StatusOr<sau::InputMode> mode = InputModeFromProto(wire.input_mode());
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
  return s;
}

}  // namespace

absl::StatusOr<ModelSpec> ModelSpecFromProto(const v1::ModelSpec& wire) {
  ModelSpec spec;
  spec.name = wire.name();
  if (wire.shards() != 0) spec.shards = wire.shards();
  absl::StatusOr<sau::SauSpec> sau = SauSpecFromProto(wire.sau());
  if (!sau.ok()) return sau.status();
  spec.sau = *std::move(sau);
  return spec;
}

v1::ModelSpec ModelSpecToProto(const ModelSpec& spec) {
  v1::ModelSpec wire;
  wire.set_name(spec.name);
  wire.set_shards(spec.shards);
  const sau::SauSpec& s = spec.sau;
  v1::SauSpec* w = wire.mutable_sau();
  w->set_d(static_cast<uint32_t>(s.d));
  w->set_d_v(static_cast<uint32_t>(s.d_v));
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
  return wire;
}

}  // namespace streamlearn::server
