// Benchmarks of the memory engines (docs/ENGINES.md), each beside its baseline in the same run
// (STYLE: benchmarks), at d = 32, 64, 128 and d_v = 16:
//
//   a. Write cost per event: ridge (seed 003) and vla (seed 004) beside the bare rank-1 update
//      G += k k^T (d^2 fmas) and beside the PRF estimator's ingest (r = 256).
//   b. Query cost: ridge with its Cholesky factor cached, beside the bare pair of triangular
//      solves; ridge when every query follows a write (the factor is recomputed), beside the
//      bare Cholesky factorisation; vla; the PRF estimator's query.
//   c. Through the shard (d = 64): SauShard::Ingest of a batch of B = 1 or 64 events, beside
//      the same B events written straight into the engine (sau::Memory); what the shard adds
//      is the versioned copy of the state per batch, the checks and the duplicate filter.
//      And the prf engine behind sau::Memory beside the estimator called directly.
//
// The claims are ratios of medians, printed after the run (bench/ratio_reporter.h):
//   core_engine_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "core/sau/dense_kernels.h"
#include "core/sau/kernels.h"
#include "core/sau/memory.h"
#include "core/sau/ridge_memory.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/vla_memory.h"
#include "core/shard/sau_shard.h"

namespace streamlearn::bench {
namespace {

constexpr int kDv = 16;
constexpr int kPool = 1024;  // pre-generated (k, v) pairs, cycled (a power of two)

struct Pool {
  std::vector<std::vector<double>> keys, values;
};

// Unit-norm keys, Gaussian values; generated once per d, outside every timed loop.
const Pool& PoolFor(int d) {
  static std::map<int, Pool> pools;
  Pool& p = pools[d];
  if (p.keys.empty()) {
    std::mt19937_64 rng(17 + d);
    std::normal_distribution<double> g;
    for (int i = 0; i < kPool; ++i) {
      std::vector<double> k(d), v(kDv);
      double n = 0;
      for (double& x : k) x = g(rng), n += x * x;
      for (double& x : k) x /= std::sqrt(n);
      for (double& x : v) x = g(rng);
      p.keys.push_back(std::move(k));
      p.values.push_back(std::move(v));
    }
  }
  return p;
}

template <typename T>
T Must(absl::StatusOr<T> x) {
  if (!x.ok()) {
    std::fprintf(stderr, "%s\n", x.status().ToString().c_str());
    std::abort();
  }
  return *std::move(x);
}

sau::SauSpec PrfSpec(int d) {
  sau::SauSpec spec;
  spec.d = d;
  spec.d_v = kDv;
  spec.r = 256;
  return spec;
}

// ---------------------------------------------------------------------------------------
// a. Writes.

void BM_Rank1Update(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const Pool& p = PoolFor(d);
  std::vector<double> g(static_cast<size_t>(d) * d, 0.0);
  size_t i = 0;
  for (auto _ : state) {
    const std::vector<double>& k = p.keys[i++ & (kPool - 1)];
    for (int r = 0; r < d; ++r) sau::Axpy(k[r], k.data(), &g[static_cast<size_t>(r) * d], d);
    benchmark::DoNotOptimize(g.data());
  }
}
BENCHMARK(BM_Rank1Update)->Arg(32)->Arg(64)->Arg(128);

void BM_RidgeWrite(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const Pool& p = PoolFor(d);
  auto mem = Must(sau::RidgeMemory::Create({.d = static_cast<uint32_t>(d), .d_v = kDv,
                                            .gamma = 0.999}));
  size_t i = 0;
  for (auto _ : state) {
    const size_t j = i++ & (kPool - 1);
    benchmark::DoNotOptimize(mem.Write(p.keys[j], p.values[j]));
  }
}
BENCHMARK(BM_RidgeWrite)->Arg(32)->Arg(64)->Arg(128);

void BM_VlaWrite(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const Pool& p = PoolFor(d);
  auto mem = Must(sau::VlaMemory::Create({.d = static_cast<uint32_t>(d), .d_v = kDv}));
  size_t i = 0;
  for (auto _ : state) {
    const size_t j = i++ & (kPool - 1);
    benchmark::DoNotOptimize(mem.Write(p.keys[j], p.values[j]));
  }
}
BENCHMARK(BM_VlaWrite)->Arg(32)->Arg(64)->Arg(128);

void BM_PrfIngest(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const Pool& p = PoolFor(d);
  auto est = Must(sau::SauEstimator::Create(PrfSpec(d)));
  size_t i = 0;
  for (auto _ : state) {
    const size_t j = i++ & (kPool - 1);
    benchmark::DoNotOptimize(est.Ingest(p.keys[j], p.values[j]));
  }
}
BENCHMARK(BM_PrfIngest)->Arg(32)->Arg(64)->Arg(128);

// ---------------------------------------------------------------------------------------
// b. Queries, after 1024 writes.

// A ridge memory that has seen the whole pool once.
sau::RidgeMemory FilledRidge(int d) {
  auto mem = Must(sau::RidgeMemory::Create({.d = static_cast<uint32_t>(d), .d_v = kDv}));
  const Pool& p = PoolFor(d);
  for (int j = 0; j < kPool; ++j) mem.Write(p.keys[j], p.values[j]);
  return mem;
}

// G + 1e-3 I of FilledRidge(d): the matrix the bare Cholesky and solves work on.
std::vector<double> FilledGram(int d) {
  std::vector<double> a = FilledRidge(d).G();
  for (int r = 0; r < d; ++r) a[static_cast<size_t>(r) * d + r] += 1e-3;
  return a;
}

void BM_TriangularSolves(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const Pool& p = PoolFor(d);
  const std::vector<double> a = FilledGram(d);
  sau::CholeskyFactor f;
  if (!sau::Cholesky(a, d, &f)) std::abort();
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(sau::CholeskySolve(f, p.keys[i++ & (kPool - 1)]));
}
BENCHMARK(BM_TriangularSolves)->Arg(32)->Arg(64)->Arg(128);

void BM_Cholesky(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const std::vector<double> a = FilledGram(d);
  sau::CholeskyFactor f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(sau::Cholesky(a, d, &f));
  }
}
BENCHMARK(BM_Cholesky)->Arg(32)->Arg(64)->Arg(128);

void BM_RidgeQueryCached(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  sau::RidgeMemory mem = FilledRidge(d);
  const Pool& p = PoolFor(d);
  mem.Read(p.keys[0]);  // the factor, outside the loop
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(mem.Read(p.keys[i++ & (kPool - 1)]));
}
BENCHMARK(BM_RidgeQueryCached)->Arg(32)->Arg(64)->Arg(128);

// One write then one query: the query pays for a new factor and its eigenvalue estimates.
void BM_RidgeWriteThenQuery(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  sau::RidgeMemory mem = FilledRidge(d);
  const Pool& p = PoolFor(d);
  size_t i = 0;
  for (auto _ : state) {
    const size_t j = i++ & (kPool - 1);
    mem.Write(p.keys[j], p.values[j]);
    benchmark::DoNotOptimize(mem.Read(p.keys[(j + 1) & (kPool - 1)]));
  }
}
BENCHMARK(BM_RidgeWriteThenQuery)->Arg(32)->Arg(64)->Arg(128);

void BM_VlaQuery(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  auto mem = Must(sau::VlaMemory::Create({.d = static_cast<uint32_t>(d), .d_v = kDv}));
  const Pool& p = PoolFor(d);
  for (int j = 0; j < kPool; ++j) mem.Write(p.keys[j], p.values[j]);
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(mem.Read(p.keys[i++ & (kPool - 1)]));
}
BENCHMARK(BM_VlaQuery)->Arg(32)->Arg(64)->Arg(128);

void BM_PrfQuery(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  auto est = Must(sau::SauEstimator::Create(PrfSpec(d)));
  const Pool& p = PoolFor(d);
  for (int j = 0; j < kPool; ++j) est.Ingest(p.keys[j], p.values[j]);
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        est.Query(p.keys[i++ & (kPool - 1)], sau::ReadoutPath::kCorrectness, false));
  }
}
BENCHMARK(BM_PrfQuery)->Arg(32)->Arg(64)->Arg(128);

