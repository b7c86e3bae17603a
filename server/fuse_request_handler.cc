#include "server/fuse_request_handler.h"

#include <cassert>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/common/status_macros.h"
#include "server/batch_step.h"
#include "server/model_lookup.h"
#include "server/proto_views.h"
#include "server/status_conversion.h"

namespace streamlearn::server {
namespace {

v1::RjLevel RjLevelToProto(int level) {
  return level == 2 ? v1::RJ_LEVEL_RED : level == 1 ? v1::RJ_LEVEL_YELLOW : v1::RJ_LEVEL_GREEN;
}

void PredictionToProto(uint64_t t, const fuse::FusePrediction& p, v1::FusePrediction* out) {
  out->set_t(t);
  out->mutable_y_hat()->Add(p.y_hat.begin(), p.y_hat.end());
  out->mutable_y_hat_sau()->Add(p.y_hat_sau.begin(), p.y_hat_sau.end());
  out->mutable_y_hat_lmu()->Add(p.y_hat_lmu.begin(), p.y_hat_lmu.end());
  out->set_gate(p.gate);
}

void HealthToProto(const FuseLearnOutcome& o, v1::FuseHealth* out) {
  const FuseShardHealth& h = o.last;
  out->set_gate(h.gate);
  out->set_g_min(h.g_min);
  out->set_g_max(h.g_max);
  out->set_margin(h.margin);
  out->set_rj_gap(h.rj_gap);
  out->set_rj_level(RjLevelToProto(h.rj_level));
  out->set_den(h.den);
  out->set_beta_floor(h.beta_floor);
  out->set_lambda_star(h.lambda_star);
  out->set_clip_rate(h.clip_rate);
  out->set_delta_load(o.table.delta_load);
  out->set_ring_used(static_cast<uint32_t>(o.table.ring_used));
  out->set_c_lookup_p100(static_cast<uint32_t>(o.c_lookup_p100));
  out->set_c_insert_p100(static_cast<uint32_t>(o.c_insert_p100));
  for (const FuseApplied& a : o.steps) {
    for (const control::ControlAction& c : a.step.actions) {
      std::string action(control::ActionName(c.action));
      action += ':';
      action += control::CauseName(c.cause);
      out->add_actions(std::move(action));
    }
  }
  out->set_lmu_tau_low(h.lmu_tau_low);
  out->set_lmu_lr_scale(h.lmu_lr_scale);
  switch (h.engine) {
    case sau::Engine::kPrf:
      out->set_engine(v1::ENGINE_PRF);
      break;
    case sau::Engine::kRidge:
      out->set_engine(v1::ENGINE_RIDGE);
      out->mutable_ridge()->set_key_norm2(h.ridge.key_norm2);
      out->mutable_ridge()->set_scale(h.ridge.scale);
      out->set_condition(h.condition);
      out->set_residual(h.residual);
      break;
    case sau::Engine::kVla:
      out->set_engine(v1::ENGINE_VLA);
      out->mutable_vla()->set_skipped(h.vla.skipped);
      out->mutable_vla()->set_residual_norm(h.vla.residual_norm);
      out->mutable_vla()->set_alpha_dot_k(h.vla.alpha_dot_k);
      out->mutable_vla()->set_refreshed(h.vla.refreshed);
      out->mutable_vla()->set_s_norm(h.s_norm);
      break;
  }
}

}  // namespace

FuseRequestHandler::FuseRequestHandler(ModelRegistry* registry, Metrics* metrics,
                                       BatchLimits limits, storage::Persistence* persistence)
    : registry_(registry), metrics_(metrics), limits_(limits), persistence_(persistence) {
  assert(limits_.max_batch >= 1);
}

absl::Status FuseRequestHandler::Learn(const v1::LearnRequest& request, LearnSession* session,
                                       v1::LearnAck* ack) {
  ack->Clear();
  absl::Status status = LearnBatch(request, session, ack);
  ToBatchStatus(status, ack->mutable_status());
  return status;
}

absl::Status FuseRequestHandler::LearnBatch(const v1::LearnRequest& request,
                                            LearnSession* session, v1::LearnAck* ack) {
  // Routed and counted before any copy, so that a flood of samples in one message costs
  // nothing.
  const size_t n = static_cast<size_t>(request.samples_size());
  ASSIGN_OR_RETURN(const BatchRoute route,
                   RouteBatch(*registry_, persistence_, request.model(), request.routing_key(),
                              PartKind::kFuse, n, limits_.max_batch, &session->binding, ack));
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const v1::FuseSample& s = request.samples(static_cast<int>(i));
    RETURN_IF_ERROR(
        CheckParallel(s.ids_size(), s.vals_size(), [&] { return SamplePrefix(i, s.t()); }));
    total += static_cast<size_t>(s.ids_size());
  }
  std::vector<lmu::Feature>& features = session->features;
  features.clear();
  features.reserve(total);  // the spans below point into it: no reallocation after this
  std::vector<FuseSampleView>& views = session->views;
  views.clear();
  views.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const v1::FuseSample& s = request.samples(static_cast<int>(i));
    const size_t begin = features.size();
    AppendFeatures(s.ids(), s.vals(), &features);
    views.push_back(FuseSampleView{
        .t = s.t(),
        .x = std::span<const lmu::Feature>(features.data() + begin, features.size() - begin),
        .q = AsSpan(s.q()),
        .y = AsSpan(s.y()),
    });
  }

  ASSIGN_OR_RETURN(const storage::DurableStep<FuseShard> step,
                   ApplyBatch(route.model->fuse(route.shard), route,
                              std::span<const FuseSampleView>(views), limits_, ack));
  const FuseLearnOutcome* outcome = &step.outcome;
  ack->set_applied(outcome->applied);
  ack->mutable_duplicate_t()->Add(outcome->duplicates.begin(), outcome->duplicates.end());
  for (const FuseApplied& a : outcome->steps) {
    PredictionToProto(views[a.index].t, a.step.prediction, ack->add_predictions());
  }
  ack->set_ver_sau(outcome->ver_sau);
  ack->set_ver_base(outcome->ver_base);
  ack->set_ver_delta(outcome->ver_delta);
  if (outcome->has_last) {
    HealthToProto(*outcome, ack->mutable_health());
    const FuseShardHealth& h = outcome->last;
    metrics_->RecordFuse(route.model->spec().name, route.shard,
                         FuseHealth{.gate = h.gate,
                                    .g_min = h.g_min,
                                    .g_max = h.g_max,
                                    .y_err_abs = h.y_err_abs,
                                    .margin = h.margin,
                                    .rj_gap = h.rj_gap,
                                    .rj_level = h.rj_level,
                                    .beta_floor = h.beta_floor,
                                    .lambda_star = h.lambda_star,
                                    .den = h.den,
                                    .actions = outcome->actions_total,
                                    .engine = h.engine,
                                    .key_scale = h.ridge.scale,
                                    .condition = h.condition,
                                    .residual_norm = h.vla.residual_norm,
                                    .s_norm = h.s_norm});
  }
  return absl::OkStatus();
}

