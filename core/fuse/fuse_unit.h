// FuseUnit: one shard's fused learner (docs/FUSE.md): an attention memory (sau::Memory: the
// prf estimator by default, or the ridge or vla engine, docs/ENGINES.md), an LmuLearner for
// the main sparse linear model, an LmuLearner for the gate / meta weights (so those are exact
// and inspectable too), and a ControlPlane, run sample by sample with the algorithm of
// docs/FUSE.md, "One step".
//
//   absl::StatusOr<std::unique_ptr<FuseUnit>> u = FuseUnit::Create(spec, secret);
//   absl::StatusOr<FuseStep> s = (*u)->Learn(t, x, q, y);   // predict, learn, control, record
//   // s->record is the body of a "fuse_learn" audit record (chain it with MerkleChain)
//   absl::StatusOr<FusePrediction> p = (*u)->Predict(x, q);  // read-only
//
// One Learn step (docs/FUSE.md):
//   1. the controls in force (computed at the end of step t-1) and their pending actions;
//   2. predict: y_lmu from x (attention-as-feature: from x ++ z_attn), y_sau from q on the
//      stabilized path, then the pattern's fused y_hat and the gate;
//   3. e = y - y_hat; the main LMU learns from its own residual, the gate / meta learner from
//      the fused loss (fuse_unit.cc);
//   4. the SAU ingests (k = q, v = y) (docs/DECISIONS.md 7); prf does it in step 2, in the
//      same pass over R as the readout (SauEstimator::QueryAndIngest), with the same results;
//   5. the control plane observes the step and sets the controls of step t+1 (the SAU's lambda
//      nudge, the LMU's lr scale and tau_low override, the gate clamp); it reads the prf
//      estimator's health, so over the ridge or vla engine it observes nothing and its controls
//      stay at their defaults (docs/FUSE.md, "Other engines");
//   6. the audit body of the step.
// Same spec, same secret, same samples in the same order => bit-identical state (with
// lmu.background_rebuild = false the records are bit-identical too; with background rebuilds
// the versions and probe counts in the records depend on rebuild timing, the state does not).
//
// Thread safety: Learn needs exclusive access; Predict and the const accessors may run
// concurrently with each other (not with Learn).
#ifndef STREAMLEARN_CORE_FUSE_FUSE_UNIT_H_
#define STREAMLEARN_CORE_FUSE_FUSE_UNIT_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/audit/audit_record.h"
#include "core/common/digest.h"
#include "core/control/control_plane.h"
#include "core/fuse/fuse_features.h"
#include "core/fuse/fuse_spec.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_learner.h"
#include "core/sau/memory.h"
#include "core/sau/sau_estimator.h"

namespace streamlearn::fuse {

inline constexpr std::string_view kRecordFuseLearn = "fuse_learn";

struct FusePrediction {
  std::vector<double> y_hat, y_hat_sau, y_hat_lmu;  // m each
  double gate = 0;   // linear-as-gate: the clamped gate; otherwise the attention weight in force
                     // (the gate clamp g_max, 1 normally; docs/FUSE.md)
  double gate_raw = 0;  // linear-as-gate: sigmoid(w_g^T z_gate) before the clamp
  double g_min = 0, g_max = 1;
  // Diagnostics at q (stabilized readout, before the step's update).
  double rj_gap = 0;
  double margin = 0;  // m_{t-1}
  double den = 0;     // raw whitened denominator phi_w(q)^T s
  // The ridge and vla engines' readout diagnostics (zero for prf, whose are the three above,
  // which stay zero for ridge and vla).
  sau::EngineReadout engine;
  // Versions read.
  uint64_t ver_sau = 0;   // SAU events
  uint64_t ver_base = 0;  // main LMU base generation
  uint64_t ver_delta = 0; // main LMU delta inserts
};

// The engine's part of a run of fused steps over ridge or vla (docs/FUSE.md, "Other engines"):
// for each sample in order, the readout at q (the step's y_hat_sau) and then the write of
// (k = q, v = y), on a copy of the unit's engine, so that an overflow is found before any step
// of the run is applied. FuseUnit::Learn then takes each step's engine part from the run
// instead of reading and writing its own engine, and the unit adopts the copy after the last
// step (FuseUnit::AdoptEngine): the same calls in the same order on the same state, so the
// result is bit-identical to stepping the unit's engine in place. Not for prf, whose input
// bounds keep its state and readout finite (docs/SAU.md, "Input bounds").
//
//   fuse::EngineRun run(unit.sau());
//   for (const Sample& s : batch) RETURN_IF_ERROR(run.Add(s.q, s.y));  // OUT_OF_RANGE: refuse
//   RETURN_IF_ERROR(run.Finish());
//   for (const Sample& s : batch) unit.Learn(s.t, s.x, s.q, s.y, &run);
//   unit.AdoptEngine(&run);
class EngineRun {
 public:
  // REQUIRES: engine is ridge or vla.
  explicit EngineRun(const sau::Memory& engine);

  // Reads out at q and writes (q, y). OUT_OF_RANGE when the readout is not finite (ridge: tiny
  // keys make its scale tiny, and a huge q then reads out inf); the run is then unusable.
  // REQUIRES: q and y passed the engine's CheckEvent.
  absl::Status Add(std::span<const double> q, std::span<const double> y);
  // OUT_OF_RANGE when the writes left the state non-finite (sau::Memory::StateFinite, one scan
  // for the run: a non-finite entry persists through later writes).
  absl::Status Finish() const;

  size_t size() const { return steps_.size(); }

