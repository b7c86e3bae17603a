#include "core/shard/fuse_shard.h"

#include "core/common/status_macros.h"
#include "core/shard/batch_gate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/byte_codec.h"
#include "core/fuse/fuse_snapshot.h"

namespace streamlearn {

namespace {

constexpr std::string_view kFuseShardKind = "streamlearn.fuse_shard";
constexpr uint32_t kSectionFuseHeader = 1;
constexpr uint32_t kSectionUnit = 2;
constexpr double kNoOverride = std::numeric_limits<double>::quiet_NaN();

// The checks FuseUnit::Learn makes, with the batch position in the message.
// The bounds of docs/SAU.md and docs/LMU.md "Input bounds" on a fused sample's x, q and y (the
// SAU learns (q, y), the LMU (x, y)). REQUIRES: the values are finite.
absl::Status CheckSampleBounds(const fuse::FuseUnit& unit, std::span<const lmu::Feature> x,
                               std::span<const double> q, std::span<const double> y) {
  RETURN_IF_ERROR(lmu::LmuLearner::CheckFeatureBounds(x));
  RETURN_IF_ERROR(unit.sau().CheckQueryBounds(q));
  RETURN_IF_ERROR(lmu::LmuLearner::CheckTargetBounds(y));
  return unit.sau().CheckEventBounds(q, y);
}

absl::Status CheckSample(const fuse::FuseUnit& unit, const FuseSampleView& s,
                         const BatchLimits& limits) {
  RETURN_IF_ERROR(CheckFeatureCount(s.x.size(), limits));
  RETURN_IF_ERROR(unit.sau().CheckQuery(s.q));
  for (size_t j = 0; j < s.x.size(); ++j) {
    if (s.x[j].id >= fuse::kReservedIdBase) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "x[%d] has id %d; ids >= %d are reserved for the fused features", j, s.x[j].id,
          fuse::kReservedIdBase));
    }
  }
  RETURN_IF_ERROR(unit.main_lmu().CheckSample(s.x, s.y, kNoOverride, kNoOverride));
  if (!limits.bound_inputs) return absl::OkStatus();
  return CheckSampleBounds(unit, s.x, s.q, s.y);
}

}  // namespace

FuseShard::FuseShard(std::unique_ptr<fuse::FuseUnit> unit)
    : spec_(unit->spec()), unit_(std::move(unit)) {}

absl::Status FuseShard::FencedError(std::string_view what) const {
  return absl::UnavailableError(absl::StrCat(
      "this fuse shard ", std::string(what), " after a failed write (", fenced_.message(),
      "); it resumes from its last committed state once the store takes writes again"));
}

bool FuseShard::fenced() const {
  MutexLock lock(&write_mu_);
  return !fenced_.ok();
}

absl::Status FuseShard::Reinstate(std::unique_ptr<FuseShard> recovered) {
  MutexLock lock(&write_mu_);
  // `recovered` is not shared: its locks are taken only so the analysis sees its fields held.
  MutexLock recovered_lock(&recovered->write_mu_);
  if (fenced_.ok()) {
    return absl::FailedPreconditionError("the fuse shard is not fenced: its state is committed");
  }
  if (!recovered->fenced_.ok()) {
    return absl::FailedPreconditionError("the recovered fuse shard is itself fenced");
  }
  if (recovered->log_seq_ != log_seq_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the recovered fuse state ends at log entry %d, the shard committed through %d",
        recovered->log_seq_, log_seq_));
  }
  std::unique_ptr<fuse::FuseUnit> old;
  {
    WriterLock swap_lock(&unit_mu_);
    WriterLock recovered_swap_lock(&recovered->unit_mu_);  // not shared; for the analysis
    old = std::exchange(unit_, std::move(recovered->unit_));
  }
  log_seq_ = recovered->log_seq_;
  actions_total_ = recovered->actions_total_;
  fenced_ = absl::OkStatus();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FuseShard>> FuseShard::Restore(const fuse::FuseSpec& spec,
                                                              const lmu::HashSecret& secret,
                                                              std::string_view blob) {
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(blob, kFuseShardKind);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::string_view> header = c->Section(kSectionFuseHeader);
  if (!header.ok()) return header.status();
  absl::StatusOr<std::string_view> body = c->Section(kSectionUnit);
  if (!body.ok()) return body.status();
  uint64_t log_seq = 0, actions_total = 0;
  ByteReader r(*header);
  RETURN_IF_ERROR(r.U64(&log_seq));
  RETURN_IF_ERROR(r.U64(&actions_total));
  RETURN_IF_ERROR(r.ExpectDone("fuse shard header"));
  absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> unit = fuse::RestoreFuse(spec, secret, *body);
  if (!unit.ok()) return unit.status();
  auto shard = std::make_unique<FuseShard>(*std::move(unit));
  {
    MutexLock lock(&shard->write_mu_);  // not shared yet; for the analysis
    shard->log_seq_ = log_seq;
    shard->actions_total_ = actions_total;
  }
  return shard;
}

