// RPC benchmarks of the Fuse service over gRPC on loopback, beside its parts served alone and
// an empty handler, in the same run (STYLE: an empty-handler RPC beside each RPC):
//
//   Learn samples/s at batches of 1, 16 and 256 samples over one pipelined bidi stream:
//     BM_FuseLearn          Fuse.Learn on the worked scenario's fused model (ScenarioFuseSpec:
//                           linear-as-gate, SAU d = 8, d_v = 1, r = 512, LMU m = 1, C = 2048)
//     BM_SauIngest          SAU.Ingest of the same samples as events (k = q, v = y) into an
//                           SAU-only model with the fused model's SAU spec
//     BM_LmuUpdate          LMU.Update of the same samples (x, y) into an LMU-only model with
//                           its LMU spec
//     BM_SauThenLmu         both parts: the SAU stream, then the LMU stream, over the same
//                           samples (the sum of the parts; two RPCs per batch where Fuse has one)
//     BM_FuseLearnEmpty     an empty-handler Fuse service in the same process: it reads each
//                           LearnRequest and writes back an empty LearnAck
//   Predict latency, unary and sequential: p50 and p99 over 2000 calls after 200 warm-up
//   calls: Fuse.Predict, SAU.Query (stabilized), LMU.Predict, and an empty Fuse.Predict handler
//   that returns a response of the same size.
//
// Samples: 4096 from the scenario's steady phase (core/workloads/scenario.h: 9 features each),
// generated once and cycled; every model is warmed up on the pool once before timing so that
// its ids are known. The server under test is streamlearn::server::Server in-process on
// 127.0.0.1:0, in memory (no data_dir), no metrics exposer; client and servers share the
// machine's cores. The claims are ratios of medians, printed after the run:
//   rpc_fuse_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
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
#include "core/workloads/scenario.h"
#include "core/shard/model_registry.h"
#include "fuse.grpc.pb.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/server.h"

