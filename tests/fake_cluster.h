// FakeCluster: fake streamlearn servers in the test process, for deterministic tests of the
// client's routing and resending (tests/client_routing_test.cc; docs/CLIENT.md, "Routing and
// resending").
//
// Each FakeServer is a grpc::Server on 127.0.0.1 that answers Admin.GetModel and
// Admin.ShardMap for one model of kFakeShards shards (kFakeModel), and SAU.Ingest as a real
// server's stream does (server/batch_stream.h): one ack per batch, in order, carrying the
// batch's shard; an event is applied only if its t is new for the shard (TOrder,
// core/shard/batch_gate.h), the others are acknowledged in duplicate_t; a batch for a shard
// the owner table gives to another server is answered NOT-OWNER; and after a retryable
// in-band failure for a shard, the stream holds back that shard's later batches. The fakes
// share one FakeState: the owner table (the shard map each of them answers) and the truth
// (every event each shard applied, in order, and which server applied each batch), so a
// test checks the end state against what it sent.
//
// A FakeScript per server injects failures at exact batches, named by shard and the t of
// their first event, the first time such a batch arrives (a resend of it is served normally)
// or every time: an in-band failure, the stream ended by the server, an ack held until the
// client gives up (or the test releases it), a read-ahead that puts the shard's later batches
// in flight before the answer, a move of the shard in the owner table.
//
//   FakeCluster cluster(2, {0, 0, 1, 1});   // server 0 (A) owns shards 0 and 1, B 2 and 3
//   cluster.server(0).script().At(0, /*first_t=*/31,
//       {.fail = absl::UnavailableError("NOT-OWNER: ..."), .move_to = 1});
//   auto client = Client::Connect(cluster.address(0));
//   ...                                      // stream batches
//   EXPECT_EQ(cluster.state().AppliedT(0), expected);
//
// Ownership: FakeCluster owns its state and servers; destroying it stops the servers
// (calls still open are cancelled). Thread safety: every class is thread-safe; handlers run
// on gRPC's threads.
#ifndef STREAMLEARN_TESTS_FAKE_CLUSTER_H_
#define STREAMLEARN_TESTS_FAKE_CLUSTER_H_

#include <grpcpp/grpcpp.h>

#include <cassert>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "core/common/mutex.h"
#include "core/common/routing.h"
#include "core/shard/batch_gate.h"
#include "gtest/gtest.h"
#include "sau.grpc.pb.h"
#include "server/batch_stream.h"

namespace streamlearn::test_util {

inline constexpr char kFakeModel[] = "routed";
inline constexpr uint32_t kFakeShards = 4;

// What the fakes share: who owns each shard, and what each shard applied.
class FakeState {
 public:
  // One applied batch: the t of its first applied event and the server that applied it.
  struct AppliedBatch {
    uint64_t first_t = 0;
    int server = -1;
    bool operator==(const AppliedBatch&) const = default;
    friend std::ostream& operator<<(std::ostream& os, const AppliedBatch& b) {
      return os << "{t " << b.first_t << " on " << ServerId(b.server) << "}";
    }
  };

  // owners[s]: the index of the server that owns shard s at first.
  // REQUIRES: owners.size() == kFakeShards.
  explicit FakeState(std::vector<int> owners) : owners_(std::move(owners)) {
    assert(owners_.size() == kFakeShards);
  }

  // The servers' addresses, by index: set once they are all listening.
  void SetAddresses(std::vector<std::string> addresses) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    addresses_ = std::move(addresses);
  }