absl::StatusOr<FuseShardSnapshot> FuseShard::Snapshot() const {
  MutexLock lock(&write_mu_);
  // A fenced shard holds samples that were neither acknowledged nor logged.
  if (!fenced_.ok()) return FencedError("cannot be snapshotted");
  const fuse::FuseUnit& unit = WriterUnit();
  FuseShardSnapshot out;
  out.last_t = unit.last_t();
  out.log_seq = log_seq_;
  out.steps = unit.steps();
  out.state_digest = unit.StateDigest();
  ByteWriter header;
  header.U64(log_seq_);
  header.U64(actions_total_);
  SnapshotBuilder b(kFuseShardKind);
  b.AddSection(kSectionFuseHeader, header.Take());
  b.AddSection(kSectionUnit, fuse::SerializeFuse(unit));
  out.blob = b.Finish();
  return out;
}

uint64_t FuseShard::log_seq() const {
  MutexLock lock(&write_mu_);
  return log_seq_;
}

absl::StatusOr<PartSnapshot> FuseShard::TakeSnapshot() const {
  absl::StatusOr<FuseShardSnapshot> s = Snapshot();
  if (!s.ok()) return s.status();
  return PartSnapshot{.log_seq = s->log_seq,
                      .steps = s->steps,
                      .state_digest = s->state_digest,
                      .blob = std::move(s->blob)};
}

Digest FuseShard::StateDigest() const { return Stats().digest; }

