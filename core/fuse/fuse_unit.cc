#include "core/fuse/fuse_unit.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "core/fuse/fuse_features.h"

namespace streamlearn::fuse {

namespace {

constexpr double kNoOverride = std::numeric_limits<double>::quiet_NaN();  // LMU lr / l2

// The gate learner regresses a logit; its per-step pseudo-residual is bounded so that one
// outlier cannot throw the gate across its range.
constexpr double kMaxGateStep = 4.0;

AuditList Doubles(const std::vector<double>& v) {
  AuditList out;
  out.reserve(v.size());
  for (double x : v) out.emplace_back(x);
  return out;
}

double Norm2(std::span<const double> a, std::span<const double> b) {
  double s = 0;
  for (size_t o = 0; o < a.size(); ++o) s += (a[o] - b[o]) * (a[o] - b[o]);
  return s;
}

std::string_view LevelName(sau::RjLevel level) {
  switch (level) {
    case sau::RjLevel::kGreen: return "green";
    case sau::RjLevel::kYellow: return "yellow";
    case sau::RjLevel::kRed: return "red";
  }
  return "green";
}

Digest InputDigest(uint64_t t, std::span<const lmu::Feature> x, std::span<const double> q,
                   std::span<const double> y) {
  // The bytes Sha256::U64 / F64 / F64s would feed one at a time (little-endian words), laid
  // out in one buffer and hashed with one update, on one context per thread.
  thread_local Sha256 h;
  thread_local std::string bytes;
  constexpr std::string_view kDomain = "streamlearn.fuse.input.v1";
  bytes.assign(kDomain);
  const auto u64 = [](uint64_t v) {
    char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<char>(v >> (8 * i));
    bytes.append(le, 8);
  };
  u64(t);
  u64(x.size());
  for (const lmu::Feature& f : x) {
    u64(f.id);
    u64(std::bit_cast<uint64_t>(f.val));
  }
  for (double v : q) u64(std::bit_cast<uint64_t>(v));
  for (double v : y) u64(std::bit_cast<uint64_t>(v));
  h.Reset();
  h.Update(bytes);
  return h.Finish();
}

}  // namespace

struct FuseUnit::Forward {
  FusePrediction p;
  HealthFeatures health;
  double gate_lmu = 0;  // the gate learner's output w_g^T z_gate + b_g
  std::vector<lmu::Feature> z;       // z_gate (gate) or z_meta (meta-linear)
  std::vector<lmu::Feature> main_x;  // attention-as-feature: x ++ z_attn
  std::vector<double> y_meta;        // meta-linear: the meta learner's output
};

namespace {
sau::PreparedQuery& ThreadPrepared() {
  thread_local sau::PreparedQuery prepared;
  return prepared;
}

// The ridge or vla readout y_hat_sau predicts y, and the gate, meta and main learners take it
// as a feature and its error as a gradient, so it must lie in the targets' range
// (LmuLearner::kInputBound; docs/FUSE.md, "Other engines"). prf's readout is a weighted mean of
// values within that range; ridge extrapolates, and tiny keys with a huge query overflow it.
absl::Status ReadoutInRange(std::span<const double> y_hat, sau::Engine engine) {
  constexpr double kBound = lmu::LmuLearner::kInputBound;
  for (size_t o = 0; o < y_hat.size(); ++o) {
    if (!(std::abs(y_hat[o]) <= kBound)) {
      return absl::OutOfRangeError(absl::StrFormat(
          "the %s readout at this q is %g at output %d, outside the targets' range [%g, %g] "
          "(keys much shorter than q); nothing was applied: scale q down",
          sau::EngineName(engine), y_hat[o], o, -kBound, kBound));
    }
  }
  return absl::OkStatus();
}
}  // namespace

EngineRun::EngineRun(const sau::Memory& engine) : memory_(engine) {
  assert(memory_.engine() != sau::Engine::kPrf);
}

absl::Status EngineRun::Add(std::span<const double> q, std::span<const double> y) {
  Step& s = steps_.emplace_back();
  // The calls RunForward and Learn make on the unit's engine (docs/FUSE.md, "One step", 2, 4).
  s.readout = memory_.Query(q, sau::ReadoutPath::kStabilized, /*low_rank=*/false);
  RETURN_IF_ERROR(ReadoutInRange(s.readout.y_hat, memory_.engine()));
  s.events_before = memory_.events();
  s.diag = memory_.Ingest(q, y);
  s.events_after = memory_.events();
  if (const sau::VlaMemory* v = memory_.vla()) s.s_norm = v->s_norm();
  return absl::OkStatus();
}

absl::Status EngineRun::Finish() const {
  if (memory_.StateFinite()) return absl::OkStatus();
  return absl::OutOfRangeError(absl::StrFormat(
      "the samples would leave the %s engine's state non-finite (an overflow); nothing was "
      "applied: scale q and y down",
      sau::EngineName(memory_.engine())));
}

absl::StatusOr<std::unique_ptr<FuseUnit>> FuseUnit::Create(const FuseSpec& raw,
                                                           const lmu::HashSecret& secret) {
  absl::StatusOr<FuseSpec> spec = ResolveFuseSpec(raw);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<sau::Memory> sau = sau::Memory::Create(spec->sau);
  if (!sau.ok()) return sau.status();
  return std::unique_ptr<FuseUnit>(new FuseUnit(*spec, secret, *std::move(sau)));
}

FuseUnit::FuseUnit(const FuseSpec& spec, const lmu::HashSecret& secret, sau::Memory sau)
    : spec_(spec),
      sau_(std::move(sau)),
      main_(std::make_unique<lmu::LmuLearner>(spec.lmu, secret)),
      gate_(std::make_unique<lmu::LmuLearner>(GateLmuSpec(spec), secret)),
      control_(spec.control) {}

absl::Status FuseUnit::CheckSample(std::span<const lmu::Feature> x,
                                   std::span<const double> q) const {
  RETURN_IF_ERROR(sau_.CheckQuery(q));
  for (size_t j = 0; j < x.size(); ++j) {
    if (x[j].id >= kReservedIdBase) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "x[%d] has id %d; ids >= %d are reserved for the fused features", j, x[j].id,
          kReservedIdBase));
    }
    if (!std::isfinite(x[j].val)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "x[%d] (id %d) has value %g; values must be finite", j, x[j].id, x[j].val));
    }
  }
  return absl::OkStatus();
}

