#include "core/sau/sau_snapshot.h"

#include <bit>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/common/byte_codec.h"
#include "core/common/digest.h"
#include "core/common/status_macros.h"

namespace streamlearn::sau {

// Reaches the private state of the SAU's components (friend of each).
struct SauSnapshotAccess {
  static SauState& State(SauEstimator& est) { return est.state_; }
  static LambdaNudge& Nudge(SauEstimator& est) { return est.nudge_; }

  static void Write(ByteWriter& w, const WhiteningStats& x) {
    w.U64(x.n_);
    w.F64s(x.mu_);
    w.F64s(x.sig2_);
  }
  static absl::Status Read(ByteReader& r, WhiteningStats& x) {
    absl::Status s = r.U64(&x.n_);
    if (s.ok()) s = r.F64sExact(&x.mu_, "whitening.mu");
    if (s.ok()) s = r.F64sExact(&x.sig2_, "whitening.sig2");
    return s;
  }

  static void Write(ByteWriter& w, const MixtureEProcess& x) {
    w.U64(x.observed_);
    w.U64(x.z_count_);
    w.F64s(x.mu_);
    w.F64s(x.v_);
    w.F64(x.zbar_);
    w.F64(x.nu2_);
    w.F64(x.zmax_);
    w.F64s(x.log_e_);
    w.U64(x.epoch_);
    w.U64(x.epoch_events_);
    w.U8(x.restart_pending_ ? 1 : 0);
    w.F64(x.log_e_mix_);
    w.F64(x.margin_);
  }
  static absl::Status Read(ByteReader& r, MixtureEProcess& x) {
    absl::Status s = r.U64(&x.observed_);
    if (s.ok()) s = r.U64(&x.z_count_);
    if (s.ok()) s = r.F64sExact(&x.mu_, "eprocess.mu");
    if (s.ok()) s = r.F64sExact(&x.v_, "eprocess.v");
    if (s.ok()) s = r.F64(&x.zbar_);
    if (s.ok()) s = r.F64(&x.nu2_);
    if (s.ok()) s = r.F64(&x.zmax_);
    if (s.ok()) s = r.F64sExact(&x.log_e_, "eprocess.log_e");
    if (s.ok()) s = r.U64(&x.epoch_);
    if (s.ok()) s = r.U64(&x.epoch_events_);
    uint8_t pending = 0;
    if (s.ok()) s = r.U8(&pending);
    if (s.ok() && pending > 1) {
      return absl::DataLossError(
          absl::StrFormat("SAU snapshot: eprocess.restart_pending is %d, not 0 or 1", pending));
    }
    x.restart_pending_ = pending == 1;
    if (s.ok()) s = r.F64(&x.log_e_mix_);
    if (s.ok()) s = r.F64(&x.margin_);
    return s;
  }

  static void Write(ByteWriter& w, const RjWindow& x) { w.U32(x.bits_); }
  static absl::Status Read(ByteReader& r, RjWindow& x) {
    uint32_t bits = 0;
    RETURN_IF_ERROR(r.U32(&bits));
    if ((bits & ~uint32_t{RjWindow::kMask}) != 0) {
      return absl::DataLossError(
          absl::StrFormat("SAU snapshot: RJ window bits 0x%x exceed the window", bits));
    }
    x.bits_ = static_cast<uint16_t>(bits);
    return absl::OkStatus();
  }

  static void Write(ByteWriter& w, const FloorPolicy& x) {
    w.F64(x.floor_);
    w.U64(x.since_trigger_);
  }
  static absl::Status Read(ByteReader& r, FloorPolicy& x) {
    absl::Status s = r.F64(&x.floor_);
    if (s.ok()) s = r.U64(&x.since_trigger_);
    return s;
  }

