#include "core/shard/sau_shard.h"

#include "absl/strings/str_format.h"

namespace streamlearn {

SauShard::SauShard(const sau::SauEstimator& initial)
    : cell_(Version{0, 0, false, {}, initial}) {}

absl::StatusOr<IngestOutcome> SauShard::Ingest(std::span<const EventView> batch,
                                               size_t max_batch) {
  if (batch.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("batch is empty; send 1..%d events per request", max_batch));
  }
  if (batch.size() > max_batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch has %d events; the limit is %d per request", batch.size(), max_batch));
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  const Version& cur = cell_.Current();
  for (size_t i = 0; i < batch.size(); ++i) {
    if (absl::Status s = cur.estimator.CheckEvent(batch[i].k, batch[i].v); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("event %d (t=%d): %s", i, batch[i].t, s.message()));
    }
  }

  IngestOutcome out;
  // Duplicates first, so a batch of nothing new publishes nothing.
  std::vector<size_t> fresh;
  fresh.reserve(batch.size());
  bool seen = cur.estimator.events() > 0;
  uint64_t last_t = cur.last_t;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (seen && batch[i].t <= last_t) {
      out.duplicates.push_back(batch[i].t);
    } else {
      fresh.push_back(i);
      last_t = batch[i].t;
      seen = true;
    }
  }
  if (fresh.empty()) {
    out.version = cur.version;
    return out;
  }
  Version* next = cell_.BeginWrite();
  for (size_t i : fresh) {
    next->last = next->estimator.Ingest(batch[i].k, batch[i].v);
    out.alarms += next->last.alarm ? 1 : 0;
    out.red_events += next->last.rj_level == sau::RjLevel::kRed ? 1 : 0;
  }
  next->has_last = true;
  next->last_t = last_t;
  next->version = cur.version + 1;
  out.version = next->version;
  out.applied = static_cast<uint32_t>(fresh.size());
  out.has_last = true;
  out.last = next->last;
  cell_.Publish(next);
  return out;
}

absl::StatusOr<QueryOutcome> SauShard::Query(std::span<const double> q, sau::ReadoutPath path,
                                             bool low_rank, uint64_t min_version) const {
  auto pin = cell_.Read();
  if (pin->version < min_version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "shard is at version %d, older than min_version %d", pin->version, min_version));
  }
  if (absl::Status s = pin->estimator.CheckQuery(q); !s.ok()) return s;
  if (low_rank && pin->estimator.spec().r_v == 0) {
    return absl::InvalidArgumentError(
        "low_rank readout requested but the model has no low-rank values (sau.r_v = 0)");
  }
  QueryOutcome out;
  out.result = pin->estimator.Query(q, path, low_rank);
  out.version = pin->version;
  out.events = pin->estimator.events();
  return out;
}

ShardStats SauShard::Stats() const {
  auto pin = cell_.Read();
  ShardStats s;
  s.version = pin->version;
  s.events = pin->estimator.events();
  s.last_t = pin->last_t;
  s.digest = pin->estimator.StateDigest();
  if (pin->has_last) s.last = pin->last;
  return s;
}

}  // namespace streamlearn
