#include "server/cluster/balance.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace streamlearn::cluster {
namespace {

std::vector<ShardId> Shards(const std::string& model, uint32_t n) {
  std::vector<ShardId> out;
  for (uint32_t i = 0; i < n; ++i) out.push_back({model, i});
  return out;
}

// Runs the servers' plans in turn, each against the leases as the previous ones left them
// (what the compare-and-set serialises), until nothing changes; returns shards per server.
std::map<std::string, size_t> Settle(std::vector<std::string> servers,
                                     const std::vector<ShardId>& shards,
                                     std::vector<Lease>* leases,
                                     const std::set<std::string>& draining = {}) {
  std::vector<std::string> live;
  for (const std::string& s : servers) {
    if (draining.count(s) == 0) live.push_back(s);
  }
  for (int round = 0; round < 20; ++round) {
    bool changed = false;
    for (const std::string& me : servers) {
      BalancePlan plan = PlanBalance({.me = me,
                                      .draining = draining.count(me) > 0,
                                      .live = live,
                                      .shards = shards,
                                      .leases = *leases,
                                      .expired = [](const Lease&) { return false; }});
      for (const ShardId& s : plan.release) {
        for (Lease& l : *leases) {
          if (l.model == s.model && l.shard == s.shard) l.owner.clear();
        }
        changed = true;
      }
      for (const ShardId& s : plan.acquire) {
        bool found = false;
        for (Lease& l : *leases) {
          if (l.model == s.model && l.shard == s.shard) {
            l.owner = me;
            ++l.epoch;
            found = true;
          }
        }
        if (!found) leases->push_back({.model = s.model, .shard = s.shard, .owner = me, .epoch = 1});
        changed = true;
      }
    }
    if (!changed) break;
  }
  std::map<std::string, size_t> out;
  for (const Lease& l : *leases) {
    if (!l.owner.empty()) ++out[l.owner];
  }
  return out;
}

TEST(BalanceTest, ServersSettleOnTheirFairShareAndEveryShardIsServed) {
  std::vector<ShardId> shards = Shards("a", 8);
  for (const ShardId& s : Shards("b", 3)) shards.push_back(s);
  std::vector<Lease> leases;
  std::map<std::string, size_t> held = Settle({"s1", "s2", "s3"}, shards, &leases);
  size_t total = 0;
  for (const auto& [server, n] : held) {
    EXPECT_LE(n, FairShare(11, 3)) << server;
    total += n;
  }
  EXPECT_EQ(total, 11u);

  // A fourth server joins: the others hand over their excess, it takes it.
  held = Settle({"s1", "s2", "s3", "s4"}, shards, &leases);
  total = 0;
  for (const auto& [server, n] : held) {
    EXPECT_LE(n, FairShare(11, 4)) << server;
    total += n;
  }
  EXPECT_EQ(total, 11u);
  EXPECT_GE(held["s4"], 1u);

  // s2 drains: it ends with nothing, every shard still served.
  held = Settle({"s1", "s2", "s3", "s4"}, shards, &leases, {"s2"});
  EXPECT_EQ(held.count("s2"), 0u);
  total = 0;
  for (const auto& [server, n] : held) total += n;
  EXPECT_EQ(total, 11u);
}

TEST(BalanceTest, AnExpiredLeaseIsFreeAndNoServerTakesMoreThanItsShare) {
  std::vector<ShardId> shards = Shards("m", 6);
  std::vector<Lease> leases;
  for (uint32_t i = 0; i < 6; ++i) leases.push_back({.model = "m", .shard = i, .owner = "dead", .epoch = 1});
  BalancePlan plan = PlanBalance({.me = "s1",
                                  .live = {"s1", "s2"},
                                  .shards = shards,
                                  .leases = leases,
                                  .expired = [](const Lease& l) { return l.owner == "dead"; }});
  EXPECT_EQ(plan.acquire.size(), 3u);
  EXPECT_TRUE(plan.release.empty());
  // Not expired: nothing to take.
  plan = PlanBalance({.me = "s1",
                      .live = {"s1", "s2"},
                      .shards = shards,
                      .leases = leases,
                      .expired = [](const Lease&) { return false; }});
  EXPECT_TRUE(plan.acquire.empty());
}

TEST(BalanceTest, TheRankingIsTheSameOnEveryRun) {
  // Rendezvous weights are a fixed function: the plan of a fresh server is reproducible.
  BalanceView v{.me = "s1", .live = {"s1", "s2", "s3"}, .shards = Shards("m", 9),
                .expired = [](const Lease&) { return false; }};
  BalancePlan p1 = PlanBalance(v), p2 = PlanBalance(v);
  ASSERT_EQ(p1.acquire.size(), 3u);
  EXPECT_EQ(p1.acquire, p2.acquire);
  v.me = "s2";
  BalancePlan q = PlanBalance(v);
  EXPECT_NE(p1.acquire, q.acquire) << "two servers want different shards first";
}

}  // namespace
}  // namespace streamlearn::cluster
