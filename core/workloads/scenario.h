// Scenario: the worked scenario of docs/FUSE.md (drift with novelty bursts) as a
// reproducible stream of fused samples (t, sparse x, q, y), and the fused model spec it is
// tuned for. Pure C++ over the core (no gRPC): the demo (client/demo/fuse_phase.cc), the shape
// tests (core/workloads/scenario_test.cc in process, tests/server_scenario_test.cc through a
// server) and the benchmarks draw the same samples from the same seed.
//
//   client::Scenario scenario(client::ScenarioOptions{});     // the defaults (docs/FUSE.md)
//   absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> unit =
//       fuse::FuseUnit::Create(client::ScenarioFuseSpec(scenario.options()), secret);
//   while (!scenario.done()) {
//     const client::ScenarioSample s = scenario.Next();       // s.t = 1, 2, ...
//     (*unit)->Learn(s.t, s.x, s.q, s.y);
//   }
//
// The target (m = 1) is y = a(q) + l(x) + noise * N(0, 1):
//   a(q) = value_c, the attention part: the query is q = centre_c + key_spread * N(0, I_d) for
//     a cluster c uniform over `clusters`. The centres come in antipodal pairs on orthonormal
//     directions (cluster c on direction c / 2, sign (-1)^c). The values are evenly spaced
//     around value_offset with variance value_scale^2, grouped by segment (below), so that
//     with the default offset 0 they have both signs and none is near 0.
//   l(x), the linear part: x holds one segment id (cluster c is in segment c % segments; a
//     coarse context the LMU can use, value 1), `nnz` stable ids uniform in [1, vocab] and,
//     from phase 2 on, `burst_nnz` ids uniform in the burst pool [vocab + 1, vocab +
//     burst_ids]; their values are N(0, 1) and l(x) = sum_j w*[id_j] val_j with w*[id] ~
//     linear_scale / sqrt(nnz) N(0, 1) (stable ids) or burst_scale / sqrt(burst_nnz) N(0, 1)
//     (burst ids), drawn at an id's first use. Segment ids carry no weight of their own.
// The SAU (k = q, v = y) sees only q: its error is at least Var(l). The LMU sees only x: it
// learns l and, through the segment ids, the segment's mean of a, so its error is at least
// the within-segment variance of a (value_scale^2 / 5 with 4 clusters in 2 segments).
//
// Phases (docs/FUSE.md, "The worked scenario", S1-S3):
//   1 steady (`steady` samples): fixed centres on the first coordinate axes, stable ids only.
//     Attention is the better part (Gate high, RJ green); the LMU's keys are a fixed set, so
//     after one rebuild its delta only fills up to its first tau_low and its ring stays empty.
//   2 novelty (`novelty` samples): the centres drift: before each sample the orthonormal
//     directions take a random-walk step (direction + drift_step * N(0, I_d), then Gram-
//     Schmidt; about drift_step sqrt(d) radians per sample), so the SAU's memory is always
//     stale. Its readout at a query averages memories of both signs: it is poor, its two
//     feature halves disagree by more than their mean (the relative RJ gap, docs/SAU.md,
//     turns red) and the e-process alarms (margins thin or negative). The LMU, keyed on ids,
//     is the better part. At the same time every sample carries `burst_nnz` burst ids, all
//     novel at first: a burst of inserts into the LMU's delta (about burst_nnz new ids per
//     sample at the start, fewer as the pool is seen).
//   3 stabilization (`stabilization` samples): the centres stay where the drift left them;
//     the burst ids keep recurring but no new ids arrive, and their weights are learned. The
//     SAU relearns the clusters and the gate returns to attention.
//
// Every draw comes from one CounterRng(seed, kScenarioStream) stream, in this order: the
// order of the values (a Fisher-Yates shuffle within each segment); then per sample: the
// drift step (phase 2: d normals per direction), the cluster, q (d normals), the stable ids
// and values (a weight drawn at an id's first use, right after its value), the burst ids and
// values likewise, then the noise. Not thread-safe.
#ifndef STREAMLEARN_CORE_WORKLOADS_SCENARIO_H_
#define STREAMLEARN_CORE_WORKLOADS_SCENARIO_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/fuse/fuse_spec.h"
#include "core/lmu/lmu_learner.h"
#include "core/sau/counter_rng.h"

