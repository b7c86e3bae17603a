// Connections and threads (docs/SECURITY.md, "Limits"): every open stream holds a server
// thread, and --max_threads caps them. A stream beyond the cap is answered RESOURCE_EXHAUSTED
// at once (it is not left waiting), the streams already open go on, and once they end the
// server takes calls again.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/server.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

struct OpenStream {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::IngestRequest, v1::IngestAck>> stream;
};

TEST(ConnectionLimitsTest, StreamsBeyondTheThreadCapAreRefusedAndTheServerRecovers) {
  constexpr int kMaxThreads = 8;
  constexpr int kTries = 40;
  server::Server::Options options;
  options.max_threads = kMaxThreads;
  std::unique_ptr<server::Server> server = test_util::StartLoopbackServer(options);
  ASSERT_NE(server->port(), 0);
  auto channel = test_util::ChannelTo(*server);
  {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::CreateModelRequest request;
    request.mutable_spec()->set_name("m");
    request.mutable_spec()->mutable_sau()->set_d(4);
    request.mutable_spec()->mutable_sau()->set_d_v(2);
    request.mutable_spec()->mutable_sau()->set_r(8);
    v1::ModelInfo info;
    ASSERT_TRUE(v1::Admin::NewStub(channel)->CreateModel(&ctx, request, &info).ok());
  }
  auto stub = v1::SAU::NewStub(channel);
  std::vector<OpenStream> open;
  int refused = 0;
  uint64_t t = 0;
  for (int i = 0; i < kTries; ++i) {
    OpenStream s;
    s.ctx = std::make_unique<grpc::ClientContext>();
    test_util::SetDeadline(s.ctx.get());
    s.stream = stub->Ingest(s.ctx.get());
    v1::IngestRequest r;
    r.set_model("m");
    r.set_routing_key(absl::StrCat("k", i));
    v1::Event* e = r.add_events();
    e->set_t(++t);
    for (double x : {0.1, 0.2, 0.3, 0.4}) e->add_k(x);
    for (double x : {1.0, -1.0}) e->add_v(x);
    v1::IngestAck ack;
    if (s.stream->Write(r) && s.stream->Read(&ack)) {
      EXPECT_EQ(ack.status().code(), 0) << ack.status().message();
      open.push_back(std::move(s));  // held open, idle, holding its thread
    } else {
      const grpc::Status st = s.stream->Finish();
      EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
      if (refused == 0) std::cout << "refused with: " << st.error_message() << std::endl;
      ++refused;
    }
  }
  std::cout << open.size() << " streams held open, " << refused << " refused" << std::endl;
  EXPECT_GT(refused, 0);
  EXPECT_LE(open.size(), static_cast<size_t>(kMaxThreads));
  EXPECT_GT(open.size(), 0u);
  for (OpenStream& s : open) {
    s.stream->WritesDone();
    EXPECT_TRUE(s.stream->Finish().ok());
  }
  // The threads are free again: calls are served (the server may take a moment to see the
  // streams end; the deadline only stops a hung test).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  grpc::Status st;
  do {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::ListModelsResponse list;
    st = v1::Admin::NewStub(channel)->ListModels(&ctx, v1::ListModelsRequest(), &list);
  } while (!st.ok() && std::chrono::steady_clock::now() < give_up);
  EXPECT_TRUE(st.ok()) << st.error_message();
  server->Shutdown(absl::Seconds(5));
}

}  // namespace
}  // namespace streamlearn
