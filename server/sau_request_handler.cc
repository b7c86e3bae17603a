#include "server/sau_request_handler.h"

#include <cassert>
#include <span>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "core/common/status_macros.h"
#include "server/batch_step.h"
#include "server/model_lookup.h"
#include "server/proto_views.h"
#include "server/status_conversion.h"
#include "server/storage/spec_conversion.h"

namespace streamlearn::server {
namespace {

v1::RjLevel RjLevelToProto(sau::RjLevel level) {
  switch (level) {
    case sau::RjLevel::kGreen:
      return v1::RJ_LEVEL_GREEN;
    case sau::RjLevel::kYellow:
      return v1::RJ_LEVEL_YELLOW;
    case sau::RjLevel::kRed:
      return v1::RJ_LEVEL_RED;
  }
  return v1::RJ_LEVEL_GREEN;
}

void DiagnosticsToProto(const sau::EventDiagnostics& d, v1::Diagnostics* out) {
  out->set_margin(d.margin);
  out->set_rj_gap(d.rj_gap);
  out->set_rj_threshold(d.rj_threshold);
  out->set_rj_level(RjLevelToProto(d.rj_level));
  out->set_beta_floor(d.beta_floor);
  out->set_lambda_star(d.lambda_star);
  out->set_clip_rate(d.clip_rate);
  out->set_den(d.den);
  out->set_shr(d.shr);
  out->set_epoch(d.epoch);
  out->set_alarm(d.alarm);
  out->set_gamma(d.gamma);
  out->set_c_hi(d.c_hi);
}

// The ridge or vla part of an ack's diagnostics: the last event's, and the state after the
// batch.
void EngineDiagnosticsToProto(sau::Engine engine, const sau::EventDiagnostics& d,
                              const sau::EngineStateSummary& state, v1::Diagnostics* out) {
  if (engine == sau::Engine::kRidge) {
    out->mutable_ridge()->set_key_norm2(d.ridge.key_norm2);
    out->mutable_ridge()->set_scale(d.ridge.scale);
  } else if (engine == sau::Engine::kVla) {
    v1::VlaDiagnostics* v = out->mutable_vla();
    v->set_skipped(d.vla.skipped);
    v->set_residual_norm(d.vla.residual_norm);
    v->set_alpha_dot_k(d.vla.alpha_dot_k);
    v->set_refreshed(d.vla.refreshed);
    v->set_s_norm(state.s_norm);
    v->set_a_norm(state.a_norm);
    v->set_skipped_total(state.skipped);
  }
}

absl::StatusOr<sau::ReadoutPath> ReadoutPathFromProto(v1::ReadoutPath path) {
  switch (path) {
    case v1::READOUT_PATH_STABILIZED:
      return sau::ReadoutPath::kStabilized;
    case v1::READOUT_PATH_CORRECTNESS:
      return sau::ReadoutPath::kCorrectness;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("path: unknown ReadoutPath value ", static_cast<int>(path)));
  }
}

}  // namespace

SauRequestHandler::SauRequestHandler(ModelRegistry* registry, Metrics* metrics,
                                     BatchLimits limits,
                                     storage::Persistence* persistence)
    : registry_(registry), metrics_(metrics), limits_(limits), persistence_(persistence) {
  assert(limits_.max_batch >= 1);
}

absl::Status SauRequestHandler::Ingest(const v1::IngestRequest& request, IngestSession* session,
                                       v1::IngestAck* ack) {
  ack->Clear();
  absl::Status status = IngestBatch(request, session, ack);
  ToBatchStatus(status, ack->mutable_status());
  return status;
}