namespace streamlearn::workloads {

inline constexpr uint64_t kScenarioStream = 0x5ce2;

enum class ScenarioPhase : int { kSteady = 1, kNovelty = 2, kStabilization = 3 };
inline constexpr ScenarioPhase kScenarioPhases[] = {
    ScenarioPhase::kSteady, ScenarioPhase::kNovelty, ScenarioPhase::kStabilization};
std::string_view PhaseName(ScenarioPhase phase);  // "steady", "novelty", "stabilization"

struct ScenarioOptions {
  // RNG seed 2. The figures in core/workloads/scenario_test.cc and docs are for this seed; other
  // seeds give the same three phases, but with some (3, 7, 11 of those tried) one cluster's
  // steady RJ gap sits near its threshold under this feature draw, and phase 1 has a few red
  // windows (6 to 71 red steps) and clamps.
  uint64_t seed = 2;

  // Phase lengths, in samples.
  int steady = 3000;
  int novelty = 1500;
  int stabilization = 3000;

  // Attention part.
  int d = 8;                  // query dimension; needs d >= ceil(clusters / 2)
  int clusters = 4;
  double key_spread = 0.1;    // q = centre + key_spread * N(0, I_d)
  double value_offset = 0.0;  // mean of the cluster values
  double value_scale = 2.0;   // their standard deviation (evenly spaced: -2.7, -0.9, 0.9, 2.7)
  double drift_step = 0.1;    // phase 2: random-walk step of the centre directions per sample

  // Linear part.
  int segments = 2;           // segment ids (the LMU's coarse context); 0 = none
  int vocab = 2000;           // stable ids 1..vocab
  int nnz = 8;                // stable ids per sample
  double linear_scale = 0.5;  // standard deviation of the stable part of l(x)
  int burst_ids = 2000;       // the burst pool: ids vocab + 1 .. vocab + burst_ids
  int burst_nnz = 4;          // burst ids per sample from phase 2 on
  double burst_scale = 0.25;  // standard deviation of the burst part of l(x)

  double noise = 0.1;
};

// INVALID_ARGUMENT naming the field ("scenario.<field> = <value> is out of range; ...").
absl::Status ValidateScenarioOptions(const ScenarioOptions& o);

struct ScenarioSample {
  uint64_t t = 0;             // 1-based position in the scenario
  ScenarioPhase phase = ScenarioPhase::kSteady;
  std::vector<lmu::Feature> x;
  std::vector<double> q, y;   // y has one value (m = 1)
  int cluster = 0;
  int novel_ids = 0;          // ids of x seen for the first time in the scenario
  double y_attention = 0;     // a(q)
  double y_linear = 0;        // l(x)
};

class Scenario {
 public:
  // REQUIRES: ValidateScenarioOptions(options).ok().
  explicit Scenario(const ScenarioOptions& options);

  const ScenarioOptions& options() const { return opt_; }
  uint64_t total() const { return total_; }
  uint64_t emitted() const { return t_; }
  bool done() const { return t_ >= total_; }
  // The phase of sample t (1-based; t > total() counts as the last phase).
  ScenarioPhase PhaseOf(uint64_t t) const;
  // First and last t of a phase.
  uint64_t PhaseBegin(ScenarioPhase phase) const;
  uint64_t PhaseEnd(ScenarioPhase phase) const;
  // Segment ids follow the burst pool: the id of segment g.
  uint64_t SegmentId(int g) const;
  double value(int cluster) const { return values_[cluster]; }

  // REQUIRES: !done().
  ScenarioSample Next();

 private:
  void DriftStep();
  double Weight(uint64_t id, bool* novel);

  ScenarioOptions opt_;
  uint64_t total_;
  sau::CounterRng rng_;
  uint64_t t_ = 0;
  std::vector<std::vector<double>> directions_;  // ceil(clusters / 2) orthonormal, d each
  std::vector<double> values_;                   // per cluster
  std::vector<double> weights_;                  // per stable / burst id (id - 1); NaN: unused
  std::vector<bool> segment_seen_;
};

// The fused model the scenario is tuned for and the demo creates: linear-as-gate (docs/FUSE.md,
// "The patterns"); an SAU over q with a local kernel (d = options.d, d_v = 1, r = 512,
// tau = 0.15 on unit-norm inputs: orthogonal centres are e^(1/0.15) ~ 800 apart in kernel
// weight, so the readout separates the clusters; r = 512 keeps the steady RJ gap well under its
// threshold); an LMU (lr 0.05) whose delta holds the burst between rebuilds (C = 2048;
// C (tau_high - tau_low) = 410 >= 5*10^4 new ids/s x 4 ms + 128), rebuilding in the background
// as in production (predictions and state do not depend on when a rebuild publishes,
// docs/FUSE.md); the gate and control plane at their defaults (an alarm or RJ red clamps the
// gate to 0.4 for 50 samples, then it recovers by 0.95 per sample).
fuse::FuseSpec ScenarioFuseSpec(const ScenarioOptions& options);

}  // namespace streamlearn::workloads

#endif  // STREAMLEARN_CORE_WORKLOADS_SCENARIO_H_