// ---------------------------------------------------------------------------------------
// c. Through the shard, d = 64. Args: engine (0 prf, 1 ridge, 2 vla), events per batch.

constexpr int kShardD = 64;

sau::SauSpec EngineSpec(int engine) {
  sau::SauSpec spec = PrfSpec(kShardD);
  spec.engine = static_cast<sau::Engine>(engine);
  spec.ridge_engine.gamma = 0.999;
  return spec;
}

void BM_EngineBare(benchmark::State& state) {
  const Pool& p = PoolFor(kShardD);
  auto mem = Must(sau::Memory::Create(EngineSpec(static_cast<int>(state.range(0)))));
  const size_t batch = static_cast<size_t>(state.range(1));
  size_t i = 0;
  for (auto _ : state) {
    for (size_t e = 0; e < batch; ++e) {
      const size_t j = i++ & (kPool - 1);
      benchmark::DoNotOptimize(mem.Ingest(p.keys[j], p.values[j]));
    }
  }
}
BENCHMARK(BM_EngineBare)->ArgsProduct({{0, 1, 2}, {1, 64}});

void BM_ShardIngest(benchmark::State& state) {
  const Pool& p = PoolFor(kShardD);
  SauShard shard(Must(sau::Memory::Create(EngineSpec(static_cast<int>(state.range(0))))));
  const size_t batch = static_cast<size_t>(state.range(1));
  std::vector<EventView> views(batch);
  uint64_t t = 0;
  for (auto _ : state) {
    for (EventView& e : views) {
      const size_t j = t & (kPool - 1);
      e = {.t = ++t, .k = p.keys[j], .v = p.values[j]};
    }
    benchmark::DoNotOptimize(shard.Ingest(views, BatchLimits(batch)));
  }
}
BENCHMARK(BM_ShardIngest)->ArgsProduct({{0, 1, 2}, {1, 64}});

