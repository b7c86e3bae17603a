// Training on the VW-style stream (core/workloads/vw_style_stream.h): the LMU's training step
// beside exact SGD on absl::flat_hash_map doing the same arithmetic, on the same pre-generated
// in-memory stream (bench/RESULTS.md, "Training on the VW-style stream"):
//   core_train_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// The stream: 10^6 examples (seed 1), 20 features each (value 1.0, Zipf(1.1) ids over 10^5,
// repeats kept), y from the hidden sparse linear model plus N(0, 0.1^2) noise; generated before
// anything is timed (320 MB of features). m = 1, constant rate lr = 0.01, l2 = 0 (VW's
// reference run, `--sgd --learning_rate 0.005 --power_t 0 --l2 0`, takes half this rate: its
// squared-loss step is 2 eta (y - p) x).
//
//   BM_TrainCold_Lmu    one pass over the stream by LmuLearner::Step from an empty learner:
//                       every one of the ~10^5 ids is inserted on first sight, and the table
//                       rebuilds as the delta fills
//   BM_TrainCold_Absl   the same pass by AbslSgd (below) from an empty map
//   BM_TrainWarm_*      a second pass over the stream by a learner that has made the first
//                       (untimed): every id known, the steady state of a long-running model
//
// The LMU's spec is the one the server gives `streamlearn create --lmu --no-sau --lr 0.01`
// (4096 delta buckets growing to 4x under pressure, tau_low / tau_high 0.6 / 0.8), except that
// it rebuilds inline (background_rebuild = false): a rebuild then runs on the writer's thread
// whenever the delta reaches tau_low, its whole cost is in the timed CPU time, and a run does
// not depend on how a background thread was scheduled (on 2 shared cores it would be flaky).
// Each iteration is one whole pass (Iterations(1)); repetitions give the medians.
//
// Before anything is timed, both learners make one pass and must predict bit for bit alike:
// every progressive prediction (before each step) and 10^4 held-out predictions (part 1 of the
// stream) after the pass. The set-up stops the run otherwise. The notes after the ratio table
// give the losses (progressive over the last 10^5 examples, held-out) and the LMU's rebuilds.
// CPU time (single-threaded timed loops; RatioReporter::TimeBase::kCpu); counters: examples/s
// (items_per_second) and per_feature (CPU time per pass / (10^6 * 20)). ~20 s on 2 cores.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_learner.h"
#include "core/lmu/lmu_spec.h"
#include "core/workloads/vw_style_stream.h"

namespace streamlearn::bench {
namespace {

using lmu::Feature;
using workloads::VwStyleExamples;
using workloads::VwStyleOptions;
using workloads::VwStyleStream;

constexpr uint64_t kSeed = 1;
constexpr size_t kExamples = 1'000'000;
constexpr size_t kHeldOut = 10'000;
constexpr size_t kProgressiveTail = 100'000;  // the last examples of the progressive loss
constexpr double kLr = 0.01;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Exact SGD over absl::flat_hash_map<uint64_t, double> (m = 1): LmuLearner::Step's arithmetic
// (core/lmu/lmu_learner.h) in the same order, constant rate, no L2 by default:
//   p = b + sum_j w[id_j] * val_j                  (in order; absent ids add nothing)
//   w[id_j] = s * w[id_j] + (eta * (y - p)) * val_j  (in order, s = 1 - eta * l2; an absent id
//                                                    is inserted at 0 first)
//   b = b + eta * (y - p)
// One hash lookup per feature in the common case: the prediction keeps each found weight's
// address and the update uses it, until the sample's first insertion (which may rehash the
// map and move every weight); from there on the update looks each id up again.
// Not thread-safe.
class AbslSgd {
 public:
  AbslSgd(double lr, double l2) : lr_(lr), l2_(l2) {}

  double Predict(std::span<const Feature> x) const {
    double p = bias_;
    for (const Feature& f : x) {
      auto it = w_.find(f.id);
      if (it != w_.end()) p += it->second * f.val;
    }
    return p;
  }

