// Snapshot, recovery and reader latency of the persistence layer (docs/DURABILITY.md;
// server/storage/persistence.h), in-process (no gRPC), each beside its baseline in the same run:
//
// Per 10^6 logged events (model d = 16, d_v = 8, r = 64, one shard, batches of 256):
//   BM_BareIngest1M          SauShard::Ingest of 10^6 events, no hook: the baseline.
//   BM_LoggedIngest1M        the same through the commit hook the server uses
//                            (ShardWriter::CommitSau: log entry + one audit record per event, one
//                            RocksDB write per batch, durability process), snapshots off, into a
//                            fresh data_dir.
//   BM_EncryptedLoggedIngest1M  the same with the model's tenant encrypted at rest
//                            (server/storage/encrypted_storage.h: every log entry and audit
//                            record sealed with AES-256-GCM before the write).
//   BM_Recover1M             Persistence::Open + Recover of that data_dir: no snapshot, so the
//                            replay of all 10^6 logged events through SauShard::Ingest.
//   BM_Snapshot              Persistence::SnapshotModel of that shard (the state does not grow
//                            with the events: O(r d_v)), including the trim of its log.
//   BM_RecoverFromSnapshot   Recover when a snapshot covers the whole log.
// Reader latency while a snapshot of a large shard (d = 16, d_v = 256, r = 2048) is taken:
//   BM_QueryLatency/0        SauShard::Query p50/p99 over 2000 calls, nothing else running;
//                   /1       with another thread taking snapshots back to back (one event
//                            ingested between them, since an unchanged shard is not
//                            snapshotted again);
//                   /2       control: with another thread hashing a buffer (CPU load without
//                            a snapshot), to tell lock-freedom from sharing 2 cores.
// Times are wall-clock, one iteration per repetition (manual time); the counter cpu_s is the
// process CPU time of the same span (RocksDB's background threads included).
//   persistence_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "core/common/digest.h"
#include "core/workloads/dgp.h"
#include "core/sau/sau_estimator.h"
#include "core/shard/model_registry.h"
#include "core/shard/sau_shard.h"
#include "server/storage/persistence.h"

namespace streamlearn::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kEvents = 1000000;
constexpr size_t kBatch = 256;
constexpr size_t kPool = 4096;  // distinct events, cycled (t always increases)
constexpr char kModel[] = "bench";

struct ModelShape {
  int d, d_v, r;
};
constexpr ModelShape kLogModel{16, 8, 64};
constexpr ModelShape kLargeModel{16, 256, 2048};

ModelSpec SpecOf(const ModelShape& m) {
  ModelSpec spec;
  spec.name = kModel;
  spec.shards = 1;
  spec.sau.d = m.d;
  spec.sau.d_v = m.d_v;
  spec.sau.r = m.r;
  return spec;
}

std::vector<sau::DgpEvent> Pool(const ModelShape& m) {
  sau::Dgp dgp(sau::Dgp::Options{.kind = sau::Dgp::Kind::kA, .d = m.d, .d_v = m.d_v}, 5);
  std::vector<sau::DgpEvent> events;
  for (size_t i = 0; i < kPool; ++i) events.push_back(dgp.Next());
  return events;
}

const std::vector<sau::DgpEvent>& LogPool() {
  static const auto* pool = new std::vector<sau::DgpEvent>(Pool(kLogModel));
  return *pool;
}

std::string Root() {
  static const std::string root =
      (fs::temp_directory_path() / ("persistence_bench_" + std::to_string(getpid()))).string();
  return root;
}

// A store with persistence and one model in it, as the server holds them.
struct Durable {
  std::unique_ptr<storage::Persistence> persistence;
  std::unique_ptr<ModelRegistry> registry;
  std::shared_ptr<Model> model;
  std::shared_ptr<storage::ModelWriters> logs;
};

// A key directory with a key for the default tenant (the bench model's), made once.
std::string KeysDir() {
  static const std::string dir = [] {
    const std::string d = Root() + "/keys";
    fs::create_directories(d);
    std::FILE* f = std::fopen((d + "/default.key").c_str(), "wb");
    if (f == nullptr) Die("cannot write the bench tenant key");
    for (int i = 0; i < 32; ++i) std::fputc((i * 37) & 0xff, f);
    std::fclose(f);
    return d;
  }();
  return dir;
}

storage::PersistenceOptions Options(const std::string& dir, bool encrypted = false) {
  storage::PersistenceOptions o;
  o.data_dir = dir;
  if (encrypted) o.encryption_keys_dir = KeysDir();
  o.durability = storage::Durability::kProcess;
  o.snapshot_every_steps = 0;
  o.snapshot_interval = absl::ZeroDuration();
  return o;
}

