#include "server/lmu_request_handler.h"

#include <cassert>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/common/status_macros.h"
#include "spdlog/spdlog.h"
#include "server/batch_step.h"
#include "server/model_lookup.h"
#include "server/proto_views.h"
#include "server/status_conversion.h"

namespace streamlearn::server {
namespace {

constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();

// A given lr or l2 override that is NaN: NaN is how a view says "absent" (SampleView), so the
// wire's presence bit is the only place it can be told from "not given". `what` makes the
// message's prefix, only for a refusal.
absl::Status CheckOverrides(const v1::Sample& s, absl::FunctionRef<std::string()> what) {
  for (const auto& [name, given, value] :
       {std::tuple<absl::string_view, bool, double>{"lr", s.has_lr(), s.lr()},
        std::tuple<absl::string_view, bool, double>{"l2", s.has_l2(), s.l2()}}) {
    if (given && std::isnan(value)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what(), name, " override is NaN; give a number, or leave ", name,
          " unset for the model's"));
    }
  }
  return absl::OkStatus();
}

// The views of a batch given as Sample messages, their (id, val) pairs copied into
// *features; y points into the request.
absl::Status RowViews(const v1::UpdateRequest& request, std::vector<lmu::Feature>* features,
                      std::vector<SampleView>* views) {
  const size_t n = static_cast<size_t>(request.samples_size());
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    const v1::Sample& s = request.samples(static_cast<int>(i));
    const auto what = [&] { return SamplePrefix(i, s.t()); };
    RETURN_IF_ERROR(CheckParallel(s.ids_size(), s.vals_size(), what));
    RETURN_IF_ERROR(CheckOverrides(s, what));
    total += static_cast<size_t>(s.ids_size());
  }
  features->clear();
  features->reserve(total);  // the spans below point into it: no reallocation after this
  views->clear();
  views->reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const v1::Sample& s = request.samples(static_cast<int>(i));
    const size_t begin = features->size();
    AppendFeatures(s.ids(), s.vals(), features);
    views->push_back(SampleView{
        .t = s.t(),
        .x = std::span<const lmu::Feature>(features->data() + begin, features->size() - begin),
        .y = std::span<const double>(s.y().data(), static_cast<size_t>(s.y_size())),
        .lr = s.has_lr() ? s.lr() : kAbsent,
        .l2 = s.has_l2() ? s.l2() : kAbsent,
    });
  }
  return absl::OkStatus();
}

// The views of a batch given in columns (lmu.proto SampleColumns), once the columns are
// checked to fit together (INVALID_ARGUMENT naming the column); the (id, val) pairs are
// copied into *features, y, lr and l2 point into the request. What each sample holds is
// checked by the shard, as for Sample messages.
absl::Status ColumnViews(const v1::SampleColumns& c, int m, std::vector<lmu::Feature>* features,
                         std::vector<SampleView>* views) {
  const size_t n = static_cast<size_t>(c.t_size());
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("columns: ", parts...));
  };
  if (static_cast<size_t>(c.counts_size()) != n) {
    return bad("counts has ", c.counts_size(), " values for ", n,
               " samples (t has ", n, "); give one feature count per sample");
  }
  uint64_t total = 0;
  for (uint32_t k : c.counts()) total += k;
  const size_t ids = static_cast<size_t>(c.ids_size());
  if (total != ids) {
    return bad("the counts add up to ", total, " features but ids has ", ids, " values");
  }
  const bool ones = c.vals_size() == 0;
  if (!ones && static_cast<size_t>(c.vals_size()) != ids) {
    return bad("vals has ", c.vals_size(), " values but ids has ", ids,
               "; give one value per id, or none when every value is 1.0");
  }
  if (static_cast<size_t>(c.y_size()) != n * static_cast<size_t>(m)) {
    return bad("y has ", c.y_size(), " values; ", n, " samples of m = ", m, " targets need ",
               n * static_cast<size_t>(m));
  }
  for (const auto& [name, size] : {std::pair<absl::string_view, int>{"lr", c.lr_size()},
                                   std::pair<absl::string_view, int>{"l2", c.l2_size()}}) {
    if (size != 0 && static_cast<size_t>(size) != n) {
      return bad(name, " has ", size, " values; give none, or one per sample (", n, ")");
    }
  }
  features->resize(ids);
  const uint64_t* id = c.ids().data();
  lmu::Feature* f = features->data();
  if (ones) {
    for (size_t j = 0; j < ids; ++j) f[j] = lmu::Feature{.id = id[j], .val = 1.0};
  } else {
    const double* val = c.vals().data();
    for (size_t j = 0; j < ids; ++j) f[j] = lmu::Feature{.id = id[j], .val = val[j]};
  }
  views->resize(n);
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t k = c.counts(static_cast<int>(i));
    (*views)[i] = SampleView{
        .t = c.t(static_cast<int>(i)),
        .x = std::span<const lmu::Feature>(f + at, k),
        .y = std::span<const double>(c.y().data() + i * static_cast<size_t>(m),
                                     static_cast<size_t>(m)),
        .lr = c.lr_size() != 0 ? c.lr(static_cast<int>(i)) : kAbsent,
        .l2 = c.l2_size() != 0 ? c.l2(static_cast<int>(i)) : kAbsent,
    };
    at += k;
  }
  return absl::OkStatus();
}

}  // namespace

