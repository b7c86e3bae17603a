// The cost of one fused step, in process, beside the sum of its parts (STYLE: every benchmark
// beside its baseline). "Fusion should cost little more than the sum of its parts":
//
//   BM_FuseLearn/<pattern>       FuseUnit::Learn per sample: predict (an SAU query at q, the
//                                main LMU, the gate / meta LMU), learn, SAU ingest, control,
//                                the audit body (pattern 0 meta-linear, 1 attention-as-feature,
//                                2 linear-as-gate)
//   BM_SauIngestLmuStep          the parts alone: SauEstimator::Ingest(q, y) + LmuLearner::Step
//   BM_SauIngest, BM_LmuStep     each part alone
//   BM_PartsWithQuery            Ingest + Step plus the two other things a fused step must do:
//                                the SAU's stabilized Query at q (the readout the gate mixes is
//                                needed before the ingest, and Ingest does not return it) and
//                                the gate LMU's Step over the 5 z_gate features
//   BM_FusePredict/2             FuseUnit::Predict (linear-as-gate), beside
//   BM_SauQueryLmuPredict        SauEstimator::Query + LmuLearner::Predict
//
// Dimensions: those of the worked scenario's model (core/workloads/scenario.cc ScenarioFuseSpec;
// repeated here because the core benchmarks link the core only): SAU d = 8, d_v = 1, r = 512,
// tau = 0.15; LMU m = 1, lr 0.05, C = 2048, background rebuilds; samples from FuseDgp with
// 12 features over 2000 ids (the scenario's samples carry 9 to 13). 4096 samples generated
// before timing and cycled; every unit is warmed up on 2000 samples first, so the LMU's ids
// are known (no inserts while timed) and the e-process tests. CPU time (single-threaded;
// RatioReporter::TimeBase::kCpu), medians of the repetitions.
//   core_fuse_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "core/workloads/fuse_dgp.h"
#include "core/fuse/fuse_features.h"
#include "core/fuse/fuse_spec.h"
#include "core/fuse/fuse_unit.h"
#include "core/lmu/lmu_learner.h"
#include "core/sau/sau_estimator.h"

