#include "server/cluster/lease_table.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "core/common/absl_view.h"
#include "core/common/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/storage/jetstream_storage.h"

namespace streamlearn::cluster {
namespace {

bool ValidId(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
  });
}

std::optional<nlohmann::json> ParseJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

}  // namespace

std::string LeaseTable::LeaseSubject(std::string_view model, uint32_t shard) const {
  return absl::StrCat("$KV.", options_.prefix, "_LEASES.lease.", storage::ModelKey(model), ".",
                      shard);
}

std::string LeaseTable::MemberSubject(std::string_view id) const {
  return absl::StrCat("$KV.", options_.prefix, "_LEASES.member.", AbslView(id));
}

absl::Status LeaseTable::Open() {
  return nats_->EnsureStream({.name = stream(),
                              .subjects = {absl::StrCat("$KV.", options_.prefix, "_LEASES.>")},
                              .replicas = options_.replicas,
                              .max_msgs_per_subject = 1});
}

absl::Time LeaseTable::Observe(const std::string& subject, uint64_t revision) {
  const absl::Time now = options_.now();
  MutexLock lock(&mu_);
  auto [it, inserted] = seen_.try_emplace(subject, revision, now);
  if (!inserted && it->second.first != revision) it->second = {revision, now};
  return it->second.second;
}

bool LeaseTable::Expired(const Lease& lease) {
  const absl::Time since = Observe(LeaseSubject(lease.model, lease.shard), lease.revision);
  return options_.now() - since >= options_.ttl;
}

bool LeaseTable::Expired(const Member& member) {
  const absl::Time since = Observe(MemberSubject(member.id), member.revision);
  return options_.now() - since >= options_.ttl;
}

absl::StatusOr<std::optional<Lease>> LeaseTable::Get(std::string_view model, uint32_t shard) {
  const std::string subject = LeaseSubject(model, shard);
  ASSIGN_OR_RETURN(std::optional<storage::StoredMsg> msg, nats_->LastMsg(stream(), subject));
  if (!msg.has_value()) return std::optional<Lease>();
  std::optional<nlohmann::json> j = ParseJson(msg->data);
  if (!j.has_value()) {
    return absl::DataLossError(absl::StrCat("lease ", subject, " is not a lease"));
  }
  Lease l{.model = std::string(model),
          .shard = shard,
          .owner = j->value("owner", ""),
          .epoch = j->value("epoch", uint64_t{0}),
          .revision = msg->seq};
  Observe(subject, l.revision);
  return std::optional<Lease>(std::move(l));
}

absl::StatusOr<std::vector<Lease>> LeaseTable::Leases() {
  std::vector<Lease> out;
  const std::string prefix = absl::StrCat("$KV.", options_.prefix, "_LEASES.lease.");
  // One direct get per key (the bucket keeps one value per key): no consumer, which a NATS
  // node's loss can keep from starting (nats_client.h, ScanSubjectDirect).
  RETURN_IF_ERROR(nats_->ScanSubjectDirect(
      stream(), prefix + ">", [&](const storage::StoredMsg& m) {
        // lease.<model key>.<shard>
        std::vector<std::string> parts = absl::StrSplit(m.subject.substr(prefix.size()), '.');
        uint32_t shard = 0;
        std::optional<std::string> model =
            parts.size() == 2 ? storage::ModelFromKey(parts[0]) : std::nullopt;
        std::optional<nlohmann::json> j = ParseJson(m.data);
        if (!model.has_value() || !absl::SimpleAtoi(parts[1], &shard) || !j.has_value()) {
          return true;  // not a key this code writes
        }
        out.push_back({.model = *model,
                       .shard = shard,
                       .owner = j->value("owner", ""),
                       .epoch = j->value("epoch", uint64_t{0}),
                       .revision = m.seq});
        return true;
      }));
  for (const Lease& l : out) Observe(LeaseSubject(l.model, l.shard), l.revision);
  std::sort(out.begin(), out.end(), [](const Lease& a, const Lease& b) {
    return std::tie(a.model, a.shard) < std::tie(b.model, b.shard);
  });
  return out;
}

absl::StatusOr<std::vector<Member>> LeaseTable::Members() {
  std::vector<Member> out;
  const std::string prefix = absl::StrCat("$KV.", options_.prefix, "_LEASES.member.");
  RETURN_IF_ERROR(nats_->ScanSubjectDirect(
      stream(), prefix + ">", [&](const storage::StoredMsg& m) {
        std::optional<nlohmann::json> j = ParseJson(m.data);
        if (!j.has_value()) return true;
        out.push_back({.id = m.subject.substr(prefix.size()),
                       .address = j->value("address", ""),
                       .draining = j->value("draining", false),
                       .revision = m.seq});
        return true;
      }));
  for (const Member& m : out) Observe(MemberSubject(m.id), m.revision);
  std::sort(out.begin(), out.end(), [](const Member& a, const Member& b) { return a.id < b.id; });
  return out;
}

absl::StatusOr<Lease> LeaseTable::Write(const Lease& next, uint64_t expected_revision) {
  const std::string subject = LeaseSubject(next.model, next.shard);
  const std::string value = nlohmann::json{{"owner", next.owner}, {"epoch", next.epoch}}.dump();
  absl::StatusOr<uint64_t> rev =
      nats_->Publish(subject, value, storage::Expect::LastSeq(expected_revision));
  if (!rev.ok()) {
    if (absl::IsAborted(rev.status())) {
      return absl::AbortedError(absl::StrCat("lease of model '", next.model, "' shard ",
                                             next.shard, " changed under this server"));
    }
    return rev.status();
  }
  Lease out = next;
  out.revision = *rev;
  Observe(subject, out.revision);
  return out;
}

absl::StatusOr<Lease> LeaseTable::Acquire(std::string_view model, uint32_t shard,
                                          std::string_view owner) {
  if (!ValidId(owner)) {
    return absl::InvalidArgumentError(
        absl::StrCat("server id '", AbslView(owner), "' is not 1..64 of [A-Za-z0-9_-]"));
  }
  ASSIGN_OR_RETURN(std::optional<Lease> have, Get(model, shard));
  if (!have.has_value()) {
    return Write({.model = std::string(model), .shard = shard, .owner = std::string(owner),
                  .epoch = 1},
                 0);
  }
  if (have->owner == owner) return Renew(*have);
  if (!have->owner.empty() && !Expired(*have)) {
    return absl::FailedPreconditionError(absl::StrCat("model '", AbslView(model), "' shard ", shard,
                                                      " is held by '", have->owner,
                                                      "' (epoch ", have->epoch, ")"));
  }
  return Write({.model = std::string(model), .shard = shard, .owner = std::string(owner),
                .epoch = have->epoch + 1},
               have->revision);
}

absl::StatusOr<Lease> LeaseTable::Renew(const Lease& held) {
  return Write(held, held.revision);
}

absl::Status LeaseTable::Release(const Lease& held) {
  Lease released = held;
  released.owner.clear();
  return Write(released, held.revision).status();
}

absl::StatusOr<Member> LeaseTable::Join(const Member& me) {
  if (!ValidId(me.id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("server id '", me.id, "' is not 1..64 of [A-Za-z0-9_-]"));
  }
  const std::string subject = MemberSubject(me.id);
  const std::string value =
      nlohmann::json{{"address", me.address}, {"draining", me.draining}}.dump();
  ASSIGN_OR_RETURN(uint64_t rev, nats_->Publish(subject, value, storage::Expect::Nothing()));
  Member out = me;
  out.revision = rev;
  Observe(subject, rev);
  return out;
}

}  // namespace streamlearn::cluster
