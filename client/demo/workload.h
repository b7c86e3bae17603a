// Workload: the demo's synthetic event stream, seed 000 section 16 DGP-A then DGP-C.
//
//   Phase A (events [0, phase_a_events)), DGP-A: k ~ N(0, I_d), v ~ N(0, I_{d_v}).
//   Phase C (the rest), DGP-C drift: K clusters; cluster c has a key centre mu_c ~ N(0, I_d)
//     and a value mean m_c ~ value_mean_scale * N(0, I_{d_v}). The active cluster cycles
//     0, 1, ..., K-1, 0, ... every cluster_period events; an event of cluster c has
//     k = mu_c + key_noise * z and v = m_c + value_noise * z' (z, z' standard normal).
//     Each switch is a drift moment: attention moves to the new cluster's value mean.
//
// Every draw comes from one NormalSource seeded with `seed`, in a fixed order: the probe
// query, then mu_0..mu_{K-1}, then m_0..m_{K-1}, then per event k (d draws) and v (d_v).
//
//   Workload w(Workload::Options{.d = 16, .d_v = 4, .seed = 7});
//   Workload::Event e;
//   for (int i = 0; i < 1000; ++i) w.Next(&e);    // e.k, e.v, e.phase, e.cluster
//
// Thread safety: none.
#ifndef STREAMLEARN_CLIENT_DEMO_WORKLOAD_H_
#define STREAMLEARN_CLIENT_DEMO_WORKLOAD_H_

#include <cstdint>
#include <vector>

#include "client/demo/normal_source.h"

namespace streamlearn::demo {

class Workload {
 public:
  struct Options {
    int d = 16;
    int d_v = 4;
    uint64_t seed = 20240601;
    uint64_t phase_a_events = 10000;
    int clusters = 4;
    uint64_t cluster_period = 2000;
    double key_noise = 0.5;
    double value_mean_scale = 2.0;
    double value_noise = 0.5;
  };

  enum class Phase { kA, kC };
  struct Event {
    uint64_t index = 0;  // 0-based position in the stream
    Phase phase = Phase::kA;
    int cluster = -1;    // active cluster in phase C, -1 in phase A
    std::vector<double> k;
    std::vector<double> v;
  };

  // REQUIRES: d, d_v, clusters, cluster_period >= 1.
  explicit Workload(const Options& options);

  void Next(Event* event);

  // A fixed query drawn from N(0, I_d) before anything else: the demo's probe.
  const std::vector<double>& probe() const { return probe_; }
  const std::vector<double>& key_centre(int c) const { return key_centres_[c]; }
  const std::vector<double>& value_mean(int c) const { return value_means_[c]; }
  const Options& options() const { return options_; }

 private:
  const Options options_;
  NormalSource rng_;
  std::vector<double> probe_;
  std::vector<std::vector<double>> key_centres_;
  std::vector<std::vector<double>> value_means_;
  uint64_t next_index_ = 0;
};

}  // namespace streamlearn::demo

#endif  // STREAMLEARN_CLIENT_DEMO_WORKLOAD_H_
