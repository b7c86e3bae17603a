#include "server/forwarder.h"

#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/storage/persistence.h"

namespace streamlearn::server {

Forwarder::Forwarder(std::string self_id, Metrics* metrics, absl::Duration hop_timeout,
                     std::shared_ptr<grpc::ChannelCredentials> credentials,
                     std::string peer_token)
    : self_(std::move(self_id)),
      metrics_(metrics),
      credentials_(credentials != nullptr ? std::move(credentials)
                                          : grpc::InsecureChannelCredentials()),
      peer_authorization_(peer_token.empty() ? std::string()
                                             : absl::StrCat("Bearer ", peer_token)),
      hop_timeout_(hop_timeout) {
  watchdog_ = std::thread([this] { Watch(); });
}

Forwarder::~Forwarder() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  watchdog_.join();
}

std::optional<std::string> Forwarder::Target(const grpc::ServerContext& in,
                                             const absl::Status& local) const {
  if (!absl::IsUnavailable(local)) return std::nullopt;
  auto owner = local.GetPayload(storage::Persistence::kOwnerPayload);
  if (!owner.has_value() || owner->empty()) return std::nullopt;
  std::string address(*owner);
  if (in.client_metadata().count(kHopKey) > 0) return std::nullopt;  // one hop at most
  return address;
}

std::shared_ptr<grpc::Channel> Forwarder::Channel(const std::string& address) {
  MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& c = channels_[address];
  if (c == nullptr) c = grpc::CreateChannel(address, credentials_);
  return c;
}

std::unique_ptr<grpc::ClientContext> Forwarder::HopContext(const grpc::ServerContext& in,
                                                           bool unary) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata(kHopKey, self_);
  if (!peer_authorization_.empty()) ctx->AddMetadata("authorization", peer_authorization_);
  if (unary) {
    auto deadline = std::chrono::system_clock::now() + absl::ToChronoMilliseconds(hop_timeout_);
    if (in.deadline() < deadline) deadline = in.deadline();
    ctx->set_deadline(deadline);
  }
  return ctx;
}

uint64_t Forwarder::Arm(grpc::ClientContext* ctx) {
  MutexLock lock(&mu_);
  const uint64_t token = next_token_++;
  armed_[token] = {.ctx = ctx,
                   .deadline = std::chrono::steady_clock::now() +
                               absl::ToChronoMilliseconds(hop_timeout_)};
  return token;
}

void Forwarder::Disarm(uint64_t token) {
  MutexLock lock(&mu_);
  armed_.erase(token);
}

void Forwarder::Watch() {
  MutexLock lock(&mu_);
  while (!stop_) {
    const auto now = std::chrono::steady_clock::now();
    for (auto it = armed_.begin(); it != armed_.end();) {
      if (it->second.deadline <= now) {
        it->second.ctx->TryCancel();  // the batch's Read returns false at once
        it = armed_.erase(it);
      } else {
        ++it;
      }
    }
    cv_.WaitUntil(&mu_, now + std::chrono::milliseconds(100));
  }
}

void Forwarder::Count(std::string_view method, absl::StatusCode code) {
  if (metrics_ != nullptr) metrics_->RecordForward(method, code);
}

absl::Status Forwarder::FromGrpc(const grpc::Status& s, const std::string& address) {
  const auto code = static_cast<absl::StatusCode>(s.error_code());
  switch (s.error_code()) {
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::UNAVAILABLE:
      if (absl::StartsWith(s.error_message(), "NOT-OWNER")) {
        return absl::UnavailableError(s.error_message());
      }
      return absl::UnavailableError(absl::StrCat("forwarding to the shard's owner at ", address,
                                                 " failed (", s.error_message(),
                                                 "); resend unacknowledged batches"));
    default:
      return absl::Status(code, s.error_message());
  }
}

}  // namespace streamlearn::server