namespace streamlearn::bench {
namespace {

constexpr size_t kPool = 4096;
constexpr size_t kMaxBatch = 4096;
constexpr char kFuseModel[] = "fuse";
constexpr char kSauModel[] = "sau";
constexpr char kLmuModel[] = "lmu";
constexpr char kRoutingKey[] = "bench-key";
constexpr int kPredictWarmup = 200;
constexpr int kPredictCalls = 2000;

size_t BatchesPerIteration(size_t batch) { return std::max<size_t>(kPool, 64 * batch) / batch; }
size_t Window(size_t batch) { return std::clamp<size_t>(2048 / batch, 4, 64); }

class EmptyFuseService final : public v1::Fuse::Service {
 public:
  grpc::Status Learn(grpc::ServerContext* context,
                     grpc::ServerReaderWriter<v1::LearnAck, v1::LearnRequest>* stream) override {
    v1::LearnRequest request;
    const v1::LearnAck ack;  // empty
    while (stream->Read(&request)) {
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }
  grpc::Status Predict(grpc::ServerContext* context, const v1::FusePredictRequest* request,
                       v1::FusePredictResponse* response) override {
    response->add_y_hat(0);  // the size of a real answer (m = 1)
    response->add_y_hat_sau(0);
    response->add_y_hat_lmu(0);
    response->set_gate(0.5);
    return grpc::Status::OK;
  }
};

struct Fixture {
  std::vector<workloads::ScenarioSample> samples;
  std::unique_ptr<server::Server> server;
  EmptyFuseService empty_service;
  std::unique_ptr<grpc::Server> empty_server;
  std::unique_ptr<v1::Fuse::Stub> fuse, empty;
  std::unique_ptr<v1::SAU::Stub> sau;
  std::unique_ptr<v1::LMU::Stub> lmu;
  // t must increase within each shard; every sent item takes the next one of its model.
  uint64_t next_t_fuse = 0, next_t_empty = 0, next_t_sau = 0, next_t_lmu = 0;
};

Fixture* g_fixture = nullptr;

// Requests of `batch` items cut from the pool (t set at send time).
std::vector<v1::LearnRequest> FuseRequests(const Fixture& f, size_t batch, const char* model) {
  std::vector<v1::LearnRequest> out(kPool / batch);
  for (size_t b = 0; b < out.size(); ++b) {
    out[b].set_model(model);
    out[b].set_routing_key(kRoutingKey);
    for (size_t i = 0; i < batch; ++i) {
      const workloads::ScenarioSample& s = f.samples[b * batch + i];
      v1::FuseSample* o = out[b].add_samples();
      for (const lmu::Feature& x : s.x) {
        o->add_ids(x.id);
        o->add_vals(x.val);
      }
      o->mutable_q()->Add(s.q.begin(), s.q.end());
      o->mutable_y()->Add(s.y.begin(), s.y.end());
    }
  }
  return out;
}

std::vector<v1::IngestRequest> SauRequests(const Fixture& f, size_t batch) {
  std::vector<v1::IngestRequest> out(kPool / batch);
  for (size_t b = 0; b < out.size(); ++b) {
    out[b].set_model(kSauModel);
    out[b].set_routing_key(kRoutingKey);
    for (size_t i = 0; i < batch; ++i) {
      const workloads::ScenarioSample& s = f.samples[b * batch + i];
      v1::Event* e = out[b].add_events();
      e->mutable_k()->Add(s.q.begin(), s.q.end());
      e->mutable_v()->Add(s.y.begin(), s.y.end());
    }
  }
  return out;
}

std::vector<v1::UpdateRequest> LmuRequests(const Fixture& f, size_t batch) {
  std::vector<v1::UpdateRequest> out(kPool / batch);
  for (size_t b = 0; b < out.size(); ++b) {
    out[b].set_model(kLmuModel);
    out[b].set_routing_key(kRoutingKey);
    for (size_t i = 0; i < batch; ++i) {
      const workloads::ScenarioSample& s = f.samples[b * batch + i];
      v1::Sample* o = out[b].add_samples();
      for (const lmu::Feature& x : s.x) {
        o->add_ids(x.id);
        o->add_vals(x.val);
      }
      o->mutable_y()->Add(s.y.begin(), s.y.end());
    }
  }
  return out;
}

void SetT(v1::LearnRequest& r, uint64_t* t) { for (auto& s : *r.mutable_samples()) s.set_t(++*t); }
void SetT(v1::IngestRequest& r, uint64_t* t) { for (auto& e : *r.mutable_events()) e.set_t(++*t); }
void SetT(v1::UpdateRequest& r, uint64_t* t) { for (auto& s : *r.mutable_samples()) s.set_t(++*t); }

struct StreamTotals {
  uint64_t acks = 0;
  uint64_t rejected = 0;
};

// One bidi stream carrying `batches` requests cycled from `requests`, at most `window` of them
// unacknowledged: this thread writes, a reader thread reads the acks (one per batch, in order).
template <typename Request, typename Ack>
grpc::Status Pipelined(
    const std::function<std::unique_ptr<grpc::ClientReaderWriter<Request, Ack>>(
        grpc::ClientContext*)>& open,
    std::vector<Request>& requests, size_t batches, size_t window, uint64_t* next_t,
    StreamTotals* totals) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<Request, Ack>> stream = open(&context);
  std::counting_semaphore<> slots(static_cast<std::ptrdiff_t>(window));
  std::atomic<bool> broken{false};
  std::thread reader([&] {
    Ack ack;
    for (size_t i = 0; i < batches; ++i) {
      if (!stream->Read(&ack)) {
        broken.store(true);
        slots.release(static_cast<std::ptrdiff_t>(batches));
        return;
      }
      ++totals->acks;
      if (ack.status().code() != 0) {
        if (totals->rejected++ == 0)
          std::fprintf(stderr, "rejected: %s\n", ack.status().message().c_str());
      }
      slots.release();
    }
  });
  for (size_t b = 0; b < batches && !broken.load(); ++b) {
    slots.acquire();
    Request& req = requests[b % requests.size()];
    SetT(req, next_t);
    if (!stream->Write(req)) break;
  }
  stream->WritesDone();
  reader.join();
  return stream->Finish();
}

grpc::Status FuseStream(v1::Fuse::Stub& stub, std::vector<v1::LearnRequest>& requests,
                        size_t batches, size_t window, uint64_t* next_t, StreamTotals* totals) {
  return Pipelined<v1::LearnRequest, v1::LearnAck>(
      [&](grpc::ClientContext* c) { return stub.Learn(c); }, requests, batches, window, next_t,
      totals);
}
grpc::Status SauStream(v1::SAU::Stub& stub, std::vector<v1::IngestRequest>& requests,
                       size_t batches, size_t window, uint64_t* next_t, StreamTotals* totals) {
  return Pipelined<v1::IngestRequest, v1::IngestAck>(
      [&](grpc::ClientContext* c) { return stub.Ingest(c); }, requests, batches, window, next_t,
      totals);
}
grpc::Status LmuStream(v1::LMU::Stub& stub, std::vector<v1::UpdateRequest>& requests,
                       size_t batches, size_t window, uint64_t* next_t, StreamTotals* totals) {
  return Pipelined<v1::UpdateRequest, v1::UpdateAck>(
      [&](grpc::ClientContext* c) { return stub.Update(c); }, requests, batches, window, next_t,
      totals);
}

Fixture& GetFixture() {
  if (g_fixture != nullptr) return *g_fixture;
  auto* f = new Fixture;
  workloads::ScenarioOptions so;
  so.steady = static_cast<int>(kPool);
  workloads::Scenario scenario(so);
  for (size_t i = 0; i < kPool; ++i) f->samples.push_back(scenario.Next());

  server::Server::Options options = LocalServerOptions();
  options.max_batch = kMaxBatch;
  int port = 0;
  f->server = StartLocalServer(options, &port);
  const fuse::FuseSpec fs = workloads::ScenarioFuseSpec(so);
  ModelSpec fuse_model;
  fuse_model.name = kFuseModel;
  fuse_model.has_sau = false;
  fuse_model.has_fuse = true;
  fuse_model.fuse = fs;
  ModelSpec sau_model;
  sau_model.name = kSauModel;
  sau_model.sau = fs.sau;
  ModelSpec lmu_model;
  lmu_model.name = kLmuModel;
  lmu_model.has_sau = false;
  lmu_model.has_lmu = true;
  lmu_model.lmu = fs.lmu;
  for (const ModelSpec* m : {&fuse_model, &sau_model, &lmu_model}) {
    if (auto r = f->server->registry().Create(*m); !r.ok()) {
      Die("registry Create " + m->name + ": " + r.status().ToString());
    }
  }

  int empty_port = 0;
  f->empty_server = StartEmptyServer(&f->empty_service, &empty_port);

  auto channel = Connect(port);
  f->fuse = v1::Fuse::NewStub(channel);
  f->sau = v1::SAU::NewStub(channel);
  f->lmu = v1::LMU::NewStub(channel);
  f->empty = v1::Fuse::NewStub(Connect(empty_port));

  // Warm-up: every model sees the pool once (ids known, e-process testing).
  StreamTotals totals;
  auto fr = FuseRequests(*f, 256, kFuseModel);
  auto sr = SauRequests(*f, 256);
  auto lr = LmuRequests(*f, 256);
  grpc::Status s = FuseStream(*f->fuse, fr, fr.size(), 4, &f->next_t_fuse, &totals);
  if (s.ok()) s = SauStream(*f->sau, sr, sr.size(), 4, &f->next_t_sau, &totals);
  if (s.ok()) s = LmuStream(*f->lmu, lr, lr.size(), 4, &f->next_t_lmu, &totals);
  if (!s.ok() || totals.rejected != 0) Die("warm-up: " + s.error_message());
  g_fixture = f;
  return *f;
}

void TearDownFixture() {
  if (g_fixture == nullptr) return;
  g_fixture->fuse.reset();
  g_fixture->sau.reset();
  g_fixture->lmu.reset();
  g_fixture->empty.reset();
  g_fixture->empty_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  g_fixture->server->Shutdown(absl::Seconds(1));
  delete g_fixture;
  g_fixture = nullptr;
}

enum class LearnTarget { kFuse, kFuseEmpty, kSau, kLmu, kSauThenLmu };

void RunLearn(benchmark::State& state, LearnTarget target) {
  Fixture& f = GetFixture();
  const size_t batch = static_cast<size_t>(state.range(0));
  const size_t batches = BatchesPerIteration(batch);
  const size_t window = Window(batch);
  std::vector<v1::LearnRequest> fuse_requests =
      FuseRequests(f, batch, target == LearnTarget::kFuseEmpty ? "empty" : kFuseModel);
  std::vector<v1::IngestRequest> sau_requests = SauRequests(f, batch);
  std::vector<v1::UpdateRequest> lmu_requests = LmuRequests(f, batch);
  StreamTotals totals;
  uint64_t streams = 0;
  for (auto _ : state) {
    grpc::Status s;
    switch (target) {
      case LearnTarget::kFuse:
        s = FuseStream(*f.fuse, fuse_requests, batches, window, &f.next_t_fuse, &totals);
        break;
      case LearnTarget::kFuseEmpty:
        s = FuseStream(*f.empty, fuse_requests, batches, window, &f.next_t_empty, &totals);
        break;
      case LearnTarget::kSau:
        s = SauStream(*f.sau, sau_requests, batches, window, &f.next_t_sau, &totals);
        break;
      case LearnTarget::kLmu:
        s = LmuStream(*f.lmu, lmu_requests, batches, window, &f.next_t_lmu, &totals);
        break;
      case LearnTarget::kSauThenLmu:
        s = SauStream(*f.sau, sau_requests, batches, window, &f.next_t_sau, &totals);
        if (s.ok()) s = LmuStream(*f.lmu, lmu_requests, batches, window, &f.next_t_lmu, &totals);
        ++streams;
        break;
    }
    ++streams;
    if (!s.ok()) {
      state.SkipWithError(("stream: " + s.error_message()).c_str());
      return;
    }
  }
  if (totals.acks != streams * batches || totals.rejected != 0) {
    state.SkipWithError("missing or rejected acks");
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batches * batch));
  state.counters["batch"] = static_cast<double>(batch);
  state.counters["window"] = static_cast<double>(window);
}

void BM_FuseLearn(benchmark::State& state) { RunLearn(state, LearnTarget::kFuse); }
void BM_FuseLearnEmpty(benchmark::State& state) { RunLearn(state, LearnTarget::kFuseEmpty); }
void BM_SauIngest(benchmark::State& state) { RunLearn(state, LearnTarget::kSau); }
void BM_LmuUpdate(benchmark::State& state) { RunLearn(state, LearnTarget::kLmu); }
void BM_SauThenLmu(benchmark::State& state) { RunLearn(state, LearnTarget::kSauThenLmu); }
#define LEARN_BENCH(fn) \
  BENCHMARK(fn)->Arg(1)->Arg(16)->Arg(256)->UseRealTime()->Unit(benchmark::kMillisecond)
LEARN_BENCH(BM_FuseLearn);
LEARN_BENCH(BM_FuseLearnEmpty);
LEARN_BENCH(BM_SauIngest);
LEARN_BENCH(BM_LmuUpdate);
LEARN_BENCH(BM_SauThenLmu);
#undef LEARN_BENCH

// Unary latency: kPredictWarmup calls, then kPredictCalls timed calls; one iteration per
// repetition, timed manually as the sum of the calls. Percentiles by nearest rank.
void RunLatency(benchmark::State& state, const std::function<void(size_t)>& call) {
  std::vector<double> us(kPredictCalls);
  for (auto _ : state) {
    for (int i = 0; i < kPredictWarmup; ++i) call(static_cast<size_t>(i));
    double total = 0;
    for (int i = 0; i < kPredictCalls; ++i) {
      const auto start = std::chrono::steady_clock::now();
      call(static_cast<size_t>(i));
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      us[static_cast<size_t>(i)] = s * 1e6;
      total += s;
    }
    state.SetIterationTime(total);
  }
  std::sort(us.begin(), us.end());
  auto rank = [&](double p) {
    const size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(us.size())));
    return us[std::clamp<size_t>(k, 1, us.size()) - 1];
  };
  state.counters["p50_us"] = rank(0.50);
  state.counters["p90_us"] = rank(0.90);
  state.counters["p99_us"] = rank(0.99);
  state.counters["max_us"] = us.back();
  state.counters["p99_over_p50"] = rank(0.99) / rank(0.50);
}

