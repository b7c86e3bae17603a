#include "client/lib/router.h"

#include <algorithm>
#include <utility>

#include "admin.grpc.pb.h"
#include "client/lib/grpc_status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"

namespace streamlearn {

bool RetryableStatus(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsAborted(status) ||
         absl::IsDeadlineExceeded(status);
}

Router::Router(std::vector<std::string> seeds, Options options) : options_(std::move(options)) {
  MutexLock lock(&mu_);
  for (std::string& s : seeds) {
    if (std::find(addresses_.begin(), addresses_.end(), s) == addresses_.end()) {
      addresses_.push_back(std::move(s));
    }
  }
  fallback_ = addresses_.empty() ? std::string() : addresses_.front();
}

std::shared_ptr<grpc::Channel> Router::Channel(const std::string& address) {
  MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& c = channels_[address];
  if (c == nullptr) {
    c = options_.make_channel != nullptr
            ? options_.make_channel(address)
            : grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  }
  return c;
}

std::string Router::Fallback() const {
  MutexLock lock(&mu_);
  return fallback_;
}

void Router::Failover(const std::string& address) {
  MutexLock lock(&mu_);
  if (fallback_ != address || addresses_.size() < 2) return;
  auto it = std::find(addresses_.begin(), addresses_.end(), address);
  fallback_ = (it == addresses_.end() || it + 1 == addresses_.end()) ? addresses_.front()
                                                                     : *(it + 1);
}

std::vector<std::string> Router::Addresses() const {
  MutexLock lock(&mu_);
  return addresses_;
}

std::string Router::AddressOf(std::string_view model, uint32_t shard) {
  if (options_.route) {
    bool known = false;
    {
      MutexLock lock(&mu_);
      if (auto it = maps_.find(model); it != maps_.end()) {
        known = true;
        if (shard < it->second.owner_address.size() &&
            !it->second.owner_address[shard].empty()) {
          return it->second.owner_address[shard];
        }
      }
    }
    // First use: read the map (a failure leaves the fallback, which forwards).
    if (!known && Refresh(model).ok()) {
      MutexLock lock(&mu_);
      if (auto it = maps_.find(model); it != maps_.end() &&
                                       shard < it->second.owner_address.size() &&
                                       !it->second.owner_address[shard].empty()) {
        return it->second.owner_address[shard];
      }
    }
  }
  return Fallback();
}

absl::Status Router::ReadMap(std::string_view model, const std::string& address) {
  v1::ShardMapRequest request;
  request.set_model(std::string(model));
  v1::ShardMapResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + options_.map_timeout);
  absl::Status s =
      FromGrpcStatus(v1::Admin::NewStub(Channel(address))->ShardMap(&ctx, request, &response));
  if (!s.ok()) return s;
  ModelMap map;
  for (const v1::ShardOwner& row : response.shards()) {
    if (row.model() != model) continue;
    if (map.owner_address.size() <= row.shard()) map.owner_address.resize(row.shard() + 1);
    // The embedded mode names no owner: everything goes to the server that answered.
    map.owner_address[row.shard()] = response.cluster() ? row.address() : address;
  }
  MutexLock lock(&mu_);
  for (const std::string& a : map.owner_address) {
    if (!a.empty() && std::find(addresses_.begin(), addresses_.end(), a) == addresses_.end()) {
      addresses_.push_back(a);
    }
  }
  maps_[std::string(model)] = std::move(map);
  fallback_ = address;
  return absl::OkStatus();
}

absl::Status Router::Refresh(std::string_view model, const std::string& failed) {
  std::vector<std::string> order;
  {
    MutexLock lock(&mu_);
    order.push_back(fallback_);
    for (const std::string& a : addresses_) {
      if (a != fallback_ && a != failed) order.push_back(a);
    }
    if (!failed.empty() && failed != fallback_) order.push_back(failed);
    if (failed == fallback_ && order.size() > 1) std::rotate(order.begin(), order.begin() + 1,
                                                              order.end());
  }
  absl::Status last = absl::UnavailableError("no server address to read the shard map from");
  for (const std::string& address : order) {
    last = ReadMap(model, address);
    if (last.ok() || absl::IsNotFound(last)) return last;
  }
  return last;
}

}  // namespace streamlearn
