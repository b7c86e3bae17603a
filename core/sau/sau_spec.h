// SauSpec: everything that defines one Streaming Attention Unit, with defaults and validation.
//
// A spec is plain data. `ResolveDefaults` fills unset fields with the documented defaults
// (docs/SAU.md), and `ValidateSpec` checks every field, returning INVALID_ARGUMENT that names
// the field and its allowed range. Two estimators built from equal resolved specs and fed the
// same events in the same order hold bit-identical state.
#ifndef STREAMLEARN_CORE_SAU_SAU_SPEC_H_
#define STREAMLEARN_CORE_SAU_SAU_SPEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace streamlearn::sau {

enum class FeatureKind { kIid, kOrthogonal, kSrht };
enum class InputMode { kL2Scaled, kRaw };
enum class ReadoutPath { kStabilized, kCorrectness };
enum class RjLevel { kGreen = 0, kYellow = 1, kRed = 2 };

// The memory behind a model's SAU part (docs/ENGINES.md): positive random features (the
// estimator of docs/SAU.md, the default), ridge recall (seed 003) or VLA (seed 004).
enum class Engine { kPrf = 0, kRidge = 1, kVla = 2 };

// The ridge engine's parameters (core/sau/ridge_memory.h; docs/ENGINES.md (R1)-(R4)).
struct RidgeOptions {
  double gamma = 1.0;         // decay of G, C, M in (0, 1]
  double eps = 1e-3;          // ridge relative to the scale, (0, 1]
  uint32_t filter_order = 0;  // K of seed 003 (13), 0..8
};

// The VLA engine's parameters (core/sau/vla_memory.h; docs/ENGINES.md (V1)-(V5)).
struct VlaOptions {
  double lambda0 = 0.1;          // A_0 = I / lambda0, (0, 1e6]
  uint32_t refresh_period = 20;  // writes between identity refreshes
  double refresh_eta = 1e-3;     // added to A's diagonal at a refresh, [0, 1]
  double key_eps = 1e-12;        // shorter keys are not written (counted), (0, 1)
};

struct SauSpec {
  // The engine (docs/ENGINES.md). Every field below d and d_v is the prf engine's; the ridge
  // and vla engines read d, d_v and their own options only.
  Engine engine = Engine::kPrf;
  RidgeOptions ridge_engine;
  VlaOptions vla_engine;

  // Dimensions and kernel (docs/SAU.md (1)-(4)).
  int d = 64;
  int d_v = 64;
  int r = 256;
  double tau = 0.0;    // 0 => sqrt(d)
  double gamma = 0.99; // decay in (0, 1]

  // Random features (docs/SAU.md (4), R8; docs/DECISIONS.md 9).
  FeatureKind features = FeatureKind::kOrthogonal;
  bool antithetic = false;  // rows in adjacent pairs (w, -w); needs r % 4 == 0
  uint64_t seed = 1;

  // Input conditioning (docs/SAU.md A1, C2; docs/DECISIONS.md 8).
  InputMode input_mode = InputMode::kL2Scaled;
  double input_scale = 1.0;  // a

  // Log-domain clipping of g = w^T x / sqrt(tau) - ||x||^2 / (2 tau) (docs/DECISIONS.md 4).
  // Both 0 => calibrated: in kL2Scaled mode g ~ N(-a^2/(2 tau), a^2/tau) per feature, so
  // c_hi = mean + 3 sd (rho_clip ~ 0.13%) and c_lo = mean - 8 sd; in kRaw mode [-30, 30].
  double c_lo = 0.0;
  double c_hi = 0.0;

  // Optional low-rank values (docs/SAU.md (8)). r_v == 0 disables H. u is d_v x r_v,
  // column-major, orthonormal columns; empty => drawn from `seed` and orthonormalised.
  int r_v = 0;
  std::vector<double> u;

  // Whitening statistics (docs/SAU.md (9)-(10)).
  double beta_mu = 0.01;
  double beta_sigma = 0.01;
  double whiten_eps = 1e-8;  // the eps of docs/SAU.md (10)-(11), in units of 1/r (phi ~ r^{-1/2})

