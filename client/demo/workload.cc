#include "client/demo/workload.h"

#include <cassert>

namespace streamlearn::demo {

Workload::Workload(const Options& options) : options_(options), rng_(options.seed) {
  assert(options.d >= 1 && options.d_v >= 1 && options.clusters >= 1 &&
         options.cluster_period >= 1);
  probe_.resize(options.d);
  rng_.Fill(probe_);
  key_centres_.assign(options.clusters, std::vector<double>(options.d));
  for (auto& mu : key_centres_) rng_.Fill(mu);
  value_means_.assign(options.clusters, std::vector<double>(options.d_v));
  for (auto& m : value_means_) {
    rng_.Fill(m);
    for (double& x : m) x *= options.value_mean_scale;
  }
}

void Workload::Next(Event* e) {
  e->index = next_index_++;
  e->k.resize(options_.d);
  e->v.resize(options_.d_v);
  rng_.Fill(e->k);
  rng_.Fill(e->v);
  if (e->index < options_.phase_a_events) {
    e->phase = Phase::kA;
    e->cluster = -1;
    return;
  }
  e->phase = Phase::kC;
  e->cluster = static_cast<int>(((e->index - options_.phase_a_events) / options_.cluster_period) %
                                static_cast<uint64_t>(options_.clusters));
  const std::vector<double>& mu = key_centres_[e->cluster];
  const std::vector<double>& m = value_means_[e->cluster];
  for (int i = 0; i < options_.d; ++i) e->k[i] = mu[i] + options_.key_noise * e->k[i];
  for (int j = 0; j < options_.d_v; ++j) e->v[j] = m[j] + options_.value_noise * e->v[j];
}

}  // namespace streamlearn::demo