// Opens `dir`; with `create`, creates the model (a fresh store), else recovers it.
Durable OpenDurable(const std::string& dir, const ModelShape& shape, bool create,
                    bool encrypted = false) {
  Durable d;
  fs::create_directories(dir);  // as Server::Start does
  absl::StatusOr<std::unique_ptr<storage::Persistence>> p =
      storage::Persistence::Open(Options(dir, encrypted), nullptr);
  if (!p.ok()) Die("Persistence::Open: " + p.status().ToString());
  d.persistence = *std::move(p);
  d.registry = std::make_unique<ModelRegistry>(lmu::HashSecret{});
  if (create) {
    absl::StatusOr<std::shared_ptr<Model>> m = d.registry->Create(
        SpecOf(shape), [&](const std::shared_ptr<Model>& m) {
          return d.persistence->OnCreate(m, d.registry->secret());
        });
    if (!m.ok()) Die("Create: " + m.status().ToString());
  } else if (absl::Status s = d.persistence->Recover(d.registry.get()); !s.ok()) {
    Die("Recover: " + s.ToString());
  }
  d.model = *d.registry->Find(kModel);
  d.logs = d.persistence->Find(kModel);
  return d;
}

// Ingests `n` events from `pool` (t from *t + 1) in batches of kBatch, through the commit hook
// when `logs` is given.
void IngestEvents(SauShard& shard, storage::ModelWriters* logs,
                  const std::vector<sau::DgpEvent>& pool, size_t n, uint64_t* t) {
  storage::Receipt receipt;
  SauCommitHook hook;
  if (logs != nullptr) {
    storage::ShardWriter* log = &logs->shard(0);
    hook = [log, &receipt](const SauCommit& c) { return log->CommitSau(c, &receipt); };
  }
  std::vector<EventView> views;
  for (size_t done = 0; done < n;) {
    const size_t b = std::min(kBatch, n - done);
    views.clear();
    for (size_t i = 0; i < b; ++i) {
      const sau::DgpEvent& e = pool[(done + i) % kPool];
      views.push_back(EventView{.t = ++*t, .k = e.k, .v = e.v});
    }
    absl::StatusOr<IngestOutcome> out = shard.Ingest(views, kBatch, hook ? &hook : nullptr);
    if (!out.ok() || out->applied != b) Die("Ingest: " + out.status().ToString());
    done += b;
  }
}

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The data_dir with 10^6 logged events that recovery reads (the latest BM_LoggedIngest1M's,
// or made on first use), and the digest its state must recover to.
std::string g_log_dir;
std::string g_log_digest;

void WriteLoggedMillion(const std::string& dir, double* seconds, double* cpu,
                        bool encrypted = false) {
  fs::remove_all(dir);
  Durable d = OpenDurable(dir, kLogModel, /*create=*/true, encrypted);
  uint64_t t = 0;
  const auto start = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  IngestEvents(d.model->sau(0), d.logs.get(), LogPool(), kEvents, &t);
  if (seconds != nullptr) *seconds = Since(start);
  if (cpu != nullptr) *cpu = ProcessCpuSeconds() - cpu0;
  g_log_digest = ToHex(d.model->sau(0).Stats().digest);
  d.persistence->Stop();
}

const std::string& LogDir() {
  if (g_log_dir.empty()) {
    g_log_dir = Root() + "/log1m";
    WriteLoggedMillion(g_log_dir, nullptr, nullptr);
  }
  return g_log_dir;
}

void BM_BareIngest1M(benchmark::State& state) {
  for (auto _ : state) {
    absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(SpecOf(kLogModel).sau);
    if (!est.ok()) Die(est.status().ToString());
    SauShard shard(*est);
    uint64_t t = 0;
    const auto start = Clock::now();
    const double cpu0 = ProcessCpuSeconds();
    IngestEvents(shard, nullptr, LogPool(), kEvents, &t);
    state.SetIterationTime(Since(start));
    state.counters["cpu_s"] = ProcessCpuSeconds() - cpu0;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kEvents));
}

void BM_LoggedIngest1M(benchmark::State& state) {
  for (auto _ : state) {
    double seconds = 0, cpu = 0;
    g_log_dir = Root() + "/log1m";
    WriteLoggedMillion(g_log_dir, &seconds, &cpu);
    state.SetIterationTime(seconds);
    state.counters["cpu_s"] = cpu;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kEvents));
  uintmax_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(g_log_dir)) {
    if (e.is_regular_file()) bytes += e.file_size();
  }
  state.counters["disk_bytes_per_event"] = static_cast<double>(bytes) / kEvents;
}

