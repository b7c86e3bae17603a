// FuseDgp: a reproducible synthetic stream for the fused learner (docs/FUSE.md, "The patterns"
// and "The worked scenario"): the target is the sum of an attention-like part that depends on
// the query q alone and a sparse linear part that depends on the features x alone, so neither
// the SAU nor the LMU can predict it by itself and a fusion can.
//
//   cluster c ~ uniform{0..K-1} per event (i.i.d., so a running mean cannot track it)
//   q  = centre_c + key_spread * N(0, I_d),   centre_c = (+-1) e_axis(c)
//   x  = nnz features: ids uniform over [1, vocab] (drawn with replacement, so an id may
//        repeat), values N(0, 1)
//   y  = value_c + sum_j w*[id_j] val_j + noise * N(0, I_m)
//        value_c ~ attention_offset + attention_scale * N(0, I_m)
//        w*[id] ~ linear_scale / sqrt(nnz) * N(0, I_m), drawn when id is first used
//
// Centres sit on signed coordinate axes (cluster c on axis c / 2 + offset, sign (-1)^c), so
// clusters are orthogonal or antipodal and an attention kernel separates them. With
// `drift_at` >= 0, from that event on the centres move to the next block of axes and the
// values are redrawn: a key-distribution change the SAU's e-process detects, and stale memory
// the SAU must forget. Every draw comes from one CounterRng(seed, 0xf05e) stream: the cluster
// values first, then per event the cluster, q, and the features (with a weight drawn at an
// id's first use), then the noise. Not thread-safe.
#ifndef STREAMLEARN_CORE_WORKLOADS_FUSE_DGP_H_
#define STREAMLEARN_CORE_WORKLOADS_FUSE_DGP_H_

#include <cstdint>
#include <vector>

#include "core/lmu/lmu_learner.h"
#include "core/sau/counter_rng.h"

namespace streamlearn::fuse {

struct FuseEvent {
  std::vector<lmu::Feature> x;
  std::vector<double> q, y;
  int cluster = 0;
  double y_attention = 0;  // output 0 of the attention part (for tests)
  double y_linear = 0;     // output 0 of the linear part
};

class FuseDgp {
 public:
  struct Options {
    int d = 8;
    int m = 1;
    int clusters = 4;               // needs 2 * ceil(clusters / 2) <= d (and twice that with drift)
    double key_spread = 0.3;
    double attention_offset = 0.0;  // value_c = offset + attention_scale * N(0, I_m)
    double attention_scale = 1.5;
    int vocab = 2000;
    int nnz = 8;
    double linear_scale = 1.0;
    double noise = 0.1;
    int64_t drift_at = -1;          // < 0: no drift
  };
  FuseDgp(const Options& opt, uint64_t seed);

  FuseEvent Next();

 private:
  void DrawValues();
  const std::vector<double>& Weight(uint64_t id);

  Options opt_;
  sau::CounterRng rng_;
  int64_t t_ = 0;
  int axis_offset_ = 0;
  std::vector<std::vector<double>> values_;   // per cluster, m
  std::vector<std::vector<double>> weights_;  // per id (1-based), m; empty until first use
};

}  // namespace streamlearn::fuse

#endif  // STREAMLEARN_CORE_WORKLOADS_FUSE_DGP_H_