namespace streamlearn::bench {
namespace {

constexpr size_t kPool = 4096;
constexpr int kWarmup = 2000;
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

fuse::FuseSpec Spec(fuse::FusePattern pattern) {
  fuse::FuseSpec s;
  s.pattern = pattern;
  s.sau.d = 8;
  s.sau.d_v = 1;
  s.sau.r = 512;
  s.sau.tau = 0.15;
  s.sau.seed = 2;
  s.lmu.m = 1;
  s.lmu.lr = 0.05;
  s.lmu.delta_buckets = 512;
  s.lmu.lambda_max = 50000;
  s.lmu.rebuild_seconds = 0.004;
  s.lmu.margin = 128;
  return s;
}

lmu::HashSecret Secret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(31 * i + 1);
  return s;
}

const std::vector<fuse::FuseEvent>& Pool() {
  static const std::vector<fuse::FuseEvent>* pool = [] {
    fuse::FuseDgp::Options o;
    o.d = 8;
    o.m = 1;
    o.clusters = 4;
    o.key_spread = 0.1;
    o.attention_scale = 2.0;
    o.vocab = 2000;
    o.nnz = 12;
    o.linear_scale = 0.5;
    fuse::FuseDgp dgp(o, 2);
    auto* p = new std::vector<fuse::FuseEvent>;
    for (size_t i = 0; i < kPool; ++i) p->push_back(dgp.Next());
    return p;
  }();
  return *pool;
}

// The resolved spec (tau, clipping and C_RJ filled in), so the parts run exactly what the
// fused unit runs.
fuse::FuseSpec Resolved(fuse::FusePattern pattern) {
  absl::StatusOr<fuse::FuseSpec> s = fuse::ResolveFuseSpec(Spec(pattern));
  if (!s.ok()) Die(s.status().ToString());
  return *s;
}

std::unique_ptr<fuse::FuseUnit> WarmUnit(fuse::FusePattern pattern, uint64_t* t) {
  absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> u =
      fuse::FuseUnit::Create(Spec(pattern), Secret());
  if (!u.ok()) Die(u.status().ToString());
  const auto& pool = Pool();
  for (int i = 0; i < kWarmup; ++i) {
    const fuse::FuseEvent& e = pool[static_cast<size_t>(i) % kPool];
    if (auto s = (*u)->Learn(++*t, e.x, e.q, e.y); !s.ok()) Die(s.status().ToString());
  }
  return *std::move(u);
}

struct Parts {
  explicit Parts(const fuse::FuseSpec& spec)
      : sau(*sau::SauEstimator::Create(spec.sau)),
        lmu(spec.lmu, Secret()),
        gate(fuse::GateLmuSpec(spec), Secret()) {}
  sau::SauEstimator sau;
  lmu::LmuLearner lmu;
  lmu::LmuLearner gate;
};

std::unique_ptr<Parts> WarmParts() {
  auto p = std::make_unique<Parts>(Resolved(fuse::FusePattern::kLinearAsGate));
  const auto& pool = Pool();
  double y = 0;
  for (int i = 0; i < kWarmup; ++i) {
    const fuse::FuseEvent& e = pool[static_cast<size_t>(i) % kPool];
    p->sau.Ingest(e.q, e.y);
    if (auto s = p->lmu.Step(e.x, e.y, kNone, kNone, &y); !s.ok()) Die(s.status().ToString());
  }
  if (absl::Status s = p->lmu.Poll(); !s.ok()) Die(s.ToString());
  return p;
}

void BM_FuseLearn(benchmark::State& state) {
  const auto pattern = static_cast<fuse::FusePattern>(state.range(0));
  uint64_t t = 0;
  std::unique_ptr<fuse::FuseUnit> u = WarmUnit(pattern, &t);
  const auto& pool = Pool();
  size_t i = 0;
  for (auto _ : state) {
    const fuse::FuseEvent& e = pool[i++ % kPool];
    absl::StatusOr<fuse::FuseStep> s = u->Learn(++t, e.x, e.q, e.y);
    if (!s.ok()) Die(s.status().ToString());
    benchmark::DoNotOptimize(s->prediction.y_hat.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetLabel(std::string(fuse::PatternName(pattern)));
}
BENCHMARK(BM_FuseLearn)->Arg(0)->Arg(1)->Arg(2);

void BM_SauIngestLmuStep(benchmark::State& state) {
  std::unique_ptr<Parts> p = WarmParts();
  const auto& pool = Pool();
  size_t i = 0;
  double y = 0;
  for (auto _ : state) {
    const fuse::FuseEvent& e = pool[i++ % kPool];
    benchmark::DoNotOptimize(p->sau.Ingest(e.q, e.y).margin);
    if (auto s = p->lmu.Step(e.x, e.y, kNone, kNone, &y); !s.ok()) Die(s.status().ToString());
    benchmark::DoNotOptimize(y);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_SauIngestLmuStep);

void BM_SauIngest(benchmark::State& state) {
  std::unique_ptr<Parts> p = WarmParts();
  const auto& pool = Pool();
  size_t i = 0;
  for (auto _ : state) {
    const fuse::FuseEvent& e = pool[i++ % kPool];
    benchmark::DoNotOptimize(p->sau.Ingest(e.q, e.y).margin);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_SauIngest);

void BM_LmuStep(benchmark::State& state) {
  std::unique_ptr<Parts> p = WarmParts();
  const auto& pool = Pool();
  size_t i = 0;
  double y = 0;
  for (auto _ : state) {
    const fuse::FuseEvent& e = pool[i++ % kPool];
    if (auto s = p->lmu.Step(e.x, e.y, kNone, kNone, &y); !s.ok()) Die(s.status().ToString());
    benchmark::DoNotOptimize(y);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_LmuStep);

void BM_PartsWithQuery(benchmark::State& state) {
  std::unique_ptr<Parts> p = WarmParts();
  const auto& pool = Pool();
  size_t i = 0;
  double y = 0, g = 0;
  // Five z_gate features with fixed ids (their values do not change the cost).
  const std::vector<lmu::Feature> z = {{fuse::kGateRj, 0.1}, {fuse::kGateMargin, 1.0},
                                       {fuse::kGateDen, -0.1}, {fuse::kGatePhiL1, 0.2},
                                       {fuse::kGateAdvantage, 0.5}};
  for (auto _ : state) {
    const fuse::FuseEvent& e = pool[i++ % kPool];
    sau::QueryResult q = p->sau.Query(e.q, sau::ReadoutPath::kStabilized, false);
    benchmark::DoNotOptimize(q.y_hat.data());
    if (auto s = p->lmu.Step(e.x, e.y, kNone, kNone, &y); !s.ok()) Die(s.status().ToString());
    const double target = 0.5;
    if (auto s = p->gate.Step(z, std::span<const double>(&target, 1), kNone, kNone, &g); !s.ok()) {
      Die(s.status().ToString());
    }
    benchmark::DoNotOptimize(p->sau.Ingest(e.q, e.y).margin);
    benchmark::DoNotOptimize(y + g);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_PartsWithQuery);

void BM_FusePredict(benchmark::State& state) {
  const auto pattern = static_cast<fuse::FusePattern>(state.range(0));
  uint64_t t = 0;
  std::unique_ptr<fuse::FuseUnit> u = WarmUnit(pattern, &t);
  const auto& pool = Pool();
  size_t i = 0;
  for (auto _ : state) {
    const fuse::FuseEvent& e = pool[i++ % kPool];
    absl::StatusOr<fuse::FusePrediction> p = u->Predict(e.x, e.q);
    if (!p.ok()) Die(p.status().ToString());
    benchmark::DoNotOptimize(p->y_hat.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_FusePredict)->Arg(2);

void BM_SauQueryLmuPredict(benchmark::State& state) {
  std::unique_ptr<Parts> p = WarmParts();
  const auto& pool = Pool();
  size_t i = 0;
  double y = 0;
  for (auto _ : state) {
    const fuse::FuseEvent& e = pool[i++ % kPool];
    sau::QueryResult q = p->sau.Query(e.q, sau::ReadoutPath::kStabilized, false);
    p->lmu.Predict(e.x, &y);
    benchmark::DoNotOptimize(q.y_hat.data());
    benchmark::DoNotOptimize(y);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_SauQueryLmuPredict);

void AddRatios(RatioReporter& rep) {
  rep.AddRatio({"FuseUnit::Learn gate / (SAU Ingest + LMU Step)", {"BM_FuseLearn/2"},
                {"BM_SauIngestLmuStep"}, 1.5, Target::kAtMost});
  rep.AddRatio({"FuseUnit::Learn meta-linear / (SAU Ingest + LMU Step)", {"BM_FuseLearn/0"},
                {"BM_SauIngestLmuStep"}, 1.5, Target::kAtMost});
  rep.AddRatio({"FuseUnit::Learn attn-as-feature / (SAU Ingest + LMU Step)", {"BM_FuseLearn/1"},
                {"BM_SauIngestLmuStep"}, 1.5, Target::kAtMost});
  rep.AddRatio({"FuseUnit::Learn gate / (parts + SAU Query + gate Step)", {"BM_FuseLearn/2"},
                {"BM_PartsWithQuery"}, 1.2, Target::kAtMost});
  rep.AddRatio({"(parts + SAU Query + gate Step) / (SAU Ingest + LMU Step)", {"BM_PartsWithQuery"},
                {"BM_SauIngestLmuStep"}, 0, Target::kNone});
  rep.AddRatio({"SAU Ingest / (SAU Ingest + LMU Step)", {"BM_SauIngest"},
                {"BM_SauIngestLmuStep"}, 0, Target::kNone});
  rep.AddRatio({"FuseUnit::Predict gate / (SAU Query + LMU Predict)", {"BM_FusePredict/2"},
                {"BM_SauQueryLmuPredict"}, 1.5, Target::kAtMost});
}

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  streamlearn::bench::RatioReporter reporter(streamlearn::bench::ConsoleOptions(),
                                             streamlearn::bench::RatioReporter::TimeBase::kCpu);
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter,
                                                streamlearn::bench::AddRatios);
}