void BM_EncryptedLoggedIngest1M(benchmark::State& state) {
  for (auto _ : state) {
    double seconds = 0, cpu = 0;
    WriteLoggedMillion(Root() + "/encrypted1m", &seconds, &cpu, /*encrypted=*/true);
    state.SetIterationTime(seconds);
    state.counters["cpu_s"] = cpu;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kEvents));
}

void BM_Recover1M(benchmark::State& state) {
  const std::string& dir = LogDir();
  for (auto _ : state) {
    const auto start = Clock::now();
    const double cpu0 = ProcessCpuSeconds();
    Durable d = OpenDurable(dir, kLogModel, /*create=*/false);
    state.SetIterationTime(Since(start));
    state.counters["cpu_s"] = ProcessCpuSeconds() - cpu0;
    if (d.model->sau(0).Stats().events != kEvents ||
        ToHex(d.model->sau(0).Stats().digest) != g_log_digest) {
      Die("the recovered state differs from the logged one");
    }
    d.persistence->Stop();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kEvents));
}

// A store with a short log (the snapshot's cost is the state's size, not the log's length).
void BM_Snapshot(benchmark::State& state) {
  const std::string dir = Root() + "/snapshot";
  uint64_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    fs::remove_all(dir);
    Durable d = OpenDurable(dir, kLogModel, /*create=*/true);
    uint64_t t = 0;
    IngestEvents(d.model->sau(0), d.logs.get(), LogPool(), kPool, &t);
    state.ResumeTiming();
    const auto start = Clock::now();
    absl::StatusOr<std::vector<storage::SnapshotInfo>> info =
        d.persistence->SnapshotModel(*d.model);
    state.SetIterationTime(Since(start));
    if (!info.ok() || info->empty() || !info->front().taken) Die("snapshot not taken");
    bytes = info->front().bytes;
    d.persistence->Stop();
  }
  state.counters["snapshot_bytes"] = static_cast<double>(bytes);
}

void BM_RecoverFromSnapshot(benchmark::State& state) {
  const std::string dir = Root() + "/from_snapshot";
  {
    fs::remove_all(dir);
    Durable d = OpenDurable(dir, kLogModel, /*create=*/true);
    uint64_t t = 0;
    IngestEvents(d.model->sau(0), d.logs.get(), LogPool(), kPool, &t);
    if (!d.persistence->SnapshotModel(*d.model).ok()) Die("snapshot failed");
    d.persistence->Stop();
  }
  for (auto _ : state) {
    const auto start = Clock::now();
    Durable d = OpenDurable(dir, kLogModel, /*create=*/false);
    state.SetIterationTime(Since(start));
    d.persistence->Stop();
  }
}

BENCHMARK(BM_BareIngest1M)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoggedIngest1M)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncryptedLoggedIngest1M)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Recover1M)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Snapshot)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RecoverFromSnapshot)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------
// Reader latency during snapshots.

constexpr int kQueryWarmup = 200;
constexpr int kQueryCalls = 2000;

struct LargeFixture {
  Durable d;
  std::vector<sau::DgpEvent> pool;
  std::vector<std::vector<double>> queries;
  uint64_t t = 0;
};

LargeFixture& Large() {
  static LargeFixture* f = [] {
    auto* f = new LargeFixture;
    const std::string dir = Root() + "/large";
    fs::remove_all(dir);
    f->d = OpenDurable(dir, kLargeModel, /*create=*/true);
    f->pool = Pool(kLargeModel);
    IngestEvents(f->d.model->sau(0), f->d.logs.get(), f->pool, 2048, &f->t);
    sau::Dgp dgp(sau::Dgp::Options{.kind = sau::Dgp::Kind::kA, .d = kLargeModel.d,
                                   .d_v = kLargeModel.d_v},
                 9);
    for (int i = 0; i < 256; ++i) f->queries.push_back(dgp.Gaussian(kLargeModel.d));
    return f;
  }();
  return *f;
}

