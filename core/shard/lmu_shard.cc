#include "core/shard/lmu_shard.h"

#include "core/common/status_macros.h"
#include "core/shard/batch_gate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/byte_codec.h"
#include "core/lmu/lmu_snapshot.h"

namespace streamlearn {

namespace {

constexpr std::string_view kLmuShardKind = "streamlearn.lmu_shard";
constexpr uint32_t kSectionLmuHeader = 1;
constexpr uint32_t kSectionLearner = 2;

}  // namespace

absl::Status LmuShard::FencedError(std::string_view what) const {
  return absl::UnavailableError(absl::StrCat(
      "this LMU shard ", std::string(what), " after a failed write (", fenced_.message(),
      "); it resumes from its last committed state once the store takes writes again"));
}

LmuShard::LmuShard(const lmu::LmuSpec& spec, const lmu::HashSecret& secret)
    : LmuShard(std::make_unique<lmu::LmuLearner>(spec, secret)) {}

LmuShard::LmuShard(std::unique_ptr<lmu::LmuLearner> learner) : learner_(learner.get()) {
  learners_.push_back(std::move(learner));
}

absl::StatusOr<std::unique_ptr<LmuShard>> LmuShard::Restore(const lmu::LmuSpec& spec,
                                                            const lmu::HashSecret& secret,
                                                            std::string_view blob) {
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(blob, kLmuShardKind);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::string_view> header = c->Section(kSectionLmuHeader);
  if (!header.ok()) return header.status();
  absl::StatusOr<std::string_view> body = c->Section(kSectionLearner);
  if (!body.ok()) return body.status();
  uint64_t last_t = 0, log_seq = 0;
  uint8_t seen = 0;
  ByteReader r(*header);
  RETURN_IF_ERROR(r.U64(&last_t));
  RETURN_IF_ERROR(r.U64(&log_seq));
  RETURN_IF_ERROR(r.U8(&seen));
  RETURN_IF_ERROR(r.ExpectDone("lmu shard header"));
  absl::StatusOr<std::unique_ptr<lmu::LmuLearner>> learner = lmu::RestoreLmu(spec, secret, *body);
  if (!learner.ok()) return learner.status();
  std::unique_ptr<LmuShard> shard(new LmuShard(*std::move(learner)));
  {
    MutexLock lock(&shard->write_mu_);  // not shared yet; for the analysis
    shard->last_t_ = last_t;
    shard->log_seq_ = log_seq;
    shard->seen_ = seen != 0;
    // Growths before the snapshot were reported by the life that made them.
    shard->growths_reported_ = shard->learner()->TableStats().delta_growths;
  }
  return shard;
}

absl::StatusOr<LmuShardSnapshot> LmuShard::Snapshot() const {
  MutexLock lock(&write_mu_);
  // A fenced shard holds samples that were neither acknowledged nor logged: a snapshot of it
  // would make recovery resurrect them.
  if (!fenced_.ok()) return FencedError("cannot be snapshotted");
  LmuShardSnapshot out;
  out.last_t = last_t_;
  out.log_seq = log_seq_;
  out.samples = learner()->samples();
  out.state_digest = learner()->StateDigest();
  ByteWriter header;
  header.U64(last_t_);
  header.U64(log_seq_);
  header.U8(seen_ ? 1 : 0);
  SnapshotBuilder b(kLmuShardKind);
  b.AddSection(kSectionLmuHeader, header.Take());
  b.AddSection(kSectionLearner, lmu::SerializeLmu(*learner()));
  out.blob = b.Finish();
  return out;
}

uint64_t LmuShard::log_seq() const {
  MutexLock lock(&write_mu_);
  return log_seq_;
}

absl::StatusOr<PartSnapshot> LmuShard::TakeSnapshot() const {
  absl::StatusOr<LmuShardSnapshot> s = Snapshot();
  if (!s.ok()) return s.status();
  return PartSnapshot{.log_seq = s->log_seq,
                      .steps = s->samples,
                      .state_digest = s->state_digest,
                      .blob = std::move(s->blob)};
}

Digest LmuShard::StateDigest() const { return Stats().digest; }

bool LmuShard::fenced() const {
  MutexLock lock(&write_mu_);
  return !fenced_.ok();
}

absl::Status LmuShard::Reinstate(std::unique_ptr<LmuShard> recovered) {
  MutexLock lock(&write_mu_);
  // `recovered` is not shared: its lock is taken only so the analysis sees its fields held.
  MutexLock recovered_lock(&recovered->write_mu_);
  if (fenced_.ok()) {
    return absl::FailedPreconditionError("the LMU shard is not fenced: its state is committed");
  }
  if (!recovered->fenced_.ok()) {
    return absl::FailedPreconditionError("the recovered LMU shard is itself fenced");
  }
  if (recovered->log_seq_ != log_seq_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the recovered LMU state ends at log entry %d, the shard committed through %d",
        recovered->log_seq_, log_seq_));
  }
  // The fenced learner stays owned: lock-free predictions may still be reading it.
  learners_.push_back(std::move(recovered->learners_.back()));
  learner_.store(learners_.back().get(), std::memory_order_release);
  seen_ = recovered->seen_;
  last_t_ = recovered->last_t_;
  log_seq_ = recovered->log_seq_;
  growths_reported_ = recovered->growths_reported_;
  fenced_ = absl::OkStatus();
  return absl::OkStatus();
}

