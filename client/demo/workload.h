// Workload: the demo's synthetic event stream, DGP-A then DGP-C (docs/SAU.md), drawn by
// the core's generators (core/workloads/dgp.h, hence CounterRng) so that the demo, the tests and
// the benchmarks share one definition of each stream.
//
//   Phase A (events [0, phase_a_events)): a Dgp of kind kA seeded `seed`:
//     k ~ N(0, I_d), v ~ N(0, I_{d_v}).
//   Phase C (the rest): a Dgp of kind kC seeded `seed + 1`: K clusters; cluster c has a key
//     centre mu_c ~ N(0, I_d) and a value mean m_c ~ value_mean_scale * N(0, I_{d_v}). The
//     active cluster cycles 0, 1, ..., K-1, 0, ... every cluster_period events from the first
//     phase-C event; an event of cluster c has k = mu_c + key_noise * z and
//     v = m_c + value_noise * z'. Each switch is a drift moment: attention moves to the new
//     cluster's value mean.
//   The probe query: d draws of N(0, 1) from the phase-A Dgp, before its first event.
//
// Draw order within each Dgp is the one documented in dgp.h; the same seed gives the same
// stream.
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

#include "core/workloads/dgp.h"

namespace streamlearn::demo {

class Workload {
 public:
  struct Options {
    int d = 16;
    int d_v = 4;
    uint64_t seed = 20240601;
    uint64_t phase_a_events = 10000;
    int clusters = 4;
    int cluster_period = 2000;
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

  // The demo's probe query (raw, as sent to the server).
  const std::vector<double>& probe() const { return probe_; }

 private:
  const uint64_t phase_a_events_;
  sau::Dgp phase_a_;
  sau::Dgp phase_c_;
  std::vector<double> probe_;
  uint64_t next_index_ = 0;
};

}  // namespace streamlearn::demo

#endif  // STREAMLEARN_CLIENT_DEMO_WORKLOAD_H_
