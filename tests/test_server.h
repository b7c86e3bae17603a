// Test helpers around an in-process Server on 127.0.0.1:0 (tests/server_*_test.cc and
// tests/client_*_test.cc): a suite fixture sharing one server, channels, clients and deadlines,
// a lock-step client for the batch streams (SAU.Ingest, LMU.Update), metric lookups, and a port
// nothing listens on.
//
// Deadlines here only stop a hung test early: they are generous (kRpcDeadline), because the
// suite runs on a 2-core machine beside other tests and other load, and a deadline that
// expires because the machine is slow is a flaky test, not a finding.
//
//   class MyTest : public SharedServerSuite<MyTest> {
//    public:
//     static server::Server::Options SuiteOptions() { ...; return options; }
//   };
//   TEST_F(MyTest, X) { auto channel = ChannelTo(*server_); ... address_ ... }
#ifndef STREAMLEARN_TESTS_TEST_SERVER_H_
#define STREAMLEARN_TESTS_TEST_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/lib/client.h"
#include "gtest/gtest.h"
#include "prometheus/metric_family.h"
#include "server/server.h"

namespace streamlearn::test_util {

// Deterministic inputs: splitmix64 mapped to [-1, 1).
class Inputs {
 public:
  explicit Inputs(uint64_t seed) : state_(seed) {}
  double Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
  }
  std::vector<double> Vector(int n) {
    std::vector<double> x(n);
    for (double& xi : x) xi = Next();
    return x;
  }

 private:
  uint64_t state_;
};


// Starts a server with `options` on 127.0.0.1 and a free port (a failed start is a test
// failure; port() is then 0).
inline std::unique_ptr<server::Server> StartLoopbackServer(server::Server::Options options) {
  options.listen = "127.0.0.1:0";
  auto server = std::make_unique<server::Server>(std::move(options));
  absl::StatusOr<int> port = server->Start();
  EXPECT_TRUE(port.ok()) << port.status();
  return server;
}

inline std::string AddressOf(const server::Server& server) {
  return "127.0.0.1:" + std::to_string(server.port());
}

inline std::shared_ptr<grpc::Channel> ChannelTo(const server::Server& server) {
  return grpc::CreateChannel(AddressOf(server), grpc::InsecureChannelCredentials());
}

// The deadline of every RPC (a whole stream, for the batch streams) the helpers make.
inline constexpr std::chrono::seconds kRpcDeadline{120};

inline void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + kRpcDeadline);
}

// Client::Connect with kRpcDeadline as both the connect timeout and the unary RPC deadline
// (the library's defaults, 10 s and 30 s, are for people, not for a loaded test machine).
inline absl::StatusOr<std::unique_ptr<Client>> ConnectClient(const std::string& address) {
  Client::Options options;
  options.connect_timeout = kRpcDeadline;
  options.rpc_timeout = kRpcDeadline;
  return Client::Connect(address, options);
}

// A TCP port on 127.0.0.1 that nothing listens on for as long as this object lives: a socket
// bound to a port of the kernel's choice and never put to listen, so connections to it are
// refused, and no other process (another test running in parallel) can take the port
// meanwhile. port() is 0 if no socket could be bound (a test failure).
class ClosedPort {
 public:
  ClosedPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
    EXPECT_NE(port_, 0) << "cannot bind a socket on 127.0.0.1";
  }
  ~ClosedPort() {
    if (fd_ >= 0) close(fd_);
  }
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  const int fd_;
  int port_ = 0;
};

// A suite whose tests share one server, started before the first test with
// Suite::SuiteOptions() and stopped after the last.
template <typename Suite>
class SharedServerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = StartLoopbackServer(Suite::SuiteOptions()).release();
    address_ = AddressOf(*server_);
  }
  static void TearDownTestSuite() {
    server_->Shutdown(absl::Seconds(5));
    delete server_;
    server_ = nullptr;
  }

  inline static server::Server* server_ = nullptr;
  inline static std::string address_;
};