  // Mixture e-process (docs/SAU.md (30)-(38); docs/DECISIONS.md 1-2).
  double alpha = 0.05;
  double kappa = 0.25;          // b_bar = 1 + kappa
  double xi = 0.1;              // domain slack
  double beta_tilde = 0.01;     // EWM rate of mu~, v~ ((30)-(31))
  double beta_envelope = 0.01;  // EWM rate of the envelope estimates (nu^2, b')
  int warmup = 200;             // events before the first test epoch starts
  int epoch_length = 2000;      // events per test epoch at most (alpha_j = alpha/(j(j+1)))
  double log_e_floor = -5.0;    // an epoch also ends when log E_mix falls below this
  std::vector<double> tilts = {0.25, 0.5, 1.0, 2.0};  // lambda_k before projection
  std::vector<double> ridge = {0.0, 0.005, 0.01, 0.02};  // rho_k, paired with tilts

  // RJ half-split policy (docs/SAU.md (15)-(16a), (39)).
  double c_rj = 0.0;  // 0 => kDefaultCrj
  double rj_delta = 0.05;

  // Denominator floor and its policy (docs/SAU.md (28), "RJ half-split").
  double beta_floor = 1e-12;        // base floor
  double red_floor_frac = 0.05;     // on red: floor >= frac * median den
  double max_floor_frac = 0.5;      // floor <= frac * median den (and >= base)
  int floor_cooldown = 50;          // events without red before the floor decays
  double floor_decay = 0.95;        // per-event decay towards the base after cooldown

  // Self-regulation (docs/SAU.md, "Self-regulation"; core/sau/regulator.h), off by default.
  // regulate_gamma: seed 001 F1, a longer window (gamma towards gamma_max) while denominators
  // are thin, back towards gamma after a cooldown. regulate_clip: seed 001 C4, F2, F4, c_hi
  // one step up (at most to c_hi_max) at the end of an e-process epoch whose upper clip rate
  // was above 1%. gamma_max, c_hi_max = 0 => resolved (0.999; c_hi + 3 steps).
  bool regulate_gamma = false;
  double gamma_max = 0.0;
  bool regulate_clip = false;
  double c_hi_max = 0.0;
  // Seed 001 F1's last resort (docs/SAU.md, "The exact window"): the last exact_window
  // conditioned keys and values are kept, and a stabilized full readout whose denominator is
  // thin (below a tenth of the running median) is answered by exact decayed softmax over
  // them. 0 = off; at most kMaxExactWindow.
  int exact_window = 0;
};

inline constexpr int kMaxExactWindow = 4096;

// "prf" / "ridge" / "vla".
const char* EngineName(Engine engine);

// C_RJ used when the spec leaves c_rj at 0; how it was calibrated is in docs/SAU.md.
inline constexpr double kDefaultCrj = 1.0;

// The step by which regulate_clip raises c_hi: one standard deviation of g in kL2Scaled mode
// (a / sqrt(tau)), 10 in kRaw mode (seed 001 C4's grid 30, 40, 50). REQUIRES: resolved tau.
double ClipStep(const SauSpec& spec);

// Fills unset fields (tau, c_lo/c_hi, c_rj, and gamma_max / c_hi_max when regulated) with
// their documented defaults.
SauSpec ResolveDefaults(SauSpec spec);

// Checks a resolved spec. Errors are INVALID_ARGUMENT naming the field and allowed range.
absl::Status ValidateSpec(const SauSpec& spec);

// The bound on |v_i| under which R, H, every numerator and every readout stay finite for this
// (resolved, valid) spec: min(1e100, DBL_MAX / (2^10 sqrt(d_v) M)), M the bound on the decayed
// feature mass of docs/SAU.md "Input bounds". 1e100 for every spec with c_hi <= 100 and
// whiten_eps >= 1e-100.
double ValueBound(const SauSpec& spec);

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_SAU_SPEC_H_
