#include "core/sau/sau_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "absl/strings/str_format.h"

namespace streamlearn::sau {

namespace {

absl::Status OutOfRange(std::string_view field, double value, std::string_view allowed) {
  return absl::InvalidArgumentError(
      absl::StrFormat("sau.%s = %g is out of range; allowed %s", field, value, allowed));
}

bool Finite(double x) { return std::isfinite(x); }

}  // namespace

const char* EngineName(Engine engine) {
  switch (engine) {
    case Engine::kPrf:
      return "prf";
    case Engine::kRidge:
      return "ridge";
    case Engine::kVla:
      return "vla";
  }
  return "prf";
}

SauSpec ResolveDefaults(SauSpec spec) {
  if (spec.tau == 0 && spec.d > 0) spec.tau = std::sqrt(static_cast<double>(spec.d));
  if (spec.c_rj == 0) spec.c_rj = kDefaultCrj;
  if (spec.c_lo == 0 && spec.c_hi == 0) {
    if (spec.input_mode == InputMode::kL2Scaled && spec.tau > 0) {
      // g ~ N(-a^2/(2 tau), a^2/tau) for every feature of a conditioned input
      // (docs/DECISIONS.md 4): clip above at mean + 3 sd (rate ~0.13%), below at mean - 8 sd.
      const double a = spec.input_scale;
      const double mean = -a * a / (2 * spec.tau);
      const double sd = a / std::sqrt(spec.tau);
      spec.c_hi = mean + 3.0 * sd;
      spec.c_lo = mean - 8.0 * sd;
    } else {
      spec.c_lo = -30;
      spec.c_hi = 30;
    }
  }
  if (spec.regulate_gamma && spec.gamma_max == 0) spec.gamma_max = std::max(spec.gamma, 0.999);
  if (spec.regulate_clip && spec.c_hi_max == 0 && spec.tau > 0) {
    spec.c_hi_max = spec.c_hi + 3 * ClipStep(spec);
  }
  return spec;
}

double ClipStep(const SauSpec& spec) {
  return spec.input_mode == InputMode::kL2Scaled ? spec.input_scale / std::sqrt(spec.tau) : 10.0;
}

absl::Status ValidateSpec(const SauSpec& s) {
  if (s.d < 1 || s.d > 4096) return OutOfRange("d", s.d, "1..4096");
  if (s.d_v < 1 || s.d_v > 4096) return OutOfRange("d_v", s.d_v, "1..4096");
  if (s.r < 2 || s.r > 65536 || s.r % 2 != 0) return OutOfRange("r", s.r, "even, 2..65536");
  if (s.antithetic && s.r % 4 != 0) {
    return OutOfRange("r", s.r, "a multiple of 4 when antithetic pairing is on");
  }
  if (static_cast<int64_t>(s.r) * std::max(s.d, s.d_v) > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sau.r * max(d, d_v) = %d exceeds the per-shard limit of %d", 
        static_cast<int64_t>(s.r) * std::max(s.d, s.d_v), int64_t{1} << 24));
  }
  if (!Finite(s.tau) || s.tau <= 0) return OutOfRange("tau", s.tau, "(0, inf); 0 means sqrt(d)");
  if (!Finite(s.gamma) || s.gamma <= 0 || s.gamma > 1)
    return OutOfRange("gamma", s.gamma, "(0, 1]");
  if (!Finite(s.input_scale) || s.input_scale <= 0 || s.input_scale > 1e3) {
    return OutOfRange("input_scale", s.input_scale, "(0, 1000]");
  }
  if (!Finite(s.c_lo) || s.c_lo < -700) return OutOfRange("c_lo", s.c_lo, "[-700, c_hi)");
  if (!Finite(s.c_hi) || s.c_hi > 700 || s.c_hi <= s.c_lo) {
    return OutOfRange("c_hi", s.c_hi, absl::StrFormat("(c_lo = %g, 700]", s.c_lo));
  }
  if (s.r_v < 0 || s.r_v > s.d_v)
    return OutOfRange("r_v", s.r_v, absl::StrFormat("0..d_v (= %d)", s.d_v));
  if (!s.u.empty()) {
    if (s.r_v == 0 || s.u.size() != static_cast<size_t>(s.d_v) * s.r_v) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sau.u has %d values; expected d_v * r_v = %d (column-major), or none to draw U",
          s.u.size(), static_cast<int64_t>(s.d_v) * s.r_v));
    }
    for (int a = 0; a < s.r_v; ++a) {
      for (int b = 0; b <= a; ++b) {
        double dot = 0;
        for (int l = 0; l < s.d_v; ++l) dot += s.u[a * s.d_v + l] * s.u[b * s.d_v + l];
        if (!Finite(dot) || std::fabs(dot - (a == b ? 1.0 : 0.0)) > 1e-9) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "sau.u columns must be orthonormal: column %d . column %d = %g", a, b, dot));
        }
      }
    }
  }
  const std::pair<const char*, double> rates[] = {{"beta_mu", s.beta_mu},
                                                  {"beta_sigma", s.beta_sigma},
                                                  {"beta_tilde", s.beta_tilde},
                                                  {"beta_envelope", s.beta_envelope}};
  for (const auto& [name, v] : rates) {
    if (!Finite(v) || v <= 0 || v > 1) return OutOfRange(name, v, "(0, 1]");
  }
  if (!Finite(s.whiten_eps) || s.whiten_eps <= 0)
    return OutOfRange("whiten_eps", s.whiten_eps, "(0, inf)");
  if (!Finite(s.alpha) || s.alpha <= 0 || s.alpha >= 1)
    return OutOfRange("alpha", s.alpha, "(0, 1)");
  if (!Finite(s.kappa) || s.kappa < 0 || s.kappa > 10)
    return OutOfRange("kappa", s.kappa, "[0, 10]");
  if (!Finite(s.xi) || s.xi <= 0 || s.xi >= 1) return OutOfRange("xi", s.xi, "(0, 1)");
  if (s.warmup < 2) return OutOfRange("warmup", s.warmup, ">= 2");
  if (s.epoch_length < 1) return OutOfRange("epoch_length", s.epoch_length, ">= 1");
  if (!Finite(s.log_e_floor) || s.log_e_floor >= 0 || s.log_e_floor < -1000) {
    return OutOfRange("log_e_floor", s.log_e_floor, "[-1000, 0)");
  }
  if (s.tilts.empty() || s.tilts.size() > 16 || s.tilts.size() != s.ridge.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sau.tilts and sau.ridge must have the same length, 1..16 (got %d and %d)",
        s.tilts.size(), s.ridge.size()));
  }
  for (size_t k = 0; k < s.tilts.size(); ++k) {
    if (!Finite(s.tilts[k]) || s.tilts[k] <= 0) {
      return OutOfRange(absl::StrFormat("tilts[%d]", k), s.tilts[k], "(0, inf)");
    }
    if (!Finite(s.ridge[k]) || s.ridge[k] < 0 || s.ridge[k] > 1) {
      return OutOfRange(absl::StrFormat("ridge[%d]", k), s.ridge[k], "[0, 1]");
    }
  }
  if (!Finite(s.c_rj) || s.c_rj <= 0)
    return OutOfRange("c_rj", s.c_rj, "(0, inf); 0 means the default");
  if (!Finite(s.rj_delta) || s.rj_delta <= 0 || s.rj_delta >= 1)
    return OutOfRange("rj_delta", s.rj_delta, "(0, 1)");
  if (!Finite(s.beta_floor) || s.beta_floor < 0)
    return OutOfRange("beta_floor", s.beta_floor, "[0, inf)");
  if (!Finite(s.red_floor_frac) || s.red_floor_frac < 0 || s.red_floor_frac > 1) {
    return OutOfRange("red_floor_frac", s.red_floor_frac, "[0, 1]");
  }
  if (!Finite(s.max_floor_frac) || s.max_floor_frac < s.red_floor_frac || s.max_floor_frac > 10) {
    return OutOfRange("max_floor_frac", s.max_floor_frac, "[red_floor_frac, 10]");
  }
  if (s.floor_cooldown < 0) return OutOfRange("floor_cooldown", s.floor_cooldown, ">= 0");
  if (!Finite(s.floor_decay) || s.floor_decay <= 0 || s.floor_decay > 1) {
    return OutOfRange("floor_decay", s.floor_decay, "(0, 1]");
  }
  if (s.exact_window < 0 || s.exact_window > kMaxExactWindow) {
    return OutOfRange("exact_window", s.exact_window,
                      absl::StrFormat("0..%d (0 = off)", kMaxExactWindow));
  }
  if (static_cast<int64_t>(s.exact_window) * (s.d + s.d_v) > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sau.exact_window * (d + d_v) = %d exceeds the per-shard limit of %d",
        static_cast<int64_t>(s.exact_window) * (s.d + s.d_v), int64_t{1} << 24));
  }
  if (!s.regulate_gamma && s.gamma_max != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sau.gamma_max = %g is set but sau.regulate_gamma is off; switch it on or leave "
        "gamma_max unset", s.gamma_max));
  }
  if (!s.regulate_clip && s.c_hi_max != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sau.c_hi_max = %g is set but sau.regulate_clip is off; switch it on or leave "
        "c_hi_max unset", s.c_hi_max));
  }
  if (s.regulate_gamma && (!Finite(s.gamma_max) || s.gamma_max < s.gamma || s.gamma_max > 1)) {
    return OutOfRange("gamma_max", s.gamma_max, absl::StrFormat("[gamma = %g, 1]", s.gamma));
  }
  if (s.regulate_clip && (!Finite(s.c_hi_max) || s.c_hi_max < s.c_hi || s.c_hi_max > 700)) {
    return OutOfRange("c_hi_max", s.c_hi_max, absl::StrFormat("[c_hi = %g, 700]", s.c_hi));
  }
  return absl::OkStatus();
}