absl::StatusOr<UpdateOutcome> LmuShard::Update(std::span<const SampleView> batch,
                                               const BatchLimits& limits,
                                               const LmuCommitHook* hook) {
  RETURN_IF_ERROR(CheckBatchSize(batch.size(), limits.max_batch, "samples"));
  MutexLock lock(&write_mu_);
  if (!fenced_.ok()) return FencedError("stopped taking updates");
  if (absl::Status st = CheckBatchItems(batch, "sample", [&](const SampleView& s) {
        RETURN_IF_ERROR(CheckFeatureCount(s.x.size(), limits));
        RETURN_IF_ERROR(learner()->CheckSample(s.x, s.y, s.lr, s.l2));
        if (!limits.bound_inputs) return absl::OkStatus();
        RETURN_IF_ERROR(lmu::LmuLearner::CheckFeatureBounds(s.x));
        return lmu::LmuLearner::CheckTargetBounds(s.y);
      });
      !st.ok()) {
    return st;
  }
  RETURN_IF_ERROR(CheckTSteps(batch, "sample", seen_, last_t_, limits));
  UpdateOutcome out;
  out.last_prediction.resize(learner()->m());
  std::vector<double> y_before(learner()->m());
  uint64_t t_first = 0;
  TOrder order(seen_, last_t_);
  for (const SampleView& s : batch) {
    if (!order.Accept(s.t)) {
      out.duplicates.push_back(s.t);
      continue;
    }
    if (out.applied == 0) t_first = s.t;
    absl::StatusOr<lmu::StepResult> r = learner()->Step(s.x, s.y, s.lr, s.l2, y_before.data());
    if (!r.ok()) {
      // Only a failed tripwire rebuild. Samples before it were applied but will not be
      // acknowledged or logged, so the shard stops here (see the header).
      fenced_ = r.status();
      return r.status();
    }
    seen_ = true;
    last_t_ = s.t;
    ++out.applied;
    out.inserted += r->inserted;
    out.c_lookup_p100 = std::max(out.c_lookup_p100, r->max_locate_probes);
    out.c_insert_p100 = std::max(out.c_insert_p100, r->max_insert_probes);
    out.last_prediction = y_before;
  }
  if (absl::Status st = learner()->Poll(); !st.ok()) {
    // A failed rebuild after samples were applied: as for a failed Step above.
    if (out.applied > 0) fenced_ = st;
    return st;
  }
  const lmu::LmuTableStats ts = learner()->TableStats();
  out.ver_base = ts.ver_base;
  out.ver_delta = ts.ver_delta;
  if (ts.delta_growths != growths_reported_) {
    growths_reported_ = ts.delta_growths;
    out.delta_grown_to = ts.delta_buckets;
  }
  if (out.applied == 0) return out;
  if (hook != nullptr) {
    absl::Status st = (*hook)(LmuCommit{.batch = batch,
                                        .outcome = &out,
                                        .log_seq = log_seq_ + 1,
                                        .t_first = t_first,
                                        .t_last = last_t_,
                                        .learner = learner()});
    if (!st.ok()) {
      fenced_ = st;
      return st;
    }
  }
  ++log_seq_;  // only once the batch is committed
  return out;
}

namespace {

// What Predict refuses in x: empty, a NaN/Inf value, one outside the input bound.
absl::Status CheckPredictInput(std::span<const lmu::Feature> x) {
  if (x.empty()) return absl::InvalidArgumentError("x is empty; give at least one feature");
  for (size_t j = 0; j < x.size(); ++j) {
    if (!std::isfinite(x[j].val)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "x[%d] (id %d) has value %s; values must be finite", j, x[j].id,
          std::isnan(x[j].val) ? "NaN" : "Inf"));
    }
  }
  return lmu::LmuLearner::CheckFeatureBounds(x);
}

}  // namespace

absl::StatusOr<PredictOutcome> LmuShard::PredictMany(
    std::span<const std::span<const lmu::Feature>> xs) const {
  for (size_t s = 0; s < xs.size(); ++s) {
    if (absl::Status st = CheckPredictInput(xs[s]); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("sample ", s, ": ", st.message()));
    }
  }
  PredictOutcome out;
  out.y_hat.resize(xs.size() * static_cast<size_t>(learner()->m()));
  const lmu::LmuLearner::PredictInfo info = learner()->PredictMany(xs, out.y_hat.data());
  out.probes_p100 = info.max_locate_probes;
  out.ver_base = info.ver_base;
  out.ver_delta = info.ver_delta;
  return out;
}

absl::StatusOr<PredictOutcome> LmuShard::Predict(std::span<const lmu::Feature> x) const {
  RETURN_IF_ERROR(CheckPredictInput(x));
  PredictOutcome out;
  out.y_hat.resize(learner()->m());
  const lmu::LmuLearner::PredictInfo info = learner()->Predict(x, out.y_hat.data());
  out.probes_p100 = info.max_locate_probes;
  out.ver_base = info.ver_base;
  out.ver_delta = info.ver_delta;
  return out;
}

LmuShardStats LmuShard::Stats() const {
  MutexLock lock(&write_mu_);
  LmuShardStats s;
  s.samples = learner()->samples();
  s.last_t = last_t_;
  s.digest = learner()->StateDigest();
  s.table = learner()->TableStats();
  return s;
}

absl::StatusOr<uint64_t> LmuShard::CheckBaseMembership() const {
  MutexLock lock(&write_mu_);
  return learner()->CheckBaseMembership();
}

lmu::LmuTableStats LmuShard::TableStats() const {
  MutexLock lock(&write_mu_);
  return learner()->TableStats();
}

}  // namespace streamlearn
