#include "core/sau/memory.h"

#include <bit>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/byte_codec.h"
#include "core/common/status_macros.h"
#include "core/sau/kernels.h"
#include "core/sau/sau_snapshot.h"

namespace streamlearn::sau {
namespace {

constexpr std::string_view kMemorySnapshotKind = "streamlearn.memory";
constexpr uint32_t kSectionParams = 1;
constexpr uint32_t kSectionState = 2;

RidgeSpec RidgeSpecOf(const SauSpec& s) {
  return RidgeSpec{.d = static_cast<uint32_t>(s.d),
                   .d_v = static_cast<uint32_t>(s.d_v),
                   .gamma = s.ridge_engine.gamma,
                   .eps = s.ridge_engine.eps,
                   .filter_order = s.ridge_engine.filter_order};
}

VlaSpec VlaSpecOf(const SauSpec& s) {
  return VlaSpec{.d = static_cast<uint32_t>(s.d),
                 .d_v = static_cast<uint32_t>(s.d_v),
                 .lambda0 = s.vla_engine.lambda0,
                 .refresh_period = s.vla_engine.refresh_period,
                 .refresh_eta = s.vla_engine.refresh_eta,
                 .key_eps = s.vla_engine.key_eps};
}

// The parameters a ridge or vla snapshot was written under, named, in a fixed order.
std::vector<std::pair<std::string_view, double>> EngineParams(const SauSpec& s) {
  std::vector<std::pair<std::string_view, double>> p = {
      {"engine", static_cast<double>(s.engine)},
      {"d", static_cast<double>(s.d)},
      {"d_v", static_cast<double>(s.d_v)}};
  if (s.engine == Engine::kRidge) {
    p.insert(p.end(), {{"ridge.gamma", s.ridge_engine.gamma},
                       {"ridge.eps", s.ridge_engine.eps},
                       {"ridge.filter_order", static_cast<double>(s.ridge_engine.filter_order)}});
  } else {
    p.insert(p.end(), {{"vla.lambda0", s.vla_engine.lambda0},
                       {"vla.refresh_period", static_cast<double>(s.vla_engine.refresh_period)},
                       {"vla.refresh_eta", s.vla_engine.refresh_eta},
                       {"vla.key_eps", s.vla_engine.key_eps}});
  }
  return p;
}

absl::Status CheckBound(std::span<const double> xs, std::string_view field) {
  for (size_t i = 0; i < xs.size(); ++i) {
    if (std::fabs(xs[i]) > kEngineInputBound) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s[%d] = %g exceeds the input bound %g of the ridge and vla engines "
          "(docs/ENGINES.md, \"Input bounds\")",
          field, i, xs[i], kEngineInputBound));
    }
  }
  return absl::OkStatus();
}

bool AllFinite(const std::vector<double>& xs) {
  for (double x : xs) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

double FrobeniusNorm(const std::vector<double>& xs) {
  return std::sqrt(Dot(xs.data(), xs.data(), static_cast<int>(xs.size())));
}

}  // namespace

absl::Status Memory::Validate(const SauSpec& spec) {
  absl::Status st;
  switch (spec.engine) {
    case Engine::kPrf:
      return ValidateSpec(ResolveDefaults(spec));
    case Engine::kRidge:
      st = RidgeMemory::Validate(RidgeSpecOf(spec));
      break;
    case Engine::kVla:
      st = VlaMemory::Validate(VlaSpecOf(spec));
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("sau.engine: unknown engine ", static_cast<int>(spec.engine)));
  }
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("sau.", st.message()));
  return absl::OkStatus();
}

absl::StatusOr<Memory> Memory::Create(const SauSpec& spec) {
  switch (spec.engine) {
    case Engine::kPrf: {
      absl::StatusOr<SauEstimator> est = SauEstimator::Create(spec);
      if (!est.ok()) return est.status();
      return Memory(*std::move(est));
    }
    case Engine::kRidge: {
      absl::StatusOr<RidgeMemory> mem = RidgeMemory::Create(RidgeSpecOf(spec));
      if (!mem.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("sau.", mem.status().message()));
      }
      return Memory(spec, *std::move(mem));
    }
    case Engine::kVla: {
      absl::StatusOr<VlaMemory> mem = VlaMemory::Create(VlaSpecOf(spec));
      if (!mem.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("sau.", mem.status().message()));
      }
      return Memory(spec, *std::move(mem));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sau.engine: unknown engine ", static_cast<int>(spec.engine)));
}

