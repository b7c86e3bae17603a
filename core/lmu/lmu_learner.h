// LmuLearner: the exact sparse linear learner of docs/LMU.md (L1)-(L2) over an LmuTable.
//
//   predict  y_hat[o] = b[o] + sum_j w[id_j][o] * val_j           (ids in the given order;
//                                                                   absent ids contribute nothing)
//   update   e[o] = y[o] - y_hat[o];  eta = lr or lr / sqrt(t)
//            w[id_j][o] = (1 - eta * l2) * w[id_j][o] + (eta * e[o]) * val_j   (in order)
//            b[o] = b[o] + eta * e[o]
//
// evaluated exactly in this order and association in IEEE-754 double (the build forbids
// contraction into fma), so a plain reference learner doing the same operations in the same
// order gets the same bits. A repeated id in one sample is updated once per occurrence.
//
// Thread safety: Step is the single writer's; Predict may run concurrently from any thread
// (lock-free; it reads each weight whole, and may see a sample's update partly applied).
#ifndef STREAMLEARN_CORE_LMU_LMU_LEARNER_H_
#define STREAMLEARN_CORE_LMU_LMU_LEARNER_H_

#include <cassert>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/lmu/feature.h"
#include "core/common/digest.h"
#include "core/lmu/lmu_table.h"

namespace streamlearn::lmu {

struct StepResult {
  int max_locate_probes = 0;  // over the sample's features
  int max_insert_probes = 0;
  uint32_t inserted = 0;      // new ids
};

class LmuLearner {
 public:
  // REQUIRES: ValidateLmuSpec(spec).ok().
  LmuLearner(const LmuSpec& spec, const HashSecret& secret);

  int m() const { return spec_.m; }
  const LmuSpec& spec() const { return spec_; }

  struct PredictInfo {
    int max_locate_probes = 0;
    uint64_t ver_base = 0;   // the base generation the prediction read
    uint64_t ver_delta = 0;  // delta inserts seen when it started
  };
  // y has m entries.
  PredictInfo Predict(std::span<const Feature> x, double* y) const;
  // The predictions of many samples under one pin: y[s*m .. s*m + m) is sample s's, the same
  // operations in the same order as Predict(xs[s]), so the same bits on a table no one writes
  // meanwhile. The lookups of all the samples are staged together (LmuTable::LocateMany over
  // their ids, a few hundred at a time), so the misses of different samples overlap instead of
  // each sample waiting for its own (docs/LMU.md, "Predicting many samples").
  // max_locate_probes is over the whole batch. y has m * xs.size() entries.
  PredictInfo PredictMany(std::span<const std::span<const Feature>> xs, double* y) const;

  // Checks a sample before anything is applied: finite values, y of size m, overrides in range.
  // lr/l2 overrides are NaN when absent.
  absl::Status CheckSample(std::span<const Feature> x, std::span<const double> y, double lr,
                           double l2) const;

  // The bound of docs/LMU.md "Input bounds" on |x_j| and |y_o|: one step from a state whose
  // weights and bias are at most 1e100 in magnitude stays finite. Checked on client input
  // (LmuShard, FuseShard), not on replayed log entries. INVALID_ARGUMENT naming the feature
  // (index and id) or target, its value and the bound. REQUIRES: the values are finite.
  static constexpr double kInputBound = 1e50;
  static absl::Status CheckFeatureBounds(std::span<const Feature> x);
  static absl::Status CheckTargetBounds(std::span<const double> y);
  // Writer: predicts into y_before (m entries), then updates. REQUIRES: CheckSample ok.
  absl::StatusOr<StepResult> Step(std::span<const Feature> x, std::span<const double> y, double lr,
                                  double l2, double* y_before);

  // Writer: publishes a finished rebuild (call between samples or batches).
  absl::Status Poll() { return table_.Poll(); }

  uint64_t samples() const { return samples_; }
  LmuTableStats TableStats() const { return table_.Stats(); }
  // LmuBase::CheckMembership of the base in force; the number of base ids checked.
  absl::StatusOr<uint64_t> CheckBaseMembership() const {
    const LmuTable::Reader reader = table_.Pin();
    if (absl::Status s = reader.base().CheckMembership(); !s.ok()) return s;
    return reader.base().size();
  }

  // Control inputs of the fused control plane (docs/FUSE.md K4, K6). Writer.
  // The learning rate in force becomes `scale` times the spec's lr (or the sample's override),
  // before the schedule: eta = (lr * scale) or (lr * scale) / sqrt(t). Scale 1 (the default)
  // gives exactly the updates above. REQUIRES: scale in (0, 1].
  void SetLrScale(double scale) {
    assert(scale > 0 && scale <= 1);
    lr_scale_ = scale;
  }
  double lr_scale() const { return lr_scale_; }
  // The rebuild threshold tau_low, honoured at the next rebuild trigger check (LmuTable).
  // REQUIRES: tau_low, when set, in (0, spec().tau_high).
  void SetTauLowOverride(std::optional<double> tau_low) { table_.SetTauLowOverride(tau_low); }
  const std::optional<double>& tau_low_override() const { return table_.tau_low_override(); }

  // Writer: every id with its m weights, sorted by id; the bias.
  std::vector<std::pair<uint64_t, std::vector<double>>> Weights() const;
  std::vector<double> Bias() const;

  // Writer: SHA-256 over samples, the bias and the sorted (id, weights): the logical state,
  // independent of where ids sit (base or delta) and of rebuild timing. Control inputs that
  // differ from their defaults (lr scale, tau_low override) are hashed after the weights.
  Digest StateDigest() const;

 private:
  friend struct LmuSnapshotAccess;  // core/lmu/lmu_snapshot.cc: snapshot and restore

  const LmuSpec spec_;
  LmuTable table_;
  std::vector<double> bias_;  // read by Predict through atomic_ref
  uint64_t samples_ = 0;
  double lr_scale_ = 1.0;
  std::vector<uint64_t> ids_, slots_;  // writer scratch: per feature, its id and slot
  std::vector<double*> rows_;          // and its weight row (null: not in the table yet)
  std::vector<double> step_;           // per output, eta times the error
};

}  // namespace streamlearn::lmu

#endif  // STREAMLEARN_CORE_LMU_LMU_LEARNER_H_