 private:
  friend class FuseUnit;
  struct Step {
    sau::QueryResult readout;  // at q, before the write
    uint64_t events_before = 0;
    sau::EventDiagnostics diag;  // of the write
    uint64_t events_after = 0;
    double s_norm = 0;  // vla: ||S||_F after the write
  };
  sau::Memory memory_;
  std::vector<Step> steps_;
  size_t next_ = 0;  // the next step Learn takes
};

struct FuseStep {
  FusePrediction prediction;                      // as Predict would have returned before the step
  std::vector<control::ControlAction> actions;    // also in the record
  AuditRecord record;                             // kind "fuse_learn"
  // The numbers of the record that callers read back (FuseShard's health and limits), typed.
  sau::EventDiagnostics diag;  // the SAU's ingest (prf), or the engine's write (ridge, vla)
  double beta_floor = 0;       // prf: the floor and the ridge in force at the step
  double lambda_star = 0;
  double s_norm = 0;           // vla: ||S||_F after the write
  int max_locate_probes = 0;   // the main LMU's step (c_lookup_p100, c_insert_p100)
  int max_insert_probes = 0;
};

class FuseUnit {
 public:
  // Resolves and validates the spec (INVALID_ARGUMENT naming the field) and builds the parts.
  static absl::StatusOr<std::unique_ptr<FuseUnit>> Create(const FuseSpec& spec,
                                                          const lmu::HashSecret& secret);

  // Errors (nothing is applied): INVALID_ARGUMENT for a bad sample (dimensions, non-finite
  // values, empty x, reserved ids >= kReservedIdBase), FAILED_PRECONDITION when t does not
  // exceed the last applied t, OUT_OF_RANGE when the ridge or vla engine would overflow (its
  // readout at q or its state after the write; EngineRun), INTERNAL if an LMU rebuild fails
  // (after a failed rebuild inside the step the unit may hold a partly applied step: restore
  // it from a snapshot).
  // `run` (ridge and vla only; null otherwise): the engine's part of this step was computed
  // ahead in it; the step takes it from there and leaves the unit's engine as it is, for
  // AdoptEngine after the run's last step. Without it a ridge or vla step runs a one-step
  // EngineRun itself (a copy of the engine per step) and adopts it.
  absl::StatusOr<FuseStep> Learn(uint64_t t, std::span<const lmu::Feature> x,
                                 std::span<const double> q, std::span<const double> y,
                                 EngineRun* run = nullptr);
  // Takes the engine of a run whose every step Learn has taken. FAILED_PRECONDITION otherwise
  // (the unit is unchanged).
  absl::Status AdoptEngine(EngineRun* run);

  // The checks of (x, q) Predict and Learn make first: q's dimension and finiteness, finite
  // values and no reserved ids in x (INVALID_ARGUMENT naming the field).
  absl::Status CheckSample(std::span<const lmu::Feature> x, std::span<const double> q) const;

  // Read-only; the same numbers Learn would compute for this (x, q) now. OUT_OF_RANGE when the
  // ridge or vla readout at q is not finite.
  absl::StatusOr<FusePrediction> Predict(std::span<const lmu::Feature> x,
                                         std::span<const double> q) const;

  const FuseSpec& spec() const { return spec_; }
  const sau::Memory& sau() const { return sau_; }
  const lmu::LmuLearner& main_lmu() const { return *main_; }
  const lmu::LmuLearner& gate_lmu() const { return *gate_; }
  const control::ControlPlane& control() const { return control_; }
  uint64_t steps() const { return steps_; }
  bool has_last_t() const { return has_last_t_; }
  uint64_t last_t() const { return last_t_; }

  // SHA-256 over the pattern, counters, rolling errors, the SAU, both LMUs (logical state) and
  // the control state. Writer (the LMU digests read the writer's view).
  Digest StateDigest() const;

 private:
  friend struct FuseSnapshotAccess;  // core/fuse/fuse_snapshot.cc

  struct Forward;
  // The attention part of a step, read before the rest of it: the readout at q (y_hat_sau), its
  // health features and the SAU's event count before the step.
  struct SauPart {
    sau::QueryResult readout;
    HealthFeatures health;
    uint64_t events_before = 0;
  };

  FuseUnit(const FuseSpec& spec, const lmu::HashSecret& secret, sau::Memory sau);
  // `sau`: the attention part, read by Learn (prf in one pass with its ingest, ridge and vla
  // from an EngineRun), or null to read it here (Predict).
  void RunForward(std::span<const lmu::Feature> x, std::span<const double> q,
                  const control::Controls& c, SauPart* sau, Forward* f) const;
  void ApplyControls();

  FuseSpec spec_;
  sau::Memory sau_;
  std::unique_ptr<lmu::LmuLearner> main_;
  std::unique_ptr<lmu::LmuLearner> gate_;
  control::ControlPlane control_;
  uint64_t steps_ = 0;
  bool has_last_t_ = false;
  uint64_t last_t_ = 0;
  // Rolling errors up to the last step (EWM, rate spec.gate.error_rate), for z_gate.
  double err_sau_ = 0, err_lmu_ = 0;
  double diff2_ = 0;  // EWM of ||y_sau - y_lmu||^2, the gate's gradient normaliser
  double y_ms_ = 0;   // EWM of ||y||^2 / m (rate spec.gate.scale_rate); y_scale = its root
  double YScale() const { return y_ms_ > 0 ? std::sqrt(y_ms_) : 1.0; }
};

}  // namespace streamlearn::fuse

#endif  // STREAMLEARN_CORE_FUSE_FUSE_UNIT_H_
