// SauEstimator: the Streaming Attention Unit of docs/SAU.md, O(1) time and memory per event.
//
// It estimates decayed softmax attention y_t(q) = A_t(q) / B_t(q) (docs/SAU.md (1)-(3)) from
// positive random features, keeps the decayed statistics R_t, s_t (and H_t) with compensated
// summation, whitening statistics, the RJ half-split window and the mixture e-process, and
// answers queries on the correctness path ((19)) or the stabilized path ((20)-(21)).
//
//   auto est = SauEstimator::Create(spec);          // validates the spec, draws W
//   if (auto s = est->CheckEvent(k, v); !s.ok()) ...// dimensions, NaN/Inf
//   EventDiagnostics diag = est->Ingest(k, v);      // O(r (d + d_v)) time
//   QueryResult y = est->Query(q, ReadoutPath::kCorrectness, /*low_rank=*/false);
//
// The immutable parameters (spec, W, U) are shared between copies; copying an estimator copies
// only its mutable state (state_bytes()), which is how a shard publishes versions.
// Thread safety: const methods may run concurrently; Ingest needs exclusive access.
#ifndef STREAMLEARN_CORE_SAU_SAU_ESTIMATOR_H_
#define STREAMLEARN_CORE_SAU_SAU_ESTIMATOR_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/digest.h"
#include "core/sau/feature_map.h"
#include "core/sau/ridge_memory.h"
#include "core/sau/sau_spec.h"
#include "core/sau/sau_state.h"
#include "core/sau/vla_memory.h"

namespace streamlearn::sau {

// Diagnostics of one ingested event (docs/DECISIONS.md 3: read out at the event's own key
// before the update).
struct EventDiagnostics {
  double margin = 0;        // m_t = log(1/alpha_j) - log E_mix(t)
  double log_e_mix = 0;
  double rj_gap = 0;        // half-split discrepancy, docs/SAU.md
  double rj_gap_eq16 = 0;   // docs/SAU.md (16) taken literally, for comparison
  double rj_threshold = 0;  // docs/SAU.md (39)
  RjLevel rj_level = RjLevel::kGreen;
  double beta_floor = 0;    // in force for the next event
  double lambda_star = 0;   // in force for the next event
  double clip_rate = 0;     // cumulative rho_clip
  int clipped = 0;          // log-features clipped at this event (> 0: a saturation event)
  int clipped_hi = 0;       // of them, those clipped above c_hi (self-regulation's (K1))
  double max_exponent = 0;  // largest unclipped log-feature seen
  double den = 0;           // raw whitened denominator phi_w(k)^T s_{t-1}
  double shr = 0;           // den / (den + lambda_star), docs/SAU.md M1
  double nu2_hat = 0;
  double bprime_hat = 0;
  uint64_t epoch = 0;
  bool alarm = false;       // margin < 0 at this event; a new epoch starts next event
  bool floor_raised = false;  // RJ red raised beta_floor at this event
  // The median whitened denominator the floor policy read at this event (its input when RJ
  // red or an alarm triggered it; docs/SAU.md (28)).
  double median_den = 0;
  // Self-regulation (docs/SAU.md, "Self-regulation"): gamma and c_hi in force for the next
  // event, and what this event changed (gamma: +1 widened, -1 stepped back).
  double gamma = 0;
  double c_hi = 0;
  int gamma_change = 0;
  bool c_hi_raised = false;
  // The ridge and vla engines' diagnostics (core/sau/memory.h); the fields above stay zero
  // for them, and these stay zero for prf.
  RidgeWrite ridge;
  VlaWrite vla;
};

// A ridge readout's diagnostics (RidgeReadout) and a vla readout's state norm; zero for prf.
struct EngineReadout {
  double lambda_min = 0;
  double lambda_max = 0;
  double condition = 0;
  double residual = 0;
  double jitter = 0;
  double s_norm = 0;  // vla: ||S||_F
};

struct QueryResult {
  std::vector<double> y_hat;  // length d_v
  double den = 0;             // the denominator divided by (after floor and ridge)
  double raw_den = 0;         // phi^T s (correctness) or phi_w^T s (stabilized)
  double rj_gap = 0;
  double margin = 0;
  double shr = 0;
  double phi_w_l1 = 0;        // ||phi_w(q)||_1 on the stabilized path, ||phi(q)||_1 otherwise
  // y_hat is exact decayed softmax over the exact window (docs/SAU.md, "The exact window"):
  // a stabilized full readout whose raw denominator was thin, with the window on.
  bool exact_window = false;
  EngineReadout engine;       // ridge and vla only
};

// A control input of the fused control plane (docs/FUSE.md K2, K3): the ridge
// in force becomes lambda_*(t) * factor + increment. The default leaves the estimator exactly
// as it is without one.
struct LambdaNudge {
  double factor = 1.0;     // >= 1
  double increment = 0.0;  // >= 0, absolute (units of the denominator)
  bool is_default() const { return factor == 1.0 && increment == 0.0; }
};

// One input vector prepared for a stabilized readout at it and then its ingest as the next
// key, both at the same state: the fused step (docs/FUSE.md, "One step": Query(q), then
// Ingest(q, y)). The conditioning, phi, the whitened phi and the full readout's half sums are
// computed once instead of twice; the results are bit-identical to Query(q, kStabilized,
// low_rank) followed by Ingest(q, v). Reusable across steps (its buffers are kept).
//
//   sau::PreparedQuery p;
//   est.Prepare(q, &p);
//   QueryResult y = est.Query(&p, low_rank);   // stabilized
//   ... (nothing that ingests into est)
//   EventDiagnostics d = est.Ingest(p, v);     // as Ingest(q, v)
class PreparedQuery {
 public:
  PreparedQuery() = default;

