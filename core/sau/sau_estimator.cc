#include "core/sau/sau_estimator.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>

#include "absl/strings/str_format.h"
#include "core/common/input_bounds.h"
#include "core/common/status_macros.h"
#include "core/sau/counter_rng.h"
#include "core/sau/kernels.h"

namespace streamlearn::sau {

namespace {

// Per-thread scratch for the hot paths, so Ingest and Query allocate nothing once warm.
struct Scratch {
  std::vector<double> x, phi, phiw, num1, num2, rhat;
  void Reserve(const SauSpec& s) {
    x.resize(s.d);
    phi.resize(s.r);
    phiw.resize(s.r);
    const size_t width = std::max(s.d_v, s.r_v);
    num1.resize(width);
    num2.resize(width);
    rhat.resize(std::max(s.r_v, 1));
  }
};

Scratch& ThreadScratch(const SauSpec& spec) {
  thread_local Scratch scratch;
  scratch.Reserve(spec);
  return scratch;
}

// U drawn from the seed: Gaussian d_v x r_v (column-major, stream kStreamU) with columns
// orthonormalised by modified Gram-Schmidt (two passes).
std::vector<double> DrawU(const SauSpec& spec) {
  const int dv = spec.d_v, rv = spec.r_v;
  std::vector<double> u(static_cast<size_t>(dv) * rv);
  CounterRng rng(spec.seed, kStreamU);
  for (double& x : u) x = rng.NextNormal();
  OrthonormaliseVectors(u.data(), rv, dv);
  return u;
}

// Half-split readout of one feature vector against a row-major r x width statistic.
// num1/num2 get the numerators over rows [0, r/2) and [r/2, r); den1/den2 the denominators
// over the compensated s, accumulated in extended precision (docs/SAU.md R1, A9).
struct HalfReadout {
  long double den1 = 0, den2 = 0;
};

HalfReadout ReadHalves(const double* f, const std::vector<double>& stat, int width,
                       const SauState& st, int r, double* num1, double* num2) {
  HalfReadout out;
  std::fill(num1, num1 + width, 0.0);
  std::fill(num2, num2 + width, 0.0);
  const int half = r / 2;
  for (int i = 0; i < r; ++i) {
    double* acc = i < half ? num1 : num2;
    Axpy(f[i], &stat[static_cast<size_t>(i) * width], acc, width);
    const long double term = static_cast<long double>(f[i]) *
                             (static_cast<long double>(st.s[i]) + st.s_c[i]);
    (i < half ? out.den1 : out.den2) += term;
  }
  return out;
}

// RJ half-split discrepancy, docs/SAU.md (16a): 0.5 ||y1 - y2|| / (||y|| + eps), and
// docs/SAU.md (16) literally: ||y - (y1 + y2)/2|| / (||y|| + eps). y, y1, y2 share the floor
// and the ridge, halved for the halves since each half sums about half of the mass.
struct RjGaps {
  double gap = 0, gap_eq16 = 0;
};

RjGaps HalfSplitGaps(const double* num1, const double* num2, long double den1, long double den2,
                     double floor, double lambda, int width) {
  constexpr double kEps = 1e-12;
  const long double den = std::max(den1 + den2, static_cast<long double>(floor)) + lambda;
  const long double d1 = std::max(den1, static_cast<long double>(floor) / 2) + lambda / 2;
  const long double d2 = std::max(den2, static_cast<long double>(floor) / 2) + lambda / 2;
  if (!(den > 0) || !(d1 > 0) || !(d2 > 0)) return {};
  // A diagnostic, not an estimate: three reciprocals, then double multiplications.
  const double inv = static_cast<double>(1.0L / den);
  const double inv1 = static_cast<double>(1.0L / d1);
  const double inv2 = static_cast<double>(1.0L / d2);
  double norm_y = 0, diff12 = 0, diff16 = 0;
  for (int j = 0; j < width; ++j) {
    const double y = (num1[j] + num2[j]) * inv;
    const double y1 = num1[j] * inv1;
    const double y2 = num2[j] * inv2;
    norm_y += y * y;
    diff12 += (y1 - y2) * (y1 - y2);
    const double e = y - 0.5 * (y1 + y2);
    diff16 += e * e;
  }
  const double denom = std::sqrt(norm_y) + kEps;
  return {0.5 * std::sqrt(diff12) / denom, std::sqrt(diff16) / denom};
}

}  // namespace

absl::StatusOr<SauEstimator> SauEstimator::Create(const SauSpec& raw) {
  SauSpec spec = ResolveDefaults(raw);
  RETURN_IF_ERROR(ValidateSpec(spec));
  auto params = std::make_shared<Params>(Params{spec, FeatureMap::Draw(spec), {}, 0.0});
  params->value_bound = ValueBound(spec);
  if (spec.r_v > 0) params->u = spec.u.empty() ? DrawU(spec) : spec.u;
  SauState state(spec);
  return SauEstimator(std::move(params), std::move(state));
}

absl::Status SauEstimator::CheckEvent(std::span<const double> k,
                                      std::span<const double> v) const {
  RETURN_IF_ERROR(params_->features.CheckInput(k, "k"));
  const int dv = params_->spec.d_v;
  if (static_cast<int>(v.size()) != dv) {
    return absl::InvalidArgumentError(
        absl::StrFormat("v has %d values; the model expects d_v = %d", v.size(), dv));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "v[%d] is %s; inputs must be finite", i, std::isnan(v[i]) ? "NaN" : "Inf"));
    }
  }
  return absl::OkStatus();
}

