// The synthetic streams of docs/SAU.md, "Reference streams and the error measure",
// reproducible from a seed (CounterRng), for tests, benchmarks, calibration and the demo.
//   DGP-A  k ~ N(0, I_d), v ~ N(0, I_{d_v}).
//   DGP-B  k ~ N(0, I_d), v = U* c with U* orthonormal (d_v x r_v), c ~ N(0, I_{r_v}).
//   DGP-C  K cluster centres mu_c ~ N(0, I_d) and value means m_c ~ value_mean_scale *
//          N(0, I_{d_v}); phases of `phase_length` events cycle through the clusters (event t,
//          0-based, belongs to cluster (t / phase_length) mod K); k = mu_c + key_spread *
//          N(0, I_d), v = m_c + value_spread * N(0, I_{d_v}).
// Draw order: every normal comes from the one stream CounterRng(seed, 0x5eed). The constructor
// draws U* (DGP-B: d_v * r_v entries, column-major, then orthonormalised) or mu_0, m_0, mu_1,
// m_1, ..., mu_{K-1}, m_{K-1} (DGP-C); then each Next() draws k (d normals) and then v (d_v
// normals; DGP-B: c, r_v normals), and Gaussian(n) draws n normals at the point it is called.
// Not thread-safe.
#ifndef STREAMLEARN_CORE_WORKLOADS_DGP_H_
#define STREAMLEARN_CORE_WORKLOADS_DGP_H_

#include <cstdint>
#include <vector>

#include "core/sau/counter_rng.h"

namespace streamlearn::sau {

struct DgpEvent {
  std::vector<double> k, v;
};

class Dgp {
 public:
  enum class Kind { kA, kB, kC };
  struct Options {
    Kind kind = Kind::kA;
    int d = 64, d_v = 64;
    int r_v = 8;                    // DGP-B
    int clusters = 4;               // DGP-C
    int phase_length = 2000;        // DGP-C
    double key_spread = 0.3;        // DGP-C: noise scale of k around mu_c
    double value_spread = 0.3;      // DGP-C: noise scale of v around m_c
    double value_mean_scale = 1.0;  // DGP-C: m_c = value_mean_scale * N(0, I_{d_v})
  };
  Dgp(const Options& opt, uint64_t seed);

  DgpEvent Next();
  std::vector<double> Gaussian(int n);  // N(0, I_n) from the same stream
  const std::vector<double>& u_star() const { return u_star_; }  // DGP-B, column-major
  int cluster() const;                   // DGP-C: the cluster of the next event

 private:
  Options opt_;
  CounterRng rng_;
  uint64_t t_ = 0;
  std::vector<double> u_star_;
  std::vector<std::vector<double>> centres_, value_means_;
};

// Two returning clusters, the self-regulation's stream (docs/SAU.md, "Self-regulation"): event
// t's key is e_c + 0.1 N(0, I_d) with c = (t / dwell) mod 2 (e_0, e_1: unit vectors, d >= 2),
// its value (1 or -1 for c = 0 or 1, 0.1 N(0, 1)), d_v = 2. Normals from CounterRng(seed, 3):
// the d of k, then the one of v, event by event.
std::vector<DgpEvent> ReturningClusters(int d, int events, int dwell, uint64_t seed);

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_WORKLOADS_DGP_H_
