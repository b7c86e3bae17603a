#include "core/sau/vla_memory.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "core/sau/kernels.h"
#include "core/sau/vector_check.h"

namespace streamlearn::sau {

absl::Status VlaMemory::Validate(const VlaSpec& spec) {
  if (spec.d < 1 || spec.d > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("vla: d = ", spec.d, " outside 1..4096"));
  }
  if (spec.d_v < 1 || spec.d_v > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("vla: d_v = ", spec.d_v, " outside 1..4096"));
  }
  if (!(spec.lambda0 > 0 && spec.lambda0 <= 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vla: lambda0 = ", spec.lambda0, " outside (0, 1e6]"));
  }
  if (!(spec.refresh_eta >= 0 && spec.refresh_eta <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vla: refresh_eta = ", spec.refresh_eta, " outside [0, 1]"));
  }
  if (!(spec.key_eps > 0 && spec.key_eps < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vla: key_eps = ", spec.key_eps, " outside (0, 1)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<VlaMemory> VlaMemory::Create(const VlaSpec& spec) {
  if (absl::Status st = Validate(spec); !st.ok()) return st;
  auto params = std::make_shared<Params>();
  params->spec = spec;
  return VlaMemory(std::move(params));
}

VlaMemory::VlaMemory(std::shared_ptr<const Params> params) : params_(std::move(params)) {
  const VlaSpec& sp = params_->spec;
  s_.assign(static_cast<size_t>(sp.d_v) * sp.d, 0.0);
  a_.assign(static_cast<size_t>(sp.d) * sp.d, 0.0);
  for (uint32_t i = 0; i < sp.d; ++i) a_[static_cast<size_t>(i) * sp.d + i] = 1.0 / sp.lambda0;
}

absl::Status VlaMemory::CheckWrite(std::span<const double> k, std::span<const double> v) const {
  if (absl::Status s = CheckEngineVector(k, spec().d, "k", "d"); !s.ok()) return s;
  return CheckEngineVector(v, spec().d_v, "v", "d_v");
}

absl::Status VlaMemory::CheckRead(std::span<const double> q) const {
  return CheckEngineVector(q, spec().d, "q", "d");
}

VlaWrite VlaMemory::Write(std::span<const double> k, std::span<const double> v) {
  const VlaSpec& sp = params_->spec;
  const int d = static_cast<int>(sp.d);
  VlaWrite out;
  const double norm = std::sqrt(Dot(k.data(), k.data(), d));
  if (!(norm >= sp.key_eps)) {
    ++skipped_;
    out.skipped = true;
    return out;
  }
  std::vector<double> kh(d), z(d);
  for (int i = 0; i < d; ++i) kh[i] = k[i] / norm;
  // (V1): z = A k^, delta = 1 + k^T z (>= 1 in exact arithmetic; the seed's clamp), and the
  // rank-1 downdate row by row. A_ij and A_ji subtract the same (z_i z_j) / delta (the product
  // commutes exactly), so A stays exactly symmetric with contiguous writes only.
  for (int i = 0; i < d; ++i) z[i] = Dot(&a_[static_cast<size_t>(i) * d], kh.data(), d);
  const double delta = std::max(1.0 + Dot(kh.data(), z.data(), d), 1e-4);
  const double inv_delta = 1.0 / delta;
  for (int i = 0; i < d; ++i) {
    const double zi = z[i];
    double* row = &a_[static_cast<size_t>(i) * d];
    for (int j = 0; j < d; ++j) row[j] -= (zi * z[j]) * inv_delta;
  }
  ++writes_;
  // (V2) and (V3): A_t k^ = z / delta, plus refresh_eta k^ after a refresh.
  std::vector<double> alpha(d);
  for (int i = 0; i < d; ++i) alpha[i] = z[i] * inv_delta;
  if (sp.refresh_period > 0 && writes_ % sp.refresh_period == 0 && sp.refresh_eta > 0) {
    for (int i = 0; i < d; ++i) a_[static_cast<size_t>(i) * d + i] += sp.refresh_eta;
    for (int i = 0; i < d; ++i) alpha[i] = std::fma(sp.refresh_eta, kh[i], alpha[i]);
    out.refreshed = true;
  }
  const double an = std::sqrt(Dot(alpha.data(), alpha.data(), d));
  // A is positive definite, so A k^ != 0 for a unit k^; a state that lost definiteness to
  // rounding would give an = 0, and then S is left alone.
  if (an > 0) {
    for (double& x : alpha) x /= an;
  }
  out.alpha_dot_k = an > 0 ? Dot(alpha.data(), kh.data(), d) : 0;
  // (V4): e = v - S k^, S += e alpha^T.
  double e2 = 0;
  for (uint32_t p = 0; p < sp.d_v; ++p) {
    double* row = &s_[static_cast<size_t>(p) * d];
    const double e = v[p] - Dot(row, kh.data(), d);
    e2 += e * e;
    if (an > 0) Axpy(e, alpha.data(), row, d);
  }
  out.residual_norm = std::sqrt(e2);
  return out;
}

std::vector<double> VlaMemory::Read(std::span<const double> q) const {
  const VlaSpec& sp = params_->spec;
  const int d = static_cast<int>(sp.d);
  std::vector<double> y(sp.d_v, 0.0);
  const double norm = std::sqrt(Dot(q.data(), q.data(), d));
  if (!(norm >= sp.key_eps)) return y;
  for (uint32_t p = 0; p < sp.d_v; ++p) {
    y[p] = Dot(&s_[static_cast<size_t>(p) * d], q.data(), d) / norm;
  }
  return y;
}

double VlaMemory::s_norm() const {
  return std::sqrt(Dot(s_.data(), s_.data(), static_cast<int>(s_.size())));
}

double VlaMemory::a_norm() const {
  return std::sqrt(Dot(a_.data(), a_.data(), static_cast<int>(a_.size())));
}

size_t VlaMemory::state_bytes() const {
  return (s_.size() + a_.size()) * sizeof(double) + sizeof(VlaMemory);
}

void VlaMemory::Hash(Sha256& h) const {
  h.Update("streamlearn.vla.state.v1");
  h.U64(writes_);
  h.U64(skipped_);
  h.F64s(s_);
  h.F64s(a_);
}

void VlaMemory::Encode(ByteWriter& w) const {
  w.U64(writes_);
  w.U64(skipped_);
  w.F64s(s_);
  w.F64s(a_);
}

absl::Status VlaMemory::Decode(ByteReader& r) {
  VlaMemory next(params_);
  RETURN_IF_ERROR(r.U64(&next.writes_));
  RETURN_IF_ERROR(r.U64(&next.skipped_));
  RETURN_IF_ERROR(r.F64sExact(&next.s_, "vla.S"));
  RETURN_IF_ERROR(r.F64sExact(&next.a_, "vla.A"));
  for (const auto& [xs, name] : {std::pair<const std::vector<double>*, const char*>{
                                     &next.s_, "vla.S"},
                                 {&next.a_, "vla.A"}}) {
    for (double x : *xs) {
      if (!std::isfinite(x)) {
        return absl::DataLossError(absl::StrCat("snapshot field ", name, " holds ", x));
      }
    }
  }
  const size_t d = spec().d;
  for (size_t i = 0; i < d; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (next.a_[i * d + j] != next.a_[j * d + i]) {
        return absl::DataLossError(
            absl::StrCat("snapshot field vla.A is not symmetric at (", i, ", ", j, ")"));
      }
    }
  }
  *this = std::move(next);
  return absl::OkStatus();
}

Digest VlaMemory::StateDigest() const {
  Sha256 h;
  Hash(h);
  return h.Finish();
}

}  // namespace streamlearn::sau