// docs/FUSE.md, "One step", up to y_hat.
void FuseUnit::RunForward(std::span<const lmu::Feature> x, std::span<const double> q,
                          const control::Controls& c, SauPart* sau, Forward* f) const {
  const int m = spec_.lmu.m;
  FusePrediction& p = f->p;
  // y_hat_sau: prf with the stabilized readout (docs/SAU.md (12)-(13), (20)-(21)) and its
  // health signals; ridge and vla with their one readout and no health signal (docs/FUSE.md,
  // "Other engines": the health features stay 0).
  SauPart own;
  if (sau == nullptr) {
    own.events_before = sau_.events();
    if (const sau::SauEstimator* prf = sau_.prf()) {
      sau::PreparedQuery& prepared = ThreadPrepared();
      prf->Prepare(q, &prepared);
      own.readout = prf->Query(&prepared, spec_.low_rank);
      own.health = ScaleHealth(own.readout, prf->spec(), prf->events(),
                               prf->state().median_den.value());
    } else {
      own.readout = sau_.Query(q, sau::ReadoutPath::kStabilized, /*low_rank=*/false);
    }
    sau = &own;
  }
  sau::QueryResult& qr = sau->readout;
  f->health = sau->health;
  p.engine = qr.engine;
  p.y_hat_sau = std::move(qr.y_hat);
  p.rj_gap = qr.rj_gap;
  p.margin = qr.margin;
  p.den = qr.raw_den;
  p.ver_sau = sau->events_before;
  p.g_min = c.g_min;
  p.g_max = c.g_max;

  // y_hat_lmu (attention-as-feature: over x ++ z_attn, docs/FUSE.md, "The patterns").
  p.y_hat_lmu.assign(m, 0.0);
  lmu::LmuLearner::PredictInfo info;
  if (spec_.pattern == FusePattern::kAttentionAsFeature) {
    AttentionFeatures(x, p.y_hat_sau, YScale(), f->health, c.g_max, &f->main_x);
    info = main_->Predict(f->main_x, p.y_hat_lmu.data());
  } else {
    info = main_->Predict(x, p.y_hat_lmu.data());
  }
  p.ver_base = info.ver_base;
  p.ver_delta = info.ver_delta;

  p.y_hat.assign(m, 0.0);
  switch (spec_.pattern) {
    case FusePattern::kLinearAsGate: {
      // Gate = clamp(sigma(w_g^T z_gate), g_min(m_t), g_max(m_t)), docs/FUSE.md (G2), with
      // the rolling-error log ratio also as a fixed offset of the logit: sigma(ln(E_lmu /
      // E_sau)) = E_lmu / (E_sau + E_lmu) is the best constant gate for independent errors, so
      // the gate starts there and w_g learns the correction (docs/FUSE.md).
      const double advantage = Advantage(err_sau_, err_lmu_);
      GateFeatures(f->health, advantage, &f->z);
      gate_->Predict(f->z, &f->gate_lmu);
      p.gate_raw = Sigmoid(advantage + f->gate_lmu);
      p.gate = std::clamp(p.gate_raw, c.g_min, c.g_max);
      for (int o = 0; o < m; ++o) {
        p.y_hat[o] = p.gate * p.y_hat_sau[o] + (1 - p.gate) * p.y_hat_lmu[o];
      }
      break;
    }
    case FusePattern::kMetaLinear: {
      // LMU regression on [y_sau, y_lmu] with a bias (docs/FUSE.md, "The patterns"); the gate
      // clamp in force weighs it against the plain LMU (1 normally: y_hat = y_meta).
      MetaFeatures(p.y_hat_sau, p.y_hat_lmu, YScale(), &f->z);
      f->y_meta.assign(m, 0.0);
      gate_->Predict(f->z, f->y_meta.data());
      p.gate_raw = p.gate = c.g_max;
      for (int o = 0; o < m; ++o) {
        p.y_hat[o] = p.gate * f->y_meta[o] + (1 - p.gate) * p.y_hat_lmu[o];
      }
      break;
    }
    case FusePattern::kAttentionAsFeature:
      p.gate_raw = p.gate = c.g_max;  // the weight on the attention readout features
      p.y_hat = p.y_hat_lmu;
      break;
  }
}