Memory::Memory(SauEstimator prf) : spec_(prf.spec()), impl_(std::move(prf)) {}

absl::Status Memory::CheckEvent(std::span<const double> k, std::span<const double> v) const {
  return std::visit(
      [&](const auto& m) {
        if constexpr (std::is_same_v<std::decay_t<decltype(m)>, SauEstimator>) {
          return m.CheckEvent(k, v);
        } else {
          return m.CheckWrite(k, v);
        }
      },
      impl_);
}

absl::Status Memory::CheckQuery(std::span<const double> q) const {
  return std::visit(
      [&](const auto& m) {
        if constexpr (std::is_same_v<std::decay_t<decltype(m)>, SauEstimator>) {
          return m.CheckQuery(q);
        } else {
          return m.CheckRead(q);
        }
      },
      impl_);
}

absl::Status Memory::CheckEventBounds(std::span<const double> k,
                                      std::span<const double> v) const {
  if (const SauEstimator* e = prf()) return e->CheckEventBounds(k, v);
  RETURN_IF_ERROR(CheckBound(k, "k"));
  return CheckBound(v, "v");
}

absl::Status Memory::CheckQueryBounds(std::span<const double> q) const {
  if (const SauEstimator* e = prf()) return e->CheckQueryBounds(q);
  return CheckBound(q, "q");
}

EventDiagnostics Memory::Ingest(std::span<const double> k, std::span<const double> v) {
  EventDiagnostics d;
  if (SauEstimator* e = std::get_if<SauEstimator>(&impl_)) {
    d = e->Ingest(k, v);
  } else if (RidgeMemory* r = std::get_if<RidgeMemory>(&impl_)) {
    d.ridge = r->Write(k, v);
  } else {
    d.vla = std::get<VlaMemory>(impl_).Write(k, v);
  }
  return d;
}

EventDiagnostics Memory::IngestFrom(const Memory& src, std::span<const double> k,
                                    std::span<const double> v) {
  SauEstimator* dst = std::get_if<SauEstimator>(&impl_);
  const SauEstimator* from = src.prf();
  if (dst == nullptr || from == nullptr) {  // the other engines' states are small: copy
    *this = src;
    return Ingest(k, v);
  }
  spec_ = src.spec_;
  return dst->IngestFrom(*from, k, v);
}

QueryResult Memory::Query(std::span<const double> q, ReadoutPath path, bool low_rank) const {
  if (const SauEstimator* e = prf()) return e->Query(q, path, low_rank);
  QueryResult out;
  if (const RidgeMemory* r = ridge()) {
    RidgeReadout y = r->Read(q);
    out.y_hat = std::move(y.y);
    out.engine = EngineReadout{.lambda_min = y.lambda_min,
                               .lambda_max = y.lambda_max,
                               .condition = y.condition,
                               .residual = y.residual,
                               .jitter = y.jitter};
  } else {
    const VlaMemory& m = std::get<VlaMemory>(impl_);
    out.y_hat = m.Read(q);
    out.engine.s_norm = m.s_norm();
  }
  return out;
}

bool Memory::StateFinite() const {
  // ridge: within the input bounds every entry of G, C and M is a decayed sum of fewer than
  // 2^64 terms of at most 1e200 (docs/ENGINES.md, "Input bounds"), so only the scale is
  // checked. vla: A is positive definite and below A_0 plus the refreshes (Loewner order),
  // so only S, which a non-finite residual or an overflow of its own would reach, is
  // scanned; a non-finite value persists through later writes, so one scan per batch
  // catches any event of it.
  if (const RidgeMemory* r = ridge()) return std::isfinite(r->scale());
  if (const VlaMemory* m = vla()) return AllFinite(m->S());
  return true;
}

