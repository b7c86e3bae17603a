// Benchmarks of the SAU core, each beside its baseline in the same run (STYLE: benchmarks).
//
//   a. Ingest cost per event, default spec ("everything on": orthogonal features, whitening,
//      RJ, e-process; also r_v = 16), beside the bare kernel phi = exp(W k), R += phi v^T.
//   b. Query latency against stream length n, beside exact attention over a cache of n keys.
//   c. State bytes against r, r_v and n, beside the formula (printed before the benchmarks).
//   d. Compensated beside plain decayed update; a VersionedCell publish beside one ingest; a
//      version per event, by copy or from the current version, beside one ingest.
//   e. Drawing W (once per model) with SRHT blocks beside QR blocks, r = d (one block).
//
// The claims are ratios of medians, printed after the run (bench/ratio_reporter.h):
//   core_sau_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// This binary's own flag (give it before Google Benchmark's): --skip_state_table.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "core/workloads/dgp.h"
#include "core/sau/exact_attention.h"
#include "core/sau/feature_map.h"
#include "core/sau/kernels.h"
#include "core/sau/sau_estimator.h"
#include "core/common/versioned_cell.h"

namespace streamlearn::bench {
namespace {

using sau::Dgp;
using sau::DgpEvent;
using sau::ReadoutPath;
using sau::SauEstimator;
using sau::SauSpec;

constexpr int kD = 64;
constexpr int kDv = 64;
constexpr size_t kPoolSize = 4096;   // pre-generated events, cycled (a power of two)
constexpr int kWarmupEvents = 1000;  // past the e-process warm-up (spec.warmup = 200)

SauEstimator MustCreate(const SauSpec& spec) {
  absl::StatusOr<SauEstimator> est = SauEstimator::Create(spec);
  if (!est.ok()) {
    std::fprintf(stderr, "SauEstimator::Create: %s\n", est.status().ToString().c_str());
    std::abort();
  }
  return *std::move(est);
}

// The default spec at d = d_v = 64 with the given r and r_v.
SauSpec DefaultSpec(int r, int r_v) {
  SauSpec spec;
  spec.d = kD;
  spec.d_v = kDv;
  spec.r = r;
  spec.r_v = r_v;
  return spec;
}

std::vector<DgpEvent> MakeEvents(size_t n, uint64_t seed) {
  Dgp dgp(Dgp::Options{.kind = Dgp::Kind::kA, .d = kD, .d_v = kDv}, seed);
  std::vector<DgpEvent> events;
  events.reserve(n);
  for (size_t i = 0; i < n; ++i) events.push_back(dgp.Next());
  return events;
}

// 4096 DGP-A events, generated once, outside every timed loop.
const std::vector<DgpEvent>& EventPool() {
  static const std::vector<DgpEvent> pool = MakeEvents(kPoolSize, /*seed=*/7);
  return pool;
}

// ---------------------------------------------------------------------------------------
// a. Ingest per event.

// The bare kernel: what any random-feature attention must do per event, in plain loops on
// plain doubles, and nothing else (no conditioning, clipping, decay, compensation, prequential
// readout, whitening or monitors):  phi = exp(W k),  R += phi v^T.
// W is stored transposed (d x r) so that W k is d axpys over r: the loop vectorises without
// reassociation (-ffp-contract=off, no -ffast-math), which a row-by-row dot product would not,
// so the baseline is not handicapped by a latency-bound reduction. Entries ~ N(0, 1/d) keep
// W k ~ N(0, 1) for DGP-A keys.
class BareKernel {
 public:
  BareKernel(int r, int d, int d_v, uint64_t seed)
      : r_(r),
        d_(d),
        d_v_(d_v),
        w_t_(static_cast<size_t>(d) * r),
        phi_(r),
        state_(static_cast<size_t>(r) * d_v, 0.0) {
    Dgp dgp(Dgp::Options{.d = d, .d_v = d_v}, seed);
    const std::vector<double> g = dgp.Gaussian(d * r);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (size_t i = 0; i < g.size(); ++i) w_t_[i] = g[i] * scale;
  }

  void Ingest(const double* k, const double* v) {
    double* phi = phi_.data();
    for (int i = 0; i < r_; ++i) phi[i] = 0.0;
    for (int l = 0; l < d_; ++l) {
      const double* col = &w_t_[static_cast<size_t>(l) * r_];
      for (int i = 0; i < r_; ++i) phi[i] += col[i] * k[l];
    }
    for (int i = 0; i < r_; ++i) phi[i] = std::exp(phi[i]);
    for (int i = 0; i < r_; ++i) {
      double* row = &state_[static_cast<size_t>(i) * d_v_];
      for (int j = 0; j < d_v_; ++j) row[j] += phi[i] * v[j];
    }
  }