absl::Status SauEstimator::CheckQuery(std::span<const double> q) const {
  return params_->features.CheckInput(q, "q");
}

absl::Status SauEstimator::CheckEventBounds(std::span<const double> k,
                                            std::span<const double> v) const {
  RETURN_IF_ERROR(CheckWithin(k, "k", kInputBound, "the bound on keys"));
  return CheckWithin(v, "v", params_->value_bound, "the model's bound on values");
}

absl::Status SauEstimator::CheckQueryBounds(std::span<const double> q) const {
  return CheckWithin(q, "q", kInputBound, "the bound on queries");
}

EventDiagnostics SauEstimator::Ingest(std::span<const double> k, std::span<const double> v) {
  return IngestKey(k, v, nullptr);
}

EventDiagnostics SauEstimator::IngestFrom(const SauEstimator& src, std::span<const double> k,
                                          std::span<const double> v) {
  assert(&src != this);
  if (params_ != src.params_) params_ = src.params_;
  nudge_ = src.nudge_;
  state_.AssignAllButSums(src.state_);
  return IngestKey(k, v, &src.state_);
}

EventDiagnostics SauEstimator::IngestKey(std::span<const double> k, std::span<const double> v,
                                         const SauState* from) {
  Scratch& sc = ThreadScratch(params_->spec);
  // phi(k_t), docs/SAU.md (4), with clipping statistics (docs/DECISIONS.md 4), and the
  // whitening of step t-1 (docs/DECISIONS.md 3).
  params_->features.Condition(k, sc.x.data());
  const FeatureMap::ClipStats clip =
      params_->features.Features(sc.x.data(), sc.phi.data(), state_.regulator.c_hi());
  state_.whitening.Whiten(sc.phi.data(), sc.phiw.data());
  return IngestFeatures(sc.x.data(), sc.phi.data(), sc.phiw.data(), clip, /*readout=*/false,
                        sc.num1.data(), sc.num2.data(), 0, 0, v, /*query=*/nullptr, from);
}

EventDiagnostics SauEstimator::Ingest(PreparedQuery& p, std::span<const double> v) {
  if (!p.prepared_ || p.events_ != state_.events) {  // stale: prepare at this state
    const std::vector<double> q = p.q_;
    Prepare(q, &p);
  }
  EventDiagnostics diag = IngestFeatures(p.x_.data(), p.phi_.data(), p.phiw_.data(), p.clip_,
                                         p.readout_,
                                         p.num1_.data(), p.num2_.data(), p.den1_, p.den2_, v);
  p.prepared_ = false;  // the state moved on
  return diag;
}

QueryResult SauEstimator::QueryAndIngest(PreparedQuery& p, std::span<const double> v,
                                         EventDiagnostics* diag) {
  if (!p.prepared_ || p.events_ != state_.events) {  // stale: prepare at this state
    const std::vector<double> q = p.q_;
    Prepare(q, &p);
  }
  QueryResult out;
  if (p.readout_) {  // already read out by Query(&p, false): finish from its half sums
    out = FinishQuery(p.phiw_.data(), p.num1_.data(), p.num2_.data(), p.den1_, p.den2_,
                      /*stabilized=*/true, /*low_rank=*/false, p.x_.data());
    *diag = IngestFeatures(p.x_.data(), p.phi_.data(), p.phiw_.data(), p.clip_, /*readout=*/true,
                           p.num1_.data(), p.num2_.data(), p.den1_, p.den2_, v);
  } else {
    *diag = IngestFeatures(p.x_.data(), p.phi_.data(), p.phiw_.data(), p.clip_,
                           /*readout=*/false,
                           p.num1_.data(), p.num2_.data(), 0, 0, v, &out);
  }
  p.prepared_ = false;  // the state moved on
  return out;
}

