// Benchmarks of the LMU (core/lmu, docs/LMU.md), each beside its baseline in the same binary
// (STYLE: benchmarks). The claims are ratios of medians, printed after the run:
//   core_lmu_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
//   1. Predict and Update per feature at 10^4, 10^6 and 10^7 keys, beside a learner over
//      absl::flat_hash_map<uint64_t, double> doing the same arithmetic in the same order:
//        predict  y = b + sum_j w[id_j] * val_j   (find; absent ids add nothing)
//        update   w[id] = (1 - eta l2) w[id] + (eta e) val   (operator[]), b += eta e
//      The LMU side is an LmuLearner (m = 1) filled with every key by Step (inline rebuilds,
//      background_rebuild = false): the delta is sized so that the fill needs few rebuilds, and
//      tau_low is set so that the last rebuild fires after 99% of the keys, leaving 1% in the
//      delta (the split is printed). Both learners see the same fill samples and must predict
//      bit for bit alike before anything is timed. Samples have 8 features whose ids are drawn
//      uniformly from the key set; the sample arrays (2^19 samples at 10^6 and 10^7 keys,
//      64 MB of features) are generated before timing and cycled. Update = Step on the same
//      samples (known ids only). "Update, 10% new": each feature is, with probability 0.1, an
//      id never seen before; it runs on its own pair of learners (so the others keep their key
//      set) for a fixed number of samples per repetition, small enough that the LMU's delta
//      never reaches tau_low inside the timed loop (the rebuild work is measured in 2.).
//      Micro (to separate hashing from memory misses): the lookup path alone
//      (LmuTable::Pin + 8 x Reader::Locate) beside 8 x find, and its parts: SipHash-1-3, the
//      MPHF evaluation, LmuBase::Locate (MPHF + Keys_base entry), both also on a SipHash-1-3
//      MPHF over the same ids (the base's key hash is FoldHash, docs/LMU_MPHF.md), Pin + unpin,
//      the lookups under one pin, the WeightArena load by slot (the extra indirection:
//      entry -> slot -> arena row, where a flat_hash_map's slot holds the weight), absl's hash;
//      each as throughput (independent lookups) and, "Lat", as latency (a dependent chain). Two
//      bench-only prototypes of a staged, prefetching Predict (one sample per pin, and 8
//      samples per pin) show what would close the gap; LmuLearner::PredictMany, the batched
//      Predict, runs beside absl's predict at 8 and 64 samples per call.
//   2. LmuBase::Build over n entries (the background part of a rebuild, T_rb minus the delta
//      copy and the publish) at 10^6 and 10^7 keys, beside building an absl::flat_hash_map
//      <uint64_t, uint64_t> (reserve + emplace) over the same (id, slot) pairs; Mphf::Build
//      alone over the same ids, for the split.
//   3. Reader latency during a background rebuild: at 10^6 keys, a reader thread calls Predict
//      in a loop and records each call's steady_clock latency while (a) nothing else runs,
//      (b) the writer inserts new ids until the delta reaches tau_low, (c) the rebuild runs
//      (the writer only polls until it publishes). Percentiles p50/p99/p99.9 per phase.
//
// Times of 1. are thread CPU time (every timed loop is single-threaded); ns per feature is the
// time per 8-feature sample divided by 8. 2. compares wall times (counter "seconds"). Fixtures
// are built once, on first use, and cached (3.8 GB peak RSS). Whole run: ~3.5 min on 2 cores.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "core/lmu/keyed_hash.h"
#include "core/lmu/lmu_base.h"
#include "core/lmu/lmu_learner.h"
#include "core/lmu/lmu_spec.h"
#include "core/lmu/lmu_table.h"

namespace streamlearn::bench {
namespace {

using lmu::BaseEntry;
using lmu::Feature;
using lmu::HashSecret;
using lmu::LmuBase;
using lmu::LmuLearner;
using lmu::LmuSpec;
using lmu::LmuTable;
using lmu::LmuTableStats;

constexpr int kF = 8;  // features per sample
constexpr double kLr = 0.01;
constexpr double kL2 = 1e-4;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr size_t k1e4 = 10'000;
constexpr size_t k1e6 = 1'000'000;
constexpr size_t k1e7 = 10'000'000;

// Id streams (distinct across streams and indices below 2^40).
constexpr uint64_t kKeys = 1;         // the key set: Id(kKeys, i), i < n
constexpr uint64_t kNewIds = 2;       // ids never in any fill
constexpr uint64_t kLatencyNew = 3;   // new ids inserted by the latency experiment's writer

HashSecret Secret() {
  HashSecret s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0xa5 ^ (i * 29 + 7));
  return s;
}

// A bijection of 64-bit words (SplitMix64's output function), so ids are distinct.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t Id(uint64_t stream, uint64_t i) { return Mix((stream << 40) ^ i); }

struct Rng {
  uint64_t state;
  uint64_t Next() { return Mix(state++); }
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1p-53; }
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* format, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof(buf), format, ap);
  va_end(ap);
  return buf;
}

// ---------------------------------------------------------------------------------------
// The baseline learner: the same arithmetic over absl::flat_hash_map<uint64_t, double>.

class MapLearner {
 public:
  double Predict(const Feature* x, int k) const {
    double y = b_;
    for (int j = 0; j < k; ++j) {
      const auto it = w_.find(x[j].id);
      if (it != w_.end()) y += it->second * x[j].val;
    }
    return y;
  }
  // Returns the prediction before the update, like LmuLearner::Step.
  double Step(const Feature* x, int k, double y) {
    const double y_hat = Predict(x, k);
    const double e = y - y_hat;
    const double eta = kLr;
    const double shrink = 1.0 - eta * kL2;
    for (int j = 0; j < k; ++j) {
      double& w = w_[x[j].id];
      w = shrink * w + (eta * e) * x[j].val;
    }
    b_ = b_ + eta * e;
    return y_hat;
  }
  const absl::flat_hash_map<uint64_t, double>& weights() const { return w_; }

 private:
  absl::flat_hash_map<uint64_t, double> w_;
  double b_ = 0;
};

// ---------------------------------------------------------------------------------------
// Scales and specs.

struct Scale {
  size_t n;
  int fill_rebuilds;      // inline rebuilds during the fill; the last after 99% of the keys
  int delta_bucket_bits;  // delta_buckets = 2^bits (capacity 4 * 2^bits)
  size_t samples;         // known-id samples pre-generated (a power of two)
  size_t new_samples;     // "10% new" samples per repetition
};

