// LeaseTable: who serves which shard in the cluster mode (docs/CLUSTER.md, "Leases"). One key
// per (model, shard) in the key-value bucket KV_<prefix>_LEASES, holding the owner's id and
// the lease's epoch; every change is a compare-and-set on the key's revision (a publish with
// the subject's expected last sequence), so two servers can never both take the same lease
// from the same state. Servers also keep a membership key each (members.<id>), renewed with
// their leases, from which each one computes its fair share (balance.h).
//
// Expiry is judged by the observer's own monotonic clock, never by comparing clocks between
// machines: a lease (or membership) is expired once its revision has not changed for `ttl`
// since this server first saw that revision. A server that renews at ttl/3 keeps its leases
// through two lost renewals.
//
// A lease decides who *should* serve a shard (routing, balancing); it is not what keeps a
// shard's log single-writer. That is the journal's fence (jetstream_storage.h): a server that
// lost its lease without noticing (paused, partitioned) is refused by JetStream at its next
// commit.
//
//   LeaseTable leases(nats, {.prefix = "SL", .replicas = 3, .ttl = absl::Seconds(6)});
//   RETURN_IF_ERROR(leases.Open());
//   absl::StatusOr<Lease> mine = leases.Acquire("clicks", 3, "server-a");
//   ... every ttl/3:  mine = leases.Renew(*mine);   // ABORTED: lost it, stop serving
//   leases.Release(*mine);                          // on drain: others take it at once
//
// Errors: UNAVAILABLE (NATS did not answer), ABORTED (another server changed the key first),
// FAILED_PRECONDITION (held by another live owner, named in the message).
// Thread safety: thread-safe.
#ifndef STREAMLEARN_SERVER_CLUSTER_LEASE_TABLE_H_
#define STREAMLEARN_SERVER_CLUSTER_LEASE_TABLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/common/mutex.h"
#include "server/storage/nats_client.h"

namespace streamlearn::cluster {

// One lease as stored. An empty owner is a released lease (anyone may take it).
struct Lease {
  std::string model;
  uint32_t shard = 0;
  std::string owner;
  uint64_t epoch = 0;      // +1 at every change of owner
  uint64_t revision = 0;   // the key's revision (its stream sequence): the CAS token
};

// A server's membership record.
struct Member {
  std::string id;
  std::string address;     // where it serves gRPC (host:port), for forwarding and clients
  bool draining = false;   // handing its shards over; takes none
  uint64_t revision = 0;
};

struct LeaseTableOptions {
  std::string prefix = "SL";
  int replicas = 1;
  absl::Duration ttl = absl::Seconds(6);
  // A monotonic clock (tests drive it by hand).
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

class LeaseTable {
 public:
  LeaseTable(std::shared_ptr<storage::NatsClient> nats, LeaseTableOptions options)
      : nats_(std::move(nats)), options_(std::move(options)) {}

  // Makes the bucket if it does not exist.
  absl::Status Open();

  // The lease of (model, shard); nullopt when nobody ever took it.
  absl::StatusOr<std::optional<Lease>> Get(std::string_view model, uint32_t shard);
  // Every lease and every member, read now (and observed for expiry).
  absl::StatusOr<std::vector<Lease>> Leases();
  absl::StatusOr<std::vector<Member>> Members();

  // Takes the lease for `owner` when it is free, released, expired or already `owner`'s.
  absl::StatusOr<Lease> Acquire(std::string_view model, uint32_t shard, std::string_view owner);
  // Renews a lease this server holds (`held` as returned by Acquire or the last Renew).
  absl::StatusOr<Lease> Renew(const Lease& held);
  // Hands a held lease back (owner cleared), so another server takes it without waiting.
  absl::Status Release(const Lease& held);

  // Writes (renews) this server's membership record.
  absl::StatusOr<Member> Join(const Member& me);
  // Whether an observed lease or member has gone unrenewed for ttl.
  bool Expired(const Lease& lease) ABSL_LOCKS_EXCLUDED(mu_);
  bool Expired(const Member& member) ABSL_LOCKS_EXCLUDED(mu_);

  const LeaseTableOptions& options() const { return options_; }
  std::string stream() const { return "KV_" + options_.prefix + "_LEASES"; }

 private:
  std::string LeaseSubject(std::string_view model, uint32_t shard) const;
  std::string MemberSubject(std::string_view id) const;
  absl::StatusOr<Lease> Write(const Lease& next, uint64_t expected_revision);
  // Notes that `subject` was seen at `revision`; returns since when (this clock).
  absl::Time Observe(const std::string& subject, uint64_t revision) ABSL_LOCKS_EXCLUDED(mu_);

  std::shared_ptr<storage::NatsClient> nats_;
  const LeaseTableOptions options_;
  Mutex mu_;
  // subject -> (revision, when this server first saw it)
  std::map<std::string, std::pair<uint64_t, absl::Time>> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streamlearn::cluster

#endif  // STREAMLEARN_SERVER_CLUSTER_LEASE_TABLE_H_