void RunFusePredict(benchmark::State& state, bool empty) {
  Fixture& f = GetFixture();
  std::vector<v1::FusePredictRequest> requests(256);
  for (size_t i = 0; i < requests.size(); ++i) {
    const workloads::ScenarioSample& s = f.samples[i];
    requests[i].set_model(kFuseModel);
    requests[i].set_routing_key(kRoutingKey);
    for (const lmu::Feature& x : s.x) {
      requests[i].add_ids(x.id);
      requests[i].add_vals(x.val);
    }
    requests[i].mutable_q()->Add(s.q.begin(), s.q.end());
  }
  v1::Fuse::Stub& stub = empty ? *f.empty : *f.fuse;
  RunLatency(state, [&](size_t i) {
    grpc::ClientContext context;
    v1::FusePredictResponse response;
    grpc::Status s = stub.Predict(&context, requests[i % requests.size()], &response);
    if (!s.ok() || response.y_hat_size() != 1) Die("Fuse.Predict: " + s.error_message());
  });
}
void BM_FusePredict(benchmark::State& state) { RunFusePredict(state, false); }
void BM_FusePredictEmpty(benchmark::State& state) { RunFusePredict(state, true); }

void BM_SauQuery(benchmark::State& state) {
  Fixture& f = GetFixture();
  std::vector<v1::QueryRequest> requests(256);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].set_model(kSauModel);
    requests[i].set_routing_key(kRoutingKey);
    requests[i].mutable_q()->Add(f.samples[i].q.begin(), f.samples[i].q.end());
    requests[i].set_path(v1::READOUT_PATH_STABILIZED);
  }
  RunLatency(state, [&](size_t i) {
    grpc::ClientContext context;
    v1::QueryResponse response;
    grpc::Status s = f.sau->Query(&context, requests[i % requests.size()], &response);
    if (!s.ok() || response.y_hat_size() != 1) Die("SAU.Query: " + s.error_message());
  });
}