  int OwnerOf(uint32_t shard) const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return owners_[shard];
  }
  // From now on the map says `server` owns `shard` (a takeover).
  void Move(uint32_t shard, int server) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    owners_[shard] = server;
    ++epochs_[shard];
  }

  static std::string ServerId(int server) { return std::string("fake-") + char('a' + server); }

  // Admin.ShardMap as server `answering` says it (cluster mode, every shard owned).
  grpc::Status Map(const v1::ShardMapRequest& request, int answering,
                   v1::ShardMapResponse* response) const ABSL_LOCKS_EXCLUDED(mu_) {
    if (!request.model().empty() && request.model() != kFakeModel) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "model '" + request.model() + "' not found");
    }
    MutexLock lock(&mu_);
    response->set_server_id(ServerId(answering));
    response->set_cluster(true);
    for (uint32_t s = 0; s < kFakeShards; ++s) {
      v1::ShardOwner* row = response->add_shards();
      row->set_model(kFakeModel);
      row->set_shard(s);
      row->set_owner(ServerId(owners_[s]));
      row->set_address(addresses_[owners_[s]]);
      row->set_epoch(epochs_[s]);
      row->set_here(owners_[s] == answering);
    }
    return grpc::Status::OK;
  }

  // Applies the events of `request` whose t is new for `shard` (the shard's de-duplication
  // rule), on behalf of `server`; fills ack's applied and duplicate_t.
  void Apply(int server, uint32_t shard, const v1::IngestRequest& request, v1::IngestAck* ack)
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    ShardTruth& truth = truth_[shard];
    TOrder order(!truth.applied_t.empty(), truth.applied_t.empty() ? 0 : truth.applied_t.back());
    uint32_t applied = 0;
    for (const v1::Event& e : request.events()) {
      if (!order.Accept(e.t())) {
        ack->add_duplicate_t(e.t());
        continue;
      }
      if (applied == 0) truth.batches.push_back({.first_t = e.t(), .server = server});
      truth.applied_t.push_back(e.t());
      ++applied;
    }
    ack->set_applied(applied);
  }

  // Every event t shard `shard` applied, in the order it applied them.
  std::vector<uint64_t> AppliedT(uint32_t shard) const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    auto it = truth_.find(shard);
    return it == truth_.end() ? std::vector<uint64_t>() : it->second.applied_t;
  }
  // The batches shard `shard` applied something of, in order.
  std::vector<AppliedBatch> AppliedBatches(uint32_t shard) const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    auto it = truth_.find(shard);
    return it == truth_.end() ? std::vector<AppliedBatch>() : it->second.batches;
  }

 private:
  struct ShardTruth {
    std::vector<uint64_t> applied_t;
    std::vector<AppliedBatch> batches;
  };

  mutable Mutex mu_;
  std::vector<int> owners_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> epochs_ ABSL_GUARDED_BY(mu_) = std::vector<uint64_t>(kFakeShards, 1);
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, ShardTruth> truth_ ABSL_GUARDED_BY(mu_);
};

// What a fake server does to one batch instead of answering it as the owner table says.
struct FakeAction {
  // Answer in-band with this status without applying the batch (UNAVAILABLE, ABORTED: the
  // stream then holds back the shard's later batches). OK: as the owner table says.
  absl::Status fail = absl::OkStatus();
  // Before answering, read on until this many later batches of the same shard are in hand
  // (or the client closes the stream): they are in flight when the answer goes out.
  int read_ahead = 0;
  // Apply the batch first (as its owner), then do what follows (an ack that is lost).
  bool apply_first = false;
  // The owner table gives the shard to this server (by index) first; -1: no change.
  int move_to = -1;
  // End the stream with this status without answering the batch (applied if apply_first).
  std::optional<grpc::Status> end = std::nullopt;
  // Answer only once the test calls FakeScript::Release(); the stream ends CANCELLED if the
  // client cancels it first.
  bool hold = false;
  // The same at every arrival of the batch, resends included (a batch the server always
  // refuses), not only the first.
  bool every_time = false;
};

// A server's injected failures. Thread-safe.
class FakeScript {
 public:
  // The first batch of `shard` whose first event has t = first_t to reach this server (each
  // one, with every_time) is handled as `action` says.
  void At(uint32_t shard, uint64_t first_t, FakeAction action) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    actions_[{shard, first_t}] = std::move(action);
  }
  // The action for a batch that arrives (consumed unless every_time: a resend of it is then
  // served normally).
  std::optional<FakeAction> Take(uint32_t shard, uint64_t first_t) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    auto it = actions_.find({shard, first_t});
    if (it == actions_.end()) return std::nullopt;
    FakeAction action = it->second;
    if (!action.every_time) actions_.erase(it);
    return action;
  }

  // Lets held answers go.
  void Release() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      released_ = true;
    }
    cv_.SignalAll();
  }
  // The server stops: held answers end.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      stopped_ = true;
    }
    cv_.SignalAll();
  }
  // Waits for Release(). False if the call was cancelled or the server stopped first.
  bool WaitForRelease(grpc::ServerContext* context) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    while (!released_) {
      // Cancellation has no callback in the sync API: look at it at every wake-up.
      if (stopped_ || context->IsCancelled()) return false;
      cv_.WaitUntil(&mu_, std::chrono::steady_clock::now() + std::chrono::milliseconds(10));
    }
    return !context->IsCancelled();
  }

 private:
  Mutex mu_;
  CondVar cv_;  // signalled by Release and Stop
  std::map<std::pair<uint32_t, uint64_t>, FakeAction> actions_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

