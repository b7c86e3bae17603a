// A little traffic for the deploy tests (tests/deploy_*_test.cc), through the C++ client
// library: one model with an SAU part and an LMU part, two routing keys on different shards,
// SAU batches, LMU batches, a Query and a Predict per round, so that every per-shard and RPC
// metric family of the server has series.
//
//   absl::StatusOr<std::unique_ptr<TrafficDriver>> driver =
//       TrafficDriver::Start("127.0.0.1:50051", "deploy");
//   ASSERT_TRUE(driver.ok()) << driver.status();
//   ASSERT_TRUE((*driver)->Round().ok());
//   (*driver)->shards();   // the shards the rounds write to
//
// Not thread-safe; one driver per thread.
#ifndef STREAMLEARN_TESTS_DEPLOY_TRAFFIC_H_
#define STREAMLEARN_TESTS_DEPLOY_TRAFFIC_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "admin.pb.h"
#include "client/lib/client.h"
#include "tests/test_server.h"

namespace streamlearn::test_util {

class TrafficDriver {
 public:
  static constexpr int kD = 4, kDv = 2, kShards = 2, kBatch = 16;

  // Connects, creates `model` and opens one ingest and one update session.
  static absl::StatusOr<std::unique_ptr<TrafficDriver>> Start(const std::string& address,
                                                              const std::string& model) {
    absl::StatusOr<std::unique_ptr<Client>> client = ConnectClient(address);
    if (!client.ok()) return client.status();
    v1::ModelSpec spec;
    spec.set_name(model);
    spec.set_shards(kShards);
    spec.mutable_sau()->set_d(kD);
    spec.mutable_sau()->set_d_v(kDv);
    spec.mutable_sau()->set_r(32);
    spec.mutable_lmu()->set_m(1);
    spec.mutable_lmu()->set_lr(0.05);
    if (absl::StatusOr<v1::ModelInfo> info = (*client)->CreateModel(spec); !info.ok()) {
      return info.status();
    }
    auto driver = std::unique_ptr<TrafficDriver>(new TrafficDriver(std::move(*client), model));
    if (absl::Status s = driver->OpenSessions(); !s.ok()) return s;
    return driver;
  }

  // One SAU batch and one LMU batch per routing key, then a Query and a Predict; waits for
  // every ack. Errors: the first failed RPC or rejected batch.
  absl::Status Round() {
    for (const std::string& key : keys_) {
      v1::IngestRequest ingest;
      ingest.set_routing_key(key);
      v1::UpdateRequest update;
      update.set_routing_key(key);
      for (int i = 0; i < kBatch; ++i) {
        v1::Event* e = ingest.add_events();
        e->set_t(next_t_);
        for (int j = 0; j < kD; ++j) e->add_k(Uniform() * 2 - 1);
        for (int j = 0; j < kDv; ++j) e->add_v(Uniform());
        v1::Sample* s = update.add_samples();
        s->set_t(next_t_);
        s->add_ids(static_cast<uint64_t>(Uniform() * 1000));
        s->add_vals(1.0);
        s->add_y(Uniform());
        ++next_t_;
      }
      if (absl::Status s = ingest_->Send(std::move(ingest)); !s.ok()) return s;
      if (absl::Status s = update_->Send(std::move(update)); !s.ok()) return s;
    }
    if (absl::Status s = ingest_->Flush(); !s.ok()) return s;
    if (absl::Status s = update_->Flush(); !s.ok()) return s;
    if (ingest_->stats().batches_rejected + update_->stats().batches_rejected > 0) {
      return absl::InternalError("a traffic batch was rejected");
    }
    const std::vector<double> q(kD, 0.25);
    if (auto r = client_->Query(model_, keys_[0], q); !r.ok()) return r.status();
    const std::vector<uint64_t> ids = {1, 2};
    const std::vector<double> vals = {1.0, 0.5};
    if (auto r = client_->Predict(model_, keys_[1], ids, vals); !r.ok()) return r.status();
    return absl::OkStatus();
  }

  const std::set<uint32_t>& shards() const { return shards_; }
  const std::string& model() const { return model_; }

 private:
  TrafficDriver(std::unique_ptr<Client> client, std::string model)
      : client_(std::move(client)), model_(std::move(model)) {}

  // Picks two routing keys on different shards and opens the sessions.
  absl::Status OpenSessions() {
    for (int i = 0; shards_.size() < kShards && i < 100; ++i) {
      const std::string key = absl::StrCat("key-", i);
      absl::StatusOr<uint32_t> shard = client_->ShardOf(model_, key);
      if (!shard.ok()) return shard.status();
      if (shards_.insert(*shard).second) keys_.push_back(key);
    }
    absl::StatusOr<std::unique_ptr<IngestSession>> ingest = client_->OpenIngest(model_);
    if (!ingest.ok()) return ingest.status();
    ingest_ = std::move(*ingest);
    absl::StatusOr<std::unique_ptr<LmuUpdateSession>> update = client_->OpenLmuUpdate(model_);
    if (!update.ok()) return update.status();
    update_ = std::move(*update);
    return absl::OkStatus();
  }

  double Uniform() {  // splitmix64 -> [0, 1)
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }

  std::unique_ptr<Client> client_;
  const std::string model_;
  std::vector<std::string> keys_;
  std::set<uint32_t> shards_;
  std::unique_ptr<IngestSession> ingest_;
  std::unique_ptr<LmuUpdateSession> update_;
  uint64_t next_t_ = 1;
  uint64_t state_ = 42;
};

}  // namespace streamlearn::test_util

#endif  // STREAMLEARN_TESTS_DEPLOY_TRAFFIC_H_
