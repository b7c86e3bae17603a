#include "server/sau_request_handler.h"

#include <cassert>
#include <span>

#include "absl/strings/str_cat.h"
#include "server/model_lookup.h"
#include "server/status_conversion.h"

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

std::span<const double> Span(const google::protobuf::RepeatedField<double>& xs) {
  return {xs.data(), static_cast<size_t>(xs.size())};
}

}  // namespace

SauRequestHandler::SauRequestHandler(ModelRegistry* registry, Metrics* metrics, size_t max_batch,
                                     storage::Persistence* persistence)
    : registry_(registry), metrics_(metrics), max_batch_(max_batch), persistence_(persistence) {
  assert(max_batch_ >= 1);
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
  if (absl::Status s = BindStreamModel(*registry_, persistence_, request.model(), ModelPart::kSau,
                                       &session->model, &session->logs);
      !s.ok()) {
    return s;
  }
  Model& model = *session->model;
  const uint32_t shard = model.ShardOf(request.routing_key());
  ack->set_shard(shard);

  // The shard checks the count too; checking it here first keeps a flood of tiny events in
  // one message from costing a view each before it is refused.
  const size_t n = static_cast<size_t>(request.events_size());
  if (n > max_batch_) {
    return absl::InvalidArgumentError(absl::StrCat("batch has ", n, " events; the limit is ",
                                                   max_batch_, " per request (max_batch)"));
  }
  std::vector<EventView>& views = session->views;
  views.clear();
  views.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const v1::Event& e = request.events(static_cast<int>(i));
    views.push_back(EventView{.t = e.t(), .k = Span(e.k()), .v = Span(e.v())});
  }

  // The batch, its audit records and its log entry are committed together before the shard
  // publishes it and before this ack is sent (server/persistence.h).
  storage::Receipt receipt;
  SauCommitHook hook;
  if (session->logs != nullptr) {
    storage::ShardWriter* log = &session->logs->shard(shard);
    hook = [log, &receipt](const SauCommit& c) { return log->CommitSau(c, &receipt); };
  }
  absl::StatusOr<IngestOutcome> outcome =
      model.sau(shard).Ingest(views, max_batch_, hook ? &hook : nullptr);
  if (!outcome.ok()) return outcome.status();
  if (session->logs != nullptr) {
    storage::SetAckAuditHead(session->logs->shard(shard).chain(),
                    outcome->applied > 0 ? &receipt : nullptr, ack);
  }

  ack->set_ver_sau(outcome->version);
  ack->set_applied(outcome->applied);
  ack->mutable_duplicate_t()->Add(outcome->duplicates.begin(), outcome->duplicates.end());
  if (outcome->has_last) DiagnosticsToProto(outcome->last, ack->mutable_last());
  metrics_->RecordIngest(model.spec().name, shard, *outcome);
  return absl::OkStatus();
}

absl::Status SauRequestHandler::Query(const v1::QueryRequest& request,
                                      v1::QueryResponse* response) const {
  absl::StatusOr<std::shared_ptr<Model>> model =
      FindModelWithPart(*registry_, request.model(), ModelPart::kSau);
  if (!model.ok()) return model.status();
  absl::StatusOr<sau::ReadoutPath> path = ReadoutPathFromProto(request.path());
  if (!path.ok()) return path.status();

  const uint32_t shard = (*model)->ShardOf(request.routing_key());
  absl::StatusOr<QueryOutcome> outcome = (*model)->sau(shard).Query(
      Span(request.q()), *path, request.low_rank(), request.min_version());
  if (!outcome.ok()) return outcome.status();

  const sau::QueryResult& r = outcome->result;
  response->mutable_y_hat()->Add(r.y_hat.begin(), r.y_hat.end());
  response->set_den(r.den);
  response->set_rj_gap(r.rj_gap);
  response->set_margin(r.margin);
  response->set_shr(r.shr);
  response->set_ver_sau(outcome->version);
  response->set_shard(shard);
  response->set_events(outcome->events);
  return absl::OkStatus();
}

}  // namespace streamlearn::server
