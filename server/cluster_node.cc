#include "server/cluster_node.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/common/status_macros.h"
#include "spdlog/spdlog.h"

namespace streamlearn::server {

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Start(
    ClusterOptions options, std::shared_ptr<storage::NatsClient> nats, ModelRegistry* registry,
    storage::Persistence* persistence, Metrics* metrics) {
  if (options.lease_ttl < absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat("lease_ttl must be >= 1s, got ",
                                                   absl::FormatDuration(options.lease_ttl)));
  }
  std::unique_ptr<ClusterNode> node(
      new ClusterNode(std::move(options), std::move(nats), registry, persistence, metrics));
  RETURN_IF_ERROR(node->leases_.Open());
  // Who serves a shard that is not served here; a shard this server holds but is still
  // loading names no one (never a request forwarded to itself).
  persistence->SetOwnerLookup([n = node.get()](const std::string& model, uint32_t shard) {
    std::pair<std::string, std::string> owner = n->OwnerOf(model, shard);
    if (owner.first == n->options_.id) return std::pair<std::string, std::string>();
    return owner;
  });
  // The first round before serving: this server's membership is known, and the shards that
  // are free (a fresh cluster, or a restart after every server stopped) are taken at once.
  if (absl::Status s = node->Tick(); !s.ok()) {
    spdlog::warn("cluster: first round: {}", s.ToString());
  }
  if (node->options_.run_thread) {
    ClusterNode* n = node.get();
    n->renew_thread_ = std::thread([n] { n->Loop(&ClusterNode::Renew, "renewing"); });
    n->balance_thread_ = std::thread([n] { n->Loop(&ClusterNode::Balance, "balancing"); });
  }
  return node;
}

ClusterNode::ClusterNode(ClusterOptions options, std::shared_ptr<storage::NatsClient> nats,
                         ModelRegistry* registry, storage::Persistence* persistence,
                         Metrics* metrics)
    : options_(std::move(options)),
      nats_(std::move(nats)),
      registry_(registry),
      persistence_(persistence),
      metrics_(metrics),
      leases_(nats_, {.prefix = options_.prefix,
                      .replicas = options_.replicas,
                      .ttl = options_.lease_ttl}) {}

void ClusterNode::CountLease(std::string_view event, uint64_t n) {
  if (metrics_ != nullptr) metrics_->RecordLeaseEvent(event, n);
}

void ClusterNode::SetHeldCount() {
  if (metrics_ != nullptr) metrics_->SetOwnedShards(held_.size());
  MutexLock view(&view_mu_);
  held_count_ = held_.size();
}

ClusterNode::~ClusterNode() {
  StopThreads();
  persistence_->SetOwnerLookup(nullptr);
}

void ClusterNode::StopThreads() {
  {
    MutexLock lock(&stop_mu_);
    stop_ = true;
  }
  stop_cv_.SignalAll();
  if (renew_thread_.joinable()) renew_thread_.join();
  if (balance_thread_.joinable()) balance_thread_.join();
}

void ClusterNode::Loop(absl::Status (ClusterNode::*round)(), const char* what) {
  const auto period = absl::ToChronoMilliseconds(options_.lease_ttl / 3);
  for (;;) {
    {
      MutexLock lock(&stop_mu_);
      const auto deadline = std::chrono::steady_clock::now() + period;
      while (!stop_) {
        if (!stop_cv_.WaitUntil(&stop_mu_, deadline)) break;
      }
      if (stop_) return;
    }
    if (absl::Status s = (this->*round)(); !s.ok()) {
      spdlog::warn("cluster: {}: {}", what, s.ToString());
    }
  }
}

absl::Status ClusterNode::Take(const cluster::ShardId& id) {
  ASSIGN_OR_RETURN(std::shared_ptr<Model> model, registry_->Find(id.model));
  ASSIGN_OR_RETURN(cluster::Lease lease, leases_.Acquire(id.model, id.shard, options_.id));
  {
    // Held (and so renewed) from now on: a load longer than the lease keeps it.
    MutexLock lock(&held_mu_);
    held_[id] = {.lease = lease, .renewed = absl::Now()};
    SetHeldCount();
  }
  CountLease("acquired");
  absl::StatusOr<uint64_t> loaded = persistence_->LoadShard(*model, id.shard, registry_->secret());
  if (!loaded.ok()) {
    Give(id, lease.epoch, /*release_lease=*/true);  // another server may do better
    return loaded.status();
  }
  {
    MutexLock lock(&held_mu_);
    auto it = held_.find(id);
    if (it != held_.end() && it->second.lease.epoch == lease.epoch) {
      spdlog::info("cluster: took model '{}' shard {} (epoch {})", id.model, id.shard,
                   lease.epoch);
      return absl::OkStatus();
    }
  }
  // The lease was lost while the shard loaded: it must not be served from here.
  persistence_->ReleaseShard(id.model, id.shard);
  return absl::AbortedError(absl::StrCat("model '", id.model, "' shard ", id.shard,
                                         ": lease lost while loading"));
}