// One fake server, listening from construction until Stop().
class FakeServer {
 public:
  // One batch that reached the server: its shard and the t of its first event.
  struct Arrival {
    uint32_t shard = 0;
    uint64_t first_t = 0;
  };

  // REQUIRES: *state outlives the server.
  FakeServer(int index, FakeState* state) : index_(index), state_(state), admin_(this), sau_(this) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&admin_);
    builder.RegisterService(&sau_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port == 0) ADD_FAILURE() << "a fake server could not start";
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  ~FakeServer() { Stop(); }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  // Closes the port; calls still open are cancelled. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    script_.Stop();
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    // Wait() returns after every handler has returned, but it knows that through gRPC's own
    // locks, which ThreadSanitizer does not see (the library is not instrumented): the count
    // of running handlers, under mu_, is what orders their last writes before the members'
    // destruction.
    MutexLock lock(&mu_);
    while (active_ > 0) cv_.Wait(&mu_);
  }

  const std::string& address() const { return address_; }
  FakeScript& script() { return script_; }

  // The first t of every batch of `shard` that reached this server, in arrival order (a
  // resent batch again), over all its streams.
  std::vector<uint64_t> ReceivedT(uint32_t shard) const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    std::vector<uint64_t> out;
    for (const Arrival& a : received_) {
      if (a.shard == shard) out.push_back(a.first_t);
    }
    return out;
  }
  // The shards of the batches that reached it.
  std::set<uint32_t> ReceivedShards() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    std::set<uint32_t> out;
    for (const Arrival& a : received_) out.insert(a.shard);
    return out;
  }
  // Ingest streams opened to it.
  int streams() const ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return streams_;
  }
  // Waits until `count` batches of `shard` have reached it. False after `timeout`.
  bool WaitForReceived(uint32_t shard, size_t count, std::chrono::milliseconds timeout)
      ABSL_LOCKS_EXCLUDED(mu_) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    MutexLock lock(&mu_);
    while (true) {
      size_t n = 0;
      for (const Arrival& a : received_) n += a.shard == shard ? 1 : 0;
      if (n >= count) return true;
      if (!cv_.WaitUntil(&mu_, deadline)) return false;
    }
  }

 private:
  // The gRPC services: thin adapters over the server's handlers.
  class Admin final : public v1::Admin::Service {
   public:
    explicit Admin(FakeServer* server) : server_(server) {}
    grpc::Status GetModel(grpc::ServerContext*, const v1::GetModelRequest* request,
                          v1::ModelInfo* info) override {
      return server_->GetModel(*request, info);
    }
    grpc::Status ShardMap(grpc::ServerContext*, const v1::ShardMapRequest* request,
                          v1::ShardMapResponse* response) override {
      return server_->state_->Map(*request, server_->index_, response);
    }

   private:
    FakeServer* const server_;
  };
  class Sau final : public v1::SAU::Service {
   public:
    explicit Sau(FakeServer* server) : server_(server) {}
    grpc::Status Ingest(
        grpc::ServerContext* context,
        grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream) override {
      return server_->Ingest(context, stream);
    }

   private:
    FakeServer* const server_;
  };

  // A batch read from a stream and not answered yet.
  struct InHand {
    v1::IngestRequest request;
    uint32_t shard = 0;
    std::optional<FakeAction> action;
  };

  grpc::Status GetModel(const v1::GetModelRequest& request, v1::ModelInfo* info) const {
    if (request.name() != kFakeModel) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "model '" + request.name() + "' not found");
    }
    info->mutable_spec()->set_name(kFakeModel);
    info->mutable_spec()->set_shards(kFakeShards);
    return grpc::Status::OK;
  }

  grpc::Status Ingest(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<v1::IngestAck, v1::IngestRequest>* stream)
      ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      ++streams_;
      ++active_;
    }
    struct Done {  // at every return: this handler no longer touches the server
      FakeServer* s;
      ~Done() {
        MutexLock lock(&s->mu_);
        --s->active_;
        s->cv_.SignalAll();
      }
    } done{this};
    std::deque<InHand> in_hand;    // read, not answered, in order
    std::set<uint32_t> held_back;  // shards with a retryable failure on this stream
    bool closed = false;           // the client closed its side (or went away)
    auto read_one = [&]() {
      InHand next;
      if (closed || !stream->Read(&next.request)) {
        closed = true;
        return false;
      }
      next.shard = ShardFor(next.request.routing_key(), kFakeShards);
      const uint64_t first_t = next.request.events_size() > 0 ? next.request.events(0).t() : 0;
      next.action = script_.Take(next.shard, first_t);
      {
        MutexLock lock(&mu_);
        received_.push_back({.shard = next.shard, .first_t = first_t});
      }
      cv_.SignalAll();
      in_hand.push_back(std::move(next));
      return true;
    };
    while (true) {
      if (in_hand.empty() && !read_one()) return grpc::Status::OK;
      const int read_ahead = in_hand.front().action ? in_hand.front().action->read_ahead : 0;
      while (!closed && LaterOfShard(in_hand) < read_ahead) read_one();
      InHand batch = std::move(in_hand.front());
      in_hand.pop_front();

      v1::IngestAck ack;
      ack.set_shard(batch.shard);
      absl::Status status;
      if (held_back.count(batch.shard) > 0) {
        status = absl::UnavailableError(
            absl::StrCat(server::kHeldBackMessage, " (shard ", batch.shard, ")"));
      } else {
        const FakeAction action = batch.action.value_or(FakeAction());
        if (action.apply_first) state_->Apply(index_, batch.shard, batch.request, &ack);
        if (action.move_to >= 0) state_->Move(batch.shard, action.move_to);
        if (action.end.has_value()) return *action.end;
        if (action.hold && !script_.WaitForRelease(context)) {
          return grpc::Status(grpc::StatusCode::CANCELLED, "held answer: the call ended");
        }
        if (!action.apply_first) {
          status = action.fail;
          if (status.ok() && state_->OwnerOf(batch.shard) != index_) {
            status = absl::UnavailableError(absl::StrCat(
                "NOT-OWNER: model '", kFakeModel, "' shard ", batch.shard, " is served by server '",
                FakeState::ServerId(state_->OwnerOf(batch.shard)), "'"));
          }
          if (status.ok()) {
            state_->Apply(index_, batch.shard, batch.request, &ack);
          } else if (server::RetryableBatchStatus(status)) {
            held_back.insert(batch.shard);
          }
        }
      }
      ack.mutable_status()->set_code(static_cast<int32_t>(status.code()));
      ack.mutable_status()->set_message(std::string(status.message()));
      if (!stream->Write(ack)) {
        return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before its ack");
      }
    }
  }

  // How many batches behind the first one in hand are of its shard.
  static int LaterOfShard(const std::deque<InHand>& in_hand) {
    int n = 0;
    for (size_t i = 1; i < in_hand.size(); ++i) n += in_hand[i].shard == in_hand[0].shard;
    return n;
  }

  const int index_;
  FakeState* const state_;
  Admin admin_;
  Sau sau_;
  FakeScript script_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;

  mutable Mutex mu_;
  CondVar cv_;  // signalled at every arrival
  std::vector<Arrival> received_ ABSL_GUARDED_BY(mu_);
  int streams_ ABSL_GUARDED_BY(mu_) = 0;
  int active_ ABSL_GUARDED_BY(mu_) = 0;  // Ingest handlers running
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

// `servers` fake servers (index 0 is "A", 1 "B", ...) over one FakeState.
class FakeCluster {
 public:
  // owners[s]: the server that owns shard s at first. REQUIRES: every owner < servers.
  FakeCluster(int servers, std::vector<int> owners) : state_(std::move(owners)) {
    std::vector<std::string> addresses;
    for (int i = 0; i < servers; ++i) {
      servers_.push_back(std::make_unique<FakeServer>(i, &state_));
      addresses.push_back(servers_.back()->address());
    }
    state_.SetAddresses(std::move(addresses));
  }

  FakeServer& server(int i) { return *servers_[i]; }
  const std::string& address(int i) const { return servers_[i]->address(); }
  FakeState& state() { return state_; }

 private:
  FakeState state_;  // before the servers: it outlives them
  std::vector<std::unique_ptr<FakeServer>> servers_;
};

}  // namespace streamlearn::test_util

#endif  // STREAMLEARN_TESTS_FAKE_CLUSTER_H_