absl::StatusOr<FusePrediction> FuseUnit::Predict(std::span<const lmu::Feature> x,
                                                 std::span<const double> q) const {
  RETURN_IF_ERROR(CheckSample(x, q));
  Forward f;
  RunForward(x, q, control_.controls(), /*sau=*/nullptr, &f);
  if (sau_.prf() == nullptr) RETURN_IF_ERROR(ReadoutInRange(f.p.y_hat_sau, sau_.engine()));
  return std::move(f.p);
}

absl::StatusOr<FuseStep> FuseUnit::Learn(uint64_t t, std::span<const lmu::Feature> x,
                                         std::span<const double> q, std::span<const double> y,
                                         EngineRun* run) {
  if (has_last_t_ && t <= last_t_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "t = %d does not follow the last applied t = %d; t must increase", t, last_t_));
  }
  RETURN_IF_ERROR(CheckSample(x, q));
  RETURN_IF_ERROR(sau_.CheckEvent(q, y));
  RETURN_IF_ERROR(main_->CheckSample(x, y, kNoOverride, kNoOverride));
  // Ridge and vla: the engine's part of the step (its readout at q, then the write of (q, y))
  // runs first on a copy, so that an overflow refuses the step before anything changes.
  std::optional<EngineRun> own;
  const EngineRun::Step* engine = nullptr;
  if (sau_.prf() == nullptr) {
    if (run == nullptr) {
      own.emplace(sau_);
      RETURN_IF_ERROR(own->Add(q, y));
      RETURN_IF_ERROR(own->Finish());
      run = &*own;
    }
    if (run->next_ >= run->steps_.size()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the engine run holds %d steps, all taken; t = %d has none", run->steps_.size(), t));
    }
    engine = &run->steps_[run->next_];
  }
  if (absl::Status s = main_->Poll(); !s.ok()) return s;  // publish a finished rebuild

  const int m = spec_.lmu.m;
  // 1. The controls of this step, decided at the end of the last one (already applied to the
  //    SAU's lambda nudge and the LMU's lr scale and tau_low), and their actions.
  const control::Controls c = control_.controls();
  std::vector<control::ControlAction> actions = control_.TakePending();
  const sau::SauEstimator* prf = sau_.prf();  // null for ridge and vla
  const double floor_used = prf != nullptr ? prf->state().floor.floor() : 0.0;
  const double lambda_used = prf != nullptr ? prf->effective_lambda() : 0.0;

  // 2. Predict. The attention part first: prf reads out at q and ingests (k = q, v = y) in one
  //    pass over R (SauEstimator::QueryAndIngest; step 4's update, done early: nothing in
  //    step 3 reads the SAU, so the results are those of the steps in order); ridge and vla
  //    take theirs from the run.
  SauPart part;
  sau::EventDiagnostics diag;
  sau::PreparedQuery* prepared = nullptr;
  bool ingested = false;
  if (prf != nullptr) {
    prepared = &ThreadPrepared();
    prf->Prepare(q, prepared);
    part.events_before = prf->events();
    const double median = prf->state().median_den.value();
    if (spec_.low_rank) {  // the readout reads H, the ingest R: two passes
      part.readout = prf->Query(prepared, /*low_rank=*/true);
    } else {
      part.readout = sau_.mutable_prf()->QueryAndIngest(*prepared, y, &diag);
      ingested = true;
    }
    part.health = ScaleHealth(part.readout, prf->spec(), part.events_before, median);
  } else {
    part.readout = engine->readout;
    part.events_before = engine->events_before;
  }
  Forward f;
  RunForward(x, q, c, &part, &f);
  const FusePrediction& p = f.p;

  // 3. Learn. The main LMU learns from its own residual y - y_hat_lmu: it stays an exact,
  //    standalone sparse linear model (the exact fallback of docs/FUSE.md), bit-identical to
  //    an LmuLearner fed the same (x, y). (Attention-as-feature: its residual is the fused one.)
  std::vector<double> before(m);
  absl::StatusOr<lmu::StepResult> step = main_->Step(
      spec_.pattern == FusePattern::kAttentionAsFeature ? std::span<const lmu::Feature>(f.main_x)
                                                        : x,
      y, kNoOverride, kNoOverride, before.data());
  if (!step.ok()) return step.status();
  assert(std::equal(before.begin(), before.end(), p.y_hat_lmu.begin(),
                    [](double a, double b) { return std::bit_cast<uint64_t>(a) ==
                                                    std::bit_cast<uint64_t>(b); }));

  double diff2 = 0;  // ||y_sau - y_lmu||^2
  for (int o = 0; o < m; ++o)
    diff2 += (p.y_hat_sau[o] - p.y_hat_lmu[o]) * (p.y_hat_sau[o] - p.y_hat_lmu[o]);
  switch (spec_.pattern) {
    case FusePattern::kLinearAsGate: {
      // SGD on 1/2 ||y - (s y_sau + (1 - s) y_lmu)||^2 in the logit of s = sigma(w_g^T z_gate),
      // unclamped (the clamp is the controller's, the gate keeps learning what it would pick),
      // normalised by the running ||y_sau - y_lmu||^2 so one lr fits any target scale. The
      // LMU's own update w += lr (target - logit) z then is exactly that step.
      const double s = p.gate_raw;
      double dot = 0;
      for (int o = 0; o < m; ++o) {
        const double d = p.y_hat_sau[o] - p.y_hat_lmu[o];
        const double e_raw = y[o] - (s * p.y_hat_sau[o] + (1 - s) * p.y_hat_lmu[o]);
        dot += e_raw * d;
      }
      const double norm = diff2_ > 0 ? diff2_ : diff2;
      const double g = norm > 0 ? std::clamp(s * (1 - s) * dot / norm, -kMaxGateStep, kMaxGateStep)
                                : 0.0;
      const double target = f.gate_lmu + g;
      double logit_before = 0;
      absl::StatusOr<lmu::StepResult> gs = gate_->Step(f.z, std::span<const double>(&target, 1),
                                                       kNoOverride, kNoOverride, &logit_before);
      if (!gs.ok()) return gs.status();
      break;
    }
    case FusePattern::kMetaLinear: {
      std::vector<double> meta_before(m);
      absl::StatusOr<lmu::StepResult> gs =
          gate_->Step(f.z, y, kNoOverride, kNoOverride, meta_before.data());
      if (!gs.ok()) return gs.status();
      break;
    }
    case FusePattern::kAttentionAsFeature:
      break;
  }

  // 4. SAU.ingest(k_t = q, v_t = y) (docs/DECISIONS.md 7): done in step 2 unless low_rank;
  //    ridge and vla wrote into the run.
  if (prf != nullptr && !ingested) diag = sau_.mutable_prf()->Ingest(*prepared, y);
  if (prf == nullptr) diag = engine->diag;
  const uint64_t ver_sau = engine != nullptr ? engine->events_after : sau_.events();

  // Rolling errors for z_gate, after their use at this step.
  const double e_sau = Norm2(y, p.y_hat_sau), e_lmu = Norm2(y, p.y_hat_lmu);
  double y2 = 0;
  for (int o = 0; o < m; ++o) y2 += y[o] * y[o];
  y2 /= m;
  if (steps_ == 0) {
    err_sau_ = e_sau;
    err_lmu_ = e_lmu;
    diff2_ = diff2;
    y_ms_ = y2;
  } else {
    const double a = spec_.gate.error_rate;
    err_sau_ += a * (e_sau - err_sau_);
    err_lmu_ += a * (e_lmu - err_lmu_);
    diff2_ += a * (diff2 - diff2_);
    y_ms_ += spec_.gate.scale_rate * (y2 - y_ms_);
  }

  // 5. Control: observe this step, set the controls of the next. The control plane reads the
  //    prf estimator's health (margin, alarm, RJ level, denominator); the ridge and vla
  //    engines have none of it, so with them it observes nothing and its controls stay at
  //    their defaults (docs/FUSE.md, "Other engines").
  if (prf != nullptr) {
    control_.Observe(control::ObservationOf(diag, floor_used, prf->state().median_den.value()),
                     &actions);
    ApplyControls();
  }
  ++steps_;
  has_last_t_ = true;
  last_t_ = t;

  // 6. The audit body (docs/FUSE.md, "The audit body").
  const lmu::LmuTableStats stats = main_->TableStats();
  FuseStep out;
  AuditList list;
  for (const control::ControlAction& a : actions) {
    AuditRecord r;
    r.Add("action", control::ActionName(a.action))
        .Add("cause", control::CauseName(a.cause))
        .Add("value", a.value);
    list.emplace_back(std::move(r));
  }
  if (prf != nullptr) {  // the SAU's own self-regulation (docs/SAU.md, "Self-regulation")
    const auto regulation = [&list](std::string_view action, std::string_view cause,
                                    double value) {
      AuditRecord r;
      r.Add("action", std::string(action)).Add("cause", std::string(cause)).Add("value", value);
      list.emplace_back(std::move(r));
    };
    if (diag.gamma_change > 0) regulation("raise_gamma", "thin_denominators", diag.gamma);
    if (diag.gamma_change < 0) regulation("lower_gamma", "cooldown", diag.gamma);
    if (diag.c_hi_raised) regulation("raise_c_hi", "clip_rate", diag.c_hi);
  }
  AuditRecord& r = out.record;
  r.Reserve(40);  // the most fields a body has; each distinct, so Add, not Set
  r.Add("kind", kRecordFuseLearn)
      .Add("t", t)
      .Add("pattern", PatternName(spec_.pattern))
      .Add("input_digest", ToHex(InputDigest(t, x, q, y)))
      .Add("ver_sau", ver_sau)
      .Add("ver_base", stats.ver_base)
      .Add("ver_delta", stats.ver_delta)
      .Add("y_hat", Doubles(p.y_hat))
      .Add("y_hat_sau", Doubles(p.y_hat_sau))
      .Add("y_hat_lmu", Doubles(p.y_hat_lmu))
      .Add("gate", p.gate)
      .Add("g_min", p.g_min)
      .Add("g_max", p.g_max);
  if (prf != nullptr) {
    r.Add("margin", diag.margin)
        .Add("rj_gap", diag.rj_gap)
        .Add("rj_threshold", diag.rj_threshold)
        .Add("rj_exceeded", diag.rj_gap > diag.rj_threshold)
        .Add("rj_level", LevelName(diag.rj_level))
        .Add("den", diag.den)
        .Add("beta_floor", floor_used)
        .Add("lambda_star", lambda_used)
        .Add("clip_rate", diag.clip_rate);
  } else if (sau_.engine() == sau::Engine::kRidge) {
    // The readout's diagnostics at q before the write, and the write's (docs/ENGINES.md).
    r.Add("engine", sau::EngineName(sau::Engine::kRidge))
        .Add("condition", p.engine.condition)
        .Add("residual", p.engine.residual)
        .Add("jitter", p.engine.jitter)
        .Add("key_norm2", diag.ridge.key_norm2)
        .Add("scale", diag.ridge.scale);
  } else {
    r.Add("engine", sau::EngineName(sau::Engine::kVla))
        .Add("residual_norm", diag.vla.residual_norm)
        .Add("alpha_dot_k", diag.vla.alpha_dot_k)
        .Add("refreshed", diag.vla.refreshed)
        .Add("skipped", diag.vla.skipped)
        .Add("s_norm", engine->s_norm);
  }
  r.Add("c_lookup_p100", step->max_locate_probes)
      .Add("locate_bound", stats.locate_bound)
      .Add("c_insert_p100", step->max_insert_probes)
      .Add("insert_bound", stats.insert_bound)
      .Add("delta_load", stats.delta_load)
      .Add("stash_used", stats.stash_used)
      .Add("ring_used", stats.ring_used)
      .Add("emergency_used", stats.emergency_used)
      .Add("y_scale", YScale())
      .Add("actions", std::move(list));
  out.actions = std::move(actions);
  out.prediction = std::move(f.p);
  out.diag = diag;
  out.beta_floor = floor_used;
  out.lambda_star = lambda_used;
  out.s_norm = engine != nullptr ? engine->s_norm : 0.0;
  out.max_locate_probes = step->max_locate_probes;
  out.max_insert_probes = step->max_insert_probes;
  if (run != nullptr) {
    ++run->next_;
    if (own.has_value()) {
      absl::Status adopted = AdoptEngine(&*own);
      assert(adopted.ok());
      (void)adopted;
    }
  }
  return out;
}

