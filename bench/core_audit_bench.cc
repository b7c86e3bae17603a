// What the audit trail costs per SAU event, beside the event itself (docs/AUDIT.md): the work
// ShardWriter::CommitSau (server/storage/shard_writer.cc) does for every applied event before the
// store write, on the writer's thread, measured on the core alone:
//
//   BM_SauIngestBare        SauEstimator::Ingest of one event: the baseline.
//   BM_RecordBuild          AppendSauEventBody: the canonical sau_event body (18 numbers
//                           formatted), with the batch digest on the first event of each
//                           256-event batch.
//   BM_RecordChain          AuditLogWriter::AppendCanonical of such a body: the envelope,
//                           SHA-256(merkle_prev || body) and, every 1024 records (the server's
//                           default cadence), an Ed25519-signed checkpoint.
//   BM_RecordBuildAndChain  both: the audit cost per record.
//   BM_LogEntryEncodeSha    the batch's log entry encoded (layout of server/log_entry.h) and
//                           its SHA-256 (the batch_digest), per event, at batches of 1 and 256.
//
// Two models: d = 64, d_v = 64, r = 256 (rpc_sau_bench's) and d = 8, d_v = 4, r = 32 (the crash
// test's), where the event itself is cheapest and the audit cost weighs most. One iteration is
// one event (one record), so the time per iteration is the time per record. Single-threaded:
// CPU time (bench/ratio_reporter.h). Target: build + chain <= 1 us per record.
//   core_audit_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "benchmark/benchmark.h"
#include "core/audit/checkpoint.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/merkle_tree.h"
#include "core/common/byte_codec.h"
#include "core/common/digest.h"
#include "core/workloads/dgp.h"
#include "core/sau/sau_estimator.h"
#include "core/audit/step_records.h"