double ValueBound(const SauSpec& s) {
  // docs/SAU.md "Input bounds", in the log domain so that no step overflows. With c =
  // max(c_hi, 0) and N the decayed event count (2^64 at gamma = 1, else 1/(1 - gamma)):
  // phi_i <= e^c / sqrt(r) (4), phi_w,i <= e^c / sqrt(whiten_eps) (11), s_i <= N e^c / sqrt(r)
  // (7), phi_w . s <= N e^2c sqrt(r / whiten_eps) (12), so every mass a value is multiplied
  // by is at most M = N e^c max(1, e^c sqrt(r) max(1, 1 / sqrt(whiten_eps))).
  // Under self-regulation the largest gamma and c_hi it may reach.
  const double c = std::max(s.regulate_clip ? std::max(s.c_hi, s.c_hi_max) : s.c_hi, 0.0);
  const double gamma = s.regulate_gamma ? std::max(s.gamma, s.gamma_max) : s.gamma;
  const double log_n = gamma >= 1 ? 64 * std::log(2.0)
                                  : std::min(64 * std::log(2.0), -std::log1p(-gamma));
  const double log_m =
      log_n + c +
      std::max(0.0, c + 0.5 * std::log(static_cast<double>(s.r)) +
                        std::max(0.0, -0.5 * std::log(s.whiten_eps)));
  const double log_bound = std::log(std::numeric_limits<double>::max()) - 10 * std::log(2.0) -
                           0.5 * std::log(static_cast<double>(s.d_v)) - log_m;
  return std::min(1e100, std::exp(log_bound));
}

}  // namespace streamlearn::sau
