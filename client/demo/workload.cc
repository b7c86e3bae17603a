#include "client/demo/workload.h"

#include <cassert>
#include <utility>

namespace streamlearn::demo {
namespace {

sau::Dgp::Options PhaseOptions(const Workload::Options& o, sau::Dgp::Kind kind) {
  return sau::Dgp::Options{.kind = kind,
                           .d = o.d,
                           .d_v = o.d_v,
                           .clusters = o.clusters,
                           .phase_length = o.cluster_period,
                           .key_spread = o.key_noise,
                           .value_spread = o.value_noise,
                           .value_mean_scale = o.value_mean_scale};
}

}  // namespace

Workload::Workload(const Options& options)
    : phase_a_events_(options.phase_a_events),
      phase_a_(PhaseOptions(options, sau::Dgp::Kind::kA), options.seed),
      phase_c_(PhaseOptions(options, sau::Dgp::Kind::kC), options.seed + 1) {
  assert(options.d >= 1 && options.d_v >= 1 && options.clusters >= 1 &&
         options.cluster_period >= 1);
  probe_ = phase_a_.Gaussian(options.d);
}

void Workload::Next(Event* e) {
  e->index = next_index_++;
  const bool phase_a = e->index < phase_a_events_;
  e->phase = phase_a ? Phase::kA : Phase::kC;
  e->cluster = phase_a ? -1 : phase_c_.cluster();
  sau::DgpEvent drawn = phase_a ? phase_a_.Next() : phase_c_.Next();
  e->k = std::move(drawn.k);
  e->v = std::move(drawn.v);
}

}  // namespace streamlearn::demo
