// Gatekeeper: authenticates a call and authorises it against the access policy
// (access_policy.h, docs/SECURITY.md); Caller: what the admitted caller sees of the models.
//
// Without an access policy the server is open: every caller may do everything, over every
// model (what a loopback-only or development server wants). With one, a call is admitted by
//   - a bearer token ("authorization: Bearer <token>" metadata) the policy names;
//   - else the identity of its mTLS client certificate (the peer identity gRPC reports: the
//     subject alternative names, or the common name) that the policy names;
//   - or the cluster's peer token (PeerToken below): the call was forwarded by another server
//     of the cluster, which admitted it (docs/CLUSTER.md, "Routing").
// UNAUTHENTICATED when none of these identify a principal, PERMISSION_DENIED when its roles do
// not allow the RPC.
//
// Names: a tenant's principal names its models plainly ("clicks") and the Caller scopes them
// ("acme/clicks", core/common/name_rule.h): one tenant cannot name another's models, so it
// cannot reach, probe or learn of them. An operator, a peer and every caller of an open server
// name models by their stored (scoped) names.
//
//   absl::StatusOr<Caller> caller = gate.Admit(*context, Rpc::kQuery);
//   if (!caller.ok()) return ToGrpcStatus(caller.status());
//   std::string model = request->model();
//   RETURN_IF_ERROR(caller->Scope(&model));              // "clicks" -> "acme/clicks"
//   ...
//   response->set_name(std::string(caller->Local(model)));  // back to "clicks"
//
// Thread safety: Admit and Reload are thread-safe; a Caller is a value.
#ifndef STREAMLEARN_SERVER_AUTH_GATEKEEPER_H_
#define STREAMLEARN_SERVER_AUTH_GATEKEEPER_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/mutex.h"
#include "core/lmu/keyed_hash.h"
#include "server/auth/access_policy.h"

namespace grpc {
class ServerContext;
}  // namespace grpc

namespace streamlearn::server {

// The metadata key of bearer tokens.
inline constexpr char kAuthorizationKey[] = "authorization";

class Caller {
 public:
  enum class Kind { kOpen, kTenant, kOperator, kPeer };

  static Caller Open() { return Caller(Kind::kOpen, ""); }
  static Caller Peer() { return Caller(Kind::kPeer, ""); }
  static Caller Operator(std::string id) { return Caller(Kind::kOperator, "", std::move(id)); }
  static Caller Tenant(std::string tenant, std::string id) {
    return Caller(Kind::kTenant, std::move(tenant), std::move(id));
  }

  Kind kind() const { return kind_; }
  const std::string& tenant() const { return tenant_; }  // kTenant only
  const std::string& id() const { return id_; }          // the principal's; empty if none

  // *name, a model name as the caller gave it, becomes the stored name. Errors:
  // INVALID_ARGUMENT (not a model name), PERMISSION_DENIED (a tenant's caller naming a model
  // in another tenant's scope: "other/x"). *name is unchanged on error.
  absl::Status Scope(std::string* name) const;
  // Whether the stored model `scoped` is one the caller may see, and its name as the caller
  // knows it (REQUIRES: Sees(scoped)).
  bool Sees(std::string_view scoped) const;
  std::string_view Local(std::string_view scoped) const;

 private:
  Caller(Kind kind, std::string tenant, std::string id = "")
      : kind_(kind), tenant_(std::move(tenant)), id_(std::move(id)) {}

  Kind kind_;
  std::string tenant_;
  std::string id_;
};

// `in` with its model name scoped to the caller: `in` itself when the name does not change
// (an open server, an operator, a peer, the default tenant), else a copy in *copy.
// Errors: those of Caller::Scope.
template <typename Request>
absl::StatusOr<const Request*> ScopedRequest(const Caller& caller, const Request& in,
                                             Request* copy) {
  std::string model = in.model();
  if (absl::Status s = caller.Scope(&model); !s.ok()) return s;
  if (model == in.model()) return &in;
  *copy = in;
  copy->set_model(std::move(model));
  return copy;
}

class Gatekeeper {
 public:
  // access_file empty: an open server. peer_token: the token forwarded calls carry (empty:
  // none is accepted; the embedded mode).
  // Errors: those of AccessPolicy::Load.
  static absl::StatusOr<std::unique_ptr<Gatekeeper>> Create(std::string access_file,
                                                            std::string peer_token);

  // The cluster's peer token, derived from the shared LMU secret (HMAC-SHA256 under a label
  // of its own), so every server of a cluster knows it and no client does.
  static std::string PeerToken(const lmu::HashSecret& secret);

  // See above. The Caller of an open server is Caller::Open().
  absl::StatusOr<Caller> Admit(const grpc::ServerContext& context, Rpc rpc) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Reads the access file again (SIGHUP); on error the policy in force stays and the error is
  // returned. OK and a no-op for an open server.
  absl::Status Reload() ABSL_LOCKS_EXCLUDED(mu_);

  // The policy in force; null for an open server.
  std::shared_ptr<const AccessPolicy> policy() const ABSL_LOCKS_EXCLUDED(mu_);

  // Takes `events` (events or samples of one batch) from the rate budget of the caller's
  // tenant (a token bucket: TenantLimits::max_events_per_second, burst_events). OK for a
  // caller without a tenant limit (open, operator, peer: the entry server charged it).
  // Errors: RESOURCE_EXHAUSTED naming the tenant and its rate; nothing is taken then.
  absl::Status ChargeEvents(const Caller& caller, size_t events) const
      ABSL_LOCKS_EXCLUDED(mu_, rate_mu_);

  bool open() const { return access_file_.empty(); }
  const std::string& peer_token() const { return peer_token_; }

 private:
  Gatekeeper(std::string access_file, std::string peer_token,
             std::shared_ptr<const AccessPolicy> policy);

  const std::string access_file_;
  const std::string peer_token_;
  const std::string peer_token_hash_;
  mutable Mutex mu_;
  std::shared_ptr<const AccessPolicy> policy_ ABSL_GUARDED_BY(mu_);
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at;
  };
  mutable Mutex rate_mu_;
  mutable absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(rate_mu_);
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_AUTH_GATEKEEPER_H_