void BM_LmuPredict(benchmark::State& state) {
  Fixture& f = GetFixture();
  std::vector<v1::PredictRequest> requests(256);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].set_model(kLmuModel);
    requests[i].set_routing_key(kRoutingKey);
    for (const lmu::Feature& x : f.samples[i].x) {
      requests[i].add_ids(x.id);
      requests[i].add_vals(x.val);
    }
  }
  RunLatency(state, [&](size_t i) {
    grpc::ClientContext context;
    v1::PredictResponse response;
    grpc::Status s = f.lmu->Predict(&context, requests[i % requests.size()], &response);
    if (!s.ok() || response.y_hat_size() != 1) Die("LMU.Predict: " + s.error_message());
  });
}

#define LATENCY_BENCH(fn) \
  BENCHMARK(fn)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond)
LATENCY_BENCH(BM_FusePredict);
LATENCY_BENCH(BM_FusePredictEmpty);
LATENCY_BENCH(BM_SauQuery);
LATENCY_BENCH(BM_LmuPredict);
#undef LATENCY_BENCH

void AddRatios(RatioReporter& rep) {
  const std::string ips = "items_per_second";
  for (const std::string b : {"1", "16", "256"}) {
    rep.AddRatio({"Fuse.Learn / (SAU.Ingest then LMU.Update) samples/s, batch " + b,
                  {"BM_FuseLearn/" + b, ips}, {"BM_SauThenLmu/" + b, ips}, 0.67,
                  Target::kAtLeast});
    rep.AddRatio({"Fuse.Learn / SAU.Ingest alone, batch " + b, {"BM_FuseLearn/" + b, ips},
                  {"BM_SauIngest/" + b, ips}, 0, Target::kNone});
    rep.AddRatio({"Fuse.Learn / LMU.Update alone, batch " + b, {"BM_FuseLearn/" + b, ips},
                  {"BM_LmuUpdate/" + b, ips}, 0, Target::kNone});
    rep.AddRatio({"Fuse.Learn / empty handler, batch " + b,
                  {"BM_FuseLearn/" + b, ips},
                  {"BM_FuseLearnEmpty/" + b, ips},
                  0.5,
                  b == "1" ? Target::kAtLeast : Target::kNone});
  }
  rep.AddRatio({"Fuse.Predict p99 / p50", {"BM_FusePredict", "p99_us"},
                {"BM_FusePredict", "p50_us"}, 2.0, Target::kAtMost});
  rep.AddRatio({"Fuse.Predict p50 / SAU.Query p50", {"BM_FusePredict", "p50_us"},
                {"BM_SauQuery", "p50_us"}, 0, Target::kNone});
  rep.AddRatio({"Fuse.Predict p50 / LMU.Predict p50", {"BM_FusePredict", "p50_us"},
                {"BM_LmuPredict", "p50_us"}, 0, Target::kNone});
  rep.AddRatio({"Fuse.Predict p50 / empty handler p50", {"BM_FusePredict", "p50_us"},
                {"BM_FusePredictEmpty", "p50_us"}, 0, Target::kNone});
  rep.AddRatio({"Fuse.Predict p99 / empty handler p99", {"BM_FusePredict", "p99_us"},
                {"BM_FusePredictEmpty", "p99_us"}, 0, Target::kNone});
}

}  // namespace
}  // namespace streamlearn::bench

int main(int argc, char** argv) {
  streamlearn::bench::RatioReporter reporter(streamlearn::bench::ConsoleOptions());
  return streamlearn::bench::RunRatioBenchmarks(argc, argv, reporter, streamlearn::bench::AddRatios,
                                                streamlearn::bench::TearDownFixture);
}