uint64_t Memory::events() const {
  if (const SauEstimator* e = prf()) return e->events();
  if (const RidgeMemory* r = ridge()) return r->writes();
  return vla()->writes() + vla()->skipped();
}

size_t Memory::state_bytes() const {
  return std::visit([](const auto& m) { return m.state_bytes(); }, impl_);
}

Digest Memory::StateDigest() const {
  return std::visit([](const auto& m) { return m.StateDigest(); }, impl_);
}

EngineStateSummary Memory::Summary() const {
  EngineStateSummary s;
  if (const RidgeMemory* r = ridge()) {
    s.writes = r->writes();
    s.scale = r->scale();
  } else if (const VlaMemory* m = vla()) {
    s.writes = m->writes();
    s.skipped = m->skipped();
    s.s_norm = m->s_norm();
    s.a_norm = FrobeniusNorm(m->A());
  }
  return s;
}

std::string Memory::Serialize() const {
  if (const SauEstimator* e = prf()) return SerializeSauState(*e);
  ByteWriter params;
  const auto named = EngineParams(spec_);
  params.U64(named.size());
  for (const auto& [name, value] : named) {
    params.Bytes(name);
    params.F64(value);
  }
  ByteWriter state;
  if (const RidgeMemory* r = ridge()) {
    r->Encode(state);
  } else {
    vla()->Encode(state);
  }
  SnapshotBuilder b(kMemorySnapshotKind);
  b.AddSection(kSectionParams, params.Take());
  b.AddSection(kSectionState, state.Take());
  return b.Finish();
}

absl::StatusOr<Memory> RestoreMemory(const SauSpec& spec, std::string_view bytes) {
  if (spec.engine == Engine::kPrf) {
    absl::StatusOr<SauEstimator> est = RestoreSau(spec, bytes);
    if (!est.ok()) return est.status();
    return Memory(*std::move(est));
  }
  absl::StatusOr<Memory> mem = Memory::Create(spec);
  if (!mem.ok()) return mem.status();
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes, kMemorySnapshotKind);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::string_view> params_bytes = c->Section(kSectionParams);
  if (!params_bytes.ok()) return params_bytes.status();
  absl::StatusOr<std::string_view> state_bytes = c->Section(kSectionState);
  if (!state_bytes.ok()) return state_bytes.status();

  ByteReader pr(*params_bytes);
  uint64_t count = 0;
  RETURN_IF_ERROR(pr.U64(&count));
  const auto want = EngineParams(mem->spec());
  // The engine first, so a snapshot of another engine says so.
  for (uint64_t i = 0; i < count; ++i) {
    std::string_view name;
    double got = 0;
    RETURN_IF_ERROR(pr.BytesView(&name));
    RETURN_IF_ERROR(pr.F64(&got));
    if (i >= want.size() || name != want[i].first) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "memory snapshot: parameter '%s' found where '%s' was expected", name,
          i < want.size() ? want[i].first : "the end"));
    }
    if (std::bit_cast<uint64_t>(got) != std::bit_cast<uint64_t>(want[i].second)) {
      if (i == 0) {
        const char* written = got == 1.0 ? "ridge" : got == 2.0 ? "vla" : "unknown";
        return absl::FailedPreconditionError(absl::StrFormat(
            "memory snapshot: written by engine %s (%.17g), the spec names engine %s", written,
            got, EngineName(spec.engine)));
      }
      return absl::FailedPreconditionError(absl::StrFormat(
          "memory snapshot: parameter %s is %.17g in the snapshot, %.17g in the spec", name, got,
          want[i].second));
    }
  }
  if (count != want.size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "memory snapshot: %d parameters stored, the spec has %d", count, want.size()));
  }
  RETURN_IF_ERROR(pr.ExpectDone("memory snapshot parameters"));

  ByteReader sr(*state_bytes);
  if (mem->engine() == Engine::kRidge) {
    RETURN_IF_ERROR(std::get<RidgeMemory>(mem->impl_).Decode(sr));
  } else {
    RETURN_IF_ERROR(std::get<VlaMemory>(mem->impl_).Decode(sr));
  }
  RETURN_IF_ERROR(sr.ExpectDone("memory snapshot state"));
  return mem;
}

}  // namespace streamlearn::sau