void ClusterNode::Give(const cluster::ShardId& id, uint64_t epoch, bool release_lease) {
  cluster::Lease lease;
  {
    MutexLock lock(&held_mu_);
    auto it = held_.find(id);
    if (it == held_.end() || (epoch != 0 && it->second.lease.epoch != epoch)) return;
    lease = it->second.lease;
    held_.erase(it);
    SetHeldCount();
  }
  persistence_->ReleaseShard(id.model, id.shard);
  if (release_lease) {
    CountLease("released");
    if (absl::Status s = leases_.Release(lease); !s.ok()) {
      spdlog::warn("cluster: handing back model '{}' shard {}: {}", id.model, id.shard,
                   s.ToString());
    }
  }
}

absl::Status ClusterNode::Tick() {
  absl::Status renewed = Renew();
  absl::Status balanced = Balance();
  return renewed.ok() ? balanced : renewed;
}

absl::Status ClusterNode::Renew() {
  absl::Status first_error;
  auto note = [&first_error](const absl::Status& s) {
    if (!s.ok() && first_error.ok()) first_error = s;
  };
  note(leases_.Join({.id = options_.id, .address = options_.address, .draining = draining_})
           .status());
  std::vector<std::pair<cluster::ShardId, cluster::Lease>> lost;
  {
    MutexLock lock(&held_mu_);
    for (auto& [id, held] : held_) {
      const absl::Time now = absl::Now();
      absl::StatusOr<cluster::Lease> renewed = leases_.Renew(held.lease);
      if (renewed.ok()) {
        held = {.lease = *renewed, .renewed = now};
        CountLease("renewed");
        continue;
      }
      if (absl::IsAborted(renewed.status()) || now - held.renewed >= options_.lease_ttl) {
        spdlog::warn("cluster: lost model '{}' shard {}: {}", id.model, id.shard,
                     renewed.status().ToString());
        lost.emplace_back(id, held.lease);
        CountLease("lost");
        continue;
      }
      CountLease("renew_failed");
      note(renewed.status());
    }
  }
  // Not serving it stops first; nothing is released (it is not ours any more, or may not be).
  for (const auto& [id, lease] : lost) Give(id, lease.epoch, /*release_lease=*/false);
  return first_error;
}