LmuRequestHandler::LmuRequestHandler(ModelRegistry* registry, Metrics* metrics,
                                     BatchLimits limits,
                                     storage::Persistence* persistence)
    : registry_(registry), metrics_(metrics), limits_(limits), persistence_(persistence) {
  assert(limits_.max_batch >= 1);
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
  // Routed and counted before any copy, so that a flood of samples in one message costs
  // nothing.
  const size_t n = Items(request);
  ASSIGN_OR_RETURN(const BatchRoute route,
                   RouteBatch(*registry_, persistence_, request.model(), request.routing_key(),
                              PartKind::kLmu, n, limits_.max_batch, &session->binding, ack));
  if (request.has_columns() && request.samples_size() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the batch has ", request.samples_size(), " samples and columns of ",
        request.columns().t_size(), "; give its samples one way, as samples or as columns"));
  }
  std::vector<SampleView>& views = session->views;
  if (request.has_columns()) {
    RETURN_IF_ERROR(ColumnViews(request.columns(), route.model->spec().lmu.m,
                                &session->features, &views));
  } else {
    RETURN_IF_ERROR(RowViews(request, &session->features, &views));
  }

  LmuShard& part = route.model->lmu(route.shard);
  ASSIGN_OR_RETURN(const storage::DurableStep<LmuShard> step,
                   ApplyBatch(part, route, std::span<const SampleView>(views), limits_, ack));
  const UpdateOutcome* outcome = &step.outcome;
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
  const lmu::LmuTableStats table = part.TableStats();
  metrics_->RecordUpdate(route.model->spec().name, route.shard, *outcome, table);
  if (outcome->delta_grown_to != 0) {
    const lmu::LmuSpec& spec = route.model->spec().lmu;
    spdlog::warn(
        "model '{}' shard {}: the LMU delta grew to {} buckets (C = {}; growth {} of at most "
        "{} buckets) after a rebuild under pressure: {} inserts so far found it above "
        "tau_high = {}, {} tripwire(s); the spec declares lambda_max = {} ids/s and T_rb = {} "
        "s, the last rebuild took {:.3f} s",
        route.model->spec().name, route.shard, outcome->delta_grown_to,
        uint64_t{outcome->delta_grown_to} * spec.bucket_size, table.delta_growths,
        lmu::DeltaBucketsCap(spec), table.tau_high_crossings, spec.tau_high, table.tripwires,
        spec.lambda_max, spec.rebuild_seconds, table.last_rebuild_seconds);
  }
  return absl::OkStatus();
}

absl::Status LmuRequestHandler::Predict(const v1::PredictRequest& request,
                                        v1::PredictResponse* response) const {
  absl::StatusOr<std::shared_ptr<Model>> model =
      FindModelWithPart(*registry_, request.model(), PartKind::kLmu);
  if (!model.ok()) return model.status();
  RETURN_IF_ERROR(
      CheckParallel(request.ids_size(), request.vals_size(), [] { return std::string(); }));
  // Several samples (counts): checked before anything is copied.
  const size_t samples = static_cast<size_t>(request.counts_size());
  if (samples > limits_.max_batch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the request has ", samples, " samples; at most ", limits_.max_batch,
        " (max_batch) per Predict"));
  }
  if (samples > 0) {
    uint64_t total = 0;
    for (uint32_t c : request.counts()) total += c;
    if (total != static_cast<uint64_t>(request.ids_size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "counts add up to ", total, " features but ids has ", request.ids_size(),
          "; sample i is the next counts[i] entries of ids and vals"));
    }
  }
  std::vector<lmu::Feature> x;
  x.reserve(static_cast<size_t>(request.ids_size()));
  AppendFeatures(request.ids(), request.vals(), &x);

  const uint32_t shard = (*model)->ShardOf(request.routing_key());
  ASSIGN_OR_RETURN(const storage::ModelWriters::Use use,
                   UseShard(persistence_, request.model(), shard));
  absl::StatusOr<PredictOutcome> outcome;
  if (samples == 0) {
    outcome = (*model)->lmu(shard).Predict(x);
  } else {
    std::vector<std::span<const lmu::Feature>> xs;
    xs.reserve(samples);
    size_t begin = 0;
    for (uint32_t c : request.counts()) {
      xs.emplace_back(x.data() + begin, c);
      begin += c;
    }
    outcome = (*model)->lmu(shard).PredictMany(xs);
  }
  if (!outcome.ok()) return outcome.status();
  response->mutable_y_hat()->Add(outcome->y_hat.begin(), outcome->y_hat.end());
  response->set_ver_base(outcome->ver_base);
  response->set_ver_delta(outcome->ver_delta);
  response->set_shard(shard);
  response->set_probes_p100(static_cast<uint32_t>(outcome->probes_p100));
  return absl::OkStatus();
}

}  // namespace streamlearn::server
