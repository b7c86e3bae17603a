#include "server/auth/gatekeeper.h"

#include <grpcpp/security/auth_context.h>
#include <grpcpp/server_context.h>
#include <openssl/evp.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/common/digest.h"
#include "core/common/name_rule.h"
#include "core/common/quote.h"

namespace streamlearn::server {

absl::Status Caller::Scope(std::string* name) const {
  if (kind_ != Kind::kTenant) return CheckScopedModelName(*name);
  std::string_view plain = *name;
  if (const size_t slash = plain.find('/'); slash != std::string_view::npos) {
    if (plain.substr(0, slash) != tenant_) {
      return absl::PermissionDeniedError(absl::StrCat(
          "model ", QuoteForError(plain), " is outside tenant '", tenant_,
          "': a tenant's principal names only its own models (as 'name' or '", tenant_,
          "/name')"));
    }
    plain.remove_prefix(slash + 1);
  }
  if (absl::Status s = CheckName("model", plain); !s.ok()) return s;
  *name = ScopedModelName(tenant_, plain);
  return absl::OkStatus();
}

bool Caller::Sees(std::string_view scoped) const {
  return kind_ != Kind::kTenant || TenantOfScoped(scoped) == tenant_;
}

std::string_view Caller::Local(std::string_view scoped) const {
  return kind_ == Kind::kTenant ? NameInScope(scoped) : scoped;
}

Gatekeeper::Gatekeeper(std::string access_file, std::string peer_token,
                       std::shared_ptr<const AccessPolicy> policy)
    : access_file_(std::move(access_file)),
      peer_token_(std::move(peer_token)),
      peer_token_hash_(peer_token_.empty() ? std::string() : TokenHash(peer_token_)),
      policy_(std::move(policy)) {}

absl::StatusOr<std::unique_ptr<Gatekeeper>> Gatekeeper::Create(std::string access_file,
                                                               std::string peer_token) {
  std::shared_ptr<const AccessPolicy> policy;
  if (!access_file.empty()) {
    absl::StatusOr<AccessPolicy> loaded = AccessPolicy::Load(access_file);
    if (!loaded.ok()) return loaded.status();
    policy = std::make_shared<const AccessPolicy>(*std::move(loaded));
  }
  return std::unique_ptr<Gatekeeper>(
      new Gatekeeper(std::move(access_file), std::move(peer_token), std::move(policy)));
}

std::string Gatekeeper::PeerToken(const lmu::HashSecret& secret) {
  static constexpr char kLabel[] = "streamlearn cluster peer token v1";
  unsigned char out[32];
  size_t out_len = 0;
  char digest[] = "SHA256";
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, digest, nullptr, secret.data(), secret.size(),
                reinterpret_cast<const unsigned char*>(kLabel), sizeof(kLabel) - 1, out,
                sizeof(out), &out_len) == nullptr ||
      out_len != sizeof(out)) {
    return std::string();  // no peer token: forwarded calls are refused, never let through
  }
  Digest d;
  std::copy(out, out + sizeof(out), d.begin());
  return ToHex(d);
}

absl::StatusOr<Caller> Gatekeeper::Admit(const grpc::ServerContext& context, Rpc rpc) const {
  std::shared_ptr<const AccessPolicy> policy;
  {
    MutexLock lock(&mu_);
    policy = policy_;
  }
  if (policy == nullptr) return Caller::Open();
  const Principal* principal = nullptr;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(kAuthorizationKey); it != metadata.end()) {
    std::string_view value(it->second.data(), it->second.size());
    if (!absl::StartsWithIgnoreCase(absl::string_view(value.data(), value.size()), "Bearer ")) {
      return absl::UnauthenticatedError(
          "the 'authorization' metadata must be 'Bearer <token>'");
    }
    value.remove_prefix(7);
    if (!peer_token_hash_.empty() && TokenHash(value) == peer_token_hash_) {
      return Caller::Peer();
    }
    principal = policy->ByToken(value);
    if (principal == nullptr) {
      return absl::UnauthenticatedError(
          "this server does not know the bearer token (revoked, mistyped, or for another "
          "server)");
    }
  } else if (std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
             auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& identity : auth->GetPeerIdentity()) {
      principal = policy->ByCertIdentity(std::string_view(identity.data(), identity.size()));
      if (principal != nullptr) break;
    }
    if (principal == nullptr) {
      return absl::UnauthenticatedError(
          "no principal of the access policy has this client certificate's identity (its "
          "subject alternative names, or its common name)");
    }
  } else {
    return absl::UnauthenticatedError(
        "this server needs credentials: a bearer token ('authorization: Bearer <token>') or a "
        "client certificate the access policy names (docs/SECURITY.md)");
  }
  if (absl::Status s = Authorize(*principal, rpc); !s.ok()) return s;
  if ((principal->roles & kRoleOperator) != 0) return Caller::Operator(principal->id);
  return Caller::Tenant(principal->tenant, principal->id);
}

std::shared_ptr<const AccessPolicy> Gatekeeper::policy() const {
  MutexLock lock(&mu_);
  return policy_;
}

absl::Status Gatekeeper::ChargeEvents(const Caller& caller, size_t events) const {
  if (caller.kind() != Caller::Kind::kTenant) return absl::OkStatus();
  const std::shared_ptr<const AccessPolicy> policy = this->policy();
  const TenantLimits* limits = policy == nullptr ? nullptr : policy->LimitsOf(caller.tenant());
  if (limits == nullptr || !limits->max_events_per_second.has_value()) return absl::OkStatus();
  const double rate = *limits->max_events_per_second;
  const double burst = std::max(1.0, limits->burst_events.value_or(rate));
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(&rate_mu_);
  auto [it, fresh] = buckets_.try_emplace(caller.tenant());
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = burst;
  } else {
    const double elapsed = std::chrono::duration<double>(now - b.at).count();
    b.tokens = std::min(burst, b.tokens + rate * std::max(0.0, elapsed));
  }
  b.at = now;
  const double want = static_cast<double>(events);
  if (want <= b.tokens) {
    b.tokens -= want;
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "tenant '", caller.tenant(), "' is over its rate limit of ", rate, " events/s (burst ",
      burst, "): this batch of ", events, " was not applied; ",
      want > burst ? "it is larger than the burst: send smaller batches"
                   : "send it again later"));
}

absl::Status Gatekeeper::Reload() {
  if (access_file_.empty()) return absl::OkStatus();
  absl::StatusOr<AccessPolicy> loaded = AccessPolicy::Load(access_file_);
  if (!loaded.ok()) return loaded.status();
  auto policy = std::make_shared<const AccessPolicy>(*std::move(loaded));
  MutexLock lock(&mu_);
  policy_ = std::move(policy);
  return absl::OkStatus();
}

}  // namespace streamlearn::server
