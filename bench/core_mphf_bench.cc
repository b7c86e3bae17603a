// core_mphf_bench: our Mphf (core/lmu/mphf.h) beside Debian's libcmph, the library the LMU
// would otherwise use: BDZ and CHD with their defaults, and CHD tuned for space (load factor
// 0.99, 5 keys per bucket, "CHD-c"); absl::flat_hash_map<uint64_t, uint32_t> as a familiar
// reference (a dictionary storing its keys, so not the same job). docs/LMU_MPHF.md has the
// figures and the decision.
//
// At n = 10^6 and 10^7 random distinct 64-bit keys:
//   Build/<impl>/<n>        one build, timed once (process CPU time; 10^7 cmph builds take
//                           5-20 s), reported as keys_per_s and bits_per_key
//   Lookup/<impl>/<n>       independent lookups of 2^20 random members of the set: throughput
//   LookupChain/<impl>/<n>  each key depends on the previous result (through an AND with an
//                           opaque zero), so every lookup waits for the last: latency
// Lookup times are CPU time per lookup (lookup_ns). After the run a table gives the ratios
// ours / other. On 2 shared cores a run takes ~45 s, ~2 min with --benchmark_repetitions=5
// (which applies to the lookups; builds always run once, ~25 s of cmph builds in all).
#include <cmph.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "benchmark/benchmark.h"
#include "core/lmu/mphf.h"

namespace streamlearn::lmu {
namespace {

constexpr size_t kSizes[] = {1000000, 10000000};
constexpr size_t kQueries = size_t{1} << 20;
constexpr int kBatch = 1024;  // lookups per benchmark iteration

enum class Impl { kOurs, kBdz, kChd, kChdCompact, kFlatHashMap };
constexpr Impl kImpls[] = {Impl::kOurs, Impl::kBdz, Impl::kChd, Impl::kChdCompact,
                           Impl::kFlatHashMap};

const char* Name(Impl impl) {
  switch (impl) {
    case Impl::kOurs: return "ours";
    case Impl::kBdz: return "BDZ";
    case Impl::kChd: return "CHD";
    case Impl::kChdCompact: return "CHD-c";
    case Impl::kFlatHashMap: return "flat_hash_map";
  }
  return "?";
}

// Distinct keys that look random: a bijective mix (xorshift and odd multiplies) of 0..n-1.
uint64_t Mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 32;
  x *= 0xd6e8feb86659fd93ULL;
  x ^= x >> 32;
  return x;
}

struct KeySet {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> queries;  // kQueries random members
};

const KeySet& Keys(size_t n) {
  static std::map<size_t, std::unique_ptr<KeySet>> cache;
  std::unique_ptr<KeySet>& ks = cache[n];
  if (ks == nullptr) {
    ks = std::make_unique<KeySet>();
    ks->keys.resize(n);
    for (size_t i = 0; i < n; ++i) ks->keys[i] = Mix(i + 0x5eed);
    std::mt19937_64 rng(n);
    ks->queries.resize(kQueries);
    for (uint64_t& q : ks->queries) q = ks->keys[rng() % n];
  }
  return *ks;
}

struct Built {
  double build_cpu_s = 0;
  double build_wall_s = 0;
  size_t bytes = 0;
  Mphf ours;
  cmph_t* cmph = nullptr;  // owned; never freed (lives for the process)
  absl::flat_hash_map<uint64_t, uint32_t> map;
  std::string error;
};

double CpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

cmph_t* BuildCmph(Impl impl, std::vector<uint64_t>& keys) {
  cmph_io_adapter_t* source = cmph_io_struct_vector_adapter(
      keys.data(), sizeof(uint64_t), 0, sizeof(uint64_t), static_cast<cmph_uint32>(keys.size()));
  cmph_config_t* config = cmph_config_new(source);
  cmph_config_set_algo(config, impl == Impl::kBdz ? CMPH_BDZ : CMPH_CHD);
  if (impl == Impl::kChdCompact) {
    cmph_config_set_graphsize(config, 0.99);  // CHD: load factor
    cmph_config_set_b(config, 5);             // CHD: keys per bucket
  }
  cmph_t* f = cmph_new(config);
  cmph_config_destroy(config);
  cmph_io_struct_vector_adapter_destroy(source);
  return f;
}

// Builds once per (impl, n), timed; later calls return the same object.
Built& Get(Impl impl, size_t n) {
  static std::map<std::pair<Impl, size_t>, std::unique_ptr<Built>> cache;
  std::unique_ptr<Built>& b = cache[{impl, n}];
  if (b != nullptr) return *b;
  b = std::make_unique<Built>();
  std::vector<uint64_t>& keys = const_cast<KeySet&>(Keys(n)).keys;
  const double cpu0 = CpuSeconds();
  const auto wall0 = std::chrono::steady_clock::now();
  switch (impl) {
    case Impl::kOurs: {
      absl::StatusOr<Mphf> f = Mphf::Build(keys, HashKey{0x0123456789abcdefULL, n});
      if (f.ok()) {
        b->ours = *std::move(f);
      } else {
        b->error = f.status().ToString();
      }
      break;
    }
    case Impl::kBdz:
    case Impl::kChd:
    case Impl::kChdCompact:
      b->cmph = BuildCmph(impl, keys);
      if (b->cmph == nullptr) b->error = "cmph_new failed";
      break;
    case Impl::kFlatHashMap:
      b->map.reserve(n);
      for (size_t i = 0; i < n; ++i) b->map.emplace(keys[i], static_cast<uint32_t>(i));
      break;
  }
  b->build_cpu_s = CpuSeconds() - cpu0;
  b->build_wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!b->error.empty()) return *b;
  switch (impl) {
    case Impl::kOurs: b->bytes = b->ours.bytes(); break;
    case Impl::kFlatHashMap:
      b->bytes = b->map.capacity() * (sizeof(std::pair<const uint64_t, uint32_t>) + 1);
      break;
    default: b->bytes = cmph_packed_size(b->cmph); break;
  }
  // Sanity (untimed): the first 10^5 keys map to distinct values below n.
  if (impl != Impl::kFlatHashMap) {
    std::vector<bool> hit(n, false);
    for (size_t i = 0; i < std::min<size_t>(n, 100000); ++i) {
      const uint64_t v = impl == Impl::kOurs
                             ? b->ours(keys[i])
                             : cmph_search(b->cmph, reinterpret_cast<const char*>(&keys[i]), 8);
      if (v >= n || hit[v]) {
        b->error = absl::StrFormat("%s is not minimal perfect at key %d", Name(impl), i);
        break;
      }
      hit[v] = true;
    }
  }
  return *b;
}