void BM_QueryLatency(benchmark::State& state) {
  LargeFixture& f = Large();
  const int background = static_cast<int>(state.range(0));  // 0 none, 1 snapshots, 2 hashing
  SauShard& shard = f.d.model->sau(0);
  auto query = [&](int i) {
    absl::StatusOr<QueryOutcome> out =
        shard.Query(f.queries[static_cast<size_t>(i) % f.queries.size()],
                    sau::ReadoutPath::kStabilized, false, 0);
    if (!out.ok()) Die(out.status().ToString());
    benchmark::DoNotOptimize(out->result.y_hat.data());
  };
  std::vector<double> latency_us(kQueryCalls);
  uint64_t snapshots = 0;
  double snapshot_seconds = 0;
  for (auto _ : state) {
    std::atomic<bool> stop{false};
    std::thread other;
    if (background == 1) {
      other = std::thread([&] {
        while (!stop.load()) {
          IngestEvents(shard, f.d.logs.get(), f.pool, 1, &f.t);  // something new to snapshot
          const auto start = Clock::now();
          if (!f.d.persistence->SnapshotModel(*f.d.model).ok()) Die("snapshot failed");
          snapshot_seconds += Since(start);
          ++snapshots;
        }
      });
    } else if (background == 2) {
      other = std::thread([&] {
        std::string buf(1 << 20, 'x');
        while (!stop.load()) {
          Sha256 h;
          h.Update(buf);
          benchmark::DoNotOptimize(h.Finish());
        }
      });
    }
    for (int i = 0; i < kQueryWarmup; ++i) query(i);
    double total_s = 0;
    for (int i = 0; i < kQueryCalls; ++i) {
      const auto start = Clock::now();
      query(i);
      const double s = Since(start);
      latency_us[static_cast<size_t>(i)] = s * 1e6;
      total_s += s;
    }
    stop = true;
    if (other.joinable()) other.join();
    state.SetIterationTime(total_s);
  }
  std::sort(latency_us.begin(), latency_us.end());
  auto rank = [&](double p) {
    const size_t k = static_cast<size_t>(std::ceil(p * latency_us.size()));
    return latency_us[std::clamp<size_t>(k, 1, latency_us.size()) - 1];
  };
  state.counters["p50_us"] = rank(0.50);
  state.counters["p99_us"] = rank(0.99);
  state.counters["max_us"] = latency_us.back();
  if (background == 1) {
    state.counters["snapshots"] = static_cast<double>(snapshots);
    state.counters["snapshot_ms"] = snapshots > 0 ? snapshot_seconds * 1e3 / snapshots : 0;
  }
}
BENCHMARK(BM_QueryLatency)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void AddRatios(RatioReporter& rep) {
  rep.AddRatio({"logged ingest / bare ingest, 10^6 events", {"BM_LoggedIngest1M"},
                {"BM_BareIngest1M"}, 0, Target::kNone});
  rep.AddRatio({"logged ingest, tenant encrypted at rest / logged ingest, 10^6 events",
                {"BM_EncryptedLoggedIngest1M"}, {"BM_LoggedIngest1M"}, 0, Target::kNone});
  rep.AddRatio({"recovery (replay of 10^6) / bare ingest of 10^6", {"BM_Recover1M"},
                {"BM_BareIngest1M"}, 0, Target::kNone});
  // Inverted so that it prints: how many snapshots take as long as 10^6 bare events.
  rep.AddRatio({"bare ingest of 10^6 / snapshot", {"BM_BareIngest1M"}, {"BM_Snapshot"}, 0,
                Target::kNone});
  rep.AddRatio({"recovery from a snapshot / replay of 10^6", {"BM_RecoverFromSnapshot"},
                {"BM_Recover1M"}, 0, Target::kNone});
  rep.AddRatio({"query p99, during snapshots / idle", {"BM_QueryLatency/1", "p99_us"},
                {"BM_QueryLatency/0", "p99_us"}, 0, Target::kNone});
  rep.AddRatio({"query p99, beside a hashing thread / idle", {"BM_QueryLatency/2", "p99_us"},
                {"BM_QueryLatency/0", "p99_us"}, 0, Target::kNone});
  rep.AddRatio({"query p99, during snapshots / beside a hashing thread",
                {"BM_QueryLatency/1", "p99_us"}, {"BM_QueryLatency/2", "p99_us"}, 0,
                Target::kNone});
  rep.AddRatio({"query p50, during snapshots / idle", {"BM_QueryLatency/1", "p50_us"},
                {"BM_QueryLatency/0", "p50_us"}, 0, Target::kNone});
}

}  // namespace
}  // namespace streamlearn::bench

void RemoveRoot() { std::filesystem::remove_all(streamlearn::bench::Root()); }

int main(int argc, char** argv) {
  streamlearn::bench::RatioReporter reporter(streamlearn::bench::ConsoleOptions());
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter,
                                                streamlearn::bench::AddRatios, RemoveRoot);
}