EventDiagnostics SauEstimator::IngestFeatures(const double* x, const double* phi,
                                              const double* phiw,
                                              const FeatureMap::ClipStats& clip, bool readout,
                                              double* num1, double* num2, long double den1,
                                              long double den2, std::span<const double> v,
                                              QueryResult* query, const SauState* from) {
  const SauSpec& spec = params_->spec;
  const int r = spec.r, dv = spec.d_v, rv = spec.r_v;
  SauState& st = state_;
  // The sums are read from `in` and written to st: the same state, or (IngestFrom) the
  // current version's, updated out of place by the same operations.
  const SauState& in = from != nullptr ? *from : st;
  const auto update = [&](double g, double a, const double* x_row, const std::vector<double>& s_in,
                          const std::vector<double>& c_in, std::vector<double>& s_out,
                          std::vector<double>& c_out, size_t at, int n) {
    if (from != nullptr) {
      CompensatedDecayAddTo(g, a, x_row, &s_in[at], &c_in[at], &s_out[at], &c_out[at], n);
    } else {
      CompensatedDecayAdd(g, a, x_row, &s_out[at], &c_out[at], n);
    }
  };
  st.clipped += static_cast<uint64_t>(clip.clipped);
  st.features += static_cast<uint64_t>(r);
  st.max_exponent = std::max(st.max_exponent, clip.max_exponent);

  // Prequential readout at k_t with the whitening, floor and ridge of step t-1
  // (docs/DECISIONS.md 3), fused with the update of each row of R (docs/SAU.md (6), R5);
  // a prepared query brings the readout's half sums along, in the same order of operations.
  const double gamma = st.regulator.gamma();  // the spec's unless self-regulated
  if (readout) {
    for (int i = 0; i < r; ++i) {
      update(gamma, phi[i], v.data(), in.R, in.R_c, st.R, st.R_c, static_cast<size_t>(i) * dv,
             dv);
    }
  } else {
    std::fill(num1, num1 + dv, 0.0);
    std::fill(num2, num2 + dv, 0.0);
    den1 = 0;
    den2 = 0;
    const int half = r / 2;
    for (int i = 0; i < r; ++i) {
      const size_t row = static_cast<size_t>(i) * dv;
      Axpy(phiw[i], &in.R[row], i < half ? num1 : num2, dv);
      const long double term = static_cast<long double>(phiw[i]) *
                               (static_cast<long double>(in.s[i]) + in.s_c[i]);
      (i < half ? den1 : den2) += term;
      update(gamma, phi[i], v.data(), in.R, in.R_c, st.R, st.R_c, row, dv);
    }
  }
  // s_t, docs/SAU.md (7); H_t, (8) with rhat = U^T v.
  update(gamma, 1.0, phi, in.s, in.s_c, st.s, st.s_c, 0, r);
  if (rv > 0) {
    std::vector<double>& rhat = ThreadScratch(spec).rhat;
    const std::vector<double>& u = params_->u;
    for (int j = 0; j < rv; ++j) rhat[j] = Dot(&u[static_cast<size_t>(j) * dv], v.data(), dv);
    for (int i = 0; i < r; ++i) {
      const size_t row = static_cast<size_t>(i) * rv;
      update(gamma, phi[i], rhat.data(), in.H, in.H_c, st.H, st.H_c, row, rv);
    }
  }

  // The readout of those half sums with the floor, ridge and margin of step t-1, which the
  // statistics below move on from (QueryAndIngest).
  if (query != nullptr && !readout) {
    *query = FinishQuery(phiw, num1, num2, den1, den2, /*stabilized=*/true, /*low_rank=*/false,
                         x);
  }

  EventDiagnostics diag;
  const double floor = st.floor.floor();
  const double lambda = effective_lambda();
  const RjGaps gaps = HalfSplitGaps(num1, num2, den1, den2, floor, lambda, dv);
  const double raw_den = static_cast<double>(den1 + den2);
  const double n = static_cast<double>(st.events + 1);
  diag.rj_gap = gaps.gap;
  diag.rj_gap_eq16 = gaps.gap_eq16;
  diag.rj_threshold =
      spec.c_rj * std::sqrt(std::log(std::max(n, std::numbers::e) / spec.rj_delta) / r);  // (39)
  diag.rj_level = st.rj.Push(diag.rj_gap > diag.rj_threshold);
  diag.den = raw_den;
  diag.shr = raw_den + lambda > 0 ? raw_den / (raw_den + lambda) : 1.0;
  if (st.events > 0) {
    st.den_min = std::min(st.den_min, raw_den);
    if (raw_den < floor) ++st.den_below_floor;
  }

  // Statistics that take phi_t only after it was used predictably.
  st.whitening.Observe(phi);
  const MixtureEProcess::Step step = st.eprocess.Observe(phi, spec);
  // The whitened denominator means something only once the whitening variances rest on a
  // few events (before that its weights are 1/sqrt(eps)); the median starts after warm-up/2.
  if (st.events >= static_cast<uint64_t>(spec.warmup / 2)) st.median_den.Push(raw_den);
  diag.median_den = st.median_den.value();
  diag.floor_raised =
      st.floor.Update(diag.rj_level == RjLevel::kRed || step.alarm, diag.median_den, spec);
  st.lambda_star = st.median_den.value() * st.eprocess.RidgeWeight(spec);  // docs/DECISIONS.md 1
  if (st.regulator.enabled()) {  // docs/SAU.md, "Self-regulation"
    const bool thin = diag.median_den > 0 && raw_den < Regulator::kThinFrac * diag.median_den;
    const Regulator::Change change =
        st.regulator.AfterEvent(spec, thin, clip.clipped_hi, st.eprocess.epoch_ending());
    diag.gamma_change = change.gamma;
    diag.c_hi_raised = change.c_hi;
  }
  ++st.events;

  diag.margin = st.eprocess.margin();
  diag.log_e_mix = st.eprocess.log_e_mix();
  diag.alarm = step.alarm;
  diag.epoch = st.eprocess.epoch();
  diag.nu2_hat = st.eprocess.nu2_hat();
  diag.bprime_hat = st.eprocess.bprime_hat();
  diag.beta_floor = st.floor.floor();
  diag.lambda_star = effective_lambda();
  diag.clip_rate = st.clip_rate();
  diag.clipped = clip.clipped;
  diag.clipped_hi = clip.clipped_hi;
  diag.max_exponent = st.max_exponent;
  diag.gamma = st.regulator.gamma();
  diag.c_hi = st.regulator.c_hi();
  st.window.Push(x, v.data());  // after every readout at this event read the window before it
  return diag;
}

