// RPC benchmarks of the SAU service over gRPC on loopback, each beside its baseline in the
// same run (STYLE: an empty-handler RPC beside each RPC):
//
//   Ingest events/s at batches of 1, 16 and 256 events (model d = d_v = 64, r = 256, one
//   shard) over one pipelined bidi stream, beside
//     (i)  an empty-handler SAU service in the same process: it reads each IngestRequest and
//          writes back an empty IngestAck; same client, same requests, same window;
//     (ii) the in-process core: SauShard::Ingest with the same batches, no gRPC.
//   Query latency, unary and sequential: p50 and p99 over 2000 calls after 200 warm-up calls,
//   beside an empty Query handler that returns a response of the same size (d_v values).
//
// The server under test is streamlearn::server::Server, started in-process on 127.0.0.1:0
// with no metrics exposer; client, server and the empty service share the machine's cores.
// The claims are ratios of medians, printed after the run (bench/ratio_reporter.h):
//   rpc_sau_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "bench/rpc_fixture.h"
#include "benchmark/benchmark.h"
#include "core/workloads/dgp.h"
#include "core/sau/sau_estimator.h"
#include "core/shard/model_registry.h"
#include "core/shard/sau_shard.h"
#include "sau.grpc.pb.h"
#include "server/server.h"