 private:
  friend class SauEstimator;
  std::vector<double> q_, x_, phi_, phiw_, num1_, num2_;  // q_: the input as given
  FeatureMap::ClipStats clip_;
  long double den1_ = 0, den2_ = 0;
  uint64_t events_ = 0;  // the state it belongs to: events() when prepared
  bool prepared_ = false;
  bool readout_ = false;  // num and den hold the full (d_v) readout's half sums
};

class SauEstimator {
 public:
  // Resolves defaults, validates (INVALID_ARGUMENT naming the field) and draws W (and U).
  static absl::StatusOr<SauEstimator> Create(const SauSpec& spec);

  // Dimension and finiteness checks, with messages naming the offending field and index.
  absl::Status CheckEvent(std::span<const double> k, std::span<const double> v) const;
  absl::Status CheckQuery(std::span<const double> q) const;

  // The magnitude bounds of docs/SAU.md "Input bounds", under which the state and every
  // readout stay finite: |k_i|, |q_i| <= kInputBound and |v_i| <= value_bound(). Checked on
  // client input (SauShard, FuseShard), not on replayed log entries. INVALID_ARGUMENT naming
  // the field, the index, the value and the bound. REQUIRES: CheckEvent / CheckQuery ok.
  static constexpr double kInputBound = 1e100;
  double value_bound() const { return params_->value_bound; }
  absl::Status CheckEventBounds(std::span<const double> k, std::span<const double> v) const;
  absl::Status CheckQueryBounds(std::span<const double> q) const;

  // REQUIRES: CheckEvent(k, v).ok().
  EventDiagnostics Ingest(std::span<const double> k, std::span<const double> v);

  // `*this = src; return Ingest(k, v);` without the copy of src's decayed sums, which are most
  // of its bytes: every other member is copied, and the sums are updated out of place, from
  // src's into this estimator's own buffers, with the same operations (bit-identical; src is
  // not changed). How a shard writes its next version from the current one (docs/SAU.md,
  // "Versions without a copy"). REQUIRES: src.CheckEvent(k, v).ok(), &src != this.
  EventDiagnostics IngestFrom(const SauEstimator& src, std::span<const double> k,
                              std::span<const double> v);

  // REQUIRES: CheckQuery(q).ok(); low_rank only when spec().r_v > 0.
  QueryResult Query(std::span<const double> q, ReadoutPath path, bool low_rank) const;

