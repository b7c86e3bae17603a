#include "core/sau/ridge_memory.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/common/mutex.h"
#include "core/sau/dense_kernels.h"
#include "core/sau/kernels.h"
#include "core/sau/vector_check.h"

namespace streamlearn::sau {

// What a query needs of a state beyond the state itself: computed once per state.
struct RidgeMemory::Factor {
  bool empty = true;          // no key with a non-zero norm yet: every readout is zero
  std::vector<double> gs;     // G~ = G/s + (eps + jitter) I, row-major (for the residual)
  CholeskyFactor chol;        // G~ = L L^T
  std::vector<double> aw;     // A_w after the spectral normalisation, row-major (K > 0)
  double jitter = 0;
  double lambda_min = 0, lambda_max = 0;
};

class RidgeMemory::FactorCache {
 public:
  // The factor of `mem`'s state, computed at the first call.
  std::shared_ptr<const Factor> Get(const RidgeMemory& mem) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    if (factor_ == nullptr) factor_ = std::make_shared<const Factor>(mem.ComputeFactor());
    return factor_;
  }
  // Only by the one writer that holds the sole reference.
  void Invalidate() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    factor_ = nullptr;
  }

 private:
  Mutex mu_;
  std::shared_ptr<const Factor> factor_ ABSL_GUARDED_BY(mu_);
};


absl::Status RidgeMemory::Validate(const RidgeSpec& spec) {
  if (spec.d < 1 || spec.d > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("ridge: d = ", spec.d, " outside 1..4096"));
  }
  if (spec.d_v < 1 || spec.d_v > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("ridge: d_v = ", spec.d_v, " outside 1..4096"));
  }
  if (!(spec.gamma > 0 && spec.gamma <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ridge: gamma = ", spec.gamma, " outside (0, 1]"));
  }
  if (!(spec.eps > 0 && spec.eps <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("ridge: eps = ", spec.eps, " outside (0, 1]"));
  }
  if (spec.filter_order > kMaxFilterOrder) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ridge: filter_order = ", spec.filter_order, " above ", kMaxFilterOrder));
  }
  return absl::OkStatus();
}

absl::StatusOr<RidgeMemory> RidgeMemory::Create(const RidgeSpec& spec) {
  if (absl::Status st = Validate(spec); !st.ok()) return st;
  auto params = std::make_shared<Params>();
  params->spec = spec;
  return RidgeMemory(std::move(params));
}

RidgeMemory::RidgeMemory(std::shared_ptr<const Params> params)
    : params_(std::move(params)), cache_(std::make_shared<FactorCache>()) {
  const RidgeSpec& sp = params_->spec;
  const size_t dd = static_cast<size_t>(sp.d) * sp.d;
  g_.assign(dd, 0.0);
  g_c_.assign(dd, 0.0);
  c_.assign(static_cast<size_t>(sp.d_v) * sp.d, 0.0);
  c_c_.assign(c_.size(), 0.0);
  if (sp.filter_order > 0) {
    m_.assign(dd, 0.0);
    m_c_.assign(dd, 0.0);
    prev_.assign(sp.d, 0.0);
  }
}

absl::Status RidgeMemory::CheckWrite(std::span<const double> k,
                                     std::span<const double> v) const {
  if (absl::Status s = CheckEngineVector(k, spec().d, "k", "d"); !s.ok()) return s;
  return CheckEngineVector(v, spec().d_v, "v", "d_v");
}

absl::Status RidgeMemory::CheckRead(std::span<const double> q) const {
  return CheckEngineVector(q, spec().d, "q", "d");
}

RidgeWrite RidgeMemory::Write(std::span<const double> k, std::span<const double> v) {
  const RidgeSpec& sp = params_->spec;
  const int d = static_cast<int>(sp.d);
  // G += k k^T row by row: G_ij and G_ji are the same product, so G stays exactly symmetric.
  for (int i = 0; i < d; ++i) {
    CompensatedDecayAdd(sp.gamma, k[i], k.data(), &g_[static_cast<size_t>(i) * d],
                        &g_c_[static_cast<size_t>(i) * d], d);
  }
  for (uint32_t p = 0; p < sp.d_v; ++p) {
    CompensatedDecayAdd(sp.gamma, v[p], k.data(), &c_[static_cast<size_t>(p) * d],
                        &c_c_[static_cast<size_t>(p) * d], d);
  }
  if (sp.filter_order > 0) {
    // M += k_t k_(t-1)^T; the first key has no predecessor (a zero one: M only decays).
    for (int i = 0; i < d; ++i) {
      CompensatedDecayAdd(sp.gamma, has_prev_ ? k[i] : 0.0, prev_.data(),
                          &m_[static_cast<size_t>(i) * d], &m_c_[static_cast<size_t>(i) * d],
                          d);
    }
    std::copy(k.begin(), k.end(), prev_.begin());
    has_prev_ = true;
  }
  const double n2 = Dot(k.data(), k.data(), d);
  scale_ = std::max(scale_, n2);
  ++writes_;
  // The published version may share the cache: a fresh one then; else empty ours.
  if (cache_.use_count() == 1) {
    cache_->Invalidate();
  } else {
    cache_ = std::make_shared<FactorCache>();
  }
  return {.key_norm2 = n2, .scale = scale_};
}