  static void Write(ByteWriter& w, const Regulator& x) {
    w.F64(x.gamma_);
    w.U32(static_cast<uint32_t>(x.level_));
    w.F64(x.c_hi_);
    w.U32(static_cast<uint32_t>(x.block_events_));
    w.U32(static_cast<uint32_t>(x.thin_));
    w.U64(x.healthy_blocks_);
    w.U64(x.epoch_clipped_hi_);
    w.U64(x.epoch_features_);
    w.U64(x.gamma_raises_);
    w.U64(x.gamma_lowers_);
    w.U64(x.c_hi_raises_);
  }
  // Checks every field against the spec's ranges: a restored regulator acts as a live one.
  static absl::Status Read(ByteReader& r, const SauSpec& spec, Regulator& x) {
    uint32_t level = 0, block = 0, thin = 0;
    absl::Status s = r.F64(&x.gamma_);
    if (s.ok()) s = r.U32(&level);
    if (s.ok()) s = r.F64(&x.c_hi_);
    if (s.ok()) s = r.U32(&block);
    if (s.ok()) s = r.U32(&thin);
    if (s.ok()) s = r.U64(&x.healthy_blocks_);
    if (s.ok()) s = r.U64(&x.epoch_clipped_hi_);
    if (s.ok()) s = r.U64(&x.epoch_features_);
    if (s.ok()) s = r.U64(&x.gamma_raises_);
    if (s.ok()) s = r.U64(&x.gamma_lowers_);
    if (s.ok()) s = r.U64(&x.c_hi_raises_);
    if (!s.ok()) return s;
    const double gamma_top = spec.regulate_gamma ? spec.gamma_max : spec.gamma;
    const uint64_t top_level = spec.regulate_gamma ? Regulator::TopLevel(spec) : 0;
    if (level > top_level || x.gamma_raises_ < x.gamma_lowers_ ||
        x.gamma_raises_ - x.gamma_lowers_ != level ||
        std::bit_cast<uint64_t>(x.gamma_) !=
            std::bit_cast<uint64_t>(Regulator::GammaAt(spec, static_cast<int>(level)))) {
      return absl::DataLossError(absl::StrFormat(
          "SAU snapshot: regulated gamma %.17g at level %d (after %d widenings and %d steps "
          "back) is not a level of the spec (gamma %.17g, at most %.17g)",
          x.gamma_, level, x.gamma_raises_, x.gamma_lowers_, spec.gamma, gamma_top));
    }
    x.level_ = static_cast<int>(level);
    // c_hi after its raises, each one step from the spec's towards the cap.
    double want_c_hi = spec.c_hi;
    bool c_hi_ok = x.c_hi_raises_ == 0 || spec.regulate_clip;
    for (uint64_t i = 0; c_hi_ok && i < x.c_hi_raises_; ++i) {
      c_hi_ok = want_c_hi < spec.c_hi_max && i < (uint64_t{1} << 20);
      want_c_hi = std::min(spec.c_hi_max, want_c_hi + ClipStep(spec));
    }
    if (!c_hi_ok || std::bit_cast<uint64_t>(x.c_hi_) != std::bit_cast<uint64_t>(want_c_hi)) {
      return absl::DataLossError(absl::StrFormat(
          "SAU snapshot: regulated c_hi %.17g is not the spec's c_hi %.17g after %d raises",
          x.c_hi_, spec.c_hi, x.c_hi_raises_));
    }
    if (block >= static_cast<uint32_t>(Regulator::kBlock) || thin > block ||
        x.healthy_blocks_ > x.Cooldown() || (level == 0 && x.healthy_blocks_ != 0) ||
        x.epoch_clipped_hi_ > x.epoch_features_) {
      return absl::DataLossError(absl::StrFormat(
          "SAU snapshot: regulator counters (block %d, thin %d, healthy %d, clipped %d of %d) "
          "are inconsistent",
          block, thin, x.healthy_blocks_, x.epoch_clipped_hi_, x.epoch_features_));
    }
    x.block_events_ = static_cast<int>(block);
    x.thin_ = static_cast<int>(thin);
    return absl::OkStatus();
  }