absl::Status SauRequestHandler::IngestBatch(const v1::IngestRequest& request,
                                            IngestSession* session, v1::IngestAck* ack) {
  const size_t n = static_cast<size_t>(request.events_size());
  ASSIGN_OR_RETURN(const BatchRoute route,
                   RouteBatch(*registry_, persistence_, request.model(), request.routing_key(),
                              PartKind::kSau, n, limits_.max_batch, &session->binding, ack));
  std::vector<EventView>& views = session->views;
  views.clear();
  views.reserve(n);
  for (const v1::Event& e : request.events()) {
    views.push_back(EventView{.t = e.t(), .k = AsSpan(e.k()), .v = AsSpan(e.v())});
  }
  ASSIGN_OR_RETURN(const storage::DurableStep<SauShard> step,
                   ApplyBatch(route.model->sau(route.shard), route,
                              std::span<const EventView>(views), limits_, ack));
  const IngestOutcome& outcome = step.outcome;
  ack->set_ver_sau(outcome.version);
  ack->set_applied(outcome.applied);
  ack->mutable_duplicate_t()->Add(outcome.duplicates.begin(), outcome.duplicates.end());
  const sau::Engine engine = route.model->spec().sau.engine;
  if (outcome.has_last) {
    if (engine == sau::Engine::kPrf) {
      DiagnosticsToProto(outcome.last, ack->mutable_last());
    } else {
      EngineDiagnosticsToProto(engine, outcome.last, outcome.engine_state, ack->mutable_last());
    }
  }
  metrics_->RecordIngest(route.model->spec().name, route.shard, outcome);
  if (outcome.regulations > 0) {  // rare by construction: at most one per 100 events or epoch
    const ShardStats stats = route.model->sau(route.shard).Stats();
    spdlog::warn("model '{}' shard {} self-regulated (docs/SAU.md, \"Self-regulation\"): "
                 "gamma {} (spec {}; {} widenings, {} steps back), c_hi {} (spec {}; {} raises) "
                 "in force from event {}",
                 route.model->spec().name, route.shard, stats.gamma,
                 route.model->spec().sau.gamma, stats.gamma_raises, stats.gamma_lowers,
                 stats.c_hi, sau::ResolveDefaults(route.model->spec().sau).c_hi,
                 stats.c_hi_raises, stats.events + 1);
  }
  return absl::OkStatus();
}

absl::Status SauRequestHandler::Query(const v1::QueryRequest& request,
                                      v1::QueryResponse* response) const {
  absl::StatusOr<std::shared_ptr<Model>> model =
      FindModelWithPart(*registry_, request.model(), PartKind::kSau);
  if (!model.ok()) return model.status();
  absl::StatusOr<sau::ReadoutPath> path = ReadoutPathFromProto(request.path());
  if (!path.ok()) return path.status();

  const uint32_t shard = (*model)->ShardOf(request.routing_key());
  ASSIGN_OR_RETURN(const storage::ModelWriters::Use use,
                   UseShard(persistence_, request.model(), shard));
  absl::StatusOr<QueryOutcome> outcome = (*model)->sau(shard).Query(
      AsSpan(request.q()), *path, request.low_rank(), request.min_version());
  if (!outcome.ok()) return outcome.status();

  const sau::QueryResult& r = outcome->result;
  response->mutable_y_hat()->Add(r.y_hat.begin(), r.y_hat.end());
  response->set_den(r.den);
  response->set_rj_gap(r.rj_gap);
  response->set_margin(r.margin);
  response->set_shr(r.shr);
  response->set_exact_window(r.exact_window);
  response->set_lambda_min(r.engine.lambda_min);
  response->set_lambda_max(r.engine.lambda_max);
  response->set_condition(r.engine.condition);
  response->set_residual(r.engine.residual);
  response->set_jitter(r.engine.jitter);
  response->set_s_norm(r.engine.s_norm);
  response->set_engine(storage::EngineToProto((*model)->spec().sau.engine));
  if ((*model)->spec().sau.engine == sau::Engine::kRidge) {
    metrics_->RecordEngineQuery((*model)->spec().name, shard, r.engine);
  }
  response->set_ver_sau(outcome->version);
  response->set_shard(shard);
  response->set_events(outcome->events);
  return absl::OkStatus();
}

}  // namespace streamlearn::server