RidgeMemory::Factor RidgeMemory::ComputeFactor() const {
  const RidgeSpec& sp = params_->spec;
  const int d = static_cast<int>(sp.d);
  Factor f;
  if (!(scale_ > 0)) return f;
  f.empty = false;
  const double inv_s = 1.0 / scale_;
  f.gs.resize(static_cast<size_t>(d) * d);
  for (size_t i = 0; i < f.gs.size(); ++i) f.gs[i] = (g_[i] + g_c_[i]) * inv_s;
  // eps, then the jittered fallbacks of seed 003 sec. 3.2.3 (in G~'s scaled units).
  static constexpr double kJitter[] = {0.0, 1e-4, 1e-2, 1.0};
  std::vector<double> a(f.gs.size());
  for (double jitter : kJitter) {
    a = f.gs;
    for (int i = 0; i < d; ++i) a[static_cast<size_t>(i) * d + i] += sp.eps + jitter;
    if (Cholesky(a, d, &f.chol)) {
      f.jitter = jitter;
      f.gs = std::move(a);
      break;
    }
  }
  // A positive definite matrix with an entry above 1e300 (a state no bounded input reaches)
  // fails all four: the readout is then zero, with lambda_min = 0 saying why.
  if (f.chol.l.empty()) {
    f.empty = true;
    return f;
  }
  f.lambda_max = LargestEigenvalue(f.gs, d);
  f.lambda_min = SmallestEigenvalue(f.chol);
  if (sp.filter_order > 0) {
    // A_w = L^-1 (M/s) L^-T (seed 003 (22)), then divided by max(1, sigma_max) ((12): 6 power
    // iterations, with gamma and eta of the learned model fixed at 1).
    std::vector<double> ms(m_.size());
    for (size_t i = 0; i < ms.size(); ++i) ms[i] = (m_[i] + m_c_[i]) * inv_s;
    f.aw = WhitenedOperator(f.chol, ms);
    const double sigma = SpectralNorm(f.aw, d, /*iterations=*/6);
    if (sigma > 1) {
      for (double& x : f.aw) x /= sigma;
    }
  }
  return f;
}

std::shared_ptr<const RidgeMemory::Factor> RidgeMemory::GetFactor() const {
  return cache_->Get(*this);
}

RidgeReadout RidgeMemory::Read(std::span<const double> q) const {
  const RidgeSpec& sp = params_->spec;
  const int d = static_cast<int>(sp.d);
  RidgeReadout out;
  out.y.assign(sp.d_v, 0.0);
  const std::shared_ptr<const Factor> f = GetFactor();
  if (f->empty) return out;
  out.lambda_min = f->lambda_min;
  out.lambda_max = f->lambda_max;
  out.condition = f->lambda_min > 0 ? f->lambda_max / f->lambda_min : 0;
  out.jitter = f->jitter;
  const double inv_nu = 1.0 / std::sqrt(scale_);
  // b: the scaled query, or with the filter L A_w^K L^-1 q/nu; then x = G~^-1 b.
  std::vector<double> b(q.size());
  for (int i = 0; i < d; ++i) b[i] = q[i] * inv_nu;
  if (sp.filter_order > 0) {
    std::vector<double> w = ForwardSolve(f->chol, b), next(d);
    for (uint32_t step = 0; step < sp.filter_order; ++step) {
      for (int i = 0; i < d; ++i) next[i] = Dot(&f->aw[static_cast<size_t>(i) * d], w.data(), d);
      w.swap(next);
    }
    b = LowerTimes(f->chol, w);
  }
  const std::vector<double> x = CholeskySolve(f->chol, b);
  // y = (C / nu) x
  for (uint32_t p = 0; p < sp.d_v; ++p) {
    const size_t row = static_cast<size_t>(p) * d;
    out.y[p] = (Dot(&c_[row], x.data(), d) + Dot(&c_c_[row], x.data(), d)) * inv_nu;
  }
  const double bn = std::sqrt(Dot(b.data(), b.data(), d));
  if (bn > 0) {
    double r2 = 0;
    for (int i = 0; i < d; ++i) {
      const double ri = Dot(&f->gs[static_cast<size_t>(i) * d], x.data(), d) - b[i];
      r2 += ri * ri;
    }
    out.residual = std::sqrt(r2) / bn;
    if (!std::isfinite(out.residual)) {
      // ||b||^2 overflowed (a query far longer than the keys): the same ratio with both sides
      // divided by max |b_i|, so that a diagnostic of a finite readout is never NaN.
      double bmax = 0;
      for (double v : b) bmax = std::max(bmax, std::abs(v));
      double r2s = 0, b2s = 0;
      for (int i = 0; i < d; ++i) {
        const double ri = Dot(&f->gs[static_cast<size_t>(i) * d], x.data(), d) / bmax -
                          b[i] / bmax;
        r2s += ri * ri;
        b2s += (b[i] / bmax) * (b[i] / bmax);
      }
      out.residual = std::sqrt(r2s / b2s);
    }
  }
  return out;
}

