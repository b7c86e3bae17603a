#include "client/demo/scenario_wire.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace streamlearn::client {

namespace {

v1::FusePattern PatternToProto(fuse::FusePattern p) {
  switch (p) {
    case fuse::FusePattern::kMetaLinear: return v1::FUSE_PATTERN_META_LINEAR;
    case fuse::FusePattern::kAttentionAsFeature: return v1::FUSE_PATTERN_ATTENTION_AS_FEATURE;
    case fuse::FusePattern::kLinearAsGate: return v1::FUSE_PATTERN_LINEAR_AS_GATE;
  }
  return v1::FUSE_PATTERN_META_LINEAR;
}

}  // namespace

v1::ModelSpec ScenarioModelSpec(const std::string& name,
                                const workloads::ScenarioOptions& options) {
  const fuse::FuseSpec s = workloads::ScenarioFuseSpec(options);
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.set_shards(1);
  v1::FuseSpec* f = spec.mutable_fuse();
  f->set_pattern(PatternToProto(s.pattern));
  v1::SauSpec* sau = f->mutable_sau();
  sau->set_d(static_cast<uint32_t>(s.sau.d));
  sau->set_d_v(static_cast<uint32_t>(s.sau.d_v));
  sau->set_r(static_cast<uint32_t>(s.sau.r));
  sau->set_tau(s.sau.tau);
  sau->set_gamma(s.sau.gamma);
  sau->set_seed(s.sau.seed);
  v1::LmuSpec* lmu = f->mutable_lmu();
  lmu->set_m(static_cast<uint32_t>(s.lmu.m));
  lmu->set_lr(s.lmu.lr);
  lmu->set_delta_buckets(s.lmu.delta_buckets);
  lmu->set_lambda_max(s.lmu.lambda_max);
  lmu->set_rebuild_seconds(s.lmu.rebuild_seconds);
  lmu->set_margin(s.lmu.margin);
  lmu->set_inline_rebuild(!s.lmu.background_rebuild);
  // Gate and control: the core defaults (zero fields).
  f->mutable_gate();
  f->mutable_control();
  return spec;
}

absl::Status CheckScenarioModel(const v1::ModelInfo& info,
                                const workloads::ScenarioOptions& options) {
  const fuse::FuseSpec s = workloads::ScenarioFuseSpec(options);
  const std::string& name = info.spec().name();
  if (!info.spec().has_fuse()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("model '%s' has no fuse part; the scenario needs a fused model", name));
  }
  const v1::FuseSpec& f = info.spec().fuse();
  auto differs = [&](std::string_view field, double have, double want) -> absl::Status {
    if (have == want) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrFormat(
        "model '%s' has fuse.%s = %g; the scenario's model has %g", name, field, have, want));
  };
  absl::Status st = differs("pattern", f.pattern(), PatternToProto(s.pattern));
  if (st.ok()) st = differs("sau.d", f.sau().d(), s.sau.d);
  if (st.ok()) st = differs("sau.d_v", f.sau().d_v(), s.sau.d_v);
  if (st.ok()) st = differs("sau.r", f.sau().r(), s.sau.r);
  if (st.ok()) st = differs("sau.tau", f.sau().tau(), s.sau.tau);
  if (st.ok()) st = differs("sau.gamma", f.sau().gamma(), s.sau.gamma);
  if (st.ok())
    st = differs("sau.seed", static_cast<double>(f.sau().seed()), static_cast<double>(s.sau.seed));
  if (st.ok()) st = differs("lmu.m", f.lmu().m(), s.lmu.m);
  if (st.ok()) st = differs("lmu.lr", f.lmu().lr(), s.lmu.lr);
  if (st.ok()) st = differs("lmu.delta_buckets", f.lmu().delta_buckets(), s.lmu.delta_buckets);
  if (st.ok())
    st = differs("control.alarm_g_max", f.control().alarm_g_max(), s.control.alarm_g_max);
  return st;
}

int CountActions(const v1::FuseHealth& health, std::string_view action_and_cause) {
  int n = 0;
  for (const std::string& a : health.actions()) n += a == action_and_cause ? 1 : 0;
  return n;
}

void TallyAck(const v1::LearnAck& ack, std::span<const workloads::ScenarioSample> batch,
              workloads::ScenarioTally* tally) {
  const v1::FuseHealth& h = ack.health();
  const int n = std::min(ack.predictions_size(), static_cast<int>(batch.size()));
  for (int i = 0; i < n; ++i) {
    const v1::FusePrediction& p = ack.predictions(i);
    const workloads::ScenarioSample& s = batch[static_cast<size_t>(i)];
    if (p.y_hat_size() < 1 || p.y_hat_sau_size() < 1 || p.y_hat_lmu_size() < 1) continue;
    tally->AddPrediction(s.t, s.y[0], p.y_hat(0), p.y_hat_sau(0), p.y_hat_lmu(0), p.gate(),
                         i + 1 == n ? h.g_max() : NAN);
  }
  if (n == 0) return;
  workloads::HealthPoint hp;
  hp.g_max = h.g_max();
  hp.red_steps = static_cast<uint64_t>(CountActions(h, "raise_beta_floor:rj_red"));
  hp.alarms = static_cast<uint64_t>(CountActions(h, "restart_eprocess:alarm"));
  hp.beta_floor = h.beta_floor();
  hp.lambda_star = h.lambda_star();
  hp.delta_load = h.delta_load();
  hp.ring_used = h.ring_used();
  tally->AddHealth(batch[static_cast<size_t>(n) - 1].t, hp);
}

}  // namespace streamlearn::client
