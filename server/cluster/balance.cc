#include "server/cluster/balance.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/hash/hash.h"

namespace streamlearn::cluster {
namespace {

// Rendezvous weight of a shard for a server: a fixed function of the three, the same on
// every server and every run (absl::Hash is seeded per process, so it is not used here).
uint64_t Weight(std::string_view server, const ShardId& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, then a 64-bit finaliser
  auto mix = [&h](std::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  };
  mix(server);
  mix(s.model);
  mix(std::string_view(reinterpret_cast<const char*>(&s.shard), sizeof(s.shard)));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

}  // namespace

size_t FairShare(size_t shards, size_t servers) {
  return servers == 0 ? 0 : (shards + servers - 1) / servers;
}

BalancePlan PlanBalance(const BalanceView& view) {
  BalancePlan plan;
  std::map<ShardId, const Lease*> lease_of;
  for (const Lease& l : view.leases) lease_of[{l.model, l.shard}] = &l;
  std::vector<ShardId> mine, free;
  std::map<std::string, size_t> held;  // live owner -> shards held
  const std::set<std::string> live(view.live.begin(), view.live.end());
  for (const ShardId& s : view.shards) {
    auto it = lease_of.find(s);
    const Lease* l = it == lease_of.end() ? nullptr : it->second;
    if (l != nullptr && l->owner == view.me) {
      mine.push_back(s);
    } else if (l == nullptr || l->owner.empty() || view.expired(*l)) {
      free.push_back(s);
    } else if (live.count(l->owner) > 0) {
      ++held[l->owner];
    }
  }
  auto by_weight = [&](std::vector<ShardId>& v) {
    std::sort(v.begin(), v.end(), [&](const ShardId& a, const ShardId& b) {
      const uint64_t wa = Weight(view.me, a), wb = Weight(view.me, b);
      return wa != wb ? wa > wb : a < b;
    });
  };
  if (view.draining) {
    plan.release = mine;
    return plan;
  }
  const size_t fair = FairShare(view.shards.size(), view.live.size());
  if (mine.size() < fair) {
    by_weight(free);
    free.resize(std::min(free.size(), fair - mine.size()));
    plan.acquire = std::move(free);
  } else if (mine.size() > fair) {
    bool someone_below = false;
    for (const std::string& server : view.live) {
      if (server != view.me && held[server] < fair) someone_below = true;
    }
    if (someone_below) {
      by_weight(mine);
      plan.release.assign(mine.begin() + static_cast<std::ptrdiff_t>(fair), mine.end());
    }
  }
  return plan;
}

}  // namespace streamlearn::cluster