  const double* state() const { return state_.data(); }

 private:
  int r_, d_, d_v_;
  std::vector<double> w_t_;  // d x r, row-major
  std::vector<double> phi_;
  std::vector<double> state_;  // r x d_v, row-major
};

void BM_BareKernel(benchmark::State& state) {
  const int r = static_cast<int>(state.range(0));
  const std::vector<DgpEvent>& pool = EventPool();
  BareKernel kernel(r, kD, kDv, /*seed=*/11);
  size_t i = 0;
  for (auto _ : state) {
    const DgpEvent& e = pool[i++ & (kPoolSize - 1)];
    kernel.Ingest(e.k.data(), e.v.data());
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(kernel.state()[0]);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BareKernel)->Arg(64)->Arg(256)->Arg(1024);

void BM_SauIngest(benchmark::State& state) {
  const int r = static_cast<int>(state.range(0));
  const int r_v = static_cast<int>(state.range(1));
  const std::vector<DgpEvent>& pool = EventPool();
  SauEstimator est = MustCreate(DefaultSpec(r, r_v));
  size_t i = 0;
  for (; i < kWarmupEvents; ++i) {
    const DgpEvent& e = pool[i & (kPoolSize - 1)];
    est.Ingest(e.k, e.v);
  }
  for (auto _ : state) {
    const DgpEvent& e = pool[i++ & (kPoolSize - 1)];
    sau::EventDiagnostics diag = est.Ingest(e.k, e.v);
    benchmark::DoNotOptimize(diag);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SauIngest)->ArgsProduct({{64, 256, 1024}, {0, 16}});

// ---------------------------------------------------------------------------------------
// b. Query latency against stream length.

constexpr int kQueryR = 256;
constexpr int64_t kLengths[] = {1000, 100000, 1000000};
constexpr int64_t kExactMax = 100000;  // 10^6 keys + values would be 1 GB: skipped
constexpr size_t kQueryPool = 256;

// One stream of 10^6 DGP-A events ingested once (lazily, on first use) into an r = 256
// estimator, with copies of the estimator kept after 10^3, 10^5 and 10^6 events, and exact
// attention caches over the first 10^3 and 10^5 (conditioned) keys.
struct StreamFixture {
  std::map<int64_t, SauEstimator> sau;
  std::map<int64_t, std::unique_ptr<sau::ExactAttentionCache>> exact;
  std::vector<std::vector<double>> queries;       // raw, for SauEstimator::Query
  std::vector<std::vector<double>> queries_cond;  // conditioned, for the exact cache
};

const StreamFixture& Stream() {
  static const StreamFixture* fixture = [] {
    auto* f = new StreamFixture;
    const auto start = std::chrono::steady_clock::now();
    SauEstimator est = MustCreate(DefaultSpec(kQueryR, 0));
    const SauSpec& spec = est.spec();  // resolved: tau = sqrt(d)
    for (int64_t n : kLengths) {
      if (n <= kExactMax) {
        f->exact[n] = std::make_unique<sau::ExactAttentionCache>(kD, kDv, spec.tau, spec.gamma);
      }
    }
    Dgp dgp(Dgp::Options{.kind = Dgp::Kind::kA, .d = kD, .d_v = kDv}, /*seed=*/21);
    std::vector<double> k_cond(kD);
    for (int64_t t = 1; t <= kLengths[2]; ++t) {
      const DgpEvent e = dgp.Next();
      est.Ingest(e.k, e.v);
      if (t <= kExactMax) {
        est.features().Condition(e.k, k_cond.data());
        for (auto& [n, cache] : f->exact) {
          if (t <= n) cache->Add(k_cond, e.v);
        }
      }
      if (t == kLengths[0] || t == kLengths[1] || t == kLengths[2]) f->sau.emplace(t, est);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Dgp qgen(Dgp::Options{.kind = Dgp::Kind::kA, .d = kD, .d_v = kDv}, /*seed=*/33);
    for (size_t i = 0; i < kQueryPool; ++i) {
      f->queries.push_back(qgen.Gaussian(kD));
      std::vector<double> qc(kD);
      est.features().Condition(f->queries.back(), qc.data());
      f->queries_cond.push_back(std::move(qc));
    }
    char line[256];
    std::snprintf(line, sizeof(line),
                  "query fixture (r=%d, d=d_v=%d): %lld DGP-A events generated and ingested, "
                  "exact caches of 10^3 and 10^5 keys built, in %.1f s (%.2f us/event)",
                  kQueryR, kD, static_cast<long long>(kLengths[2]), seconds,
                  seconds * 1e6 / static_cast<double>(kLengths[2]));
    Notes().push_back(line);
    Notes().push_back(
        "exact attention at n = 10^6 skipped: keys + values = 10^6 x 128 doubles "
        "= 1 GB, and one query would take ~10x the n = 10^5 figure");
    return f;
  }();
  return *fixture;
}

void BM_SauQuery(benchmark::State& state) {
  const StreamFixture& f = Stream();
  const SauEstimator& est = f.sau.at(state.range(0));
  const ReadoutPath path =
      state.range(1) == 0 ? ReadoutPath::kStabilized : ReadoutPath::kCorrectness;
  size_t i = 0;
  for (auto _ : state) {
    sau::QueryResult y = est.Query(f.queries[i++ & (kQueryPool - 1)], path, /*low_rank=*/false);
    benchmark::DoNotOptimize(y.y_hat.data());
  }
  state.counters["events"] = static_cast<double>(est.events());
}
// Second argument: 0 = stabilized path (docs/SAU.md (20)-(21)), 1 = correctness path ((19)).
BENCHMARK(BM_SauQuery)->ArgsProduct({{1000, 100000, 1000000}, {0, 1}});

// A drift-free check of n-independence: queries at n = 10^3 and at n = 10^6 alternate in every
// iteration, each timed by the steady clock (~20 ns against ~12 us), so slow changes in the
// machine's load hit both sides equally; both states stream from L2 either way. (The same
// pairing for ingest against the bare kernel was tried and dropped: the two working sets evict
// each other and the bare kernel, the smaller, suffers more, which flatters the ratio.)
void BM_SauQueryPaired(benchmark::State& state) {
  const StreamFixture& f = Stream();
  const SauEstimator& small = f.sau.at(kLengths[0]);
  const SauEstimator& large = f.sau.at(kLengths[2]);
  const ReadoutPath path =
      state.range(0) == 0 ? ReadoutPath::kStabilized : ReadoutPath::kCorrectness;
  double small_s = 0, large_s = 0;
  size_t i = 0;
  for (auto _ : state) {
    const std::vector<double>& q = f.queries[i++ & (kQueryPool - 1)];
    const auto t0 = std::chrono::steady_clock::now();
    sau::QueryResult a = small.Query(q, path, /*low_rank=*/false);
    benchmark::DoNotOptimize(a.y_hat.data());
    const auto t1 = std::chrono::steady_clock::now();
    sau::QueryResult b = large.Query(q, path, /*low_rank=*/false);
    benchmark::DoNotOptimize(b.y_hat.data());
    const auto t2 = std::chrono::steady_clock::now();
    small_s += std::chrono::duration<double>(t1 - t0).count();
    large_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["n1e3_ns"] = small_s * 1e9 / n;
  state.counters["n1e6_ns"] = large_s * 1e9 / n;
}
BENCHMARK(BM_SauQueryPaired)->Arg(0)->Arg(1);

void BM_ExactQuery(benchmark::State& state) {
  const StreamFixture& f = Stream();
  const sau::ExactAttentionCache& cache = *f.exact.at(state.range(0));
  size_t i = 0;
  for (auto _ : state) {
    std::vector<double> y = cache.Query(f.queries_cond[i++ & (kQueryPool - 1)]);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["keys"] = static_cast<double>(cache.size());
}
BENCHMARK(BM_ExactQuery)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------------------
// c. State bytes (not timed): printed before the benchmarks.

void PrintStateTable() {
  constexpr size_t kF64 = sizeof(double);
  const std::vector<DgpEvent>& pool = EventPool();
  std::printf(
      "SAU state bytes, d = d_v = %d (W, r x d, is an immutable parameter shared by all "
      "versions and not part of the state)\n",
      kDv);
  std::printf("%6s %5s %14s %12s %14s %14s %14s %10s %s\n", "r", "r_v", "2r(d_v+r_v) f64",
              "6r+K f64", "formula B", "after 1e3 B", "after 1e5 B", "rest B", "same");
  for (int r : {64, 256, 1024}) {
    for (int r_v : {0, 16}) {
      SauEstimator est = MustCreate(DefaultSpec(r, r_v));
      size_t bytes_1e3 = 0, bytes_1e5 = 0;
      for (size_t t = 1; t <= 100000; ++t) {
        const DgpEvent& e = pool[t & (kPoolSize - 1)];
        est.Ingest(e.k, e.v);
        if (t == 1000) bytes_1e3 = est.state_bytes();
      }
      bytes_1e5 = est.state_bytes();
      // R, R_c (r x d_v) and H, H_c (r x r_v): the compensation doubles the leading term.
      const size_t leading = 2 * static_cast<size_t>(r) * (kDv + r_v);
      // s, s_c; whitening mu, sig2; e-process mu~, v~; and K log E values.
      const size_t linear = 6 * static_cast<size_t>(r) + est.spec().tilts.size();
      const size_t formula = (leading + linear) * kF64;
      std::printf("%6d %5d %14zu %12zu %14zu %14zu %14zu %10zu %s\n", r, r_v, leading, linear,
                  formula, bytes_1e3, bytes_1e5, bytes_1e5 - formula,
                  bytes_1e3 == bytes_1e5 ? "yes" : "NO");
    }
  }
  std::printf("rest = sizeof(SauState), the fixed scalars and vector headers.\n\n");
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------
// d. Micro-benchmarks: the price of compensation and of versioning.

constexpr int kBlockRows = 1024;

struct RowBlock {
  std::vector<double> s, c, a, x;
  RowBlock() : s(kBlockRows * kDv, 0.0), c(kBlockRows * kDv, 0.0) {
    Dgp dgp(Dgp::Options{.d = kD, .d_v = kDv}, /*seed=*/5);
    a = dgp.Gaussian(kBlockRows);
    for (double& v : a) v = std::exp(v) / std::sqrt(static_cast<double>(kBlockRows));
    x = dgp.Gaussian(kDv);
  }
};

void BM_CompensatedDecayAdd(benchmark::State& state) {
  RowBlock b;
  for (auto _ : state) {
    for (int i = 0; i < kBlockRows; ++i) {
      const size_t row = static_cast<size_t>(i) * kDv;
      sau::CompensatedDecayAdd(0.99, b.a[i], b.x.data(), &b.s[row], &b.c[row], kDv);
    }
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(b.s[0] + b.c[0]);
}
BENCHMARK(BM_CompensatedDecayAdd);

void BM_PlainDecayAdd(benchmark::State& state) {
  RowBlock b;
  for (auto _ : state) {
    for (int i = 0; i < kBlockRows; ++i) {
      sau::PlainDecayAdd(0.99, b.a[i], b.x.data(), &b.s[static_cast<size_t>(i) * kDv], kDv);
    }
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(b.s[0]);
}
BENCHMARK(BM_PlainDecayAdd);

// BeginWrite (a copy of the r = 256 state into a reused slot) + Publish, as a shard does once
// per batch; compare with BM_SauIngest/256/0.
void BM_VersionedCellPublish(benchmark::State& state) {
  const std::vector<DgpEvent>& pool = EventPool();
  SauEstimator est = MustCreate(DefaultSpec(256, 0));
  for (size_t i = 0; i < kWarmupEvents; ++i) est.Ingest(pool[i].k, pool[i].v);
  VersionedCell<SauEstimator> cell(est);
  for (auto _ : state) {
    SauEstimator* next = cell.BeginWrite();
    benchmark::DoNotOptimize(next);
    cell.Publish(next);
  }
  state.counters["state_bytes"] = static_cast<double>(est.state_bytes());
  state.counters["slots"] = static_cast<double>(cell.slot_count());
}
BENCHMARK(BM_VersionedCellPublish);

// A version per event, as a shard publishes at batch 1 (r = 256): arg 0 copies the current
// version into a reused slot and ingests there (BeginWrite, Ingest: the way before commit
// 632e3b4), arg 1 ingests from the current version into the slot without the copy
// (BeginWriteWith, IngestFrom: SauShard::Ingest's way). Compare with BM_SauIngest/256/0.
void BM_VersionedIngest(benchmark::State& state) {
  const bool from = state.range(0) == 1;
  const std::vector<DgpEvent>& pool = EventPool();
  SauEstimator est = MustCreate(DefaultSpec(256, 0));
  size_t i = 0;
  for (; i < kWarmupEvents; ++i) est.Ingest(pool[i].k, pool[i].v);
  VersionedCell<SauEstimator> cell(est);
  for (auto _ : state) {
    const DgpEvent& e = pool[i++ & (kPoolSize - 1)];
    sau::EventDiagnostics diag;
    if (from) {
      const SauEstimator& cur = cell.Current();
      SauEstimator* next = cell.BeginWriteWith([](const SauEstimator&, SauEstimator*) {});
      diag = next->IngestFrom(cur, e.k, e.v);
      cell.Publish(next);
    } else {
      SauEstimator* next = cell.BeginWrite();
      diag = next->Ingest(e.k, e.v);
      cell.Publish(next);
    }
    benchmark::DoNotOptimize(diag);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_VersionedIngest)->Arg(0)->Arg(1);

// Drawing W for r = d (one block) with the given feature kind (0 orthogonal, 1 srht).
void BM_DrawW(benchmark::State& state) {
  SauSpec spec = DefaultSpec(static_cast<int>(state.range(0)), 0);
  spec.d = static_cast<int>(state.range(0));
  spec.features = state.range(1) == 1 ? sau::FeatureKind::kSrht : sau::FeatureKind::kOrthogonal;
  spec.tau = std::sqrt(static_cast<double>(spec.d));
  for (auto _ : state) {
    sau::FeatureMap m = sau::FeatureMap::Draw(spec);
    benchmark::DoNotOptimize(m.w().data());
  }
}
BENCHMARK(BM_DrawW)->ArgsProduct({{64, 256, 1024}, {0, 1}})->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------

void AddRatios(RatioReporter& rep) {
  for (const char* r : {"64", "256", "1024"}) {
    const std::string bare = std::string("BM_BareKernel/") + r;
    rep.AddRatio({std::string("a. SAU ingest / bare kernel, r=") + r,
                  {std::string("BM_SauIngest/") + r + "/0"},
                  {bare},
                  3.0,
                  Target::kAtMost});
    rep.AddRatio({std::string("a. SAU ingest (r_v=16) / bare kernel, r=") + r,
                  {std::string("BM_SauIngest/") + r + "/16"},
                  {bare},
                  3.0,
                  Target::kAtMost});
  }
  const std::pair<const char*, const char*> paths[] = {{"0", "stabilized"}, {"1", "correctness"}};
  for (const auto& [arg, name] : paths) {
    const std::string p = arg;
    rep.AddRatio({std::string("b. SAU query n=1e6 / n=1e3, ") + name,
                  {"BM_SauQuery/1000000/" + p},
                  {"BM_SauQuery/1000/" + p},
                  1.1,
                  Target::kAtMost});
    rep.AddRatio({std::string("b. paired: SAU query n=1e6 / n=1e3, ") + name,
                  {"BM_SauQueryPaired/" + p, "n1e6_ns"},
                  {"BM_SauQueryPaired/" + p, "n1e3_ns"},
                  1.1,
                  Target::kAtMost});
    rep.AddRatio({std::string("b. SAU query n=1e5 / n=1e3, ") + name,
                  {"BM_SauQuery/100000/" + p},
                  {"BM_SauQuery/1000/" + p},
                  1.1,
                  Target::kAtMost});
    rep.AddRatio({std::string("b. exact n=1e5 / SAU query n=1e5, ") + name,
                  {"BM_ExactQuery/100000"},
                  {"BM_SauQuery/100000/" + p},
                  100.0,
                  Target::kAtLeast});
    rep.AddRatio({std::string("b. exact n=1e3 / SAU query n=1e3, ") + name,
                  {"BM_ExactQuery/1000"},
                  {"BM_SauQuery/1000/" + p},
                  0,
                  Target::kNone});
  }
  rep.AddRatio({"d. compensated / plain decayed add, 1024 x 64",
                {"BM_CompensatedDecayAdd"},
                {"BM_PlainDecayAdd"},
                0,
                Target::kNone});
  rep.AddRatio({"d. VersionedCell publish / one SAU ingest, r=256",
                {"BM_VersionedCellPublish"},
                {"BM_SauIngest/256/0"},
                0,
                Target::kNone});
  rep.AddRatio({"d. a version per event, copy then ingest / one SAU ingest, r=256",
                {"BM_VersionedIngest/0"},
                {"BM_SauIngest/256/0"},
                0,
                Target::kNone});
  rep.AddRatio({"d. a version per event, ingest from the current / one SAU ingest, r=256",
                {"BM_VersionedIngest/1"},
                {"BM_SauIngest/256/0"},
                0,
                Target::kNone});
  for (const char* d : {"64", "256", "1024"}) {
    rep.AddRatio({std::string("e. draw W: SRHT / QR blocks, r = d = ") + d,
                  {std::string("BM_DrawW/") + d + "/1"},
                  {std::string("BM_DrawW/") + d + "/0"},
                  0,
                  Target::kNone});
  }
}

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  bool state_table = true;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--skip_state_table") == 0) {
      state_table = false;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  if (state_table) streamlearn::bench::PrintStateTable();
  // Every benchmark is single-threaded: CPU time.
  streamlearn::bench::RatioReporter reporter(
      streamlearn::bench::ConsoleOptions(), streamlearn::bench::RatioReporter::TimeBase::kCpu);
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter,
                                                streamlearn::bench::AddRatios);
}
