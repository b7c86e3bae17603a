// What the RPC benchmarks share: an in-process streamlearn server on a free local port, an
// "empty handler" gRPC server beside it (the baseline every RPC figure is a ratio to), and a
// channel to either.
//
//   std::unique_ptr<server::Server> s = StartLocalServer(LocalServerOptions(), &port);
//   std::unique_ptr<grpc::Server> empty = StartEmptyServer(&empty_service, &empty_port);
//   auto stub = v1::SAU::NewStub(Connect(port));
//
// Also the SAU ingest every RPC benchmark drives: MakeIngestRequests (a pool of events cut into
// requests) and PipelinedIngest (one stream with a window of unacknowledged batches).
//
// Set-up failures stop the run (Die). Not thread-safe: the fixtures are built once, from the
// benchmark thread.
#ifndef STREAMLEARN_BENCH_RPC_FIXTURE_H_
#define STREAMLEARN_BENCH_RPC_FIXTURE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <semaphore>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/bench_main.h"
#include "core/workloads/dgp.h"
#include "sau.grpc.pb.h"
#include "server/server.h"

namespace streamlearn::bench {

inline constexpr int kMaxMessageBytes = 16 << 20;

// Listens on 127.0.0.1 (a free port), no metrics exposer.
inline server::Server::Options LocalServerOptions() {
  server::Server::Options options;
  options.listen = "127.0.0.1:0";
  options.metrics = "";
  return options;
}

inline std::unique_ptr<server::Server> StartLocalServer(const server::Server::Options& options,
                                                        int* port) {
  auto s = std::make_unique<server::Server>(options);
  absl::StatusOr<int> p = s->Start();
  if (!p.ok()) Die("Server::Start: " + p.status().ToString());
  *port = *p;
  return s;
}

// A plain gRPC server with `service` (whose handlers do nothing), on a free local port.
inline std::unique_ptr<grpc::Server> StartEmptyServer(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> s = builder.BuildAndStart();
  if (s == nullptr || *port == 0) Die("cannot start the empty-handler server");
  return s;
}

inline std::shared_ptr<grpc::Channel> Connect(int port) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    Die("cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  return channel;
}

// `events` cut into requests of `batch` events each (whole batches only) for `model` and
// `routing_key`; t is set at send time.
inline std::vector<v1::IngestRequest> MakeIngestRequests(std::span<const sau::DgpEvent> events,
                                                         const std::string& model,
                                                         const std::string& routing_key,
                                                         size_t batch) {
  std::vector<v1::IngestRequest> requests(events.size() / batch);
  for (size_t b = 0; b < requests.size(); ++b) {
    v1::IngestRequest& req = requests[b];
    req.set_model(model);
    req.set_routing_key(routing_key);
    for (size_t i = 0; i < batch; ++i) {
      const sau::DgpEvent& e = events[b * batch + i];
      v1::Event* ev = req.add_events();
      ev->mutable_k()->Add(e.k.begin(), e.k.end());
      ev->mutable_v()->Add(e.v.begin(), e.v.end());
    }
  }
  return requests;
}

// One Ingest stream carrying `batches` requests cycled from `requests` (each one's events get
// the next t values from *next_t), at most `window` unacknowledged. Counts acks and the acks
// that rejected their batch.
inline grpc::Status PipelinedIngest(v1::SAU::Stub& stub, std::vector<v1::IngestRequest>& requests,
                                    size_t batches, size_t window, uint64_t* next_t,
                                    uint64_t* acks, uint64_t* rejected) {
  grpc::ClientContext context;
  auto stream = stub.Ingest(&context);
  std::counting_semaphore<> slots(static_cast<std::ptrdiff_t>(window));
  std::atomic<bool> broken{false};
  std::thread reader([&] {
    v1::IngestAck ack;
    for (size_t i = 0; i < batches; ++i) {
      if (!stream->Read(&ack)) {
        broken.store(true);
        slots.release(static_cast<std::ptrdiff_t>(batches));
        return;
      }
      ++*acks;
      if (ack.status().code() != 0) ++*rejected;
      slots.release();
    }
  });
  for (size_t b = 0; b < batches && !broken.load(); ++b) {
    slots.acquire();
    v1::IngestRequest& req = requests[b % requests.size()];
    for (v1::Event& e : *req.mutable_events()) e.set_t(++*next_t);
    if (!stream->Write(req)) break;
  }
  stream->WritesDone();
  reader.join();
  return stream->Finish();
}

}  // namespace streamlearn::bench

#endif  // STREAMLEARN_BENCH_RPC_FIXTURE_H_
