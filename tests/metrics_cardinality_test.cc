// Metrics cardinality (docs/OPERATIONS.md, "Metrics"): a model with many shards and a server
// with many models add a bounded number of series. Shards past --metrics_max_shards share one
// series (shard="<N>+") whose counters are their sums; models past --metrics_max_models share
// model="_other".
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "core/common/routing.h"
#include "prometheus/metric_family.h"
#include "sau.grpc.pb.h"
#include "server/server.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

// Every (model, shard) label pair of `name` and its value.
std::map<std::pair<std::string, std::string>, double> Series(server::Server& server,
                                                              const std::string& name) {
  std::map<std::pair<std::string, std::string>, double> out;
  for (const prometheus::MetricFamily& family : server.metrics().registry()->Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      std::string model, shard;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "model") model = l.value;
        if (l.name == "shard") shard = l.value;
      }
      out[{model, shard}] = m.counter.value;
    }
  }
  return out;
}

TEST(MetricsCardinalityTest, ShardsAndModelsPastTheLimitsShareSeriesWhoseCountersAddUp) {
  server::Server::Options options;
  options.metrics_max_shards = 2;
  options.metrics_max_models = 1;
  std::unique_ptr<server::Server> server = test_util::StartLoopbackServer(options);
  ASSERT_NE(server->port(), 0);
  auto channel = test_util::ChannelTo(*server);
  constexpr uint32_t kShards = 8;
  for (const char* name : {"wide", "second"}) {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::CreateModelRequest request;
    request.mutable_spec()->set_name(name);
    request.mutable_spec()->set_shards(kShards);
    request.mutable_spec()->mutable_sau()->set_d(4);
    request.mutable_spec()->mutable_sau()->set_d_v(2);
    request.mutable_spec()->mutable_sau()->set_r(8);
    v1::ModelInfo info;
    ASSERT_TRUE(v1::Admin::NewStub(channel)->CreateModel(&ctx, request, &info).ok());
  }
  // Shard s of "wide" gets s + 1 events, then "second" gets one event in each shard.
  std::map<uint32_t, std::string> key;
  for (int i = 0; key.size() < kShards; ++i) {
    const std::string k = absl::StrCat("k", i);
    key.emplace(ShardFor(k, kShards), k);
  }
  grpc::ClientContext ctx;
  test_util::SetDeadline(&ctx);
  auto stream = v1::SAU::NewStub(channel)->Ingest(&ctx);
  test_util::Inputs in(3);
  for (const char* model : {"wide", "second"}) {
    for (const auto& [shard, k] : key) {
      v1::IngestRequest r;
      r.set_model(model);
      r.set_routing_key(k);
      const uint32_t n = std::string(model) == "wide" ? shard + 1 : 1;
      for (uint32_t i = 0; i < n; ++i) {
        v1::Event* e = r.add_events();
        e->set_t(i + 1);
        for (double x : in.Vector(4)) e->add_k(x);
        for (double x : in.Vector(2)) e->add_v(x);
      }
      v1::IngestAck ack;
      ASSERT_TRUE(stream->Write(r) && stream->Read(&ack));
      ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
    }
  }
  stream->WritesDone();
  ASSERT_TRUE(stream->Finish().ok());

  const auto events = Series(*server, "streamlearn_sau_events_total");
  const std::map<std::pair<std::string, std::string>, double> want = {
      {{"wide", "0"}, 1},
      {{"wide", "1"}, 2},
      {{"wide", "2+"}, 3 + 4 + 5 + 6 + 7 + 8},
      {{"_other", "0"}, 1},
      {{"_other", "1"}, 1},
      {{"_other", "2+"}, 6},
  };
  EXPECT_EQ(events, want);
  // Every per-shard family is bounded the same way: no label outside these pairs.
  for (const prometheus::MetricFamily& family : server->metrics().registry()->Collect()) {
    for (const prometheus::ClientMetric& m : family.metric) {
      std::string model, shard;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "model") model = l.value;
        if (l.name == "shard") shard = l.value;
      }
      if (model.empty()) continue;
      EXPECT_TRUE(want.contains({model, shard})) << family.name << "{" << model << "," << shard
                                                  << "}";
    }
  }
  server->Shutdown(absl::Seconds(5));
}

}  // namespace
}  // namespace streamlearn
