// What the RPC benchmarks share: an in-process streamlearn server on a free local port, an
// "empty handler" gRPC server beside it (the baseline every RPC figure is a ratio to), and a
// channel to either.
//
//   std::unique_ptr<server::Server> s = StartLocalServer(LocalServerOptions(), &port);
//   std::unique_ptr<grpc::Server> empty = StartEmptyServer(&empty_service, &empty_port);
//   auto stub = v1::SAU::NewStub(Connect(port));
//
// Set-up failures stop the run (Die). Not thread-safe: the fixtures are built once, from the
// benchmark thread.
#ifndef STREAMLEARN_BENCH_RPC_FIXTURE_H_
#define STREAMLEARN_BENCH_RPC_FIXTURE_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bench/bench_main.h"
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

}  // namespace streamlearn::bench

#endif  // STREAMLEARN_BENCH_RPC_FIXTURE_H_