absl::StatusOr<FuseLearnOutcome> FuseShard::Learn(std::span<const FuseSampleView> batch,
                                                  const BatchLimits& limits,
                                                  const FuseCommitHook* hook) {
  RETURN_IF_ERROR(CheckBatchSize(batch.size(), limits.max_batch, "samples"));
  MutexLock lock(&write_mu_);
  if (!fenced_.ok()) return FencedError("stopped learning");
  // Only this writer changes the unit, so reading it here needs no unit_mu_.
  const fuse::FuseUnit& unit = WriterUnit();
  if (absl::Status st = CheckBatchItems(
          batch, "sample", [&](const FuseSampleView& s) { return CheckSample(unit, s, limits); });
      !st.ok()) {
    return st;
  }
  RETURN_IF_ERROR(CheckTSteps(batch, "sample", unit.has_last_t(), unit.last_t(), limits));

  FuseLearnOutcome out;
  std::vector<size_t> fresh;
  {
    TOrder order(unit.has_last_t(), unit.last_t());
    for (size_t i = 0; i < batch.size(); ++i) {
      if (order.Accept(batch[i].t)) {
        fresh.push_back(i);
      } else {
        out.duplicates.push_back(batch[i].t);
      }
    }
  }
  // Ridge and vla: the engine's part of every step first, on a copy, so that an overflow
  // (a readout or a state out of double range) refuses the batch before anything changes.
  std::optional<fuse::EngineRun> run;
  if (unit.sau().prf() == nullptr && !fresh.empty()) {
    run.emplace(unit.sau());
    for (size_t i : fresh) {
      if (absl::Status st = run->Add(batch[i].q, batch[i].y); !st.ok()) {
        return absl::Status(st.code(), absl::StrFormat("sample %d (t=%d): %s", i, batch[i].t,
                                                       st.message()));
      }
    }
    RETURN_IF_ERROR(run->Finish());
  }
  for (size_t i : fresh) {
    const FuseSampleView& s = batch[i];
    FuseApplied applied;
    applied.index = i;
    {
      // One sample at a time, so that a Predict waits for at most one step.
      WriterLock step_lock(&unit_mu_);
      absl::StatusOr<fuse::FuseStep> step =
          unit_->Learn(s.t, s.x, s.q, s.y, run.has_value() ? &*run : nullptr);
      if (!step.ok()) {
        // Checked above, so only a failed LMU rebuild: the unit may hold a partial step and
        // earlier samples that will never be acknowledged or logged (see the header).
        fenced_ = step.status();
        return step.status();
      }
      applied.step = *std::move(step);
      if (applied.step.diag.margin < 0) {
        applied.negative_margin = true;
        applied.next_actions = unit_->control().pending();
      }
    }
    ++out.applied;
    actions_total_ += applied.step.actions.size();
    out.c_lookup_p100 = std::max(out.c_lookup_p100, applied.step.max_locate_probes);
    out.c_insert_p100 = std::max(out.c_insert_p100, applied.step.max_insert_probes);
    out.steps.push_back(std::move(applied));
  }
  if (run.has_value()) {
    WriterLock adopt_lock(&unit_mu_);
    if (absl::Status st = unit_->AdoptEngine(&*run); !st.ok()) {
      fenced_ = st;  // not reached: every step took its engine part
      return st;
    }
  }
  out.table = unit.main_lmu().TableStats();
  out.ver_sau = unit.sau().events();
  out.ver_base = out.table.ver_base;
  out.ver_delta = out.table.ver_delta;
  out.actions_total = actions_total_;
  if (out.applied == 0) return out;

  const FuseApplied& a = out.steps.back();
  const fuse::FusePrediction& p = a.step.prediction;
  const sau::EventDiagnostics& d = a.step.diag;
  FuseShardHealth& h = out.last;
  out.has_last = true;
  h.gate = p.gate;
  h.g_min = p.g_min;
  h.g_max = p.g_max;
  h.engine = unit.sau().engine();
  if (h.engine == sau::Engine::kPrf) {  // the record's prf fields; zero over ridge and vla
    h.margin = d.margin;
    h.rj_gap = d.rj_gap;
    h.rj_level = static_cast<int>(d.rj_level);
    h.den = d.den;
    h.beta_floor = a.step.beta_floor;
    h.lambda_star = a.step.lambda_star;
    h.clip_rate = d.clip_rate;
  }
  const std::span<const double> y = batch[a.index].y;
  double err2 = 0;
  for (size_t o = 0; o < y.size() && o < p.y_hat.size(); ++o) {
    err2 += (y[o] - p.y_hat[o]) * (y[o] - p.y_hat[o]);
  }
  h.y_err_abs = std::sqrt(err2);
  if (h.engine == sau::Engine::kRidge) {
    h.condition = p.engine.condition;
    h.residual = p.engine.residual;
    h.ridge = d.ridge;
  } else if (h.engine == sau::Engine::kVla) {
    h.vla = d.vla;
    h.s_norm = a.step.s_norm;
  }
  const control::Controls c = unit.control().controls();
  h.lmu_tau_low = c.lmu_tau_low.value_or(unit.spec().lmu.tau_low);
  h.lmu_lr_scale = c.lmu_lr_scale;

  if (hook != nullptr) {
    absl::Status st = (*hook)(FuseCommit{
        .batch = batch, .outcome = &out, .log_seq = log_seq_ + 1, .unit = &unit});
    if (!st.ok()) {
      fenced_ = st;
      return st;
    }
  }
  ++log_seq_;  // only once the batch is committed
  return out;
}

absl::StatusOr<fuse::FusePrediction> FuseShard::Predict(std::span<const lmu::Feature> x,
                                                        std::span<const double> q) const {
  if (x.empty()) return absl::InvalidArgumentError("x is empty; give at least one feature");
  ReaderLock lock(&unit_mu_);
  RETURN_IF_ERROR(unit_->CheckSample(x, q));
  RETURN_IF_ERROR(CheckSampleBounds(*unit_, x, q, {}));
  return unit_->Predict(x, q);
}

FuseShardStats FuseShard::Stats() const {
  MutexLock lock(&write_mu_);
  const fuse::FuseUnit& unit = WriterUnit();
  FuseShardStats s;
  s.steps = unit.steps();
  s.last_t = unit.last_t();
  s.log_seq = log_seq_;
  s.actions_total = actions_total_;
  s.digest = unit.StateDigest();
  s.ver_sau = unit.sau().events();
  s.table = unit.main_lmu().TableStats();
  s.controls = unit.control().controls();
  return s;
}

}  // namespace streamlearn
