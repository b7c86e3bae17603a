// Benchmarks of the LMU's cuckoo delta, each beside absl::flat_hash_map<uint64_t, uint64_t>
// holding the same ids (STYLE: benchmarks), at 50% and 85% of the delta's capacity:
//
//   a. Locate of a present id / find of a present key.
//   b. Locate of an absent id / find of an absent key (the delta's worst path: both buckets,
//      both fingerprint vectors, the emergency slot).
//   c. Insert of new ids from load - 5% to load + 5% / insert into a map reserved for the
//      delta's capacity (so it never rehashes either).
//   d. The two SipHash-1-3 evaluations every delta miss pays, for scale.
//
// The delta is the LMU's (lmu_spec.h): 4096 buckets of 4 (C = 16384), S = 8, L = 8, Q = 16.
// The claims are ratios of medians, printed after the run (bench/ratio_reporter.h):
//   core_cuckoo_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Every benchmark is single-threaded; times are CPU time. The insert benchmarks time only the
// inserts (manual time, thread CPU time) and report ns per insert in the counter ns_per_op.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "core/lmu/cuckoo_delta.h"
#include "core/lmu/keyed_hash.h"

namespace streamlearn::bench {
namespace {

using lmu::CuckooDelta;
using lmu::HashKey;

constexpr HashKey kKeyA{0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
constexpr HashKey kKeyB{0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull};
constexpr size_t kPool = 4096;  // ids looked up, cycled (a power of two)

CuckooDelta::Options DeltaOptions() {
  CuckooDelta::Options o;
  o.buckets = 4096;
  return o;
}
size_t Capacity() { return size_t{4096} * 4; }

// Distinct pseudo-random ids: SplitMix64's output function is a bijection.
uint64_t Id(uint64_t stream, uint64_t i) {
  uint64_t x = (stream << 40) ^ i;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr uint64_t kInserted = 1;  // the stream of present ids
constexpr uint64_t kAbsent = 2;

size_t Count(int load_percent) { return Capacity() * load_percent / 100; }

std::unique_ptr<CuckooDelta> FilledDelta(size_t n) {
  auto d = std::make_unique<CuckooDelta>(DeltaOptions(), kKeyA, kKeyB);
  for (size_t i = 0; i < n; ++i) d->Insert(Id(kInserted, i), i);
  return d;
}

absl::flat_hash_map<uint64_t, uint64_t> FilledMap(size_t n) {
  absl::flat_hash_map<uint64_t, uint64_t> m;
  m.reserve(Capacity());
  for (size_t i = 0; i < n; ++i) m.emplace(Id(kInserted, i), i);
  return m;
}

// kPool ids: present ones spread over the whole fill (old and new), or absent ones.
std::vector<uint64_t> Pool(size_t n, bool present) {
  std::vector<uint64_t> ids(kPool);
  for (size_t k = 0; k < kPool; ++k) {
    ids[k] = present ? Id(kInserted, (k * 2654435761u) % n) : Id(kAbsent, k);
  }
  return ids;
}

// ---------------------------------------------------------------------------------------
// a, b. Lookups. Arguments: load in percent, 1 = present ids / 0 = absent ids.

void BM_DeltaLocate(benchmark::State& state) {
  const size_t n = Count(static_cast<int>(state.range(0)));
  const auto d = FilledDelta(n);
  const std::vector<uint64_t> ids = Pool(n, state.range(1) == 1);
  size_t k = 0;
  int64_t found = 0;
  for (auto _ : state) {
    const CuckooDelta::LocateResult r = d->Locate(ids[k++ & (kPool - 1)]);
    found += r.found;
    benchmark::DoNotOptimize(r.payload);
  }
  if (found != (state.range(1) == 1 ? state.iterations() : 0)) state.SkipWithError("lookup");
  state.counters["overflow"] = d->stash_used() + d->ring_used() + (d->emergency_used() ? 1 : 0);
}
BENCHMARK(BM_DeltaLocate)->Args({50, 1})->Args({85, 1})->Args({50, 0})->Args({85, 0});

void BM_AbslFind(benchmark::State& state) {
  const size_t n = Count(static_cast<int>(state.range(0)));
  const auto m = FilledMap(n);
  const std::vector<uint64_t> ids = Pool(n, state.range(1) == 1);
  size_t k = 0;
  int64_t found = 0;
  for (auto _ : state) {
    const auto it = m.find(ids[k++ & (kPool - 1)]);
    const bool hit = it != m.end();
    found += hit;
    benchmark::DoNotOptimize(hit ? it->second : 0);
  }
  if (found != (state.range(1) == 1 ? state.iterations() : 0)) state.SkipWithError("lookup");
}
BENCHMARK(BM_AbslFind)->Args({50, 1})->Args({85, 1})->Args({50, 0})->Args({85, 0});

// ---------------------------------------------------------------------------------------
// c. Inserts from load - 5% to load + 5%. Argument: load in percent. Each iteration builds a
// fresh table up to load - 5% (not timed) and times the next 10% of the capacity in thread
// CPU time (like the other benchmarks' CPU time, it leaves out time spent preempted).

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <typename Table, typename Make, typename Insert>
void TimeInserts(benchmark::State& state, Make make, Insert insert) {
  const int load = static_cast<int>(state.range(0));
  const size_t from = Count(load - 5), to = Count(load + 5);
  double ns = 0;
  uint64_t ops = 0;
  for (auto _ : state) {
    Table t = make(from);
    const double t0 = ThreadCpuSeconds();
    for (size_t i = from; i < to; ++i) insert(t, Id(kInserted, i), i);
    const double s = ThreadCpuSeconds() - t0;
    state.SetIterationTime(s);
    ns += s * 1e9;
    ops += to - from;
    benchmark::DoNotOptimize(t);
  }
  state.counters["ns_per_op"] = ns / static_cast<double>(ops);
}

void BM_DeltaInsert(benchmark::State& state) {
  uint64_t full = 0;
  TimeInserts<std::unique_ptr<CuckooDelta>>(
      state, FilledDelta, [&](std::unique_ptr<CuckooDelta>& d, uint64_t id, uint64_t v) {
        full += d->Insert(id, v).where == CuckooDelta::Where::kFull;
      });
  if (full != 0) state.SkipWithError("kFull");
}
BENCHMARK(BM_DeltaInsert)->Arg(50)->Arg(85)->UseManualTime()->Iterations(200);

void BM_AbslInsert(benchmark::State& state) {
  TimeInserts<absl::flat_hash_map<uint64_t, uint64_t>>(
      state, FilledMap,
      [](absl::flat_hash_map<uint64_t, uint64_t>& m, uint64_t id, uint64_t v) {
        m.emplace(id, v);
      });
}
BENCHMARK(BM_AbslInsert)->Arg(50)->Arg(85)->UseManualTime()->Iterations(200);

// ---------------------------------------------------------------------------------------
// d. The hashing a delta miss pays: SipHash13 under both keys.

void BM_SipHash13Pair(benchmark::State& state) {
  const std::vector<uint64_t> ids = Pool(1, false);
  size_t k = 0;
  for (auto _ : state) {
    const uint64_t id = ids[k++ & (kPool - 1)];
    benchmark::DoNotOptimize(lmu::SipHash13(kKeyA, id) ^ lmu::SipHash13(kKeyB, id));
  }
}
BENCHMARK(BM_SipHash13Pair);

// ---------------------------------------------------------------------------------------

void AddRatios(RatioReporter& rep) {
  for (const char* load : {"50", "85"}) {
    const std::string l = load;
    rep.AddRatio({"a. delta Locate hit / absl find hit, load " + l + "%",
                  {"BM_DeltaLocate/" + l + "/1"}, {"BM_AbslFind/" + l + "/1"}, 0, Target::kNone});
    rep.AddRatio({"b. delta Locate miss / absl find miss, load " + l + "%",
                  {"BM_DeltaLocate/" + l + "/0"}, {"BM_AbslFind/" + l + "/0"}, 0, Target::kNone});
    rep.AddRatio({"c. delta Insert / absl insert (reserved), load " + l + "%",
                  {"BM_DeltaInsert/" + l, "ns_per_op"},
                  {"BM_AbslInsert/" + l, "ns_per_op"}, 0, Target::kNone});
  }
  for (const char* load : {"50", "85"}) {
    const std::string l = load;
    rep.AddRatio({"d. two SipHash13 / delta Locate miss, load " + l + "%", {"BM_SipHash13Pair"},
                  {"BM_DeltaLocate/" + l + "/0"}, 0, Target::kNone});
  }
}

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  streamlearn::bench::RatioReporter reporter(streamlearn::bench::ConsoleOptions(),
                                             streamlearn::bench::RatioReporter::TimeBase::kCpu);
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter,
                                                streamlearn::bench::AddRatios);
}