  // Returns the prediction before the step.
  double Step(std::span<const Feature> x, double y) {
    found_.resize(x.size());
    double p = bias_;
    for (size_t j = 0; j < x.size(); ++j) {
      auto it = w_.find(x[j].id);
      found_[j] = it == w_.end() ? nullptr : &it->second;
      if (found_[j] != nullptr) p += *found_[j] * x[j].val;
    }
    const double eta = lr_;
    const double shrink = 1.0 - eta * l2_;
    const double e = y - p;
    bool moved = false;  // an insertion may have rehashed: the kept addresses are stale
    for (size_t j = 0; j < x.size(); ++j) {
      double* w = moved ? nullptr : found_[j];
      if (w == nullptr) {
        const auto [it, inserted] = w_.try_emplace(x[j].id, 0.0);
        w = &it->second;
        moved = moved || inserted;
      }
      *w = shrink * *w + (eta * e) * x[j].val;
    }
    bias_ = bias_ + eta * e;
    return p;
  }

  size_t size() const { return w_.size(); }

 private:
  const double lr_, l2_;
  double bias_ = 0;
  absl::flat_hash_map<uint64_t, double> w_;
  std::vector<double*> found_;  // scratch: per feature, its weight's address or null
};

lmu::HashSecret Secret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0x5c ^ (i * 13 + 1));
  return s;
}

// What `streamlearn create --lmu --no-sau --lr 0.01` gets from the server
// (server/storage/spec_conversion.cc), with inline rebuilds (see the header).
lmu::LmuSpec Spec() {
  lmu::LmuSpec s;
  s.lr = kLr;
  s.delta_buckets = lmu::SolveDeltaBuckets(s, s.delta_buckets);
  s.max_delta_buckets = lmu::DefaultMaxDeltaBuckets(s.delta_buckets);
  s.background_rebuild = false;
  if (absl::Status st = lmu::ValidateLmuSpec(s); !st.ok()) Die(st.ToString());
  return s;
}

const VwStyleExamples& Train() {
  static const VwStyleExamples* train = [] {
    VwStyleStream stream(VwStyleOptions{}, kSeed);
    return new VwStyleExamples(DrawExamples(stream, kExamples));
  }();
  return *train;
}

const VwStyleExamples& HeldOut() {
  static const VwStyleExamples* held_out = [] {
    VwStyleStream stream(VwStyleOptions{}, kSeed, /*part=*/1);
    return new VwStyleExamples(DrawExamples(stream, kHeldOut));
  }();
  return *held_out;
}

double LmuStep(lmu::LmuLearner& lmu, const VwStyleExamples& ex, size_t i) {
  double p = 0;
  if (!lmu.Step(ex.example(i), {&ex.y[i], 1}, kNaN, kNaN, &p).ok()) Die("LmuLearner::Step");
  return p;
}

std::string Fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), format, a, b, c, d);
  return buf;
}

// The untimed check: one pass of each learner, every prediction compared bit for bit.
void CheckBitIdentity() {
  static const bool done = [] {
    const VwStyleExamples& train = Train();
    const VwStyleExamples& held_out = HeldOut();
    lmu::LmuLearner lmu(Spec(), Secret());
    AbslSgd absl(kLr, 0.0);
    double progressive = 0;
    for (size_t i = 0; i < train.size(); ++i) {
      const double a = LmuStep(lmu, train, i);
      const double b = absl.Step(train.example(i), train.y[i]);
      if (a != b) Die("LMU and absl predictions differ at example " + std::to_string(i));
      if (i >= train.size() - kProgressiveTail) progressive += (a - train.y[i]) * (a - train.y[i]);
    }
    double loss = 0, zero = 0;
    for (size_t i = 0; i < held_out.size(); ++i) {
      double a = 0;
      lmu.Predict(held_out.example(i), &a);
      if (a != absl.Predict(held_out.example(i))) {
        Die("LMU and absl held-out predictions differ at example " + std::to_string(i));
      }
      loss += (a - held_out.y[i]) * (a - held_out.y[i]);
      zero += held_out.y[i] * held_out.y[i];
    }
    const lmu::LmuTableStats st = lmu.TableStats();
    Notes().push_back(Fmt(
        "check: one pass of each learner predicted bit for bit alike (10^6 progressive and "
        "10^4 held-out predictions); %.0f ids",
        static_cast<double>(absl.size())));
    Notes().push_back(Fmt(
        "losses (both learners): progressive MSE over the last 10^5 examples %.5f, held-out MSE "
        "%.5f (zero predictor %.4f; noise floor 0.01)",
        progressive / kProgressiveTail, loss / held_out.size(), zero / held_out.size()));
    Notes().push_back(Fmt(
        "LMU table after the pass: %.0f rebuilds (inline), delta %.0f buckets, max rebuild "
        "%.1f ms",
        static_cast<double>(st.rebuilds), static_cast<double>(st.delta_buckets),
        1e3 * st.max_rebuild_seconds));
    return true;
  }();
  (void)done;
}