  // The fused step's pair (PreparedQuery above). Prepare: REQUIRES CheckQuery(q).ok(). Query:
  // the stabilized readout at the prepared q (low_rank as above). Ingest: the prepared q as the
  // key; REQUIRES CheckEvent(q, v).ok(). A PreparedQuery from before another Ingest (or from
  // another estimator's events count) is prepared again, so a stale one costs time, not
  // correctness.
  void Prepare(std::span<const double> q, PreparedQuery* p) const;
  QueryResult Query(PreparedQuery* p, bool low_rank) const;
  EventDiagnostics Ingest(PreparedQuery& p, std::span<const double> v);
  // Both in one pass over R: the stabilized full readout at the prepared q (as Query(&p,
  // false) before the ingest) and the ingest of (q, v), whose update of R reads each row right
  // after the readout did. Bit-identical to Query(&p, false) followed by Ingest(p, v); *diag
  // gets the ingest's diagnostics. REQUIRES: CheckEvent(q, v).ok().
  QueryResult QueryAndIngest(PreparedQuery& p, std::span<const double> v,
                             EventDiagnostics* diag);

  const SauSpec& spec() const { return params_->spec; }
  const FeatureMap& features() const { return params_->features; }
  const Digest& w_digest() const { return params_->features.digest(); }
  const std::vector<double>& u() const { return params_->u; }
  const SauState& state() const { return state_; }
  uint64_t events() const { return state_.events; }
  size_t state_bytes() const { return state_.Bytes(); }

  // Control input (docs/FUSE.md): from the next event or query on, the ridge in force is
  // lambda_*(t) * factor + increment instead of lambda_*(t) (docs/DECISIONS.md 1), in the readout
  // and the prequential diagnostics alike. A caller that sets it between events from
  // information up to t-1 keeps every decision predictable. The nudge is part of the state
  // (digest, snapshot); it stays until it is set again.
  // REQUIRES: factor finite and >= 1, increment finite and >= 0.
  void SetLambdaNudge(LambdaNudge nudge);
  const LambdaNudge& lambda_nudge() const { return nudge_; }
  // The ridge in force for the next event or query: lambda_*(t) with the nudge applied.
  double effective_lambda() const {
    return nudge_.is_default() ? state_.lambda_star
                               : state_.lambda_star * nudge_.factor + nudge_.increment;
  }

  // SHA-256 over the canonical byte layout of the whole mutable state (docs/SAU.md); a
  // non-default lambda nudge is appended after the state.
  Digest StateDigest() const;

 private:
  friend struct SauSnapshotAccess;  // core/sau/sau_snapshot.cc: snapshot and restore

  struct Params {
    SauSpec spec;
    FeatureMap features;
    std::vector<double> u;  // d_v x r_v column-major, empty if r_v == 0
    double value_bound = 0;  // ValueBound(spec)
  };
  SauEstimator(std::shared_ptr<const Params> params, SauState state)
      : params_(std::move(params)), state_(std::move(state)) {}

  // Ingest of a conditioned key whose phi and whitened phi are given. With `readout` the
  // prequential readout's half sums at k are given too (num1, num2: d_v each; den1, den2);
  // without, they are computed here, fused with the update of R, and `query` (if not null)
  // gets the stabilized readout they make, finished before the statistics move on.
  EventDiagnostics IngestFeatures(const double* x, const double* phi, const double* phiw,
                                  const FeatureMap::ClipStats& clip, bool readout, double* num1,
                                  double* num2, long double den1, long double den2,
                                  std::span<const double> v, QueryResult* query = nullptr,
                                  const SauState* from = nullptr);
  // Ingest(k, v) with the sums read from `from` (null: this state's own), as IngestFeatures.
  EventDiagnostics IngestKey(std::span<const double> k, std::span<const double> v,
                             const SauState* from);
  // The readout's end, shared by both Query forms: y_hat, den, rj_gap, shr and ||f||_1 from
  // the half sums of the feature vector f (phi or the whitened phi). With the conditioned
  // query x (a stabilized full readout), a thin denominator is answered from the exact
  // window when the spec keeps one.
  QueryResult FinishQuery(const double* f, const double* num1, const double* num2,
                          long double den1, long double den2, bool stabilized, bool low_rank,
                          const double* x = nullptr) const;

  std::shared_ptr<const Params> params_;
  SauState state_;
  LambdaNudge nudge_;
};

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_SAU_ESTIMATOR_H_