  // The window's entries oldest first (its slots are not part of the state).
  static void Write(ByteWriter& w, const ExactWindow& x) {
    w.U32(static_cast<uint32_t>(x.n_));
    for (int i = 0; i < x.n_; ++i) {
      for (int l = 0; l < x.d_; ++l) w.F64(x.key(i)[l]);
      for (int j = 0; j < x.dv_; ++j) w.F64(x.value(i)[j]);
    }
  }
  // Every entry within what an ingest could have put there: a conditioned key (norm a in
  // L2-scaled mode, entries within kInputBound raw) and a value within the value bound.
  static absl::Status Read(ByteReader& r, const SauSpec& spec, ExactWindow& x) {
    uint32_t n = 0;
    RETURN_IF_ERROR(r.U32(&n));
    if (n > static_cast<uint32_t>(x.cap_)) {
      return absl::DataLossError(absl::StrFormat(
          "SAU snapshot: the exact window holds %d entries, the spec keeps %d", n, x.cap_));
    }
    std::vector<double> k(static_cast<size_t>(x.d_)), v(static_cast<size_t>(x.dv_));
    for (uint32_t i = 0; i < n; ++i) {
      for (double& e : k) RETURN_IF_ERROR(r.F64(&e));
      for (double& e : v) RETURN_IF_ERROR(r.F64(&e));
      double norm2 = 0, key_max = 0, value_max = 0;
      bool finite = true;
      for (const double e : k) {
        finite = finite && std::isfinite(e);
        norm2 += e * e;
        key_max = std::max(key_max, std::abs(e));
      }
      for (const double e : v) {
        finite = finite && std::isfinite(e);
        value_max = std::max(value_max, std::abs(e));
      }
      const bool key_ok = spec.input_mode == InputMode::kL2Scaled
                              ? std::sqrt(norm2) <= spec.input_scale * (1 + 1e-9)
                              : key_max <= SauEstimator::kInputBound;
      if (!finite || !key_ok || value_max > ValueBound(spec)) {
        return absl::DataLossError(absl::StrFormat(
            "SAU snapshot: exact window entry %d is not one an event could have left (key norm "
            "%g, largest value %g)",
            i, std::sqrt(norm2), value_max));
      }
      x.Push(k.data(), v.data());
    }
    return absl::OkStatus();
  }