void SetCounters(benchmark::State& state) {
  const double examples = static_cast<double>(state.iterations()) * kExamples;
  state.SetItemsProcessed(static_cast<int64_t>(examples));
  const double features = examples * VwStyleOptions{}.features;
  // Seconds per feature (printed as e.g. "17.4ns").
  state.counters["per_feature"] =
      benchmark::Counter(features, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// One timed pass over the training stream by a new learner (make()), after `warm_passes`
// untimed ones; the learner is made and destroyed outside the timing.
template <typename Make>
void TimedPass(benchmark::State& state, int warm_passes, Make make) {
  CheckBitIdentity();
  const VwStyleExamples& train = Train();
  for (auto _ : state) {
    state.PauseTiming();
    auto learner = make();
    for (int p = 0; p < warm_passes; ++p) {
      for (size_t i = 0; i < train.size(); ++i) learner->Step(train, i);
    }
    state.ResumeTiming();
    for (size_t i = 0; i < train.size(); ++i) benchmark::DoNotOptimize(learner->Step(train, i));
    state.PauseTiming();
    learner.reset();
    state.ResumeTiming();
  }
  SetCounters(state);
}

// The two learners behind one Step(examples, i).
struct TimedLmu {
  lmu::LmuLearner lmu{Spec(), Secret()};
  double Step(const VwStyleExamples& ex, size_t i) { return LmuStep(lmu, ex, i); }
};
struct TimedAbsl {
  AbslSgd absl{kLr, 0.0};
  double Step(const VwStyleExamples& ex, size_t i) { return absl.Step(ex.example(i), ex.y[i]); }
};

void BM_TrainCold_Lmu(benchmark::State& state) {
  TimedPass(state, 0, [] { return std::make_unique<TimedLmu>(); });
}
void BM_TrainCold_Absl(benchmark::State& state) {
  TimedPass(state, 0, [] { return std::make_unique<TimedAbsl>(); });
}
void BM_TrainWarm_Lmu(benchmark::State& state) {
  TimedPass(state, 1, [] { return std::make_unique<TimedLmu>(); });
}
void BM_TrainWarm_Absl(benchmark::State& state) {
  TimedPass(state, 1, [] { return std::make_unique<TimedAbsl>(); });
}

BENCHMARK(BM_TrainCold_Lmu)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainCold_Absl)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainWarm_Lmu)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainWarm_Absl)->Iterations(1)->Unit(benchmark::kMillisecond);

void AddRatios(RatioReporter& rep) {
  rep.AddRatio({"training pass from empty, LMU / absl (ns per feature)", {"BM_TrainCold_Lmu"},
                {"BM_TrainCold_Absl"}, 1.5, Target::kAtMost});
  rep.AddRatio({"training pass, ids known, LMU / absl (ns per feature)", {"BM_TrainWarm_Lmu"},
                {"BM_TrainWarm_Absl"}, 1.5, Target::kAtMost});
  rep.AddRatio({"LMU: from empty / ids known", {"BM_TrainCold_Lmu"}, {"BM_TrainWarm_Lmu"}, 0,
                Target::kNone});
  rep.AddRatio({"absl: from empty / ids known", {"BM_TrainCold_Absl"}, {"BM_TrainWarm_Absl"}, 0,
                Target::kNone});
}

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  streamlearn::bench::RatioReporter reporter(streamlearn::bench::ConsoleOptions(),
                                             streamlearn::bench::RatioReporter::TimeBase::kCpu);
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter,
                                                streamlearn::bench::AddRatios);
}
