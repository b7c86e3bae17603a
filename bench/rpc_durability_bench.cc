// What durability costs SAU ingest through the real gRPC stack (docs/DURABILITY.md), beside
// the same server without a data_dir, in the same run:
//
//   BM_Ingest/<durability>/<batch>  events/s over one pipelined SAU.Ingest stream (model
//   d = d_v = 64, r = 256, one shard; rpc_sau_bench's), at batches of 1 and 256 events, into
//     0  memory   a server without a data_dir: the chain is computed, nothing is stored;
//     1  process  a data_dir, --durability=process: batch + records + log entry in one RocksDB
//                 write (WAL written, not fsync'ed) before the ack;
//     2  machine  --durability=machine: the same write with the WAL fsync'ed before the ack.
// Three in-process servers (streamlearn::server::Server on 127.0.0.1:0, no metrics exposer,
// snapshots at the server defaults: every 10^5 events or 5 min), one client stream at a time.
// A machine-durability stream waits for one fsync per batch (one writer per shard, so no group
// commit within one stream): its iterations carry fewer events at batch 1.
// Claims are ratios of medians (bench/ratio_reporter.h); target: process >= 70% of memory at
// batch 256.
//   rpc_durability_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "admin.grpc.pb.h"
#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "bench/rpc_fixture.h"
#include "benchmark/benchmark.h"
#include "core/workloads/dgp.h"
#include "sau.grpc.pb.h"
#include "server/server.h"
#include "server/storage/store.h"

namespace streamlearn::bench {
namespace {

namespace fs = std::filesystem;

constexpr int kD = 64;
constexpr int kDv = 64;
constexpr int kR = 256;
constexpr size_t kPoolEvents = 4096;
constexpr char kModel[] = "bench";
constexpr char kRoutingKey[] = "bench-key";

enum Mode { kMemory = 0, kProcess = 1, kMachine = 2 };
constexpr const char* kModeNames[] = {"memory", "process", "machine"};

// Batches per iteration: 4096 events (and >= 64 batches); a machine stream at batch 1 does
// 256 fsync'ed batches.
size_t BatchesPerIteration(Mode mode, size_t batch) {
  if (mode == kMachine && batch == 1) return 256;
  return std::max<size_t>(kPoolEvents, 64 * batch) / batch;
}
size_t Window(size_t batch) { return std::clamp<size_t>(2048 / batch, 4, 64); }

struct ServerUnderTest {
  std::unique_ptr<server::Server> server;
  std::unique_ptr<v1::SAU::Stub> stub;
  uint64_t next_t = 0;
};

struct Fixture {
  std::string root;  // data_dirs, removed at the end
  std::vector<sau::DgpEvent> events;
  ServerUnderTest targets[3];
};

Fixture* g_fixture = nullptr;

Fixture& GetFixture() {
  if (g_fixture != nullptr) return *g_fixture;
  auto* f = new Fixture;
  f->root = (fs::temp_directory_path() /
             ("rpc_durability_bench_" + std::to_string(getpid())))
                .string();
  fs::remove_all(f->root);
  sau::Dgp dgp(sau::Dgp::Options{.kind = sau::Dgp::Kind::kA, .d = kD, .d_v = kDv}, 7);
  for (size_t i = 0; i < kPoolEvents; ++i) f->events.push_back(dgp.Next());
  for (Mode mode : {kMemory, kProcess, kMachine}) {
    server::Server::Options options = LocalServerOptions();
    options.lmu_secret = lmu::HashSecret{};
    if (mode != kMemory) {
      options.data_dir = f->root + "/" + kModeNames[mode];
      options.durability =
          mode == kMachine ? storage::Durability::kMachine : storage::Durability::kProcess;
    }
    ServerUnderTest& t = f->targets[mode];
    int port = 0;
    t.server = StartLocalServer(options, &port);
    auto channel = Connect(port);
    v1::CreateModelRequest req;
    req.mutable_spec()->set_name(kModel);
    req.mutable_spec()->set_shards(1);
    req.mutable_spec()->mutable_sau()->set_d(kD);
    req.mutable_spec()->mutable_sau()->set_d_v(kDv);
    req.mutable_spec()->mutable_sau()->set_r(kR);
    grpc::ClientContext ctx;
    v1::ModelInfo info;
    grpc::Status s = v1::Admin::NewStub(channel)->CreateModel(&ctx, req, &info);
    if (!s.ok()) Die("CreateModel: " + s.error_message());
    t.stub = v1::SAU::NewStub(channel);
  }
  g_fixture = f;
  return *f;
}

void TearDownFixture() {
  if (g_fixture == nullptr) return;
  for (ServerUnderTest& t : g_fixture->targets) {
    t.stub.reset();
    if (t.server != nullptr) t.server->Shutdown(absl::Seconds(1));
    t.server.reset();
  }
  fs::remove_all(g_fixture->root);
  delete g_fixture;
  g_fixture = nullptr;
}

std::vector<v1::IngestRequest> MakeRequests(const Fixture& f, size_t batch) {
  return MakeIngestRequests(f.events, kModel, kRoutingKey, batch);
}

void BM_Ingest(benchmark::State& state) {
  Fixture& f = GetFixture();
  const Mode mode = static_cast<Mode>(state.range(0));
  const size_t batch = static_cast<size_t>(state.range(1));
  std::vector<v1::IngestRequest> requests = MakeRequests(f, batch);
  const size_t batches = BatchesPerIteration(mode, batch);
  ServerUnderTest& t = f.targets[mode];
  uint64_t acks = 0, rejected = 0;
  for (auto _ : state) {
    grpc::Status s =
        PipelinedIngest(*t.stub, requests, batches, Window(batch), &t.next_t, &acks, &rejected);
    if (!s.ok()) {
      state.SkipWithError(("Ingest stream: " + s.error_message()).c_str());
      return;
    }
  }
  const uint64_t expected = static_cast<uint64_t>(state.iterations()) * batches;
  if (acks != expected || rejected != 0) {
    state.SkipWithError("missing or rejected acks");
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(expected * batch));
  state.SetLabel(kModeNames[mode]);
}
BENCHMARK(BM_Ingest)
    ->ArgsProduct({{kMemory, kProcess, kMachine}, {1, 256}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void AddRatios(RatioReporter& rep) {
  const std::string eps = "items_per_second";
  for (const char* batch : {"1", "256"}) {
    const std::string b = batch;
    rep.AddRatio({"ingest events/s, process / memory, batch " + b,
                  {"BM_Ingest/1/" + b, eps},
                  {"BM_Ingest/0/" + b, eps},
                  0.7,
                  b == "256" ? Target::kAtLeast : Target::kNone});
    rep.AddRatio({"ingest events/s, machine / memory, batch " + b,
                  {"BM_Ingest/2/" + b, eps},
                  {"BM_Ingest/0/" + b, eps},
                  0,
                  Target::kNone});
    rep.AddRatio({"ingest events/s, machine / process, batch " + b,
                  {"BM_Ingest/2/" + b, eps},
                  {"BM_Ingest/1/" + b, eps},
                  0,
                  Target::kNone});
  }
}

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  streamlearn::bench::RatioReporter reporter(streamlearn::bench::ConsoleOptions());
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter, streamlearn::bench::AddRatios,
                                                streamlearn::bench::TearDownFixture);
}