const Scale& GetScale(size_t n) {
  static const Scale kScales[] = {
      {k1e4, 1, 13, size_t{1} << 16, 2'000},
      {k1e6, 2, 18, size_t{1} << 19, 25'000},
      {k1e7, 2, 21, size_t{1} << 19, 100'000},
  };
  for (const Scale& s : kScales) {
    if (s.n == n) return s;
  }
  Die("no scale for n = " + std::to_string(n));
}

size_t BaseKeys(const Scale& s) { return s.n - s.n / 100; }

// Inline rebuilds; tau_low = K / C exactly, K = BaseKeys / fill_rebuilds, so the delta
// reaches tau_low on the K-th, 2K-th, ... insert: after the fill 99% of the keys are in the
// base and 1% in the delta. The delta is large so that the fill takes few rebuilds.
LmuSpec FillSpec(const Scale& s) {
  LmuSpec spec;
  spec.m = 1;
  spec.lr = kLr;
  spec.l2 = kL2;
  spec.delta_buckets = uint32_t{1} << s.delta_bucket_bits;
  const double capacity = static_cast<double>(spec.delta_buckets) * spec.bucket_size;
  const size_t k = BaseKeys(s) / s.fill_rebuilds;
  if (k * s.fill_rebuilds != BaseKeys(s)) Die("fill_rebuilds must divide the base keys");
  spec.tau_low = static_cast<double>(k) / capacity;
  spec.tau_high = std::min(0.95, spec.tau_low + 0.2);
  spec.background_rebuild = false;
  if (absl::Status st = lmu::ValidateLmuSpec(spec); !st.ok()) Die(std::string(st.message()));
  return spec;
}

std::string Split(const LmuTableStats& st) {
  const double total = static_cast<double>(st.base_keys + st.delta_keys);
  return Fmt("base %llu (%.2f%%), delta %llu (%.2f%%, load %.3f), rebuilds %llu",
             static_cast<unsigned long long>(st.base_keys), 100.0 * st.base_keys / total,
             static_cast<unsigned long long>(st.delta_keys), 100.0 * st.delta_keys / total,
             st.delta_load, static_cast<unsigned long long>(st.rebuilds));
}

// ---------------------------------------------------------------------------------------
// Learner fixtures: an LmuLearner and a MapLearner trained on the same fill samples.

struct LearnerPair {
  size_t n = 0;
  std::unique_ptr<LmuLearner> lmu;
  MapLearner map;
  LmuTableStats stats;  // after the fill
  double lmu_fill_s = 0, map_fill_s = 0;
  bool identical = true;  // predictions bit for bit alike after the fill
};

void FillPair(const Scale& s, LearnerPair* p) {
  p->n = s.n;
  const LmuSpec spec = FillSpec(s);
  p->lmu = std::make_unique<LmuLearner>(spec, Secret());
  Rng rng{0x1234 + s.n};
  // The fill samples: every key once, in order, 8 per sample, random values and targets.
  std::vector<Feature> x(kF);
  double lmu_s = 0, map_s = 0;
  double y_before = 0;
  for (size_t i = 0; i < s.n; i += kF) {
    for (int j = 0; j < kF; ++j) x[j] = {Id(kKeys, i + j), 0.5 + rng.Unit()};
    const double y = 2 * rng.Unit() - 1;
    double t0 = Now();
    absl::StatusOr<lmu::StepResult> r = p->lmu->Step(x, {&y, 1}, kNaN, kNaN, &y_before);
    if (!r.ok()) Die("fill Step: " + std::string(r.status().message()));
    double t1 = Now();
    p->map.Step(x.data(), kF, y);
    lmu_s += t1 - t0;
    map_s += Now() - t1;
  }
  if (absl::Status st = p->lmu->Poll(); !st.ok()) Die(std::string(st.message()));
  p->stats = p->lmu->TableStats();
  p->lmu_fill_s = lmu_s;
  p->map_fill_s = map_s;
  // Same state: predictions over random samples of known ids must agree bit for bit.
  for (int k = 0; k < 1000; ++k) {
    for (int j = 0; j < kF; ++j) x[j] = {Id(kKeys, rng.Below(s.n)), 0.5 + rng.Unit()};
    double y_lmu = 0;
    p->lmu->Predict(x, &y_lmu);
    if (y_lmu != p->map.Predict(x.data(), kF)) p->identical = false;
  }
}

struct Fixture : LearnerPair {
  std::vector<Feature> x;  // samples * kF features, known ids
  std::vector<double> y;   // samples targets
  size_t samples = 0;
};

// Known-id samples (ids uniform over the key set).
void MakeSamples(size_t n, size_t samples, uint64_t seed, std::vector<Feature>* x,
                 std::vector<double>* y) {
  Rng rng{seed};
  x->resize(samples * kF);
  y->resize(samples);
  for (size_t k = 0; k < samples; ++k) {
    for (int j = 0; j < kF; ++j) (*x)[k * kF + j] = {Id(kKeys, rng.Below(n)), 0.5 + rng.Unit()};
    (*y)[k] = 2 * rng.Unit() - 1;
  }
}

void Note(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  Notes().push_back(line);
}

Fixture& GetFixture(size_t n) {
  static std::map<size_t, std::unique_ptr<Fixture>> cache;
  auto& f = cache[n];
  if (f == nullptr) {
    const Scale& s = GetScale(n);
    f = std::make_unique<Fixture>();
    FillPair(s, f.get());
    f->samples = s.samples;
    MakeSamples(n, s.samples, 0xabc0 + n, &f->x, &f->y);
    Note(Fmt("fixture %zu keys: LMU %s; fill: LMU Step %.2f s, absl Step %.2f s; "
             "predictions identical: %s",
             n, Split(f->stats).c_str(), f->lmu_fill_s, f->map_fill_s,
             f->identical ? "yes" : "NO"));
  }
  return *f;
}

// The "10% new ids" pair: its own learners, filled the same way; the sample stream is extended
// (untimed) whenever a run would pass its end, so every "new" id is new to both learners.
struct NewFixture : LearnerPair {
  std::vector<Feature> x;
  std::vector<double> y;
  size_t lmu_pos = 0, map_pos = 0;  // next sample for each side
  uint64_t next_new = 0;
  uint64_t new_ids = 0;
  Rng rng{0};
};

void ExtendNewSamples(NewFixture* f, size_t samples) {
  const size_t old = f->y.size();
  f->x.resize((old + samples) * kF);
  f->y.resize(old + samples);
  for (size_t k = old; k < old + samples; ++k) {
    for (int j = 0; j < kF; ++j) {
      const bool fresh = f->rng.Below(10) == 0;
      const uint64_t id = fresh ? Id(kNewIds, f->next_new++) : Id(kKeys, f->rng.Below(f->n));
      f->new_ids += fresh;
      f->x[k * kF + j] = {id, 0.5 + f->rng.Unit()};
    }
    f->y[k] = 2 * f->rng.Unit() - 1;
  }
}

NewFixture& GetNewFixture(size_t n) {
  static std::map<size_t, std::unique_ptr<NewFixture>> cache;
  auto& f = cache[n];
  if (f == nullptr) {
    const Scale& s = GetScale(n);
    f = std::make_unique<NewFixture>();
    FillPair(s, f.get());
    f->rng = Rng{0xfeed0 + n};
    ExtendNewSamples(f.get(), 6 * s.new_samples);
    Note(Fmt("fixture %zu keys, 10%% new: LMU %s; fill %.2f s + %.2f s", n,
             Split(f->stats).c_str(), f->lmu_fill_s, f->map_fill_s));
  }
  return *f;
}

// ---------------------------------------------------------------------------------------
// 1. Predict and Update. Argument: keys. One iteration = one 8-feature sample.

void SetFeatureCounters(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kF);
}

void BM_Predict_Lmu(benchmark::State& state) {
  Fixture& f = GetFixture(static_cast<size_t>(state.range(0)));
  if (!f.identical) state.SkipWithError("LMU and absl learners disagree after the fill");
  const size_t mask = f.samples - 1;
  size_t k = 0;
  double y = 0;
  for (auto _ : state) {
    f.lmu->Predict({&f.x[(k & mask) * kF], kF}, &y);
    benchmark::DoNotOptimize(y);
    ++k;
  }
  SetFeatureCounters(state);
}

void BM_Predict_Absl(benchmark::State& state) {
  Fixture& f = GetFixture(static_cast<size_t>(state.range(0)));
  const size_t mask = f.samples - 1;
  size_t k = 0;
  for (auto _ : state) {
    double y = f.map.Predict(&f.x[(k & mask) * kF], kF);
    benchmark::DoNotOptimize(y);
    ++k;
  }
  SetFeatureCounters(state);
}

// LmuLearner::PredictMany over Samples consecutive samples per call (one pin, the lookups of
// all of them staged together); per feature, as the rows above. Its sums are checked against
// Predict's once, bit for bit, before the loop.
template <int Samples>
void BM_PredictMany_Lmu(benchmark::State& state) {
  Fixture& f = GetFixture(static_cast<size_t>(state.range(0)));
  if (!f.identical) state.SkipWithError("LMU and absl learners disagree after the fill");
  const size_t mask = f.samples - 1;  // a power of two, a multiple of Samples
  std::vector<std::span<const Feature>> xs(Samples);
  double y[Samples];
  for (int s = 0; s < Samples; ++s) xs[s] = {&f.x[s * kF], kF};
  f.lmu->PredictMany(xs, y);
  for (int s = 0; s < Samples; ++s) {
    double one = 0;
    f.lmu->Predict(xs[s], &one);
    if (one != y[s]) state.SkipWithError("PredictMany disagrees with Predict");
  }
  size_t k = 0;
  for (auto _ : state) {
    const size_t first = k & mask;
    for (int s = 0; s < Samples; ++s) xs[s] = {&f.x[(first + s) * kF], kF};
    f.lmu->PredictMany(xs, y);
    benchmark::DoNotOptimize(y);
    k += Samples;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * Samples * kF);
}

void BM_Update_Lmu(benchmark::State& state) {
  Fixture& f = GetFixture(static_cast<size_t>(state.range(0)));
  const size_t mask = f.samples - 1;
  size_t k = 0;
  double y_before = 0;
  uint64_t inserted = 0;
  for (auto _ : state) {
    const size_t i = k & mask;
    absl::StatusOr<lmu::StepResult> r =
        f.lmu->Step({&f.x[i * kF], kF}, {&f.y[i], 1}, kNaN, kNaN, &y_before);
    inserted += r.ok() ? r->inserted : 1;
    benchmark::DoNotOptimize(y_before);
    ++k;
  }
  if (inserted != 0) state.SkipWithError("known-id update inserted ids");
  SetFeatureCounters(state);
}

void BM_Update_Absl(benchmark::State& state) {
  Fixture& f = GetFixture(static_cast<size_t>(state.range(0)));
  const size_t mask = f.samples - 1;
  size_t k = 0;
  for (auto _ : state) {
    const size_t i = k & mask;
    double y = f.map.Step(&f.x[i * kF], kF, f.y[i]);
    benchmark::DoNotOptimize(y);
    ++k;
  }
  SetFeatureCounters(state);
}

// 10% new ids: a fixed number of samples per run (Iterations), continuing the stream.
void BM_UpdateNew_Lmu(benchmark::State& state) {
  NewFixture& f = GetNewFixture(static_cast<size_t>(state.range(0)));
  const size_t need = f.lmu_pos + static_cast<size_t>(state.max_iterations);
  if (need > f.y.size()) ExtendNewSamples(&f, need - f.y.size());
  const uint64_t rebuilds = f.lmu->TableStats().rebuilds;
  double y_before = 0;
  uint64_t inserted = 0;
  for (auto _ : state) {
    const size_t i = f.lmu_pos++;
    absl::StatusOr<lmu::StepResult> r =
        f.lmu->Step({&f.x[i * kF], kF}, {&f.y[i], 1}, kNaN, kNaN, &y_before);
    inserted += r.ok() ? r->inserted : 1;
    benchmark::DoNotOptimize(y_before);
  }
  const LmuTableStats st = f.lmu->TableStats();
  if (st.rebuilds != rebuilds) state.SkipWithError("a rebuild ran inside the timed loop");
  state.counters["new_frac"] = static_cast<double>(inserted) / (state.iterations() * kF);
  state.counters["delta_keys"] = static_cast<double>(st.delta_keys);
  SetFeatureCounters(state);
}

void BM_UpdateNew_Absl(benchmark::State& state) {
  NewFixture& f = GetNewFixture(static_cast<size_t>(state.range(0)));
  const size_t need = f.map_pos + static_cast<size_t>(state.max_iterations);
  if (need > f.y.size()) ExtendNewSamples(&f, need - f.y.size());
  for (auto _ : state) {
    const size_t i = f.map_pos++;
    double y = f.map.Step(&f.x[i * kF], kF, f.y[i]);
    benchmark::DoNotOptimize(y);
  }
  SetFeatureCounters(state);
}

// ---------------------------------------------------------------------------------------
// Micro: the lookup path and its parts. The table is an LmuTable filled like the learners
// (LocateOrInsert, same spec and split); the base is an LmuBase built over the table's
// entries (the rebuild benchmark's input), the same size and shape as the table's base.

struct TableFixture {
  std::unique_ptr<LmuTable> table;
  std::vector<BaseEntry> entries;             // every (id, slot)
  std::shared_ptr<const LmuBase> base;        // built over entries
  lmu::HashKey mphf_key;                      // a SipHash key, for the hash-only benchmark
  // The same base on the other key hash: an MPHF built on SipHash-1-3 over the same ids and
  // the entries in its hash order (what LmuBase::Build made before FoldHash, and makes when
  // both FoldHash salts fail), for the FoldHash / SipHash rows.
  lmu::Mphf sip_mphf;
  std::vector<BaseEntry> sip_entries;
  std::vector<uint64_t> slots;                // the slot of every feature of GetFixture(n).x
};

TableFixture& GetTable(size_t n) {
  static std::map<size_t, std::unique_ptr<TableFixture>> cache;
  auto& t = cache[n];
  if (t == nullptr) {
    const Scale& s = GetScale(n);
    t = std::make_unique<TableFixture>();
    t->table = std::make_unique<LmuTable>(FillSpec(s), Secret());
    const double t0 = Now();
    for (size_t i = 0; i < n; ++i) {
      LmuTable::Probes probes;
      if (!t->table->LocateOrInsert(Id(kKeys, i), &probes).ok()) Die("table fill");
    }
    const double fill_s = Now() - t0;
    t->entries = t->table->Entries();
    if (t->entries.size() != n) Die("table entries");
    absl::StatusOr<std::shared_ptr<const LmuBase>> base =
        LmuBase::Build(t->entries, Secret(), /*generation=*/1000);
    if (!base.ok()) Die("base build: " + std::string(base.status().message()));
    t->base = *std::move(base);
    t->mphf_key = lmu::DeriveHashKey(Secret(), lmu::HashPurpose::kMphf, 1000);
    {
      std::vector<uint64_t> ids(n);
      for (size_t i = 0; i < n; ++i) ids[i] = t->entries[i].id;
      lmu::Mphf::Options sip;
      sip.key_hash = lmu::Mphf::KeyHash::kSipHash13;
      absl::StatusOr<lmu::Mphf> f = lmu::Mphf::Build(ids, t->mphf_key, sip);
      if (!f.ok()) Die("SipHash MPHF build: " + std::string(f.status().message()));
      t->sip_mphf = *std::move(f);
      t->sip_entries.resize(n);
      for (const BaseEntry& e : t->entries) t->sip_entries[t->sip_mphf(e.id)] = e;
    }
    const Fixture& f = GetFixture(n);
    t->slots.resize(f.x.size());
    auto reader = t->table->Pin();
    for (size_t i = 0; i < f.x.size(); ++i) {
      int probes = 0;
      if (!reader.Locate(f.x[i].id, &t->slots[i], &probes)) Die("table locate");
    }
    Note(Fmt("table %zu keys: %s; fill (LocateOrInsert) %.2f s; sizes: base %.1f MB "
             "(MPHF %.2f bits/key), arena %.1f MB; absl map (this fixture's learner) "
             "capacity %zu, %.1f MB",
             n, Split(t->table->Stats()).c_str(), fill_s, t->base->bytes() / 1e6,
             t->base->mphf().bits_per_key(), t->table->weights().bytes() / 1e6,
             f.map.weights().capacity(),
             f.map.weights().capacity() * (sizeof(std::pair<uint64_t, double>) + 1) / 1e6));
  }
  return *t;
}

template <typename PerFeature>
void MicroLoop(benchmark::State& state, const Fixture& f, PerFeature per_feature) {
  const size_t mask = f.samples - 1;
  size_t k = 0;
  uint64_t acc = 0;
  for (auto _ : state) {
    const size_t base = (k & mask) * kF;
    for (int j = 0; j < kF; ++j) acc += per_feature(base + j);
    ++k;
  }
  benchmark::DoNotOptimize(acc);
  SetFeatureCounters(state);
}

void BM_Micro_SipHash13(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const lmu::HashKey key = GetTable(n).mphf_key;
  MicroLoop(state, f, [&](size_t i) { return lmu::SipHash13(key, f.x[i].id); });
}

void BM_Micro_AbslHash(benchmark::State& state) {
  const Fixture& f = GetFixture(static_cast<size_t>(state.range(0)));
  const absl::Hash<uint64_t> hash;
  MicroLoop(state, f, [&](size_t i) { return static_cast<uint64_t>(hash(f.x[i].id)); });
}

void BM_Micro_Mphf(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const lmu::Mphf& mphf = GetTable(n).base->mphf();
  MicroLoop(state, f, [&](size_t i) { return mphf(f.x[i].id); });
}

void BM_Micro_BaseLocate(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const LmuBase& base = *GetTable(n).base;
  MicroLoop(state, f, [&](size_t i) {
    uint64_t slot = 0;
    base.Locate(f.x[i].id, &slot);  // the 1% delta ids are in this base too
    return slot;
  });
}

// The two rows above on the SipHash-1-3 MPHF over the same ids (LmuBase::Locate's operations).
void BM_Micro_MphfSipHash(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const lmu::Mphf& mphf = GetTable(n).sip_mphf;
  MicroLoop(state, f, [&](size_t i) { return mphf(f.x[i].id); });
}

void BM_Micro_BaseLocateSipHash(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const TableFixture& t = GetTable(n);
  MicroLoop(state, f, [&](size_t i) {
    const uint64_t id = f.x[i].id;
    const BaseEntry& e = t.sip_entries[t.sip_mphf(id)];
    return e.id == id ? e.slot : uint64_t{0};
  });
}

void BM_Micro_ArenaLoad(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const TableFixture& t = GetTable(n);
  const lmu::WeightArena& w = t.table->weights();
  MicroLoop(state, f, [&](size_t i) {
    return static_cast<uint64_t>(w.Load(t.slots[i], 0) * 1e6);
  });
}

// LmuTable::Pin once per sample (as Predict does) + Reader::Locate per feature.
void BM_Micro_TableLocate(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const LmuTable& table = *GetTable(n).table;
  const size_t mask = f.samples - 1;
  size_t k = 0;
  uint64_t acc = 0;
  for (auto _ : state) {
    const LmuTable::Reader reader = table.Pin();
    const Feature* x = &f.x[(k & mask) * kF];
    for (int j = 0; j < kF; ++j) {
      uint64_t slot = 0;
      int probes = 0;
      acc += reader.Locate(x[j].id, &slot, &probes) ? slot : 0;
    }
    ++k;
  }
  benchmark::DoNotOptimize(acc);
  SetFeatureCounters(state);
}

void BM_Micro_AbslFind(benchmark::State& state) {
  const Fixture& f = GetFixture(static_cast<size_t>(state.range(0)));
  const auto& m = f.map.weights();
  MicroLoop(state, f, [&](size_t i) {
    const auto it = m.find(f.x[i].id);
    return it == m.end() ? uint64_t{0} : static_cast<uint64_t>(it->second * 1e6);
  });
}

// The same lookups under one pin for the whole run: what the per-sample pin costs. Pin and
// unpin are seq_cst read-modify-writes (lock xadd on x86-64), full fences: the misses of one
// sample cannot overlap those of the next.
void BM_Micro_TableLocatePinOnce(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const LmuTable& table = *GetTable(n).table;
  const LmuTable::Reader reader = table.Pin();
  const size_t mask = f.samples - 1;
  size_t k = 0;
  uint64_t acc = 0;
  for (auto _ : state) {
    const Feature* x = &f.x[(k & mask) * kF];
    for (int j = 0; j < kF; ++j) {
      uint64_t slot = 0;
      int probes = 0;
      acc += reader.Locate(x[j].id, &slot, &probes) ? slot : 0;
    }
    ++k;
  }
  benchmark::DoNotOptimize(acc);
  SetFeatureCounters(state);
}

// Pin + unpin alone, once per iteration (reported per feature like the others: / 8).
void BM_Micro_PinUnpin(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const LmuTable& table = *GetTable(n).table;
  for (auto _ : state) {
    const LmuTable::Reader reader = table.Pin();
    benchmark::DoNotOptimize(reader.ver_base());
  }
  SetFeatureCounters(state);
}

// The full weight fetch of Predict without the learner around it: Pin + Locate + arena load.
void BM_Micro_LocateLoad(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const LmuTable& table = *GetTable(n).table;
  const lmu::WeightArena& w = table.weights();
  const size_t mask = f.samples - 1;
  size_t k = 0;
  double acc = 0;
  for (auto _ : state) {
    const LmuTable::Reader reader = table.Pin();
    const Feature* x = &f.x[(k & mask) * kF];
    for (int j = 0; j < kF; ++j) {
      uint64_t slot = 0;
      int probes = 0;
      if (reader.Locate(x[j].id, &slot, &probes)) acc += w.Load(slot, 0) * x[j].val;
    }
    ++k;
  }
  benchmark::DoNotOptimize(acc);
  SetFeatureCounters(state);
}

// A prototype of what could close the gap (bench only, public APIs): Predict's lookups in
// three stages over the sample's 8 features instead of one dependent chain per feature:
// (1) MPHF positions, prefetching the Keys_base entries; (2) the entries' slots; (3) the
// weights. The misses of all 8 features overlap. Pins the table per sample like Predict, but
// reads the standalone base (every id is in it; a real Predict would read the pinned base and
// fall back to the delta for ids not in it).
void BM_Micro_StagedPredict(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const TableFixture& t = GetTable(n);
  const lmu::Mphf& mphf = t.base->mphf();
  const BaseEntry* entries = t.base->entries().data();
  const lmu::WeightArena& w = t.table->weights();
  const size_t mask = f.samples - 1;
  size_t k = 0;
  double acc = 0;
  for (auto _ : state) {
    const LmuTable::Reader pin = t.table->Pin();  // as a Predict call would (not used here)
    const Feature* x = &f.x[(k & mask) * kF];
    uint64_t pos[kF];
    uint64_t slot[kF];
    for (int j = 0; j < kF; ++j) {
      pos[j] = mphf(x[j].id);
      __builtin_prefetch(&entries[pos[j]]);
    }
    for (int j = 0; j < kF; ++j) {
      const BaseEntry& e = entries[pos[j]];
      slot[j] = e.id == x[j].id ? e.slot : ~uint64_t{0};
    }
    double y = 0;
    for (int j = 0; j < kF; ++j) {
      if (slot[j] != ~uint64_t{0}) y += w.Load(slot[j], 0) * x[j].val;
    }
    acc += y;
    ++k;
  }
  benchmark::DoNotOptimize(acc);
  SetFeatureCounters(state);
}

// The same three stages over 8 samples (64 features) under one pin: a batched Predict, so the
// misses of several samples overlap too. One iteration = 64 features.
constexpr int kBatch = 8;
void BM_Micro_StagedBatch(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const Fixture& f = GetFixture(n);
  const TableFixture& t = GetTable(n);
  const lmu::Mphf& mphf = t.base->mphf();
  const BaseEntry* entries = t.base->entries().data();
  const lmu::WeightArena& w = t.table->weights();
  const size_t mask = f.samples - 1;
  size_t k = 0;
  double acc = 0;
  constexpr int kB = kBatch * kF;
  for (auto _ : state) {
    const LmuTable::Reader pin = t.table->Pin();
    const Feature* x = &f.x[(k & mask) * kF];  // samples k .. k + 7 (mask: a multiple of 8)
    uint64_t pos[kB];
    uint64_t slot[kB];
    for (int j = 0; j < kB; ++j) {
      pos[j] = mphf(x[j].id);
      __builtin_prefetch(&entries[pos[j]]);
    }
    for (int j = 0; j < kB; ++j) {
      const BaseEntry& e = entries[pos[j]];
      slot[j] = e.id == x[j].id ? e.slot : ~uint64_t{0};
    }
    for (int s = 0; s < kBatch; ++s) {
      double y = 0;
      for (int j = s * kF; j < (s + 1) * kF; ++j) {
        if (slot[j] != ~uint64_t{0}) y += w.Load(slot[j], 0) * x[j].val;
      }
      acc += y;
    }
    k += kBatch;
  }
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kB);
}

// Latency: the same operations as a dependent chain (each lookup's id depends on the previous
// result through a run-time zero), so nothing overlaps: ns per lookup = its latency.
template <typename Fn>
void ChainLoop(benchmark::State& state, const Fixture& f, Fn fn) {
  static volatile uint64_t zero = 0;
  const uint64_t z = zero;
  const size_t mask = f.samples * kF - 1;
  size_t i = 0;
  uint64_t acc = 0;
  for (auto _ : state) {
    for (int j = 0; j < kF; ++j) {
      const size_t at = i++ & mask;
      acc = fn(f.x[at].id ^ (acc & z), at, acc & z);
    }
  }
  benchmark::DoNotOptimize(acc);
  SetFeatureCounters(state);
}

void BM_Lat_SipHash13(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const lmu::HashKey key = GetTable(n).mphf_key;
  ChainLoop(state, GetFixture(n),
            [&](uint64_t id, size_t, uint64_t) { return lmu::SipHash13(key, id); });
}

void BM_Lat_Mphf(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const lmu::Mphf& mphf = GetTable(n).base->mphf();
  ChainLoop(state, GetFixture(n), [&](uint64_t id, size_t, uint64_t) { return mphf(id); });
}

void BM_Lat_BaseLocate(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const LmuBase& base = *GetTable(n).base;
  ChainLoop(state, GetFixture(n), [&](uint64_t id, size_t, uint64_t) {
    uint64_t slot = 0;
    base.Locate(id, &slot);
    return slot;
  });
}

void BM_Lat_ArenaLoad(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const TableFixture& t = GetTable(n);
  const lmu::WeightArena& w = t.table->weights();
  ChainLoop(state, GetFixture(n), [&](uint64_t, size_t at, uint64_t z) {
    return std::bit_cast<uint64_t>(w.Load(t.slots[at] ^ z, 0));
  });
}

// MPHF + Keys_base entry + arena row: the per-feature chain of Predict (without the pin).
void BM_Lat_LmuFetch(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const TableFixture& t = GetTable(n);
  const LmuBase& base = *t.base;
  const lmu::WeightArena& w = t.table->weights();
  ChainLoop(state, GetFixture(n), [&](uint64_t id, size_t, uint64_t) {
    uint64_t slot = 0;
    return base.Locate(id, &slot) ? std::bit_cast<uint64_t>(w.Load(slot, 0)) : uint64_t{1};
  });
}

void BM_Lat_AbslFind(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const auto& m = GetFixture(n).map.weights();
  ChainLoop(state, GetFixture(n), [&](uint64_t id, size_t, uint64_t) {
    const auto it = m.find(id);
    return it == m.end() ? uint64_t{1} : std::bit_cast<uint64_t>(it->second);
  });
}

// ---------------------------------------------------------------------------------------
// 2. Rebuild: LmuBase::Build over n (id, slot) entries beside an absl map over the same.
// Wall time of one build per repetition (Iterations(1)); counter keys_per_s.

// Times `build()` once per iteration (wall clock); `build` returns false on failure. The built
// object is destroyed outside the timed part, so only construction is measured.
template <typename Build>
void TimedBuilds(benchmark::State& state, size_t n, Build build) {
  double seconds = 0;
  for (auto _ : state) {
    const double t0 = Now();
    const bool ok = build();
    seconds += Now() - t0;
    if (!ok) {
      state.SkipWithError("build failed");
      return;
    }
  }
  state.counters["seconds"] = seconds / state.iterations();
  state.counters["keys_per_s"] = n * state.iterations() / seconds;
}

void BM_Rebuild_LmuBaseBuild(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const TableFixture& t = GetTable(n);
  static uint64_t generation = 2000;
  std::shared_ptr<const LmuBase> built;
  TimedBuilds(state, n, [&] {
    absl::StatusOr<std::shared_ptr<const LmuBase>> b =
        LmuBase::Build(t.entries, Secret(), ++generation);
    if (!b.ok()) return false;
    built = *std::move(b);  // the previous base is freed here, inside the timed part (as a
    return true;            // rebuild that replaces a base would)
  });
}

// The MPHF alone over the same ids: LmuBase::Build minus the id copy and the scatter of the
// entries into hash order (one more MPHF evaluation and one random 16-byte write per key).
void BM_Rebuild_MphfBuild(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const TableFixture& t = GetTable(n);
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = t.entries[i].id;
  static uint64_t generation = 5000;
  lmu::Mphf built;
  TimedBuilds(state, n, [&] {
    const lmu::HashKey salt = lmu::DeriveHashKey(Secret(), lmu::HashPurpose::kMphf, ++generation);
    absl::StatusOr<lmu::Mphf> f = lmu::Mphf::Build(ids, salt);
    if (!f.ok()) return false;
    built = *std::move(f);
    return true;
  });
}

void BM_Rebuild_AbslBuild(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const TableFixture& t = GetTable(n);
  absl::flat_hash_map<uint64_t, uint64_t> built;
  TimedBuilds(state, n, [&] {
    absl::flat_hash_map<uint64_t, uint64_t> m;
    m.reserve(n);
    for (const BaseEntry& e : t.entries) m.emplace(e.id, e.slot);
    built.swap(m);  // the previous map is freed with m, as the LMU frees its previous base
    return true;
  });
}

// ---------------------------------------------------------------------------------------
// 3. Reader latency during background rebuilds, at 10^6 keys.

LmuSpec LatencySpec() {
  LmuSpec spec;
  spec.m = 1;
  spec.lr = kLr;
  spec.l2 = kL2;
  spec.delta_buckets = 1u << 13;  // C = 32768; a rebuild every 19661 new ids
  spec.tau_low = 0.6;
  spec.tau_high = 0.8;
  spec.background_rebuild = true;
  if (absl::Status st = lmu::ValidateLmuSpec(spec); !st.ok()) Die(std::string(st.message()));
  return spec;
}

// Writer: waits (polling) until no rebuild is running; publishes finished ones.
void WaitForRebuilds(LmuLearner& lmu) {
  for (;;) {
    if (absl::Status st = lmu.Poll(); !st.ok()) Die(std::string(st.message()));
    if (!lmu.TableStats().rebuild_running) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

struct Percentiles {
  size_t count = 0;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
};

Percentiles Summarize(std::vector<uint32_t>& v) {
  Percentiles p;
  p.count = v.size();
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return static_cast<double>(v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]);
  };
  p.p50 = at(0.5);
  p.p99 = at(0.99);
  p.p999 = at(0.999);
  p.max = static_cast<double>(v.back());
  return p;
}

void BM_ReaderLatency(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  // The learner: background rebuilds, filled with n keys, waiting out each rebuild.
  LmuLearner lmu(LatencySpec(), Secret());
  {
    Rng rng{0x77};
    std::vector<Feature> x(kF);
    double y_before = 0;
    for (size_t i = 0; i < n; i += kF) {
      for (int j = 0; j < kF; ++j) x[j] = {Id(kKeys, i + j), 0.5 + rng.Unit()};
      const double y = 2 * rng.Unit() - 1;
      if (!lmu.Step(x, {&y, 1}, kNaN, kNaN, &y_before).ok()) Die("latency fill");
      if (lmu.TableStats().rebuild_running) WaitForRebuilds(lmu);
    }
    WaitForRebuilds(lmu);
  }
  const LmuTableStats filled = lmu.TableStats();
  std::vector<Feature> xs;
  std::vector<double> ys;
  constexpr size_t kReaderSamples = size_t{1} << 18;
  MakeSamples(n, kReaderSamples, 0x5150, &xs, &ys);

  enum Phase : int { kIdle = 0, kInserting = 1, kRebuilding = 2, kStop = 3 };
  constexpr int kRounds = 8;
  constexpr auto kIdleWindow = std::chrono::milliseconds(250);
  std::atomic<int> phase{kIdle};
  std::vector<uint32_t> lat[3];
  for (auto& v : lat) v.reserve(size_t{12} << 20);
  std::vector<double> rebuild_ms;
  uint64_t inserted = 0;

  for (auto _ : state) {
    std::thread reader([&] {
      size_t k = 0;
      double y = 0;
      for (;;) {
        const int p = phase.load(std::memory_order_acquire);
        if (p == kStop) break;
        const auto t0 = std::chrono::steady_clock::now();
        lmu.Predict({&xs[(k & (kReaderSamples - 1)) * kF], kF}, &y);
        const auto t1 = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(y);
        std::vector<uint32_t>& v = lat[p];
        if (v.size() < v.capacity()) {
          v.push_back(static_cast<uint32_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
        }
        ++k;
      }
    });
    uint64_t next_new = 0;
    std::vector<Feature> x(kF);
    double y_before = 0;
    Rng rng{0x99};
    for (int round = 0; round < kRounds; ++round) {
      phase.store(kIdle, std::memory_order_release);
      std::this_thread::sleep_for(kIdleWindow);
      // Insert new ids until the delta reaches tau_low and the rebuild starts.
      phase.store(kInserting, std::memory_order_release);
      const uint64_t rebuilds = lmu.TableStats().rebuilds;
      while (!lmu.TableStats().rebuild_running) {
        for (int j = 0; j < kF; ++j) x[j] = {Id(kLatencyNew, next_new++), 0.5 + rng.Unit()};
        const double y = 2 * rng.Unit() - 1;
        if (!lmu.Step(x, {&y, 1}, kNaN, kNaN, &y_before).ok()) Die("latency insert");
        inserted += kF;
      }
      phase.store(kRebuilding, std::memory_order_release);
      const double t0 = Now();
      while (lmu.TableStats().rebuilds == rebuilds) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (!lmu.Poll().ok()) Die("latency poll");
      }
      rebuild_ms.push_back(1e3 * (Now() - t0));
    }
    phase.store(kStop, std::memory_order_release);
    reader.join();
  }
  const LmuTableStats end = lmu.TableStats();
  Percentiles p[3];
  for (int i = 0; i < 3; ++i) p[i] = Summarize(lat[i]);
  std::sort(rebuild_ms.begin(), rebuild_ms.end());
  const char* names[3] = {"(a) idle (reader alone)", "(b) writer inserting new ids",
                          "(c) background rebuild running"};
  Note(Fmt("3. reader latency, %zu keys at start (%s); %d rounds; %llu new ids inserted; "
           "rebuild (trigger to publish) median %.1f ms, T_rb reported %.1f ms; "
           "per-call latency of Predict (8 features), steady_clock, ns:",
           n, Split(filled).c_str(), kRounds, static_cast<unsigned long long>(inserted),
           rebuild_ms[rebuild_ms.size() / 2], 1e3 * end.last_rebuild_seconds));
  Note(Fmt("   %-34s %10s %8s %8s %8s %9s", "phase", "calls", "p50", "p99", "p99.9", "max"));
  for (int i = 0; i < 3; ++i) {
    Note(Fmt("   %-34s %10zu %8.0f %8.0f %8.0f %9.0f", names[i], p[i].count, p[i].p50,
             p[i].p99, p[i].p999, p[i].max));
  }
  Note(Fmt("   p99 rebuild / p99 idle = %.2f, p99.9 rebuild / p99.9 idle = %.2f, "
           "p50 rebuild / p50 idle = %.2f",
           p[2].p99 / p[0].p99, p[2].p999 / p[0].p999, p[2].p50 / p[0].p50));
  state.counters["idle_p50_ns"] = p[0].p50;
  state.counters["idle_p99_ns"] = p[0].p99;
  state.counters["idle_p999_ns"] = p[0].p999;
  state.counters["ins_p99_ns"] = p[1].p99;
  state.counters["rb_p50_ns"] = p[2].p50;
  state.counters["rb_p99_ns"] = p[2].p99;
  state.counters["rb_p999_ns"] = p[2].p999;
  state.counters["rebuild_ms"] = rebuild_ms[rebuild_ms.size() / 2];
}

// ---------------------------------------------------------------------------------------
// Registration. Predict/Update/micro: default min time, --benchmark_repetitions applies.

void KeyArgs(benchmark::internal::Benchmark* b) {
  b->Arg(k1e4)->Arg(k1e6)->Arg(k1e7);
}

BENCHMARK(BM_Predict_Lmu)->Apply(KeyArgs);
BENCHMARK(BM_Predict_Absl)->Apply(KeyArgs);
BENCHMARK(BM_PredictMany_Lmu<8>)->Apply(KeyArgs);
BENCHMARK(BM_PredictMany_Lmu<64>)->Apply(KeyArgs);
BENCHMARK(BM_Update_Lmu)->Apply(KeyArgs);
BENCHMARK(BM_Update_Absl)->Apply(KeyArgs);
BENCHMARK(BM_UpdateNew_Lmu)->Arg(k1e4)->Iterations(2'000);
BENCHMARK(BM_UpdateNew_Lmu)->Arg(k1e6)->Iterations(25'000);
BENCHMARK(BM_UpdateNew_Lmu)->Arg(k1e7)->Iterations(100'000);
BENCHMARK(BM_UpdateNew_Absl)->Arg(k1e4)->Iterations(2'000);
BENCHMARK(BM_UpdateNew_Absl)->Arg(k1e6)->Iterations(25'000);
BENCHMARK(BM_UpdateNew_Absl)->Arg(k1e7)->Iterations(100'000);
// Micro benchmarks: shorter runs (0.2 s per repetition).
void MicroArgs(benchmark::internal::Benchmark* b) { KeyArgs(b); b->MinTime(0.2); }
BENCHMARK(BM_Micro_TableLocate)->Apply(MicroArgs);
BENCHMARK(BM_Micro_AbslFind)->Apply(MicroArgs);
BENCHMARK(BM_Micro_TableLocatePinOnce)->Apply(MicroArgs);
BENCHMARK(BM_Micro_PinUnpin)->Apply(MicroArgs);
BENCHMARK(BM_Micro_LocateLoad)->Apply(MicroArgs);
BENCHMARK(BM_Micro_StagedPredict)->Apply(MicroArgs);
BENCHMARK(BM_Micro_StagedBatch)->Apply(MicroArgs);
BENCHMARK(BM_Micro_SipHash13)->Apply(MicroArgs);
BENCHMARK(BM_Micro_AbslHash)->Apply(MicroArgs);
BENCHMARK(BM_Micro_Mphf)->Apply(MicroArgs);
BENCHMARK(BM_Micro_BaseLocate)->Apply(MicroArgs);
BENCHMARK(BM_Micro_MphfSipHash)->Apply(MicroArgs);
BENCHMARK(BM_Micro_BaseLocateSipHash)->Apply(MicroArgs);
BENCHMARK(BM_Micro_ArenaLoad)->Apply(MicroArgs);
BENCHMARK(BM_Lat_SipHash13)->Apply(MicroArgs);
BENCHMARK(BM_Lat_Mphf)->Apply(MicroArgs);
BENCHMARK(BM_Lat_BaseLocate)->Apply(MicroArgs);
BENCHMARK(BM_Lat_ArenaLoad)->Apply(MicroArgs);
BENCHMARK(BM_Lat_LmuFetch)->Apply(MicroArgs);
BENCHMARK(BM_Lat_AbslFind)->Apply(MicroArgs);
BENCHMARK(BM_Rebuild_LmuBaseBuild)->Arg(k1e6)->Iterations(1)->Repetitions(5)->UseRealTime();
BENCHMARK(BM_Rebuild_LmuBaseBuild)->Arg(k1e7)->Iterations(1)->Repetitions(3)->UseRealTime();
BENCHMARK(BM_Rebuild_MphfBuild)->Arg(k1e6)->Iterations(1)->Repetitions(5)->UseRealTime();
BENCHMARK(BM_Rebuild_MphfBuild)->Arg(k1e7)->Iterations(1)->Repetitions(3)->UseRealTime();
BENCHMARK(BM_Rebuild_AbslBuild)->Arg(k1e6)->Iterations(1)->Repetitions(5)->UseRealTime();
BENCHMARK(BM_Rebuild_AbslBuild)->Arg(k1e7)->Iterations(1)->Repetitions(3)->UseRealTime();
BENCHMARK(BM_ReaderLatency)->Arg(k1e6)->Iterations(1)->Repetitions(1)->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------
// Reporting: the ratio table (RatioReporter) and a per-feature summary.

std::string N(size_t n) { return std::to_string(n); }
std::string Pretty(size_t n) { return n == k1e4 ? "10^4" : n == k1e6 ? "10^6" : "10^7"; }

void AddRatios(RatioReporter& rep) {
  for (size_t n : {k1e4, k1e6, k1e7}) {
    const bool target = n != k1e4;
    rep.AddRatio({"1. Predict LMU / absl, " + Pretty(n) + " keys", {"BM_Predict_Lmu/" + N(n)},
                  {"BM_Predict_Absl/" + N(n)}, 1.5, target ? Target::kAtMost : Target::kNone});
    // Per feature: a ratio of items_per_second, absl's over PredictMany's.
    for (const char* samples : {"8", "64"}) {
      rep.AddRatio({"1. PredictMany of " + std::string(samples) + " samples LMU / absl, " +
                        Pretty(n) + " keys",
                    {"BM_Predict_Absl/" + N(n), "items_per_second"},
                    {"BM_PredictMany_Lmu<" + std::string(samples) + ">/" + N(n),
                     "items_per_second"},
                    0, Target::kNone});
    }
    rep.AddRatio({"1. Update LMU / absl, " + Pretty(n) + " keys", {"BM_Update_Lmu/" + N(n)},
                  {"BM_Update_Absl/" + N(n)}, 2.0, target ? Target::kAtMost : Target::kNone});
    rep.AddRatio({"1. Update 10% new LMU / absl, " + Pretty(n) + " keys",
                  {"BM_UpdateNew_Lmu/" + N(n)}, {"BM_UpdateNew_Absl/" + N(n)}, 0,
                  Target::kNone});
  }
  for (size_t n : {k1e4, k1e6, k1e7}) {
    rep.AddRatio({"1m. Pin+Locate / absl find, " + Pretty(n), {"BM_Micro_TableLocate/" + N(n)},
                  {"BM_Micro_AbslFind/" + N(n)}, 0, Target::kNone});
    rep.AddRatio({"1m. LmuBase::Locate / absl find, " + Pretty(n),
                  {"BM_Micro_BaseLocate/" + N(n)}, {"BM_Micro_AbslFind/" + N(n)}, 0,
                  Target::kNone});
    rep.AddRatio({"1m. MPHF on FoldHash / on SipHash-1-3, " + Pretty(n),
                  {"BM_Micro_Mphf/" + N(n)}, {"BM_Micro_MphfSipHash/" + N(n)}, 0, Target::kNone});
    rep.AddRatio({"1m. LmuBase::Locate on FoldHash / on SipHash-1-3, " + Pretty(n),
                  {"BM_Micro_BaseLocate/" + N(n)}, {"BM_Micro_BaseLocateSipHash/" + N(n)}, 0,
                  Target::kNone});
    rep.AddRatio({"1m. SipHash13 / absl hash, " + Pretty(n), {"BM_Micro_SipHash13/" + N(n)},
                  {"BM_Micro_AbslHash/" + N(n)}, 0, Target::kNone});
    rep.AddRatio({"1m. Pin+Locate+arena load / absl find, " + Pretty(n),
                  {"BM_Micro_LocateLoad/" + N(n)}, {"BM_Micro_AbslFind/" + N(n)}, 0,
                  Target::kNone});
    rep.AddRatio({"1m. latency MPHF+entry+arena / absl find, " + Pretty(n),
                  {"BM_Lat_LmuFetch/" + N(n)}, {"BM_Lat_AbslFind/" + N(n)}, 0, Target::kNone});
    rep.AddRatio({"1p. staged-prefetch predict (prototype) / absl predict, " + Pretty(n),
                  {"BM_Micro_StagedPredict/" + N(n)}, {"BM_Predict_Absl/" + N(n)}, 0,
                  Target::kNone});
    // Per feature: a ratio of items_per_second, absl over the prototype.
    rep.AddRatio({"1p. staged batch of 8 samples (prototype) / absl predict, " + Pretty(n),
                  {"BM_Predict_Absl/" + N(n), "items_per_second"},
                  {"BM_Micro_StagedBatch/" + N(n), "items_per_second"}, 0, Target::kNone});
  }
  for (size_t n : {k1e6, k1e7}) {
    rep.AddRatio({"2. LmuBase::Build / absl map build, " + Pretty(n),
                  {"BM_Rebuild_LmuBaseBuild/" + N(n), "seconds"},
                  {"BM_Rebuild_AbslBuild/" + N(n), "seconds"}, 0, Target::kNone});
  }
  rep.AddRatio({"3. reader p99 during rebuild / idle, 10^6",
                {"BM_ReaderLatency/" + N(k1e6), "rb_p99_ns"},
                {"BM_ReaderLatency/" + N(k1e6), "idle_p99_ns"}, 0, Target::kNone});
  rep.AddRatio({"3. reader p99.9 during rebuild / idle, 10^6",
                {"BM_ReaderLatency/" + N(k1e6), "rb_p999_ns"},
                {"BM_ReaderLatency/" + N(k1e6), "idle_p999_ns"}, 0, Target::kNone});
}

// Keeps the medians (CPU ns per iteration and counters) for the per-feature summary.
class LmuReporter : public RatioReporter {
 public:
  using RatioReporter::RatioReporter;

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      const bool aggregate = run.run_type == Run::RT_Aggregate;
      if (aggregate && run.aggregate_name != "median") continue;
      std::string key = run.run_name.function_name;
      if (!run.run_name.args.empty()) key += "/" + run.run_name.args;
      if (!aggregate && medians_.count(key) != 0) continue;
      double cpu = run.GetAdjustedCPUTime();
      if (run.time_unit == benchmark::kMicrosecond) cpu *= 1e3;
      if (run.time_unit == benchmark::kMillisecond) cpu *= 1e6;
      if (run.time_unit == benchmark::kSecond) cpu *= 1e9;
      cpu_ns_[key] = cpu;
      for (const auto& [name, c] : run.counters) counters_[key][name] = c.value;
      if (aggregate) medians_[key] = true;
    }
    RatioReporter::ReportRuns(runs);
  }

  void Finalize() override {
    RatioReporter::Finalize();
    std::ostream& out = GetOutputStream();
    out << "\nLMU summary: medians, ns per feature (CPU time per 8-feature sample / 8)\n";
    out << Fmt("%-6s | %-31s | %-31s | %-22s\n", "keys", "predict LMU  absl  ratio  <=1.5",
               "update  LMU  absl  ratio  <=2", "update 10% new LMU absl ratio");
    for (size_t n : {k1e4, k1e6, k1e7}) {
      const bool target = n != k1e4;
      out << Fmt("%-6s | %s | %s | %s\n", Pretty(n).c_str(),
                 Cell("BM_Predict_Lmu/" + N(n), "BM_Predict_Absl/" + N(n), target ? 1.5 : 0)
                     .c_str(),
                 Cell("BM_Update_Lmu/" + N(n), "BM_Update_Absl/" + N(n), target ? 2.0 : 0)
                     .c_str(),
                 Cell("BM_UpdateNew_Lmu/" + N(n), "BM_UpdateNew_Absl/" + N(n), 0).c_str());
    }
    out << "\nLookup path, throughput: ns per feature (8 independent lookups per iteration)\n";
    out << Fmt("%-6s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %9s %9s\n", "keys", "SipHash",
               "Mphf", "BaseLoc", "Pin/8", "Pin+Loc", "PinOnce", "ArenaLd", "+arena", "staged",
               "batch8", "absl hash", "absl find");
    for (size_t n : {k1e4, k1e6, k1e7}) {
      out << Fmt("%-6s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %9s %9s\n", Pretty(n).c_str(),
                 PerFeature("BM_Micro_SipHash13/" + N(n)).c_str(),
                 PerFeature("BM_Micro_Mphf/" + N(n)).c_str(),
                 PerFeature("BM_Micro_BaseLocate/" + N(n)).c_str(),
                 PerFeature("BM_Micro_PinUnpin/" + N(n)).c_str(),
                 PerFeature("BM_Micro_TableLocate/" + N(n)).c_str(),
                 PerFeature("BM_Micro_TableLocatePinOnce/" + N(n)).c_str(),
                 PerFeature("BM_Micro_ArenaLoad/" + N(n)).c_str(),
                 PerFeature("BM_Micro_LocateLoad/" + N(n)).c_str(),
                 PerFeature("BM_Micro_StagedPredict/" + N(n)).c_str(),
                 PerFeature("BM_Micro_StagedBatch/" + N(n), kBatch * kF).c_str(),
                 PerFeature("BM_Micro_AbslHash/" + N(n)).c_str(),
                 PerFeature("BM_Micro_AbslFind/" + N(n)).c_str());
    }
    out << "  BaseLoc = MPHF + Keys_base entry; Pin/8 = one Pin + unpin, / 8; Pin+Loc = "
           "LmuTable::Pin per sample + Reader::Locate;\n  PinOnce = the same under one pin; "
           "ArenaLd = WeightArena::Load by a known slot; +arena = Pin + Locate + arena load "
           "(Predict's fetch);\n  staged = prototype: 3 stages with prefetch, one sample per "
           "pin; batch8 = the same over 8 samples per pin (see source)\n";
    out << "\nLookup path, latency: ns per lookup as a dependent chain\n";
    out << Fmt("%-6s %9s %9s %9s %9s %12s %9s\n", "keys", "SipHash", "Mphf", "BaseLoc",
               "ArenaLd", "MPHF+ent+ar", "absl find");
    for (size_t n : {k1e4, k1e6, k1e7}) {
      out << Fmt("%-6s %9s %9s %9s %9s %12s %9s\n", Pretty(n).c_str(),
                 PerFeature("BM_Lat_SipHash13/" + N(n)).c_str(),
                 PerFeature("BM_Lat_Mphf/" + N(n)).c_str(),
                 PerFeature("BM_Lat_BaseLocate/" + N(n)).c_str(),
                 PerFeature("BM_Lat_ArenaLoad/" + N(n)).c_str(),
                 PerFeature("BM_Lat_LmuFetch/" + N(n)).c_str(),
                 PerFeature("BM_Lat_AbslFind/" + N(n)).c_str());
    }
    out << "\nRebuild (LmuBase::Build), median wall time:\n";
    for (size_t n : {k1e6, k1e7}) {
      const auto lmu = Counter("BM_Rebuild_LmuBaseBuild/" + N(n), "seconds");
      const auto absl = Counter("BM_Rebuild_AbslBuild/" + N(n), "seconds");
      if (lmu < 0 || absl < 0) continue;
      const auto mphf = Counter("BM_Rebuild_MphfBuild/" + N(n), "seconds");
      out << Fmt("%-6s LmuBase::Build %.3f s (%.2f M keys/s), of which Mphf::Build %.3f s; "
                 "absl reserve+emplace %.3f s (%.2f M keys/s); ratio %.2f\n",
                 Pretty(n).c_str(), lmu, n / lmu / 1e6, mphf, absl, n / absl / 1e6,
                 lmu / absl);
    }
    out.flush();
  }

 private:
  double Counter(const std::string& key, const std::string& name) const {
    auto it = counters_.find(key);
    if (it == counters_.end()) return -1;
    auto c = it->second.find(name);
    return c == it->second.end() ? -1 : c->second;
  }
  std::string PerFeature(const std::string& key, int features = kF) const {
    auto it = cpu_ns_.find(key);
    return it == cpu_ns_.end() ? "n/a" : Fmt("%.2f", it->second / features);
  }
  std::string Cell(const std::string& lmu, const std::string& absl, double target) const {
    auto a = cpu_ns_.find(lmu), b = cpu_ns_.find(absl);
    if (a == cpu_ns_.end() || b == cpu_ns_.end()) return Fmt("%-31s", "n/a");
    const double r = a->second / b->second;
    return Fmt("%7.2f %6.2f %6.2f  %-7s", a->second / kF, b->second / kF, r,
               target == 0 ? "-" : (r <= target ? "met" : "MISSED"));
  }

  std::map<std::string, double> cpu_ns_;
  std::map<std::string, std::map<std::string, double>> counters_;
  std::map<std::string, bool> medians_;
};

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  streamlearn::bench::LmuReporter reporter(streamlearn::bench::ConsoleOptions(),
                                           streamlearn::bench::RatioReporter::TimeBase::kCpu);
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter,
                                                streamlearn::bench::AddRatios);
}
