// Router: where a client sends a request for shard s of a model (docs/CLIENT.md, "Routing and
// resending").
//
// A cluster's servers each serve some shards and forward the rest (docs/CLUSTER.md,
// "Routing"); a client that knows the shard map sends each request straight to the owner and
// saves the hop. The Router keeps one channel per server address (the seeds given to
// Client::Connect and every owner address it learns), and the shard map of each model it was
// asked about (Admin.ShardMap), read on first use and again after a failure
// (Refresh). In the embedded mode, or while a shard has no owner (a takeover under way), a
// request goes to the server that last answered the map: it forwards, or answers NOT-OWNER
// and the caller refreshes and retries.
//
//   auto router = std::make_shared<Router>(seeds, options);
//   std::string address = router->AddressOf("clicks", 3);   // the owner, or a fallback
//   auto stub = v1::SAU::NewStub(router->Channel(address));
//   // after UNAVAILABLE from `address`:
//   router->Refresh("clicks", address);
//
// Thread safety: thread-safe. Sessions and the Client share one Router (shared_ptr).
#ifndef STREAMLEARN_CLIENT_LIB_ROUTER_H_
#define STREAMLEARN_CLIENT_LIB_ROUTER_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/common/mutex.h"
#include "grpcpp/channel.h"
#include "client/lib/credentials.h"

namespace streamlearn {

// Whether a failed call may succeed if made again, maybe elsewhere: UNAVAILABLE (a server
// down or draining, NOT-OWNER, a failed hop), ABORTED (a fenced write), DEADLINE_EXCEEDED.
bool RetryableStatus(const absl::Status& status);

class Router {
 public:
  struct Options {
    // false: every request goes to the first seed (the servers forward); no shard map read.
    bool route = true;
    // Deadline of one Admin.ShardMap call.
    std::chrono::milliseconds map_timeout{5000};
    // Makes every channel (credentials.h); null: plaintext, no token.
    ChannelFactory make_channel;
  };

  // REQUIRES: seeds is not empty.
  Router(std::vector<std::string> seeds, Options options);
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // The channel to `address` (host:port), created on first use and kept.
  std::shared_ptr<grpc::Channel> Channel(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  // Where a request for shard `shard` of `model` goes: its owner's address as of the last map
  // read (reading the map first if this model has none), else the fallback (below).
  std::string AddressOf(std::string_view model, uint32_t shard) ABSL_LOCKS_EXCLUDED(mu_);

  // Reads the model's shard map again, from the fallback first and then from every other
  // known address, after `failed` (the address of a failed call, tried last; may be empty)
  // went wrong. The error of the last server tried if none answered; NOT_FOUND for an unknown
  // model (the map is then left as it was).
  absl::Status Refresh(std::string_view model, const std::string& failed = "")
      ABSL_LOCKS_EXCLUDED(mu_);

  // Where calls that any server answers go (CreateModel, GetModel, ...): the server that last
  // answered a map read, initially the first seed. Moves to another known address when the
  // current one fails (Failover).
  std::string Fallback() const ABSL_LOCKS_EXCLUDED(mu_);
  // `address` failed: the fallback moves to the next known address if it was `address`.
  void Failover(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  // Every address known: the seeds, then owners learnt from maps.
  std::vector<std::string> Addresses() const ABSL_LOCKS_EXCLUDED(mu_);
  const Options& options() const { return options_; }

 private:
  struct ModelMap {
    std::vector<std::string> owner_address;  // by shard; empty: no owner now
  };
  absl::Status ReadMap(std::string_view model, const std::string& address)
      ABSL_LOCKS_EXCLUDED(mu_);

  const Options options_;
  mutable Mutex mu_;
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);  // seeds first, no duplicates
  std::string fallback_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, ModelMap, std::less<>> maps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_ROUTER_H_