template <Impl kImpl>
inline uint64_t Lookup(const Built& b, uint64_t key) {
  if constexpr (kImpl == Impl::kOurs) {
    return b.ours(key);
  } else if constexpr (kImpl == Impl::kFlatHashMap) {
    return b.map.find(key)->second;
  } else {
    return cmph_search(b.cmph, reinterpret_cast<const char*>(&key), sizeof(key));
  }
}

void BM_Build(benchmark::State& state, Impl impl, size_t n) {
  const Built& b = Get(impl, n);
  if (!b.error.empty()) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  for (auto _ : state) state.SetIterationTime(b.build_cpu_s);
  state.counters["keys_per_s"] = n / b.build_cpu_s;
  state.counters["wall_s"] = b.build_wall_s;
  state.counters["bits_per_key"] = 8.0 * b.bytes / n;
}

template <Impl kImpl>
void BM_Lookup(benchmark::State& state, size_t n) {
  const Built& b = Get(kImpl, n);
  if (!b.error.empty()) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  const std::vector<uint64_t>& q = Keys(n).queries;
  size_t i = 0;
  uint64_t sum = 0;
  for (auto _ : state) {
    for (int j = 0; j < kBatch; ++j) {
      sum += Lookup<kImpl>(b, q[i]);
      i = (i + 1) & (kQueries - 1);
    }
  }
  benchmark::DoNotOptimize(sum);
  state.counters["lookup_ns"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kBatch,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <Impl kImpl>
void BM_LookupChain(benchmark::State& state, size_t n) {
  const Built& b = Get(kImpl, n);
  if (!b.error.empty()) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  const std::vector<uint64_t>& q = Keys(n).queries;
  uint64_t zero = 0;
  benchmark::DoNotOptimize(zero);  // opaque: the compiler cannot drop the dependency
  size_t i = 0;
  uint64_t prev = 0;
  for (auto _ : state) {
    for (int j = 0; j < kBatch; ++j) {
      prev = Lookup<kImpl>(b, q[i] + (prev & zero));
      i = (i + 1) & (kQueries - 1);
    }
  }
  benchmark::DoNotOptimize(prev);
  state.counters["lookup_ns"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kBatch,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

template <Impl kImpl>
void RegisterLookups(size_t n) {
  const std::string suffix = absl::StrFormat("%s/%d", Name(kImpl), n);
  benchmark::RegisterBenchmark(("Lookup/" + suffix).c_str(), BM_Lookup<kImpl>, n);
  benchmark::RegisterBenchmark(("LookupChain/" + suffix).c_str(), BM_LookupChain<kImpl>, n);
}

void RegisterAll() {
  for (size_t n : kSizes) {
    for (Impl impl : kImpls) {
      benchmark::RegisterBenchmark(absl::StrFormat("Build/%s/%d", Name(impl), n).c_str(),
                                   BM_Build, impl, n)
          ->UseManualTime()
          ->Iterations(1)
          ->Repetitions(1)
          ->Unit(benchmark::kMillisecond);
    }
    RegisterLookups<Impl::kOurs>(n);
    RegisterLookups<Impl::kBdz>(n);
    RegisterLookups<Impl::kChd>(n);
    RegisterLookups<Impl::kChdCompact>(n);
    RegisterLookups<Impl::kFlatHashMap>(n);
  }
}

// The console reporter plus, at the end, per n a table of the figures and of the ratios
// ours / other (median of the repetitions when there are several).
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  SummaryReporter() : ConsoleReporter(OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (run.run_type == Run::RT_Aggregate && !median) continue;
      Figures& f = figures_[run.run_name.function_name];
      if (f.from_median && !median) continue;  // keep the median over single repetitions
      f.from_median = median;
      f.counters.clear();
      for (const auto& [name, counter] : run.counters) f.counters[name] = counter.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::ostream& out = GetOutputStream();
    for (size_t n : kSizes) {
      out << absl::StrFormat("\nMPHF summary, n = %d (lookups: CPU ns per lookup)\n", n);
      out << absl::StrFormat("%-14s %9s %14s %10s %10s\n", "impl", "bits/key", "build keys/s",
                             "lookup ns", "chain ns");
      for (Impl impl : kImpls) {
        out << absl::StrFormat("%-14s %9s %14s %10s %10s\n", Name(impl),
                               Cell(Get("Build", impl, n, "bits_per_key"), "%.3f"),
                               Cell(Get("Build", impl, n, "keys_per_s"), "%.3g"),
                               Cell(Ns(Get("Lookup", impl, n, "lookup_ns")), "%.1f"),
                               Cell(Ns(Get("LookupChain", impl, n, "lookup_ns")), "%.1f"));
      }
      out << absl::StrFormat("ratio ours / other (bits, ns: < 1 is ours better; keys/s: > 1)\n");
      for (Impl impl : kImpls) {
        if (impl == Impl::kOurs) continue;
        auto ratio = [&](const char* bench, const char* counter) {
          const double a = Get(bench, Impl::kOurs, n, counter);
          const double b = Get(bench, impl, n, counter);
          return a > 0 && b > 0 ? a / b : -1.0;
        };
        const double bits = ratio("Build", "bits_per_key");
        const double lookup = ratio("Lookup", "lookup_ns");
        const double chain = ratio("LookupChain", "lookup_ns");
        const bool complete = bits > 0 && lookup > 0 && chain > 0;
        const bool dominates = complete && bits < 1 && lookup < 1 && chain < 1;
        out << absl::StrFormat("  vs %-12s %9s %14s %10s %10s   %s\n", Name(impl),
                               Cell(bits, "%.2f"), Cell(ratio("Build", "keys_per_s"), "%.2f"),
                               Cell(lookup, "%.2f"), Cell(chain, "%.2f"),
                               impl == Impl::kFlatHashMap ? "(reference)"
                               : !complete ? "(not all measured)"
                               : dominates ? "ours better on bits and lookups"
                                           : "ours NOT better on both");
      }
    }
    out.flush();
  }

 private:
  struct Figures {
    bool from_median = false;
    std::map<std::string, double> counters;
  };

  double Get(const char* bench, Impl impl, size_t n, const char* counter) const {
    auto it = figures_.find(absl::StrFormat("%s/%s/%d", bench, Name(impl), n));
    if (it == figures_.end()) return -1;
    auto c = it->second.counters.find(counter);
    return c == it->second.counters.end() ? -1 : c->second;
  }
  static double Ns(double seconds) { return seconds < 0 ? seconds : seconds * 1e9; }
  static std::string Cell(double v, const absl::FormatSpec<double>& format) {
    return v < 0 ? "n/a" : absl::StrFormat(format, v);
  }

  std::map<std::string, Figures> figures_;
};

}  // namespace
}  // namespace streamlearn::lmu

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  streamlearn::lmu::RegisterAll();
  streamlearn::lmu::SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