QueryResult SauEstimator::Query(std::span<const double> q, ReadoutPath path,
                                bool low_rank) const {
  const SauSpec& spec = params_->spec;
  const SauState& st = state_;
  Scratch& sc = ThreadScratch(spec);

  params_->features.Condition(q, sc.x.data());
  params_->features.Features(sc.x.data(), sc.phi.data(), st.regulator.c_hi());
  const bool stabilized = path == ReadoutPath::kStabilized;
  const double* f = sc.phi.data();
  if (stabilized) {
    st.whitening.Whiten(sc.phi.data(), sc.phiw.data());  // docs/SAU.md (11)
    f = sc.phiw.data();
  }
  const int width = low_rank ? spec.r_v : spec.d_v;
  const HalfReadout h = ReadHalves(f, low_rank ? st.H : st.R, width, st, spec.r, sc.num1.data(),
                                   sc.num2.data());
  return FinishQuery(f, sc.num1.data(), sc.num2.data(), h.den1, h.den2, stabilized, low_rank,
                     stabilized && !low_rank ? sc.x.data() : nullptr);
}

void SauEstimator::Prepare(std::span<const double> q, PreparedQuery* p) const {
  const SauSpec& spec = params_->spec;
  p->q_.assign(q.begin(), q.end());
  p->x_.resize(spec.d);
  p->phi_.resize(spec.r);
  p->phiw_.resize(spec.r);
  p->num1_.resize(spec.d_v);
  p->num2_.resize(spec.d_v);
  params_->features.Condition(q, p->x_.data());
  p->clip_ = params_->features.Features(p->x_.data(), p->phi_.data(), state_.regulator.c_hi());
  state_.whitening.Whiten(p->phi_.data(), p->phiw_.data());
  p->events_ = state_.events;
  p->prepared_ = true;
  p->readout_ = false;
}

