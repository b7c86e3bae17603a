// LeaseTable against a real nats-server with JetStream (Debian's), with a hand-driven clock:
// who may take a lease and when, that a compare-and-set race has one winner, and that a
// server whose lease was taken over cannot renew it.
#include "server/cluster/lease_table.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nats_cluster.h"

namespace streamlearn::cluster {
namespace {

using ::testing::HasSubstr;
using test_util::NatsTestCluster;

NatsTestCluster* SharedNats() {
  static NatsTestCluster* nats = [] {
    absl::StatusOr<std::unique_ptr<NatsTestCluster>> c = NatsTestCluster::Start(1);
    if (!c.ok()) {
      ADD_FAILURE() << c.status();
      return static_cast<NatsTestCluster*>(nullptr);
    }
    return c->release();
  }();
  return nats;
}

// A clock the test moves.
struct FakeClock {
  absl::Time t = absl::UnixEpoch() + absl::Hours(1);
  std::function<absl::Time()> fn() {
    return [this] { return t; };
  }
};

class LeaseTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(SharedNats(), nullptr);
    static int n = 0;
    prefix_ = absl::StrCat("L", n++);
  }
  // A server's view of the table: its own connection and its own clock.
  std::unique_ptr<LeaseTable> Table(FakeClock* clock) {
    auto nats = storage::NatsClient::Connect({.servers = SharedNats()->urls()});
    EXPECT_TRUE(nats.ok()) << nats.status();
    auto t = std::make_unique<LeaseTable>(std::shared_ptr<storage::NatsClient>(*std::move(nats)),
                                          LeaseTableOptions{.prefix = prefix_,
                                                            .ttl = absl::Seconds(6),
                                                            .now = clock->fn()});
    EXPECT_TRUE(t->Open().ok());
    return t;
  }
  std::string prefix_;
};

TEST_F(LeaseTableTest, AHeldLeaseIsTakenOnlyAfterItWentUnrenewedForTheTtl) {
  FakeClock ca, cb;
  auto a = Table(&ca);
  auto b = Table(&cb);
  absl::StatusOr<Lease> la = a->Acquire("m.x", 3, "server-a");
  ASSERT_TRUE(la.ok()) << la.status();
  EXPECT_EQ(la->epoch, 1u);

  absl::StatusOr<Lease> lb = b->Acquire("m.x", 3, "server-b");
  EXPECT_EQ(lb.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(lb.status().message(), HasSubstr("server-a"));
  // a renews every 2 s; b's clock runs on: the revision keeps changing, so never expired.
  for (int i = 0; i < 5; ++i) {
    ca.t += absl::Seconds(2);
    cb.t += absl::Seconds(2);
    la = a->Renew(*la);
    ASSERT_TRUE(la.ok()) << la.status();
    EXPECT_EQ(b->Acquire("m.x", 3, "server-b").status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  // a stops renewing (paused). Just under the ttl on b's clock: still a's.
  cb.t += absl::Seconds(5);
  EXPECT_EQ(b->Acquire("m.x", 3, "server-b").status().code(),
            absl::StatusCode::kFailedPrecondition);
  cb.t += absl::Seconds(1);
  lb = b->Acquire("m.x", 3, "server-b");
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->epoch, la->epoch + 1);
  EXPECT_EQ(lb->owner, "server-b");
  // a comes back: its renewal fails, so it knows it lost the shard.
  absl::StatusOr<Lease> late = a->Renew(*la);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kAborted) << late.status();
  absl::StatusOr<std::optional<Lease>> now = a->Get("m.x", 3);
  ASSERT_TRUE(now.ok() && now->has_value());
  EXPECT_EQ((*now)->owner, "server-b");
}

TEST_F(LeaseTableTest, AReleasedLeaseIsTakenAtOnce) {
  FakeClock ca, cb;
  auto a = Table(&ca);
  auto b = Table(&cb);
  absl::StatusOr<Lease> la = a->Acquire("m", 0, "a");
  ASSERT_TRUE(la.ok());
  ASSERT_TRUE(a->Release(*la).ok());
  absl::StatusOr<Lease> lb = b->Acquire("m", 0, "b");
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->epoch, 2u);
  // Releasing a lease one no longer holds changes nothing.
  EXPECT_EQ(a->Release(*la).code(), absl::StatusCode::kAborted);
  EXPECT_EQ((*b->Get("m", 0))->owner, "b");
}

TEST_F(LeaseTableTest, RacingServersHaveExactlyOneWinnerPerShard) {
  constexpr int kServers = 4, kShards = 12;
  std::vector<FakeClock> clocks(kServers);
  std::vector<std::unique_ptr<LeaseTable>> tables;
  for (int i = 0; i < kServers; ++i) tables.push_back(Table(&clocks[i]));
  std::vector<std::atomic<int>> winners(kShards);
  std::atomic<int> go{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] {
      go.fetch_add(1);
      while (go.load() < kServers) std::this_thread::yield();
      for (int s = 0; s < kShards; ++s) {
        absl::StatusOr<Lease> l = tables[i]->Acquire("race", s, absl::StrCat("s", i));
        if (l.ok()) {
          winners[s].fetch_add(1);
        } else {
          EXPECT_TRUE(absl::IsAborted(l.status()) || absl::IsFailedPrecondition(l.status()))
              << l.status();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  absl::StatusOr<std::vector<Lease>> leases = tables[0]->Leases();
  ASSERT_TRUE(leases.ok()) << leases.status();
  ASSERT_EQ(leases->size(), static_cast<size_t>(kShards));
  for (int s = 0; s < kShards; ++s) {
    EXPECT_EQ(winners[s].load(), 1) << "shard " << s;
    EXPECT_EQ((*leases)[s].epoch, 1u);
  }
}

TEST_F(LeaseTableTest, MembersAreListedAndExpireWhenTheyStopRenewing) {
  FakeClock c;
  auto t = Table(&c);
  ASSERT_TRUE(t->Join({.id = "a", .address = "10.0.0.1:50051"}).ok());
  ASSERT_TRUE(t->Join({.id = "b", .address = "10.0.0.2:50051", .draining = true}).ok());
  EXPECT_EQ(t->Join({.id = "bad.id"}).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<Member>> members = t->Members();
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[0].address, "10.0.0.1:50051");
  EXPECT_TRUE((*members)[1].draining);
  c.t += absl::Seconds(4);
  ASSERT_TRUE(t->Join({.id = "a", .address = "10.0.0.1:50051"}).ok());
  c.t += absl::Seconds(3);
  members = t->Members();
  ASSERT_TRUE(members.ok());
  EXPECT_FALSE(t->Expired((*members)[0]));  // a renewed 3 s ago
  EXPECT_TRUE(t->Expired((*members)[1]));   // b 7 s ago
  // The leases list stays apart from the members.
  EXPECT_TRUE(t->Leases()->empty());
}

}  // namespace
}  // namespace streamlearn::cluster
