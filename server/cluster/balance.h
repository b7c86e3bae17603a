// PlanBalance: which leases a server takes and which it hands back, so that the cluster's
// servers each end up with their fair share of every model's shards (docs/CLUSTER.md,
// "Balance"). A pure function of what the server observed; each server runs it on its own
// and the lease table's compare-and-set settles races.
//
// Rules: fair = ceil(shards / live servers). A draining server releases everything and
// takes nothing. A server below its fair share takes free shards (never leased, released, or
// whose lease expired) until it reaches it; one above hands back its excess, but only while
// some live server is below its fair share (no churn for nothing). Among candidates a server
// prefers the shards that rank highest for it by rendezvous hashing of (server, model, shard),
// so servers racing for free shards mostly want different ones, and a shard tends to go back
// to the same server after a restart.
#ifndef STREAMLEARN_SERVER_CLUSTER_BALANCE_H_
#define STREAMLEARN_SERVER_CLUSTER_BALANCE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "server/cluster/lease_table.h"

namespace streamlearn::cluster {

struct ShardId {
  std::string model;
  uint32_t shard = 0;
  friend bool operator==(const ShardId& a, const ShardId& b) {
    return a.model == b.model && a.shard == b.shard;
  }
  friend bool operator<(const ShardId& a, const ShardId& b) {
    return a.model != b.model ? a.model < b.model : a.shard < b.shard;
  }
};

struct BalancePlan {
  std::vector<ShardId> acquire;  // best first
  std::vector<ShardId> release;
};

struct BalanceView {
  std::string me;
  bool draining = false;
  std::vector<std::string> live;   // live, non-draining servers (me included unless draining)
  std::vector<ShardId> shards;     // every shard of every model
  std::vector<Lease> leases;       // as read
  std::function<bool(const Lease&)> expired;
};

BalancePlan PlanBalance(const BalanceView& view);

// The fair share: ceil(shards / servers), 0 without servers.
size_t FairShare(size_t shards, size_t servers);

}  // namespace streamlearn::cluster

#endif  // STREAMLEARN_SERVER_CLUSTER_BALANCE_H_