namespace streamlearn::bench {
namespace {

constexpr int kD = 64;
constexpr int kDv = 64;
constexpr int kR = 256;
constexpr size_t kPoolEvents = 4096;  // DGP-A events, generated once, cycled
constexpr size_t kMaxBatch = 4096;    // the server's default max_batch
constexpr char kModel[] = "bench";
constexpr char kRoutingKey[] = "bench-key";
constexpr int kQueryWarmup = 200;
constexpr int kQueryCalls = 2000;

sau::SauSpec BenchSpec() {
  sau::SauSpec spec;
  spec.d = kD;
  spec.d_v = kDv;
  spec.r = kR;
  return spec;
}

// Events per benchmark iteration: at least 4096, and at least 64 batches.
size_t BatchesPerIteration(size_t batch) {
  return std::max<size_t>(kPoolEvents, 64 * batch) / batch;
}

// Unacknowledged batches allowed on a stream: enough to keep both sides busy, bounded so that
// at most ~2000 events are in flight.
size_t Window(size_t batch) { return std::clamp<size_t>(2048 / batch, 4, 64); }

// The baseline service: the generated SAU service type with handlers that do no work.
class EmptySauService final : public v1::SAU::Service {
 public:
  grpc::Status Ingest(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) override {
    v1::IngestRequest request;
    const v1::IngestAck ack;  // empty
    while (stream->Read(&request)) {
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status Query(grpc::ServerContext* context, const v1::QueryRequest* request,
                     v1::QueryResponse* response) override {
    response->mutable_y_hat()->Resize(kDv, 0.0);  // the size of a real answer
    return grpc::Status::OK;
  }
};

// Everything the benchmarks share, built once on first use and torn down by main().
struct Fixture {
  std::vector<sau::DgpEvent> events;
  std::vector<std::vector<double>> queries;

  std::unique_ptr<server::Server> server;
  EmptySauService empty_service;
  std::unique_ptr<grpc::Server> empty_server;
  std::unique_ptr<v1::SAU::Stub> server_stub;
  std::unique_ptr<v1::SAU::Stub> empty_stub;

  // Sequence numbers must increase within the shard; every sent event takes the next one.
  uint64_t next_t_server = 0;
  uint64_t next_t_empty = 0;
};

Fixture* g_fixture = nullptr;

Fixture& GetFixture() {
  if (g_fixture != nullptr) return *g_fixture;
  auto* f = new Fixture;
  sau::Dgp dgp(sau::Dgp::Options{.kind = sau::Dgp::Kind::kA, .d = kD, .d_v = kDv}, 7);
  for (size_t i = 0; i < kPoolEvents; ++i) f->events.push_back(dgp.Next());
  for (int i = 0; i < 256; ++i) f->queries.push_back(dgp.Gaussian(kD));

  server::Server::Options options = LocalServerOptions();
  options.max_batch = kMaxBatch;
  int port = 0;
  f->server = StartLocalServer(options, &port);
  ModelSpec spec;
  spec.name = kModel;
  spec.shards = 1;
  spec.sau = BenchSpec();
  if (auto m = f->server->registry().Create(spec); !m.ok()) {
    Die("registry Create: " + m.status().ToString());
  }

  int empty_port = 0;
  f->empty_server = StartEmptyServer(&f->empty_service, &empty_port);

  f->server_stub = v1::SAU::NewStub(Connect(port));
  f->empty_stub = v1::SAU::NewStub(Connect(empty_port));
  g_fixture = f;
  return *f;
}

void TearDownFixture() {
  if (g_fixture == nullptr) return;
  g_fixture->server_stub.reset();
  g_fixture->empty_stub.reset();
  g_fixture->empty_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  g_fixture->server->Shutdown(absl::Seconds(1));
  delete g_fixture;
  g_fixture = nullptr;
}

// The pool's events cut into requests of `batch` events (t is set at send time).
std::vector<v1::IngestRequest> MakeRequests(const Fixture& f, size_t batch) {
  return MakeIngestRequests(f.events, kModel, kRoutingKey, batch);
}

struct StreamTotals {
  uint64_t acks = 0;
  uint64_t rejected = 0;
};

// One Ingest stream with at most `window` batches unacknowledged (rpc_fixture.h).
grpc::Status PipelinedIngest(v1::SAU::Stub& stub, std::vector<v1::IngestRequest>& requests,
                             size_t batches, size_t window, uint64_t* next_t,
                             StreamTotals* totals) {
  return bench::PipelinedIngest(stub, requests, batches, window, next_t, &totals->acks,
                                &totals->rejected);
}

void RunIngestOverGrpc(benchmark::State& state, bool empty_handler) {
  Fixture& f = GetFixture();
  const size_t batch = static_cast<size_t>(state.range(0));
  std::vector<v1::IngestRequest> requests = MakeRequests(f, batch);
  const size_t batches = BatchesPerIteration(batch);
  v1::SAU::Stub& stub = empty_handler ? *f.empty_stub : *f.server_stub;
  uint64_t* next_t = empty_handler ? &f.next_t_empty : &f.next_t_server;
  StreamTotals totals;
  for (auto _ : state) {
    grpc::Status s = PipelinedIngest(stub, requests, batches, Window(batch), next_t, &totals);
    if (!s.ok()) {
      state.SkipWithError(("Ingest stream: " + s.error_message()).c_str());
      return;
    }
  }
  const uint64_t expected = static_cast<uint64_t>(state.iterations()) * batches;
  if (totals.acks != expected || totals.rejected != 0) {
    state.SkipWithError("missing or rejected acks");
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(expected * batch));
  state.counters["batch"] = static_cast<double>(batch);
  state.counters["window"] = static_cast<double>(Window(batch));
}

void BM_IngestServer(benchmark::State& state) { RunIngestOverGrpc(state, false); }
void BM_IngestEmptyHandler(benchmark::State& state) { RunIngestOverGrpc(state, true); }
BENCHMARK(BM_IngestServer)->Arg(1)->Arg(16)->Arg(256)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IngestEmptyHandler)
    ->Arg(1)
    ->Arg(16)
    ->Arg(256)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The same batches through SauShard::Ingest directly: validation, duplicate check, a private
// copy of the state, the SAU updates and the publish; no gRPC, no protobuf.
void BM_IngestInProcess(benchmark::State& state) {
  Fixture& f = GetFixture();
  const size_t batch = static_cast<size_t>(state.range(0));
  const size_t batches = BatchesPerIteration(batch);
  absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(BenchSpec());
  if (!est.ok()) Die(est.status().ToString());
  SauShard shard(*est);
  std::vector<std::vector<EventView>> views(kPoolEvents / batch);
  for (size_t b = 0; b < views.size(); ++b) {
    for (size_t i = 0; i < batch; ++i) {
      const sau::DgpEvent& e = f.events[b * batch + i];
      views[b].push_back(EventView{.t = 0, .k = e.k, .v = e.v});
    }
  }
  uint64_t t = 0;
  uint64_t applied = 0;
  for (auto _ : state) {
    for (size_t b = 0; b < batches; ++b) {
      std::vector<EventView>& batch_views = views[b % views.size()];
      for (EventView& v : batch_views) v.t = ++t;
      absl::StatusOr<IngestOutcome> out = shard.Ingest(batch_views, kMaxBatch);
      if (!out.ok()) {
        state.SkipWithError(out.status().ToString().c_str());
        return;
      }
      applied += out->applied;
    }
  }
  if (applied != static_cast<uint64_t>(state.iterations()) * batches * batch) {
    state.SkipWithError("events not applied");
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(applied));
  state.counters["batch"] = static_cast<double>(batch);
}
BENCHMARK(BM_IngestInProcess)
    ->Arg(1)
    ->Arg(16)
    ->Arg(256)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Unary Query latency: 200 warm-up calls, then 2000 timed calls; one iteration per
// repetition, timed manually as the sum of the calls. Percentiles by nearest rank.
void RunQueryLatency(benchmark::State& state, bool empty_handler) {
  Fixture& f = GetFixture();
  v1::SAU::Stub& stub = empty_handler ? *f.empty_stub : *f.server_stub;
  if (!empty_handler) {  // a shard that has seen events (the state size does not depend on it)
    std::vector<v1::IngestRequest> requests = MakeRequests(f, 256);
    StreamTotals totals;
    grpc::Status s = PipelinedIngest(stub, requests, 4, 4, &f.next_t_server, &totals);
    if (!s.ok()) Die("seeding the query model: " + s.error_message());
  }
  std::vector<v1::QueryRequest> requests(f.queries.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].set_model(kModel);
    requests[i].set_routing_key(kRoutingKey);
    requests[i].mutable_q()->Add(f.queries[i].begin(), f.queries[i].end());
    requests[i].set_path(v1::READOUT_PATH_STABILIZED);
  }
  auto call = [&](int i) {
    grpc::ClientContext context;
    v1::QueryResponse response;
    grpc::Status s =
        stub.Query(&context, requests[static_cast<size_t>(i) % requests.size()], &response);
    if (!s.ok() || response.y_hat_size() != kDv) Die("Query: " + s.error_message());
  };
  std::vector<double> latency_us(kQueryCalls);
  for (auto _ : state) {
    for (int i = 0; i < kQueryWarmup; ++i) call(i);
    double total_s = 0;
    for (int i = 0; i < kQueryCalls; ++i) {
      const auto start = std::chrono::steady_clock::now();
      call(i);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      latency_us[static_cast<size_t>(i)] = s * 1e6;
      total_s += s;
    }
    state.SetIterationTime(total_s);
  }
  std::sort(latency_us.begin(), latency_us.end());
  auto rank = [&](double p) {
    const size_t k = static_cast<size_t>(std::ceil(p * latency_us.size()));
    return latency_us[std::clamp<size_t>(k, 1, latency_us.size()) - 1];
  };
  double mean = 0;
  for (double x : latency_us) mean += x;
  state.counters["p50_us"] = rank(0.50);
  state.counters["p90_us"] = rank(0.90);
  state.counters["p99_us"] = rank(0.99);
  state.counters["max_us"] = latency_us.back();
  state.counters["mean_us"] = mean / static_cast<double>(latency_us.size());
  state.counters["p99_over_p50"] = rank(0.99) / rank(0.50);
}

void BM_QueryServer(benchmark::State& state) { RunQueryLatency(state, false); }
void BM_QueryEmptyHandler(benchmark::State& state) { RunQueryLatency(state, true); }
BENCHMARK(BM_QueryServer)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QueryEmptyHandler)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

void AddRatios(RatioReporter& rep) {
  const std::string eps = "items_per_second";
  for (const char* b : {"1", "16", "256"}) {
    const std::string batch = b;
    const bool at_1 = batch == "1", at_256 = batch == "256";
    rep.AddRatio({"ingest events/s, server / empty handler, batch " + batch,
                  {"BM_IngestServer/" + batch, eps},
                  {"BM_IngestEmptyHandler/" + batch, eps},
                  0.5,
                  at_1 ? Target::kAtLeast : Target::kNone});
    rep.AddRatio({"ingest events/s, server / in-process SauShard, batch " + batch,
                  {"BM_IngestServer/" + batch, eps},
                  {"BM_IngestInProcess/" + batch, eps},
                  0.5,
                  at_256 ? Target::kAtLeast : Target::kNone});
  }
  rep.AddRatio({"query p99 / p50, server",
                {"BM_QueryServer", "p99_us"},
                {"BM_QueryServer", "p50_us"},
                2.0,
                Target::kAtMost});
  rep.AddRatio({"query p99 / p50, empty handler",
                {"BM_QueryEmptyHandler", "p99_us"},
                {"BM_QueryEmptyHandler", "p50_us"},
                0,
                Target::kNone});
  rep.AddRatio({"query p50, server / empty handler",
                {"BM_QueryServer", "p50_us"},
                {"BM_QueryEmptyHandler", "p50_us"},
                0,
                Target::kNone});
  rep.AddRatio({"query p99, server / empty handler",
                {"BM_QueryServer", "p99_us"},
                {"BM_QueryEmptyHandler", "p99_us"},
                0,
                Target::kNone});
}

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  streamlearn::bench::RatioReporter reporter(streamlearn::bench::ConsoleOptions());
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter, streamlearn::bench::AddRatios,
                                                streamlearn::bench::TearDownFixture);
}
