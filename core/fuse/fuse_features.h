// The features the fusion layer builds from the SAU's health (docs/FUSE.md, "z_gate"): z_gate for
// the gate, z_attn for attention-as-feature, z_meta for the meta-linear learner, with their
// fixed feature ids and scalings (docs/FUSE.md explains each choice).
//
// Health signals at the query q_t, all read before step t's updates (predictable):
//   rj      clamp(RJ_gap(q_t) / threshold_t, 0, 4) / 4    the SAU's own relative-error
//           estimate in units of the docs/SAU.md (39) threshold (1/4 = at it)
//   margin  clamp(m_{t-1}, -5, 5) / 5                      saturates at 1 when the margin is
//           comfortable, so it moves only when the margin is thin (or negative)
//   den     clamp(ln(den(q_t) / median_den), -5, 5) / 5    denominator strength relative to
//           its running median (novel queries have small den); 0 before the median exists,
//           -1 for a zero denominator
//   phi_l1  clamp(ln(||phi_w(q_t)||_1 / r), -5, 5) / 5     feature mass of the whitened query
// and, for the gate only,
//   advantage  clamp(ln(E_lmu / E_sau), -5, 5), E_* = EWM of ||y - y_hat_*||^2 up to t-1 (rate
//              gate.error_rate): > 0 when the SAU has been the better predictor. sigma of it,
//              E_lmu / (E_sau + E_lmu), is the best constant gate when the two errors are
//              independent, so it is also added to the gate's logit as a fixed offset.
// The gate's bias is the gate LMU's own bias term.
#ifndef STREAMLEARN_CORE_FUSE_FUSE_FEATURES_H_
#define STREAMLEARN_CORE_FUSE_FUSE_FEATURES_H_

#include <cstdint>
#include <span>
#include <vector>

#include "core/fuse/fuse_spec.h"
#include "core/lmu/lmu_learner.h"
#include "core/sau/sau_estimator.h"

namespace streamlearn::fuse {

// z_gate ids in the gate learner (its own table, so they cannot clash with x).
inline constexpr uint64_t kGateRj = 1;
inline constexpr uint64_t kGateMargin = 2;
inline constexpr uint64_t kGateDen = 3;
inline constexpr uint64_t kGatePhiL1 = 4;
inline constexpr uint64_t kGateAdvantage = 5;

// z_meta ids in the meta learner: y_sau[o] -> kMetaSau + o, y_lmu[o] -> MetaLmuId(m, o).
inline constexpr uint64_t kMetaSau = 1;
inline constexpr uint64_t MetaLmuId(int m, int o) { return kMetaSau + m + o; }

// z_attn ids appended to x (attention-as-feature): y_sau[o] -> kAttnReadout + o, then the four
// health signals.
inline constexpr uint64_t kAttnReadout = kReservedIdBase;
inline constexpr uint64_t kAttnRj = kReservedIdBase + 256;
inline constexpr uint64_t kAttnMargin = kReservedIdBase + 257;
inline constexpr uint64_t kAttnDen = kReservedIdBase + 258;
inline constexpr uint64_t kAttnPhiL1 = kReservedIdBase + 259;

struct HealthFeatures {
  double rj = 0, margin = 0, den = 0, phi_l1 = 0;
};

// The scaled health signals of a stabilized query result taken before step t's ingest.
// `events` = events the SAU has ingested (t-1), for the docs/SAU.md (39) threshold.
HealthFeatures ScaleHealth(const sau::QueryResult& qr, const sau::SauSpec& spec, uint64_t events,
                           double median_den);

// docs/SAU.md (39): C_RJ sqrt(log(max(n, e) / delta) / r) for the n-th event.
double RjThreshold(const sau::SauSpec& spec, uint64_t n);

// clamp(ln(e2_lmu / e2_sau), -5, 5); 0 until both are positive.
double Advantage(double e2_sau, double e2_lmu);

void GateFeatures(const HealthFeatures& h, double advantage, std::vector<lmu::Feature>* z);
// z_meta: y_sau[o] / y_scale, y_lmu[o] / y_scale (y_scale: the running RMS of the targets
// before this step, so the features have about unit scale and one lr is stable for any target
// scale); each clamped to the LMU's input bound +-1e50 (LmuLearner::kInputBound).
void MetaFeatures(std::span<const double> y_sau, std::span<const double> y_lmu, double y_scale,
                  std::vector<lmu::Feature>* z);
// x followed by z_attn; the readout values are y_sau[o] / y_scale times `attention_weight`
// (the gate clamp in force, 1 normally), clamped to +-1e50 as in MetaFeatures.
void AttentionFeatures(std::span<const lmu::Feature> x, std::span<const double> y_sau,
                       double y_scale, const HealthFeatures& h, double attention_weight,
                       std::vector<lmu::Feature>* out);

double Sigmoid(double z);

}  // namespace streamlearn::fuse

#endif  // STREAMLEARN_CORE_FUSE_FUSE_FEATURES_H_