namespace streamlearn::bench {
namespace {

constexpr size_t kPool = 4096;   // events generated once per model, cycled
constexpr size_t kBatch = 256;   // events per batch for the batch digest and scratch reuse
constexpr uint64_t kCheckpointEvery = 1024;

struct ModelCase {
  int d, d_v, r;
};
constexpr ModelCase kModels[] = {{64, 64, 256}, {8, 4, 32}};

sau::SauSpec SpecOf(const ModelCase& m) {
  sau::SauSpec spec;
  spec.d = m.d;
  spec.d_v = m.d_v;
  spec.r = m.r;
  return spec;
}

// Per model: DGP-A events and the diagnostics a real estimator gave for them.
struct Pool {
  std::vector<sau::DgpEvent> events;
  std::vector<sau::EventDiagnostics> diags;
  std::vector<std::string> bodies;  // the canonical sau_event bodies of those events
};

const Pool& PoolFor(int model) {
  static std::map<int, Pool> pools;
  auto it = pools.find(model);
  if (it != pools.end()) return it->second;
  const ModelCase& m = kModels[model];
  Pool& p = pools[model];
  sau::Dgp dgp(sau::Dgp::Options{.kind = sau::Dgp::Kind::kA, .d = m.d, .d_v = m.d_v}, 11);
  absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(SpecOf(m));
  if (!est.ok()) std::abort();
  const Digest batch_digest{};
  for (size_t i = 0; i < kPool; ++i) {
    p.events.push_back(dgp.Next());
    p.diags.push_back(est->Ingest(p.events.back().k, p.events.back().v));
    std::string body;
    AppendSauEventBody(SauEventRecord{.t = i + 1,
                                      .log_seq = i / kBatch + 1,
                                      .ver_sau = i / kBatch + 1,
                                      .diag = &p.diags.back(),
                                      .batch_digest = i % kBatch == 0 ? &batch_digest : nullptr},
                       &body);
    p.bodies.push_back(std::move(body));
  }
  return p;
}

const Ed25519PrivateKey& Key() {
  static const Ed25519PrivateKey* key = [] {
    absl::StatusOr<Ed25519PrivateKey> k = Ed25519PrivateKey::Generate();
    if (!k.ok()) std::abort();
    return new Ed25519PrivateKey(*std::move(k));
  }();
  return *key;
}

void BM_SauIngestBare(benchmark::State& state) {
  const int model = static_cast<int>(state.range(0));
  const Pool& p = PoolFor(model);
  absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(SpecOf(kModels[model]));
  size_t i = 0;
  for (auto _ : state) {
    const sau::DgpEvent& e = p.events[i++ % kPool];
    benchmark::DoNotOptimize(est->Ingest(e.k, e.v));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_RecordBuild(benchmark::State& state) {
  const Pool& p = PoolFor(static_cast<int>(state.range(0)));
  const Digest batch_digest{};
  std::string bodies;
  uint64_t t = 0;
  for (auto _ : state) {
    if (t % kBatch == 0) bodies.clear();  // Bodies::Clear once per batch
    const size_t i = t % kPool;
    AppendSauEventBody(SauEventRecord{.t = ++t,
                                      .log_seq = t / kBatch + 1,
                                      .ver_sau = t / kBatch + 1,
                                      .diag = &p.diags[i],
                                      .batch_digest = i % kBatch == 0 ? &batch_digest : nullptr},
                       &bodies);
    benchmark::DoNotOptimize(bodies.data());
  }
  state.SetItemsProcessed(state.iterations());
  size_t bytes = 0;
  for (const std::string& b : p.bodies) bytes += b.size();
  state.counters["body_bytes"] = static_cast<double>(bytes) / kPool;
}

void BM_RecordChain(benchmark::State& state) {
  const Pool& p = PoolFor(static_cast<int>(state.range(0)));
  AuditLogWriter writer(Key(), kCheckpointEvery);
  std::vector<std::string> lines;
  uint64_t n = 0;
  for (auto _ : state) {
    if (n % kBatch == 0) lines.clear();  // the journal's scratch, once per commit
    if (!writer.AppendCanonical(p.bodies[n++ % kPool], &lines).ok()) std::abort();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["line_bytes"] = lines.empty() ? 0 : static_cast<double>(lines.back().size());
}

void BM_RecordBuildAndChain(benchmark::State& state) {
  const Pool& p = PoolFor(static_cast<int>(state.range(0)));
  const Digest batch_digest{};
  AuditLogWriter writer(Key(), kCheckpointEvery);
  std::vector<std::string> lines;
  std::string body;
  uint64_t t = 0;
  for (auto _ : state) {
    if (t % kBatch == 0) lines.clear();
    const size_t i = t % kPool;
    body.clear();
    AppendSauEventBody(SauEventRecord{.t = ++t,
                                      .log_seq = t / kBatch + 1,
                                      .ver_sau = t / kBatch + 1,
                                      .diag = &p.diags[i],
                                      .batch_digest = i % kBatch == 0 ? &batch_digest : nullptr},
                       &body);
    if (!writer.AppendCanonical(body, &lines).ok()) std::abort();
  }
  state.SetItemsProcessed(state.iterations());
}

// The log entry of server/log_entry.h: u8 1 | u32 n | n x (u64 t | f64s k | f64s v).
void EncodeEntry(const std::vector<sau::DgpEvent>& events, size_t first, size_t n, uint64_t t,
                 std::string* out) {
  ByteWriter w;
  w.U8(1);
  w.U32(static_cast<uint32_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const sau::DgpEvent& e = events[(first + i) % kPool];
    w.U64(t + i);
    w.F64s(e.k);
    w.F64s(e.v);
  }
  *out = w.Take();
}

// Per event: one iteration encodes and hashes a whole batch, so the time per event is the
// iteration time / batch (reported as the counter ns_per_event and by items_per_second).
void BM_LogEntryEncodeSha(benchmark::State& state) {
  const Pool& p = PoolFor(static_cast<int>(state.range(0)));
  const size_t batch = static_cast<size_t>(state.range(1));
  std::string entry;
  size_t first = 0;
  uint64_t t = 1;
  for (auto _ : state) {
    EncodeEntry(p.events, first, batch, t, &entry);
    Sha256 h;
    h.Update(entry);
    benchmark::DoNotOptimize(h.Finish());
    first += batch;
    t += batch;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch));
  state.counters["entry_bytes_per_event"] = static_cast<double>(entry.size()) / batch;
}

// ---- The RFC 6962 tree over a chain (core/audit/merkle_tree.h) ----
// kTreeLeaves envelope lines of the small model's records (~680 bytes each), in memory.
constexpr uint64_t kTreeLeaves = uint64_t{1} << 16;

const std::vector<std::string>& TreeLines() {
  static const std::vector<std::string>* lines = [] {
    const Pool& p = PoolFor(1);
    AuditLogWriter writer(Key(), kCheckpointEvery);
    auto* out = new std::vector<std::string>;
    while (out->size() < kTreeLeaves) {
      std::vector<std::string> batch;
      if (!writer.AppendCanonical(p.bodies[out->size() % kPool], &batch).ok()) std::abort();
      for (std::string& l : batch) out->push_back(std::move(l));
    }
    out->resize(kTreeLeaves);
    return out;
  }();
  return *lines;
}

LeafReader TreeReader() {
  return [](uint64_t begin, uint64_t end,
            const std::function<void(uint64_t, std::string_view)>& visit) {
    const std::vector<std::string>& lines = TreeLines();
    for (uint64_t i = begin; i < end && i < lines.size(); ++i) visit(i, lines[i]);
    return absl::OkStatus();
  };
}

// Baseline: the leaf hashes of n lines, which any root over them must compute.
void BM_LeafHashes(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  const std::vector<std::string>& lines = TreeLines();
  for (auto _ : state) {
    for (uint64_t i = 0; i < n; ++i) benchmark::DoNotOptimize(LeafHash(lines[i]));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

// The first root over a chain: every line read and hashed, every node computed, the aligned
// subtrees of >= 256 leaves cached.
void BM_TreeRootCold(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    MerkleTreeCache tree(TreeReader());
    benchmark::DoNotOptimize(tree.Root(n));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(n));
}

// A later proof over a warm cache, at indices and sizes spread over the chain.
void BM_InclusionProofWarm(benchmark::State& state) {
  MerkleTreeCache tree(TreeReader());
  if (!tree.Root(kTreeLeaves).ok()) std::abort();
  uint64_t i = 0;
  for (auto _ : state) {
    const uint64_t size = kTreeLeaves - (i * 7919) % 4096;
    benchmark::DoNotOptimize(tree.InclusionProof((i * 104729) % size, size));
    ++i;
  }
}

void BM_ConsistencyProofWarm(benchmark::State& state) {
  MerkleTreeCache tree(TreeReader());
  if (!tree.Root(kTreeLeaves).ok()) std::abort();
  uint64_t i = 0;
  for (auto _ : state) {
    const uint64_t second = kTreeLeaves - (i * 7919) % 4096;
    benchmark::DoNotOptimize(tree.ConsistencyProof(1 + (i * 104729) % second, second));
    ++i;
  }
}

BENCHMARK(BM_LeafHashes)->Arg(256)->Arg(kTreeLeaves);
BENCHMARK(BM_TreeRootCold)->Arg(kTreeLeaves);
BENCHMARK(BM_InclusionProofWarm);
BENCHMARK(BM_ConsistencyProofWarm);

BENCHMARK(BM_SauIngestBare)->Arg(0)->Arg(1);
BENCHMARK(BM_RecordBuild)->Arg(0)->Arg(1);
BENCHMARK(BM_RecordChain)->Arg(0)->Arg(1);
BENCHMARK(BM_RecordBuildAndChain)->Arg(0)->Arg(1);
BENCHMARK(BM_LogEntryEncodeSha)->Args({0, 1})->Args({0, 256})->Args({1, 1})->Args({1, 256});

std::string ModelName(int model) {
  const ModelCase& m = kModels[model];
  return "d=" + std::to_string(m.d) + " d_v=" + std::to_string(m.d_v) +
         " r=" + std::to_string(m.r);
}

void AddRatios(RatioReporter& rep) {
  const std::string leaves = std::to_string(kTreeLeaves);
  rep.AddRatio({"Merkle root over 2^16 lines, cold / their leaf hashes", {"BM_TreeRootCold/" + leaves},
                {"BM_LeafHashes/" + leaves}, 0, Target::kNone});
  rep.AddRatio({"inclusion proof, warm cache / leaf hashes of 256 lines",
                {"BM_InclusionProofWarm"}, {"BM_LeafHashes/256"}, 0, Target::kNone});
  rep.AddRatio({"consistency proof, warm cache / leaf hashes of 256 lines",
                {"BM_ConsistencyProofWarm"}, {"BM_LeafHashes/256"}, 0, Target::kNone});
  for (int model : {0, 1}) {
    const std::string a = "/" + std::to_string(model);
    const std::string name = ModelName(model);
    rep.AddRatio({"record build + chain / bare ingest, " + name,
                  {"BM_RecordBuildAndChain" + a}, {"BM_SauIngestBare" + a}, 0, Target::kNone});
    rep.AddRatio({"record build / bare ingest, " + name, {"BM_RecordBuild" + a},
                  {"BM_SauIngestBare" + a}, 0, Target::kNone});
    rep.AddRatio({"record chain / bare ingest, " + name, {"BM_RecordChain" + a},
                  {"BM_SauIngestBare" + a}, 0, Target::kNone});
    // items_per_second of the bare ingest over that of the entry: entry time / ingest time.
    for (const char* batch : {"1", "256"}) {
      rep.AddRatio({std::string("log entry encode+SHA per event / bare ingest, batch ") + batch +
                        ", " + name,
                    {"BM_SauIngestBare" + a, "items_per_second"},
                    {"BM_LogEntryEncodeSha" + a + "/" + batch, "items_per_second"},
                    0,
                    Target::kNone});
    }
  }
}

// The ratio table, then the absolute target: build + chain <= 1 us per record (the time per
// iteration is the time per record).
class AuditReporter : public RatioReporter {
 public:
  static double NsPer(benchmark::TimeUnit unit) {
    switch (unit) {
      case benchmark::kNanosecond:
        return 1;
      case benchmark::kMicrosecond:
        return 1e3;
      case benchmark::kMillisecond:
        return 1e6;
      case benchmark::kSecond:
        return 1e9;
    }
    return 1;
  }
  using RatioReporter::RatioReporter;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred || run.run_name.function_name != "BM_RecordBuildAndChain") continue;
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      const std::string key = run.run_name.args;
      if (run.run_type == Run::RT_Aggregate && !median) continue;
      if (!median && has_median_.count(key) != 0) continue;
      if (median) has_median_.insert(key);
      ns_[key] = run.GetAdjustedCPUTime() * NsPer(run.time_unit);
    }
    RatioReporter::ReportRuns(runs);
  }
  void Finalize() override {
    RatioReporter::Finalize();
    std::ostream& out = GetOutputStream();
    for (const auto& [args, ns] : ns_) {
      char line[160];
      std::snprintf(line, sizeof(line),
                    "audit build + chain per record, %s: %.0f ns (CPU, median), target <= 1000 "
                    "ns: %s\n",
                    ModelName(std::stoi(args)).c_str(), ns, ns <= 1000 ? "met" : "NO");
      out << line;
    }
  }

 private:
  std::map<std::string, double> ns_;
  std::set<std::string> has_median_;
};

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  streamlearn::bench::AuditReporter reporter(streamlearn::bench::ConsoleOptions(),
                                             streamlearn::bench::RatioReporter::TimeBase::kCpu);
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter,
                                                streamlearn::bench::AddRatios);
}