absl::Status ClusterNode::Balance() {
  MutexLock lock(&tick_mu_);
  if (draining_) return absl::OkStatus();
  absl::Status first_error;
  auto note = [&first_error](const absl::Status& s) {
    if (!s.ok() && first_error.ok()) first_error = s;
  };
  std::map<cluster::ShardId, uint64_t> held;
  {
    MutexLock h(&held_mu_);
    for (const auto& [id, l] : held_) held[id] = l.lease.epoch;
  }
  // A shard the journal's fence stopped while the lease stayed ours: load it again.
  for (const auto& [id, epoch] : held) {
    std::shared_ptr<storage::ModelWriters> w = persistence_->Find(id.model);
    if (w == nullptr || w->serving(id.shard)) continue;
    if (absl::StatusOr<std::shared_ptr<Model>> m = registry_->Find(id.model); m.ok()) {
      note(persistence_->LoadShard(**m, id.shard, registry_->secret()).status());
    }
  }

  absl::StatusOr<std::vector<std::string>> added = persistence_->RegisterStoredModels(registry_);
  note(added.status());
  absl::StatusOr<std::vector<cluster::Lease>> leases = leases_.Leases();
  absl::StatusOr<std::vector<cluster::Member>> members = leases_.Members();
  if (!leases.ok() || !members.ok()) {
    note(leases.status());
    note(members.status());
    SetReady(false);
    return first_error;
  }
  std::map<std::string, std::string> address;
  std::vector<std::string> live;
  for (const cluster::Member& m : *members) {
    // Every member's address, an expired one's too: its unexpired leases still route there.
    address[m.id] = m.address;
    if (m.id != options_.id && leases_.Expired(m)) continue;
    if (!m.draining) live.push_back(m.id);
  }
  std::vector<cluster::ShardId> shards;
  for (const std::shared_ptr<Model>& m : registry_->List()) {
    for (uint32_t i = 0; i < m->num_shards(); ++i) shards.push_back({m->spec().name, i});
  }
  // A lease the table still gives this server but that it no longer holds (dropped after
  // renewals failed for a whole lease_ttl, not released: NATS did not answer) is free for
  // the plan: this server may take it again, or another will. Counted as this server's, it
  // would be neither served nor taken.
  std::vector<cluster::Lease> view_leases = *leases;
  for (cluster::Lease& l : view_leases) {
    if (l.owner == options_.id && !held.contains({l.model, l.shard})) l.owner.clear();
  }
  cluster::BalancePlan plan = cluster::PlanBalance(
      {.me = options_.id,
       .draining = false,
       .live = live,
       .shards = shards,
       .leases = view_leases,
       .expired = [this](const cluster::Lease& l) { return leases_.Expired(l); }});
  for (const cluster::ShardId& id : plan.release) {
    spdlog::info("cluster: handing over model '{}' shard {} (balance)", id.model, id.shard);
    Give(id, /*epoch=*/0, /*release_lease=*/true);
  }
  std::map<cluster::ShardId, const cluster::Lease*> by_id;
  for (const cluster::Lease& l : *leases) by_id[{l.model, l.shard}] = &l;
  for (const cluster::ShardId& id : plan.acquire) {
    absl::Status s = Take(id);
    if (s.ok()) {
      // Another server's lease that expired: a takeover (not a hand-over or a new shard).
      if (auto l = by_id.find(id);
          l != by_id.end() && !l->second->owner.empty() && l->second->owner != options_.id) {
        spdlog::info("cluster: model '{}' shard {} taken over from '{}'", id.model, id.shard,
                     l->second->owner);
        CountLease("taken_over");
      }
    } else if (!absl::IsFailedPrecondition(s) && !absl::IsAborted(s)) {
      note(s);  // lost races are normal; the rest is reported
    }
  }

  // The map readers see.
  std::vector<ShardOwner> map;
  MutexLock held_lock(&held_mu_);
  for (const cluster::ShardId& id : shards) {
    ShardOwner row;
    row.model = id.model;
    row.shard = id.shard;
    if (auto h = held_.find(id); h != held_.end()) {
      row.owner = options_.id;
      row.address = options_.address;
      row.epoch = h->second.lease.epoch;
      row.here = true;
    } else if (auto l = by_id.find(id); l != by_id.end() && !l->second->owner.empty() &&
                                        l->second->owner != options_.id &&
                                        !leases_.Expired(*l->second)) {
      row.owner = l->second->owner;
      row.address = address.count(row.owner) > 0 ? address[row.owner] : "";
      row.epoch = l->second->epoch;
    }
    map.push_back(std::move(row));
  }
  {
    MutexLock view(&view_mu_);
    map_ = std::move(map);
  }
  bool ready = first_error.ok() && !draining_.load(std::memory_order_acquire);
  for (const auto& [id, lease] : held_) {
    std::shared_ptr<storage::ModelWriters> w = persistence_->Find(id.model);
    if (w == nullptr || !w->serving(id.shard)) ready = false;
  }
  SetReady(ready);
  return first_error;
}

void ClusterNode::SetReady(bool ready) {
  ready_.store(ready, std::memory_order_release);
  if (options_.on_ready) options_.on_ready(ready);
}

void ClusterNode::Drain() {
  if (draining_.exchange(true)) return;
  SetReady(false);
  StopThreads();  // no round runs from here on
  MutexLock lock(&tick_mu_);
  (void)leases_.Join({.id = options_.id, .address = options_.address, .draining = true});
  std::vector<cluster::ShardId> ids;
  {
    MutexLock h(&held_mu_);
    for (const auto& [id, held] : held_) ids.push_back(id);
  }
  for (const cluster::ShardId& id : ids) Give(id, /*epoch=*/0, /*release_lease=*/true);
  spdlog::info("cluster: drained; handed over {} shard(s)", ids.size());
  MutexLock view(&view_mu_);
  for (ShardOwner& row : map_) {
    if (!row.here) continue;
    row.owner.clear();
    row.address.clear();
    row.epoch = 0;
    row.here = false;
  }
}

std::vector<ShardOwner> ClusterNode::ShardMap() const {
  MutexLock lock(&view_mu_);
  return map_;
}

std::pair<std::string, std::string> ClusterNode::OwnerOf(const std::string& model,
                                                         uint32_t shard) const {
  MutexLock lock(&view_mu_);
  for (const ShardOwner& row : map_) {
    if (row.model == model && row.shard == shard) return {row.owner, row.address};
  }
  return {};
}

size_t ClusterNode::held() const {
  MutexLock lock(&view_mu_);
  return held_count_;
}

}  // namespace streamlearn::server