QueryResult SauEstimator::Query(PreparedQuery* p, bool low_rank) const {
  if (!p->prepared_ || p->events_ != state_.events) {  // stale: prepare at this state
    const std::vector<double> q = p->q_;
    Prepare(q, p);
  }
  const SauSpec& spec = params_->spec;
  const SauState& st = state_;
  if (low_rank) {  // the readout of H: its halves are not the ingest's, which reads R
    Scratch& sc = ThreadScratch(spec);
    const HalfReadout h = ReadHalves(p->phiw_.data(), st.H, spec.r_v, st, spec.r,
                                     sc.num1.data(), sc.num2.data());
    return FinishQuery(p->phiw_.data(), sc.num1.data(), sc.num2.data(), h.den1, h.den2,
                       /*stabilized=*/true, /*low_rank=*/true);
  }
  if (!p->readout_) {
    const HalfReadout h = ReadHalves(p->phiw_.data(), st.R, spec.d_v, st, spec.r,
                                     p->num1_.data(), p->num2_.data());
    p->den1_ = h.den1;
    p->den2_ = h.den2;
    p->readout_ = true;
  }
  return FinishQuery(p->phiw_.data(), p->num1_.data(), p->num2_.data(), p->den1_, p->den2_,
                     /*stabilized=*/true, /*low_rank=*/false, p->x_.data());
}

QueryResult SauEstimator::FinishQuery(const double* f, const double* num1, const double* num2,
                                      long double den1, long double den2, bool stabilized,
                                      bool low_rank, const double* x) const {
  const SauSpec& spec = params_->spec;
  const SauState& st = state_;
  const int r = spec.r;
  const double floor = stabilized ? st.floor.floor() : 0.0;
  const double lambda = stabilized ? effective_lambda() : 0.0;
  const int width = low_rank ? spec.r_v : spec.d_v;

  QueryResult out;
  const long double raw = den1 + den2;
  // docs/SAU.md (19) on the correctness path; (12)-(13) with R7's floor, i.e. (20), on the
  // stabilized path.
  const long double den =
      stabilized ? std::max(raw, static_cast<long double>(floor)) + lambda : raw;
  out.raw_den = static_cast<double>(raw);
  out.den = static_cast<double>(den);
  std::vector<double> z(width, 0.0);
  if (den > 0) {
    for (int j = 0; j < width; ++j) {
      z[j] = static_cast<double>((num1[j] + static_cast<long double>(num2[j])) / den);
    }
  }
  if (low_rank) {  // docs/SAU.md (14), (21): y = U z
    const int dv = spec.d_v;
    out.y_hat.assign(dv, 0.0);
    for (int j = 0; j < width; ++j) {
      Axpy(z[j], &params_->u[static_cast<size_t>(j) * dv], out.y_hat.data(), dv);
    }
  } else {
    out.y_hat = std::move(z);
  }
  // Seed 001 F1's last resort (docs/SAU.md, "The exact window"): a thin denominator, by
  // the regulator's measure (G1), is answered by exact softmax over the last keys.
  if (x != nullptr && st.window.size() > 0) {
    const double median = st.median_den.value();
    if (median > 0 && out.raw_den < Regulator::kThinFrac * median) {
      out.exact_window = st.window.Readout(x, spec.tau, st.regulator.gamma(), out.y_hat.data());
    }
  }
  out.rj_gap = HalfSplitGaps(num1, num2, den1, den2, floor, lambda, width).gap;
  out.margin = st.eprocess.margin();
  out.shr = raw + lambda > 0 ? static_cast<double>(raw / (raw + lambda)) : 1.0;
  double l1 = 0;
  for (int i = 0; i < r; ++i) l1 += std::abs(f[i]);
  out.phi_w_l1 = l1;
  return out;
}

void SauEstimator::SetLambdaNudge(LambdaNudge nudge) {
  assert(std::isfinite(nudge.factor) && nudge.factor >= 1.0);
  assert(std::isfinite(nudge.increment) && nudge.increment >= 0.0);
  nudge_ = nudge;
}

Digest SauEstimator::StateDigest() const {
  Sha256 h;
  h.Update(params_->features.digest().data(), params_->features.digest().size());
  state_.Hash(h);
  if (!nudge_.is_default()) {  // an unsteered estimator keeps the digest of docs/SAU.md
    h.Update("streamlearn.sau.lambda_nudge.v1");
    h.F64(nudge_.factor);
    h.F64(nudge_.increment);
  }
  return h.Finish();
}

}  // namespace streamlearn::sau
