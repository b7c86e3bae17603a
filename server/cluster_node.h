// ClusterNode: a server's part in the cluster mode (docs/CLUSTER.md). It keeps the server's
// membership and its shard leases (cluster/lease_table.h) fresh, takes its fair share of every
// model's shards (cluster/balance.h), loads a shard from the replicated store when it takes
// the lease (storage::Persistence::LoadShard) and stops serving it when it hands the lease
// back or loses it, and answers who serves what (the shard map, NOT-OWNER errors).
//
// Two background threads, each every lease_ttl / 3: one renews the membership and the held
// leases (Renew), one balances (Balance: new models, releases, acquisitions and the loads
// they bring). Loading a shard can take seconds (a long replay, a NATS election); it never
// delays a renewal, so a server never loses its other leases to a slow load. Tests drive
// Tick() (Renew then Balance) themselves with run_thread = false.
//   auto node = ClusterNode::Start(options, nats, registry, persistence);
//   ...
//   node->Drain();   // SIGTERM: hand every shard over, then stop
//
// A server stops serving a shard by itself when it could not renew the lease for lease_ttl
// (another server may have taken it); the journal's fence guards the rest.
// Thread safety: thread-safe.
#ifndef STREAMLEARN_SERVER_CLUSTER_NODE_H_
#define STREAMLEARN_SERVER_CLUSTER_NODE_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/common/mutex.h"
#include "core/shard/model_registry.h"
#include "server/cluster/balance.h"
#include "server/cluster/lease_table.h"
#include "server/metrics.h"
#include "server/storage/nats_client.h"
#include "server/storage/persistence.h"

namespace streamlearn::server {

struct ClusterOptions {
  std::string id;                          // this server's id: [A-Za-z0-9_-]{1,64}
  std::string address;                     // host:port where others and clients reach it
  std::string prefix = "SL";
  int replicas = 3;
  absl::Duration lease_ttl = absl::Seconds(6);
  bool run_thread = true;                  // false: the caller drives Tick()
  // Called at the end of every balance round with ready() (on the balancing thread; the
  // first time within Start). May be empty.
  std::function<void(bool)> on_ready;
};

// One row of the shard map.
struct ShardOwner {
  std::string model;
  uint32_t shard = 0;
  std::string owner;     // empty: nobody serves it now
  std::string address;
  uint64_t epoch = 0;
  bool here = false;     // served by this server
};

class ClusterNode {
 public:
  static absl::StatusOr<std::unique_ptr<ClusterNode>> Start(
      ClusterOptions options, std::shared_ptr<storage::NatsClient> nats, ModelRegistry* registry,
      storage::Persistence* persistence, Metrics* metrics = nullptr);
  ~ClusterNode();

  // One round: Renew(), then Balance().
  absl::Status Tick() ABSL_LOCKS_EXCLUDED(tick_mu_, held_mu_, view_mu_);
  // Membership heartbeat and lease renewals. A lease lost (another server took it) or not
  // renewed for a whole lease_ttl (NATS unreachable): the shard stops being served here.
  absl::Status Renew() ABSL_LOCKS_EXCLUDED(held_mu_, view_mu_);
  // New models, reloads of fenced shards, the balance plan (releases, then acquisitions), the
  // shard map.
  absl::Status Balance() ABSL_LOCKS_EXCLUDED(tick_mu_, held_mu_, view_mu_);
  // Hands every shard over (membership marked draining, each shard released and its lease
  // given back) and stops the thread. Idempotent.
  void Drain() ABSL_LOCKS_EXCLUDED(tick_mu_, held_mu_, view_mu_);

  // The shard map as of the last round.
  std::vector<ShardOwner> ShardMap() const ABSL_LOCKS_EXCLUDED(view_mu_);
  // (owner id, address) of a shard as of the last round; empty when nobody holds it.
  std::pair<std::string, std::string> OwnerOf(const std::string& model, uint32_t shard) const
      ABSL_LOCKS_EXCLUDED(view_mu_);
  // The shards this server holds leases for.
  size_t held() const ABSL_LOCKS_EXCLUDED(view_mu_);
  // Whether the last balance round ended with this server holding and serving its fair share:
  // no error, nothing left that it wanted and could not take, every held shard loaded, and
  // not draining. The readiness of a server in the cluster mode (grpc.health.v1 service
  // "streamlearn.ready"): a rolling upgrade waits for it before replacing the next server.
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  const ClusterOptions& options() const { return options_; }

 private:
  ClusterNode(ClusterOptions options, std::shared_ptr<storage::NatsClient> nats,
              ModelRegistry* registry, storage::Persistence* persistence, Metrics* metrics);
  void CountLease(std::string_view event, uint64_t n = 1);
  void SetReady(bool ready);
  void SetHeldCount() ABSL_EXCLUSIVE_LOCKS_REQUIRED(held_mu_) ABSL_LOCKS_EXCLUDED(view_mu_);
  // Runs round() every lease_ttl / 3 until stopped.
  void Loop(absl::Status (ClusterNode::*round)(), const char* what) ABSL_LOCKS_EXCLUDED(stop_mu_);
  void StopThreads() ABSL_LOCKS_EXCLUDED(stop_mu_);
  absl::Status Take(const cluster::ShardId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_)
      ABSL_LOCKS_EXCLUDED(held_mu_);
  // Stops serving the shard and forgets its lease (released when release_lease) if it is
  // still the one held (epoch; 0 = any).
  void Give(const cluster::ShardId& id, uint64_t epoch, bool release_lease)
      ABSL_LOCKS_EXCLUDED(held_mu_);

  const ClusterOptions options_;
  std::shared_ptr<storage::NatsClient> nats_;
  ModelRegistry* const registry_;
  storage::Persistence* const persistence_;
  Metrics* const metrics_;  // may be null
  cluster::LeaseTable leases_;

  // One balance round at a time (lock order: tick_mu_, held_mu_, view_mu_).
  Mutex tick_mu_;
  struct Held {
    cluster::Lease lease;
    absl::Time renewed;  // this server's clock, at the last successful renewal
  };
  mutable Mutex held_mu_;
  std::map<cluster::ShardId, Held> held_ ABSL_GUARDED_BY(held_mu_);
  std::atomic<bool> draining_{false};
  std::atomic<bool> ready_{false};

  // What the last round saw, for readers.
  mutable Mutex view_mu_;
  std::vector<ShardOwner> map_ ABSL_GUARDED_BY(view_mu_);
  size_t held_count_ ABSL_GUARDED_BY(view_mu_) = 0;

  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread renew_thread_;
  std::thread balance_thread_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_CLUSTER_NODE_H_
