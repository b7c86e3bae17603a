#include "core/shard/lmu_shard.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace streamlearn {

LmuShard::LmuShard(const lmu::LmuSpec& spec, const lmu::HashSecret& secret)
    : learner_(spec, secret) {}

absl::StatusOr<UpdateOutcome> LmuShard::Update(std::span<const SampleView> batch,
                                               size_t max_batch) {
  if (batch.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("batch is empty; send 1..%d samples per request", max_batch));
  }
  if (batch.size() > max_batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch has %d samples; the limit is %d per request", batch.size(), max_batch));
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  for (size_t i = 0; i < batch.size(); ++i) {
    const SampleView& s = batch[i];
    if (absl::Status st = learner_.CheckSample(s.x, s.y, s.lr, s.l2); !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sample %d (t=%d): %s", i, s.t, st.message()));
    }
  }
  UpdateOutcome out;
  out.last_prediction.resize(learner_.m());
  std::vector<double> y_before(learner_.m());
  for (const SampleView& s : batch) {
    if (seen_ && s.t <= last_t_) {
      out.duplicates.push_back(s.t);
      continue;
    }
    absl::StatusOr<lmu::StepResult> r = learner_.Step(s.x, s.y, s.lr, s.l2, y_before.data());
    if (!r.ok()) return r.status();  // only a failed tripwire rebuild; reported, not hidden
    seen_ = true;
    last_t_ = s.t;
    ++out.applied;
    out.inserted += r->inserted;
    out.c_lookup_p100 = std::max(out.c_lookup_p100, r->max_locate_probes);
    out.c_insert_p100 = std::max(out.c_insert_p100, r->max_insert_probes);
    out.last_prediction = y_before;
  }
  if (absl::Status st = learner_.Poll(); !st.ok()) return st;
  const lmu::LmuTableStats ts = learner_.TableStats();
  out.ver_base = ts.ver_base;
  out.ver_delta = ts.ver_delta;
  return out;
}

absl::StatusOr<PredictOutcome> LmuShard::Predict(std::span<const lmu::Feature> x) const {
  if (x.empty()) return absl::InvalidArgumentError("x is empty; give at least one feature");
  for (size_t j = 0; j < x.size(); ++j) {
    if (!std::isfinite(x[j].val)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "x[%d] (id %d) has value %s; values must be finite", j, x[j].id,
          std::isnan(x[j].val) ? "NaN" : "Inf"));
    }
  }
  PredictOutcome out;
  out.y_hat.resize(learner_.m());
  const lmu::LmuLearner::PredictInfo info = learner_.Predict(x, out.y_hat.data());
  out.probes_p100 = info.max_locate_probes;
  out.ver_base = info.ver_base;
  out.ver_delta = info.ver_delta;
  return out;
}

LmuShardStats LmuShard::Stats() const {
  std::lock_guard<std::mutex> lock(write_mu_);
  LmuShardStats s;
  s.samples = learner_.samples();
  s.last_t = last_t_;
  s.digest = learner_.StateDigest();
  s.table = learner_.TableStats();
  return s;
}

lmu::LmuTableStats LmuShard::TableStats() const {
  std::lock_guard<std::mutex> lock(write_mu_);
  return learner_.TableStats();
}

}  // namespace streamlearn