// ---------------------------------------------------------------------------------------

void AddRatios(RatioReporter& rep) {
  for (const std::string d : {"32", "64", "128"}) {
    rep.AddRatio({"a. ridge write / rank-1 update, d=" + d, {"BM_RidgeWrite/" + d},
                  {"BM_Rank1Update/" + d}, 0, Target::kNone});
    rep.AddRatio({"a. vla write / rank-1 update, d=" + d, {"BM_VlaWrite/" + d},
                  {"BM_Rank1Update/" + d}, 0, Target::kNone});
    rep.AddRatio({"a. ridge write / prf ingest (r=256), d=" + d, {"BM_RidgeWrite/" + d},
                  {"BM_PrfIngest/" + d}, 0, Target::kNone});
    rep.AddRatio({"a. vla write / prf ingest (r=256), d=" + d, {"BM_VlaWrite/" + d},
                  {"BM_PrfIngest/" + d}, 0, Target::kNone});
    rep.AddRatio({"b. ridge query (cached factor) / two triangular solves, d=" + d,
                  {"BM_RidgeQueryCached/" + d}, {"BM_TriangularSolves/" + d}, 0,
                  Target::kNone});
    rep.AddRatio({"b. ridge write + query / Cholesky, d=" + d,
                  {"BM_RidgeWriteThenQuery/" + d}, {"BM_Cholesky/" + d}, 0, Target::kNone});
    rep.AddRatio({"b. ridge query (cached) / prf query, d=" + d, {"BM_RidgeQueryCached/" + d},
                  {"BM_PrfQuery/" + d}, 0, Target::kNone});
    rep.AddRatio({"b. vla query / prf query, d=" + d, {"BM_VlaQuery/" + d},
                  {"BM_PrfQuery/" + d}, 0, Target::kNone});
  }
  rep.AddRatio({"b. ridge query (cached) d=128 / d=32", {"BM_RidgeQueryCached/128"},
                {"BM_RidgeQueryCached/32"}, 0, Target::kNone});
  for (const auto& [engine, name] : {std::pair{"0", "prf"}, {"1", "ridge"}, {"2", "vla"}}) {
    for (const std::string b : {"1", "64"}) {
      rep.AddRatio({std::string("c. ") + name + " shard ingest / bare engine, batch " + b,
                    {std::string("BM_ShardIngest/") + engine + "/" + b},
                    {std::string("BM_EngineBare/") + engine + "/" + b}, 0, Target::kNone});
    }
  }
  rep.AddRatio({"c. prf behind sau::Memory / the estimator directly, d=64",
                {"BM_EngineBare/0/1"}, {"BM_PrfIngest/64"}, 0, Target::kNone});
  rep.AddRatio({"b. Cholesky d=128 / d=32", {"BM_Cholesky/128"}, {"BM_Cholesky/32"}, 0,
                Target::kNone});
}

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  // Every benchmark is single-threaded: CPU time.
  streamlearn::bench::RatioReporter reporter(
      streamlearn::bench::ConsoleOptions(), streamlearn::bench::RatioReporter::TimeBase::kCpu);
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter,
                                                streamlearn::bench::AddRatios);
}
