#include "client/demo/lmu_phase.h"

#include <cmath>
#include <vector>

#include "client/lib/lmu_update_session.h"
#include "core/common/mutex.h"
#include "core/common/status_macros.h"
#include "core/sau/counter_rng.h"
#include "fmt/format.h"

namespace streamlearn::demo {

namespace {

constexpr int kFeatures = 8;   // nonzeros per sample
constexpr int kLmuBatch = 100;
constexpr double kIds = 100000;  // distinct ids, roughly Zipf(1) by rank = floor(kIds^u)

// The hidden linear target: a weight per id, drawn from the id itself (reproducible).
double TrueWeight(uint64_t seed, uint64_t id) { return sau::CounterRng(seed ^ id, 7).NextNormal(); }

absl::StatusOr<v1::ModelInfo> CreateOrReuse(Client& client, const std::string& name) {
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.set_shards(1);
  v1::LmuSpec* lmu = spec.mutable_lmu();
  lmu->set_m(1);
  lmu->set_lr(0.05);
  // Sized by the scheduling inequality for this stream: new ids arrive at up to ~10^5/s at
  // the start and a rebuild of <= 10^5 ids takes well under 50 ms, so C (tau_high - tau_low)
  // = 32768 * 0.2 >= 10^5 * 0.05 + 1024. Rebuilds then come every ~20k new ids.
  lmu->set_delta_buckets(8192);
  lmu->set_lambda_max(100000);
  lmu->set_rebuild_seconds(0.05);
  lmu->set_margin(1024);
  absl::StatusOr<v1::ModelInfo> info = client.CreateModel(spec);
  if (info.ok() || info.status().code() != absl::StatusCode::kAlreadyExists) return info;
  return client.GetModel(name);
}

}  // namespace

absl::Status RunLmuPhase(Client& client, const LmuPhaseOptions& o, std::ostream& out) {
  absl::StatusOr<v1::ModelInfo> info = CreateOrReuse(client, o.model);
  if (!info.ok()) return info.status();
  if (!info->spec().has_lmu()) {
    return absl::FailedPreconditionError(
        fmt::format("model '{}' exists without an lmu part; pick another --model", o.model));
  }
  uint64_t t_offset = 0;
  for (const v1::LmuShardInfo& s : info->lmu_shards()) t_offset = std::max(t_offset, s.last_t());

  // Shared by this thread and the session's reader thread (on_ack).
  struct Window {
    Mutex mu;
    std::vector<double> last_y ABSL_GUARDED_BY(mu);  // y of each sent batch's last sample
    double se ABSL_GUARDED_BY(mu) = 0;  // squared errors of the acks' predictions, this window
    uint64_t n ABSL_GUARDED_BY(mu) = 0;
  } w;
  LmuUpdateSession::Options so;
  so.window = 32;
  so.on_ack = [&w](const UpdateResult& r) {
    if (!r.status.ok() || r.ack.last_prediction_size() == 0) return;
    MutexLock lock(&w.mu);
    const double e = r.ack.last_prediction(0) - w.last_y[r.batch];
    w.se += e * e;
    ++w.n;
  };
  absl::StatusOr<std::unique_ptr<LmuUpdateSession>> session = client.OpenLmuUpdate(o.model, so);
  if (!session.ok()) return session.status();

  out << fmt::format(
      "\nLMU phase: model '{}' learns a hidden sparse linear target over {:.0f} ids ({} "
      "nonzeros per sample, Zipf-like ids), {} samples in batches of {}\n",
      o.model, kIds, kFeatures, o.samples, kLmuBatch);
  if (!o.quiet) {
    out << fmt::format("{:>8} {:>10} {:>8} {:>8} {:>9} {:>9} {:>7} {:>10} {:>10} {:>9}\n",
                       "samples", "rmse(preq)", "ver_base", "rebuilds", "base_keys", "delta_keys",
                       "load", "locate/bnd", "insert/bnd", "tripwires");
  }
  sau::CounterRng rng(o.seed, 11);
  v1::UpdateRequest req;
  const uint64_t every = std::max<uint64_t>(kLmuBatch, o.samples / 8);
  for (uint64_t i = 0; i < o.samples; ++i) {
    if (req.samples_size() == 0) req.set_routing_key(o.routing_key);
    v1::Sample* s = req.add_samples();
    s->set_t(t_offset + i + 1);
    double y = 0.1 * rng.NextNormal();
    for (int j = 0; j < kFeatures; ++j) {
      const uint64_t rank = static_cast<uint64_t>(std::pow(kIds, rng.NextUniform())) - 1;
      const uint64_t id = rank * 0x9E3779B97F4A7C15ULL + 1;
      s->add_ids(id);
      s->add_vals(1.0);
      y += TrueWeight(o.seed, id);
    }
    s->add_y(y);
    const bool last = i + 1 == o.samples;
    if (req.samples_size() < kLmuBatch && !last) continue;
    {
      MutexLock lock(&w.mu);
      w.last_y.push_back(y);
    }
    RETURN_IF_ERROR((*session)->Send(std::move(req)));
    req.Clear();
    if ((i + 1) % every != 0 && !last) continue;
    RETURN_IF_ERROR((*session)->Flush());
    absl::StatusOr<v1::ModelInfo> now = client.GetModel(o.model);
    if (!now.ok()) return now.status();
    double rmse = 0;
    {
      MutexLock lock(&w.mu);
      rmse = w.n > 0 ? std::sqrt(w.se / w.n) : 0;
      w.se = 0;
      w.n = 0;
    }
    if (o.quiet || now->lmu_shards_size() == 0) continue;
    const v1::LmuShardInfo& sh = now->lmu_shards(0);
    out << fmt::format("{:>8} {:>10.4f} {:>8} {:>8} {:>9} {:>9} {:>7.3f} {:>10} {:>10} {:>9}\n",
                       i + 1, rmse, sh.ver_base(), sh.rebuilds(), sh.base_keys(), sh.delta_keys(),
                       sh.delta_load(),
                       fmt::format("{}/{}", sh.max_locate_probes(), sh.locate_bound()),
                       fmt::format("{}/{}", sh.max_insert_probes(), sh.insert_bound()),
                       sh.tripwires());
  }
  RETURN_IF_ERROR((*session)->Finish());
  const BatchStats stats = (*session)->stats();
  out << fmt::format(
      "LMU summary: {} batches acknowledged, {} rejected. The prequential error falls as the "
      "exact learner sees each id more often (the noise floor is 0.1); rebuilds publish new "
      "bases while predictions go on, and the probe maxima stay within their bounds\n",
      stats.batches_acked, stats.batches_rejected);
  if (stats.batches_rejected > 0) return absl::InternalError("an LMU batch was rejected");
  return absl::OkStatus();
}

}  // namespace streamlearn::demo