size_t RidgeMemory::state_bytes() const {
  return (g_.size() + g_c_.size() + c_.size() + c_c_.size() + m_.size() + m_c_.size() +
          prev_.size()) *
             sizeof(double) +
         sizeof(RidgeMemory);
}

void RidgeMemory::Hash(Sha256& h) const {
  h.Update("streamlearn.ridge.state.v1");
  h.U64(writes_);
  h.F64(scale_);
  h.F64s(g_);
  h.F64s(g_c_);
  h.F64s(c_);
  h.F64s(c_c_);
  h.F64s(m_);
  h.F64s(m_c_);
  h.F64s(prev_);
  h.U64(has_prev_ ? 1 : 0);
}

void RidgeMemory::Encode(ByteWriter& w) const {
  w.U64(writes_);
  w.F64(scale_);
  for (const std::vector<double>* xs : {&g_, &g_c_, &c_, &c_c_, &m_, &m_c_, &prev_}) w.F64s(*xs);
  w.U8(has_prev_ ? 1 : 0);
}

absl::Status RidgeMemory::Decode(ByteReader& r) {
  RidgeMemory next(params_);
  RETURN_IF_ERROR(r.U64(&next.writes_));
  RETURN_IF_ERROR(r.F64(&next.scale_));
  const std::pair<std::vector<double>*, const char*> fields[] = {
      {&next.g_, "ridge.G"},   {&next.g_c_, "ridge.G_c"}, {&next.c_, "ridge.C"},
      {&next.c_c_, "ridge.C_c"}, {&next.m_, "ridge.M"},   {&next.m_c_, "ridge.M_c"},
      {&next.prev_, "ridge.prev"}};
  for (const auto& [xs, name] : fields) {
    RETURN_IF_ERROR(r.F64sExact(xs, name));
    for (double x : *xs) {
      if (!std::isfinite(x)) {
        return absl::DataLossError(absl::StrCat("snapshot field ", name, " holds ", x));
      }
    }
  }
  uint8_t has_prev = 0;
  RETURN_IF_ERROR(r.U8(&has_prev));
  if (!std::isfinite(next.scale_) || next.scale_ < 0 || has_prev > 1 ||
      (has_prev == 1 && spec().filter_order == 0)) {
    return absl::DataLossError("snapshot field ridge.scale or ridge.has_prev is invalid");
  }
  next.has_prev_ = has_prev == 1;
  const size_t d = spec().d;
  for (size_t i = 0; i < d; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (next.g_[i * d + j] != next.g_[j * d + i] ||
          next.g_c_[i * d + j] != next.g_c_[j * d + i]) {
        return absl::DataLossError(
            absl::StrCat("snapshot field ridge.G is not symmetric at (", i, ", ", j, ")"));
      }
    }
  }
  *this = std::move(next);
  return absl::OkStatus();
}

Digest RidgeMemory::StateDigest() const {
  Sha256 h;
  Hash(h);
  return h.Finish();
}

namespace {
std::vector<double> Sum(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}
}  // namespace

std::vector<double> RidgeMemory::G() const { return Sum(g_, g_c_); }
std::vector<double> RidgeMemory::C() const { return Sum(c_, c_c_); }
std::vector<double> RidgeMemory::M() const { return Sum(m_, m_c_); }

}  // namespace streamlearn::sau