// One bidi batch stream, written and read in lock step: one request, then its ack.
//
//   LockStepStream<v1::UpdateRequest, v1::UpdateAck> s(
//       [&](grpc::ClientContext* ctx) { return stub.Update(ctx); });
template <typename Request, typename Ack>
class LockStepStream {
 public:
  using ReaderWriter = grpc::ClientReaderWriter<Request, Ack>;
  explicit LockStepStream(
      const std::function<std::unique_ptr<ReaderWriter>(grpc::ClientContext*)>& open) {
    SetDeadline(&ctx_);
    rw_ = open(&ctx_);
  }
  // Sends one batch and reads its ack; false if the stream ended first.
  bool Send(const Request& request, Ack* ack) { return rw_->Write(request) && rw_->Read(ack); }
  Ack Send(const Request& request) {
    Ack ack;
    EXPECT_TRUE(Send(request, &ack)) << "the stream ended: " << Finish().error_message();
    return ack;
  }
  grpc::Status Finish() {
    rw_->WritesDone();
    return rw_->Finish();
  }

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<ReaderWriter> rw_;
};

// One case of the in-band error convention: a good batch spoiled by `mutate`.
template <typename Request>
struct RejectionCase {
  std::string scenario;
  std::function<void(Request&)> mutate;
  grpc::StatusCode code;
  std::vector<std::string> mentions;  // substrings of the ack's message
};

// Checks the in-band error convention case by case on one stream, after a first good batch:
// the spoiled batch is
// rejected in its ack with the case's code and a message naming every mention, it applies
// nothing and leaves state() (e.g. the shard's digest) unchanged, and the same stream then
// accepts the unspoiled batch, whose t values are still fresh. make_batch(first_t) builds a
// good batch of `n` items with t = first_t, first_t + 1, ...; *next_t advances by n per
// accepted batch.
template <typename Request, typename Ack>
void ExpectRejectedInBandThenAccepted(LockStepStream<Request, Ack>& stream,
                                      const std::vector<RejectionCase<Request>>& cases,
                                      const std::function<Request(uint64_t)>& make_batch,
                                      uint32_t n, const std::function<std::string()>& state,
                                      uint64_t* next_t) {
  const Ack first = stream.Send(make_batch(*next_t));
  ASSERT_EQ(first.status().code(), 0) << first.status().message();
  *next_t += n;
  for (const RejectionCase<Request>& c : cases) {
    SCOPED_TRACE(c.scenario);
    const std::string before = state();
    Request bad = make_batch(*next_t);
    c.mutate(bad);
    const Ack rejected = stream.Send(bad);
    EXPECT_EQ(rejected.status().code(), static_cast<int>(c.code));
    for (const std::string& m : c.mentions) {
      EXPECT_NE(rejected.status().message().find(m), std::string::npos)
          << "'" << m << "' not in: " << rejected.status().message();
    }
    EXPECT_EQ(rejected.applied(), 0u);
    EXPECT_EQ(state(), before);

    const Ack good = stream.Send(make_batch(*next_t));
    EXPECT_EQ(good.status().code(), 0) << good.status().message();
    EXPECT_EQ(good.applied(), n);
    *next_t += n;
  }
}

// The value of the series `name`{model, shard} in the server's registry; NaN if absent.
inline double SeriesValue(server::Server& server, const std::string& name,
                          const std::string& model, uint32_t shard) {
  for (const prometheus::MetricFamily& family : server.metrics().registry()->Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      bool model_match = false, shard_match = false;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        model_match = model_match || (l.name == "model" && l.value == model);
        shard_match = shard_match || (l.name == "shard" && l.value == std::to_string(shard));
      }
      if (model_match && shard_match) {
        return family.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
      }
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace streamlearn::test_util

#endif  // STREAMLEARN_TESTS_TEST_SERVER_H_