absl::Status FuseRequestHandler::Predict(const v1::FusePredictRequest& request,
                                         v1::FusePredictResponse* response) const {
  absl::StatusOr<std::shared_ptr<Model>> model =
      FindModelWithPart(*registry_, request.model(), PartKind::kFuse);
  if (!model.ok()) return model.status();
  RETURN_IF_ERROR(
      CheckParallel(request.ids_size(), request.vals_size(), [] { return std::string(); }));
  std::vector<lmu::Feature> x;
  x.reserve(static_cast<size_t>(request.ids_size()));
  AppendFeatures(request.ids(), request.vals(), &x);

  const uint32_t shard = (*model)->ShardOf(request.routing_key());
  ASSIGN_OR_RETURN(const storage::ModelWriters::Use use,
                   UseShard(persistence_, request.model(), shard));
  absl::StatusOr<fuse::FusePrediction> p = (*model)->fuse(shard).Predict(x, AsSpan(request.q()));
  if (!p.ok()) return p.status();
  response->mutable_y_hat()->Add(p->y_hat.begin(), p->y_hat.end());
  response->mutable_y_hat_sau()->Add(p->y_hat_sau.begin(), p->y_hat_sau.end());
  response->mutable_y_hat_lmu()->Add(p->y_hat_lmu.begin(), p->y_hat_lmu.end());
  response->set_gate(p->gate);
  response->set_rj_gap(p->rj_gap);
  response->set_margin(p->margin);
  response->set_den(p->den);
  response->set_ver_sau(p->ver_sau);
  response->set_ver_base(p->ver_base);
  response->set_ver_delta(p->ver_delta);
  response->set_shard(shard);
  return absl::OkStatus();
}

}  // namespace streamlearn::server