  static void Write(ByteWriter& w, const StreamingMedian& x) { w.F64(x.value_); }
  static absl::Status Read(ByteReader& r, StreamingMedian& x) { return r.F64(&x.value_); }
};

namespace {

// The spec parameters that drive the state's evolution or the readouts, as (name, value)
// pairs; integers and enums as exact doubles. W's own parameters (d, r, seed, kind) are covered
// by the W digest too, but are listed so that a mismatch can be named.
std::vector<std::pair<std::string, double>> SpecParams(const SauSpec& s) {
  std::vector<std::pair<std::string, double>> p = {
      {"d", s.d},
      {"d_v", s.d_v},
      {"r", s.r},
      {"r_v", s.r_v},
      {"tau", s.tau},
      {"gamma", s.gamma},
      {"features", static_cast<double>(s.features)},
      {"antithetic", s.antithetic ? 1.0 : 0.0},
      {"input_mode", static_cast<double>(s.input_mode)},
      {"input_scale", s.input_scale},
      {"c_lo", s.c_lo},
      {"c_hi", s.c_hi},
      {"beta_mu", s.beta_mu},
      {"beta_sigma", s.beta_sigma},
      {"whiten_eps", s.whiten_eps},
      {"alpha", s.alpha},
      {"kappa", s.kappa},
      {"xi", s.xi},
      {"beta_tilde", s.beta_tilde},
      {"beta_envelope", s.beta_envelope},
      {"warmup", s.warmup},
      {"epoch_length", s.epoch_length},
      {"log_e_floor", s.log_e_floor},
      {"c_rj", s.c_rj},
      {"rj_delta", s.rj_delta},
      {"beta_floor", s.beta_floor},
      {"red_floor_frac", s.red_floor_frac},
      {"max_floor_frac", s.max_floor_frac},
      {"floor_cooldown", s.floor_cooldown},
      {"floor_decay", s.floor_decay},
      {"tilts.size", static_cast<double>(s.tilts.size())},
      {"ridge.size", static_cast<double>(s.ridge.size())},
  };
  // Listed only when switched on, so that snapshots from before self-regulation restore.
  if (s.regulate_gamma) p.emplace_back("gamma_max", s.gamma_max);
  if (s.regulate_clip) p.emplace_back("c_hi_max", s.c_hi_max);
  if (s.exact_window > 0) p.emplace_back("exact_window", s.exact_window);
  for (size_t i = 0; i < s.tilts.size(); ++i) {
    p.emplace_back(absl::StrFormat("tilts[%d]", i), s.tilts[i]);
  }
  for (size_t i = 0; i < s.ridge.size(); ++i) {
    p.emplace_back(absl::StrFormat("ridge[%d]", i), s.ridge[i]);
  }
  return p;
}

Digest UDigest(const std::vector<double>& u) {
  Sha256 h;
  h.Update("streamlearn.sau.u.v1");
  h.F64s(u);
  return h.Finish();
}

std::string_view DigestBytes(const Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace

std::string SerializeSauState(const SauEstimator& est) {
  ByteWriter params;
  params.Bytes(DigestBytes(est.w_digest()));
  params.Bytes(DigestBytes(UDigest(est.u())));
  params.U64(est.spec().seed);
  const auto spec_params = SpecParams(est.spec());
  params.U64(spec_params.size());
  for (const auto& [name, value] : spec_params) {
    params.Bytes(name);
    params.F64(value);
  }

  const SauState& st = est.state();
  ByteWriter w;
  w.U64(st.events);
  w.F64s(st.R);
  w.F64s(st.R_c);
  w.F64s(st.s);
  w.F64s(st.s_c);
  w.F64s(st.H);
  w.F64s(st.H_c);
  SauSnapshotAccess::Write(w, st.whitening);
  SauSnapshotAccess::Write(w, st.eprocess);
  SauSnapshotAccess::Write(w, st.rj);
  SauSnapshotAccess::Write(w, st.floor);
  SauSnapshotAccess::Write(w, st.median_den);
  w.F64(st.lambda_star);
  w.U64(st.clipped);
  w.U64(st.features);
  w.F64(st.max_exponent);
  w.U64(st.den_below_floor);
  w.F64(st.den_min);

  ByteWriter control;
  control.F64(est.lambda_nudge().factor);
  control.F64(est.lambda_nudge().increment);

  SnapshotBuilder b(kSauSnapshotKind);
  b.AddSection(kSauSectionParams, params.Take());
  b.AddSection(kSauSectionState, w.Take());
  b.AddSection(kSauSectionControl, control.Take());
  if (st.regulator.enabled()) {
    ByteWriter reg;
    SauSnapshotAccess::Write(reg, st.regulator);
    b.AddSection(kSauSectionRegulator, reg.Take());
  }
  if (st.window.capacity() > 0) {
    ByteWriter win;
    SauSnapshotAccess::Write(win, st.window);
    b.AddSection(kSauSectionWindow, win.Take());
  }
  return b.Finish();
}

absl::StatusOr<SauEstimator> RestoreSau(const SauSpec& spec, std::string_view bytes) {
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes, kSauSnapshotKind);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::string_view> params_bytes = c->Section(kSauSectionParams);
  if (!params_bytes.ok()) return params_bytes.status();
  absl::StatusOr<std::string_view> state_bytes = c->Section(kSauSectionState);
  if (!state_bytes.ok()) return state_bytes.status();

  absl::StatusOr<SauEstimator> est = SauEstimator::Create(spec);
  if (!est.ok()) return est.status();

  // Parameters: W first (the identity of the model), then U, then the named spec fields.
  ByteReader pr(*params_bytes);
  std::string_view w_digest, u_digest;
  uint64_t seed = 0, count = 0;
  absl::Status s = pr.BytesView(&w_digest);
  if (s.ok()) s = pr.BytesView(&u_digest);
  if (s.ok()) s = pr.U64(&seed);
  if (s.ok()) s = pr.U64(&count);
  if (!s.ok()) return s;
  if (w_digest != DigestBytes(est->w_digest())) {
    Digest stored{};
    if (w_digest.size() == stored.size()) {
      std::copy(w_digest.begin(), w_digest.end(), reinterpret_cast<char*>(stored.data()));
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "SAU snapshot: W digest mismatch: the snapshot's W has digest %s (seed %d), the spec "
        "(seed %d) draws %s",
        ToHex(stored), seed, spec.seed, ToHex(est->w_digest())));
  }
  if (u_digest != DigestBytes(UDigest(est->u()))) {
    return absl::FailedPreconditionError(
        "SAU snapshot: U digest mismatch: the spec's low-rank U differs from the snapshot's");
  }
  const auto want = SpecParams(est->spec());
  if (count != want.size()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "SAU snapshot: %d spec parameters stored, the spec has %d", count, want.size()));
  }
  for (const auto& [name, value] : want) {
    std::string_view got_name;
    double got = 0;
    s = pr.BytesView(&got_name);
    if (s.ok()) s = pr.F64(&got);
    if (!s.ok()) return s;
    if (got_name != name) {
      return absl::DataLossError(absl::StrFormat(
          "SAU snapshot: spec parameter '%s' found where '%s' was expected", got_name, name));
    }
    if (std::bit_cast<uint64_t>(got) != std::bit_cast<uint64_t>(value)) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "SAU snapshot: spec parameter %s is %.17g in the snapshot, %.17g in the spec", name,
          got, value));
    }
  }
  if (s = pr.ExpectDone("SAU parameter section"); !s.ok()) return s;

  // State: into a copy, so that a failure leaves nothing half-restored.
  SauState st = est->state();
  ByteReader r(*state_bytes);
  s = r.U64(&st.events);
  if (s.ok()) s = r.F64sExact(&st.R, "R");
  if (s.ok()) s = r.F64sExact(&st.R_c, "R_c");
  if (s.ok()) s = r.F64sExact(&st.s, "s");
  if (s.ok()) s = r.F64sExact(&st.s_c, "s_c");
  if (s.ok()) s = r.F64sExact(&st.H, "H");
  if (s.ok()) s = r.F64sExact(&st.H_c, "H_c");
  if (s.ok()) s = SauSnapshotAccess::Read(r, st.whitening);
  if (s.ok()) s = SauSnapshotAccess::Read(r, st.eprocess);
  if (s.ok()) s = SauSnapshotAccess::Read(r, st.rj);
  if (s.ok()) s = SauSnapshotAccess::Read(r, st.floor);
  if (s.ok()) s = SauSnapshotAccess::Read(r, st.median_den);
  if (s.ok()) s = r.F64(&st.lambda_star);
  if (s.ok()) s = r.U64(&st.clipped);
  if (s.ok()) s = r.U64(&st.features);
  if (s.ok()) s = r.F64(&st.max_exponent);
  if (s.ok()) s = r.U64(&st.den_below_floor);
  if (s.ok()) s = r.F64(&st.den_min);
  if (s.ok()) s = r.ExpectDone("SAU state section");
  if (!s.ok()) return s;

  LambdaNudge nudge;
  for (const auto& [tag, payload] : c->sections()) {
    if (tag != kSauSectionControl) continue;
    ByteReader cr(payload);
    s = cr.F64(&nudge.factor);
    if (s.ok()) s = cr.F64(&nudge.increment);
    if (s.ok()) s = cr.ExpectDone("SAU control section");
    if (!s.ok()) return s;
    if (!(std::isfinite(nudge.factor) && nudge.factor >= 1.0 && std::isfinite(nudge.increment) &&
          nudge.increment >= 0.0)) {
      return absl::DataLossError(absl::StrFormat(
          "SAU snapshot: lambda nudge (factor %g, increment %g) is out of range", nudge.factor,
          nudge.increment));
    }
    break;
  }
  if (st.regulator.enabled()) {
    absl::StatusOr<std::string_view> reg = c->Section(kSauSectionRegulator);
    if (!reg.ok()) return reg.status();
    ByteReader rr(*reg);
    s = SauSnapshotAccess::Read(rr, est->spec(), st.regulator);
    if (s.ok()) s = rr.ExpectDone("SAU regulator section");
    if (!s.ok()) return s;
  }
  if (st.window.capacity() > 0) {
    absl::StatusOr<std::string_view> win = c->Section(kSauSectionWindow);
    if (!win.ok()) return win.status();
    ByteReader wr(*win);
    s = SauSnapshotAccess::Read(wr, est->spec(), st.window);
    if (s.ok()) s = wr.ExpectDone("SAU exact window section");
    if (!s.ok()) return s;
  }
  SauSnapshotAccess::State(*est) = std::move(st);
  SauSnapshotAccess::Nudge(*est) = nudge;
  return est;
}

}  // namespace streamlearn::sau
