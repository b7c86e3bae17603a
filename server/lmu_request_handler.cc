#include "server/lmu_request_handler.h"

#include <cassert>
#include <limits>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/model_lookup.h"
#include "server/status_conversion.h"

namespace streamlearn::server {
namespace {

constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();

// `what` prefixes the message ("sample 3 (t=103): " or "").
absl::Status CheckParallel(int ids, int vals, absl::string_view what) {
  if (ids == vals) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, "ids has ", ids, " values but vals has ",
                                                 vals, "; give one value per id"));
}

void AppendFeatures(const google::protobuf::RepeatedField<uint64_t>& ids,
                    const google::protobuf::RepeatedField<double>& vals,
                    std::vector<lmu::Feature>* out) {
  for (int j = 0; j < ids.size(); ++j) out->push_back(lmu::Feature{.id = ids[j], .val = vals[j]});
}

}  // namespace

LmuRequestHandler::LmuRequestHandler(ModelRegistry* registry, Metrics* metrics, size_t max_batch,
                                     storage::Persistence* persistence)
    : registry_(registry), metrics_(metrics), max_batch_(max_batch), persistence_(persistence) {
  assert(max_batch_ >= 1);
}

absl::Status LmuRequestHandler::Update(const v1::UpdateRequest& request, UpdateSession* session,
                                       v1::UpdateAck* ack) {
  ack->Clear();
  absl::Status status = UpdateBatch(request, session, ack);
  ToBatchStatus(status, ack->mutable_status());
  return status;
}

absl::Status LmuRequestHandler::UpdateBatch(const v1::UpdateRequest& request,
                                            UpdateSession* session, v1::UpdateAck* ack) {
  if (absl::Status s = BindStreamModel(*registry_, persistence_, request.model(), ModelPart::kLmu,
                                       &session->model, &session->logs);
      !s.ok()) {
    return s;
  }
  Model& model = *session->model;
  const uint32_t shard = model.ShardOf(request.routing_key());
  ack->set_shard(shard);

  // Checked before any copy, so that a flood of samples in one message costs nothing.
  const size_t n = static_cast<size_t>(request.samples_size());
  if (n > max_batch_) {
    return absl::InvalidArgumentError(absl::StrCat("batch has ", n, " samples; the limit is ",
                                                   max_batch_, " per request (max_batch)"));
  }
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const v1::Sample& s = request.samples(static_cast<int>(i));
    if (absl::Status st = CheckParallel(s.ids_size(), s.vals_size(),
                                        absl::StrCat("sample ", i, " (t=", s.t(), "): "));
        !st.ok()) {
      return st;
    }
    total += static_cast<size_t>(s.ids_size());
  }
  std::vector<lmu::Feature>& features = session->features;
  features.clear();
  features.reserve(total);  // the spans below point into it: no reallocation after this
  std::vector<SampleView>& views = session->views;
  views.clear();
  views.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const v1::Sample& s = request.samples(static_cast<int>(i));
    const size_t begin = features.size();
    AppendFeatures(s.ids(), s.vals(), &features);
    views.push_back(SampleView{
        .t = s.t(),
        .x = std::span<const lmu::Feature>(features.data() + begin, features.size() - begin),
        .y = std::span<const double>(s.y().data(), static_cast<size_t>(s.y_size())),
        .lr = s.has_lr() ? s.lr() : kAbsent,
        .l2 = s.has_l2() ? s.l2() : kAbsent,
    });
  }

  LmuShard& lmu_shard = model.lmu(shard);
  if (persistence_ != nullptr && lmu_shard.fenced()) {
    // A failed write left the shard fenced; it resumes from the store's committed state.
    if (absl::Status s = persistence_->ReinstateFenced(model, shard, PartKind::kLmu,
                                                       registry_->secret());
        !s.ok()) {
      return s;
    }
  }
  // Committed with its audit record and log entry before this ack (server/persistence.h).
  storage::Receipt receipt;
  LmuCommitHook hook;
  if (session->logs != nullptr) {
    storage::ShardWriter* log = &session->logs->shard(shard);
    hook = [log, &receipt](const LmuCommit& c) { return log->CommitLmu(c, &receipt); };
  }
  absl::StatusOr<UpdateOutcome> outcome =
      lmu_shard.Update(views, max_batch_, hook ? &hook : nullptr);
  if (!outcome.ok()) return outcome.status();
  if (session->logs != nullptr) {
    storage::SetAckAuditHead(session->logs->shard(shard).chain(),
                    outcome->applied > 0 ? &receipt : nullptr, ack);
  }

  ack->set_ver_base(outcome->ver_base);
  ack->set_ver_delta(outcome->ver_delta);
  ack->set_applied(outcome->applied);
  ack->mutable_duplicate_t()->Add(outcome->duplicates.begin(), outcome->duplicates.end());
  ack->set_c_lookup_p100(static_cast<uint32_t>(outcome->c_lookup_p100));
  ack->set_c_insert_p100(static_cast<uint32_t>(outcome->c_insert_p100));
  ack->set_inserted(outcome->inserted);
  if (outcome->applied > 0) {
    ack->mutable_last_prediction()->Add(outcome->last_prediction.begin(),
                                        outcome->last_prediction.end());
  }
  metrics_->RecordUpdate(model.spec().name, shard, *outcome, lmu_shard.TableStats());
  return absl::OkStatus();
}

absl::Status LmuRequestHandler::Predict(const v1::PredictRequest& request,
                                        v1::PredictResponse* response) const {
  absl::StatusOr<std::shared_ptr<Model>> model =
      FindModelWithPart(*registry_, request.model(), ModelPart::kLmu);
  if (!model.ok()) return model.status();
  if (absl::Status s = CheckParallel(request.ids_size(), request.vals_size(), ""); !s.ok()) {
    return s;
  }
  std::vector<lmu::Feature> x;
  x.reserve(static_cast<size_t>(request.ids_size()));
  AppendFeatures(request.ids(), request.vals(), &x);

  const uint32_t shard = (*model)->ShardOf(request.routing_key());
  absl::StatusOr<PredictOutcome> outcome = (*model)->lmu(shard).Predict(x);
  if (!outcome.ok()) return outcome.status();
  response->mutable_y_hat()->Add(outcome->y_hat.begin(), outcome->y_hat.end());
  response->set_ver_base(outcome->ver_base);
  response->set_ver_delta(outcome->ver_delta);
  response->set_shard(shard);
  response->set_probes_p100(static_cast<uint32_t>(outcome->probes_p100));
  return absl::OkStatus();
}

}  // namespace streamlearn::server