absl::Status FuseUnit::AdoptEngine(EngineRun* run) {
  if (run->next_ != run->steps_.size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the engine run holds %d steps and Learn took %d; the unit adopts it after its last",
        run->steps_.size(), run->next_));
  }
  if (run->memory_.engine() != sau_.engine()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the engine run is a %s memory, the unit's a %s one",
        sau::EngineName(run->memory_.engine()), sau::EngineName(sau_.engine())));
  }
  sau_ = std::move(run->memory_);
  run->steps_.clear();
  run->next_ = 0;
  return absl::OkStatus();
}

void FuseUnit::ApplyControls() {
  const control::Controls c = control_.controls();
  if (sau::SauEstimator* prf = sau_.mutable_prf()) prf->SetLambdaNudge(c.lambda);
  main_->SetLrScale(c.lmu_lr_scale);
  main_->SetTauLowOverride(c.lmu_tau_low);
}

Digest FuseUnit::StateDigest() const {
  Sha256 h;
  h.Update("streamlearn.fuse.state.v1");
  h.U64(static_cast<uint64_t>(spec_.pattern));
  h.U64(steps_);
  h.U64(has_last_t_ ? 1 : 0);
  h.U64(last_t_);
  h.F64(err_sau_);
  h.F64(err_lmu_);
  h.F64(diff2_);
  h.F64(y_ms_);
  for (const Digest& d : {sau_.StateDigest(), main_->StateDigest(), gate_->StateDigest()}) {
    h.Update(d.data(), d.size());
  }
  control_.Hash(h);
  return h.Finish();
}

}  // namespace streamlearn::fuse
