// Client: the C++ client of streamlearn servers (Admin, SAU, LMU and Fuse services).
//
// Unary calls (CreateModel, GetModel, ListModels, Query, Predict) return absl::Status /
// absl::StatusOr with the server's gRPC code and message unchanged; each attempt has a
// deadline of Options::rpc_timeout. SAU.Ingest runs over an IngestSession
// (ingest_session.h), LMU.Update over an LmuUpdateSession (lmu_update_session.h), Fuse.Learn
// over a FuseLearnSession (fuse_session.h): pipelined streams that resend what a failure left
// unacknowledged (batch_session.h).
//
// Routing (docs/CLIENT.md, "Routing and resending"): a model's state is split into shards,
// shard = ShardFor(routing key, shards) (core/common/routing.h, the function the server
// uses). In the cluster mode each shard is served by one server; the Client reads the shard
// map (Admin.ShardMap) and sends each request for a shard to its owner, over one channel per
// server (Router, router.h). Reads of a shard (Query, Predict, FusePredict) that fail with
// UNAVAILABLE (a server down, NOT-OWNER during a takeover) or DEADLINE_EXCEEDED are retried
// after reading the map again, with backoff, for up to Options::retry_timeout. In the embedded
// mode every request goes to the one server. Connect takes one address or several
// (comma-separated seeds): any one that answers gives the map.
//
//   absl::StatusOr<std::unique_ptr<Client>> client =
//       Client::Connect("sl-0:50051,sl-1:50051,sl-2:50051");
//   if (!client.ok()) return client.status();
//   v1::ModelSpec spec;
//   spec.set_name("demo");
//   spec.mutable_sau()->set_d(16);
//   spec.mutable_sau()->set_d_v(4);
//   absl::StatusOr<v1::ModelInfo> info = (*client)->CreateModel(spec);
//   std::vector<double> q(16, 0.25);
//   auto y = (*client)->Query("demo", "user-42", q, v1::READOUT_PATH_CORRECTNESS);
//   std::vector<uint64_t> ids = {17, 42};
//   std::vector<double> vals = {1.0, 0.5};
//   auto p = (*client)->Predict("clicks", "user-42", ids, vals);   // LMU part
//
// Thread safety: all methods are thread-safe; sessions it opens are independent of it.
#ifndef STREAMLEARN_CLIENT_LIB_CLIENT_H_
#define STREAMLEARN_CLIENT_LIB_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "admin.grpc.pb.h"
#include "client/lib/credentials.h"
#include "client/lib/fuse_session.h"
#include "client/lib/ingest_session.h"
#include "client/lib/lmu_update_session.h"
#include "client/lib/router.h"
#include "core/common/mutex.h"
#include "grpcpp/channel.h"
#include "core/lmu/feature.h"
#include "fuse.grpc.pb.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"

namespace streamlearn {

class Client {
 public:
  struct Options {
    // Connect waits this long for a server to answer.
    std::chrono::milliseconds connect_timeout{10000};
    // Deadline of each attempt of a unary RPC.
    std::chrono::milliseconds rpc_timeout{30000};
    // Reads of a shard are retried (above) for this long.
    std::chrono::milliseconds retry_timeout{60000};
    // false: every request goes to the first server that answered Connect (which forwards
    // what it does not serve); the shard map is never read.
    bool route = true;
    // Token and TLS (credentials.h); none by default: plaintext, no token.
    ClientCredentials credentials;
  };

  // `addresses`: host:port, or several separated by commas (seeds: any one of them serving
  // is enough). Opens a channel to each in turn (with Options::credentials) until one is
  // ready. Errors: INVALID_ARGUMENT for an empty list or credentials that do not go together,
  // NOT_FOUND for a credentials file that is missing, FAILED_PRECONDITION for a token over
  // plaintext to a host that is not loopback, UNAVAILABLE naming the addresses if none can
  // be reached in time (also when the TLS handshake fails: check the CA and the server name).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& addresses,
                                                         const Options& options);
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& addresses) {
    return Connect(addresses, Options());
  }

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Errors from the server: INVALID_ARGUMENT naming the field, ALREADY_EXISTS.
  absl::StatusOr<v1::ModelInfo> CreateModel(const v1::ModelSpec& spec);
  // NOT_FOUND naming the model.
  absl::StatusOr<v1::ModelInfo> GetModel(std::string_view name);
  absl::StatusOr<std::vector<v1::ModelInfo>> ListModels();
  // Who serves each shard of `model` (every model when empty), as the answering server saw it
  // at its last lease round (docs/CLUSTER.md, "Routing"); in the embedded mode every shard is
  // served by the one server. NOT_FOUND naming an unknown model.
  absl::StatusOr<v1::ShardMapResponse> ShardMap(std::string_view model = "");

  // Reads attention at q from the shard of `routing_key`; read-only. With min_version > 0
  // the server fails with FAILED_PRECONDITION if the shard has not reached that version
  // (pass an ack's ver_sau to read your own writes).
  absl::StatusOr<v1::QueryResponse> Query(
      std::string_view model, std::string_view routing_key, std::span<const double> q,
      v1::ReadoutPath path = v1::READOUT_PATH_STABILIZED, bool low_rank = false,
      uint64_t min_version = 0);

  // The LMU's prediction at the sparse x = {(ids[j], vals[j])} from the shard of
  // `routing_key`; read-only. Errors from the server: INVALID_ARGUMENT (lengths differ, empty
  // x, NaN/Inf), NOT_FOUND, FAILED_PRECONDITION (the model has no lmu part).
  absl::StatusOr<v1::PredictResponse> Predict(std::string_view model,
                                              std::string_view routing_key,
                                              std::span<const uint64_t> ids,
                                              std::span<const double> vals);
  // The predictions of several samples in one call, read together under one pin of the
  // shard's table (docs/LMU.md, "Predicting many samples"): sample i is the next counts[i]
  // entries of ids and vals; the response's y_hat holds m values per sample, sample after
  // sample. At most the server's max_batch samples (4096 by default). Errors: Predict's,
  // naming the sample, and INVALID_ARGUMENT when the counts do not add up to ids.
  absl::StatusOr<v1::PredictResponse> PredictMany(std::string_view model,
                                                  std::string_view routing_key,
                                                  std::span<const uint64_t> ids,
                                                  std::span<const double> vals,
                                                  std::span<const uint32_t> counts);

  // The fused prediction at (x, q) from the shard of `routing_key`; read-only: what the next
  // Fuse.Learn with that (x, q) would predict. Errors from the server: INVALID_ARGUMENT
  // (lengths differ, q's dimension, empty x, NaN/Inf, reserved ids), NOT_FOUND,
  // FAILED_PRECONDITION (the model has no fuse part).
  absl::StatusOr<v1::FusePredictResponse> FusePredict(std::string_view model,
                                                      std::string_view routing_key,
                                                      std::span<const uint64_t> ids,
                                                      std::span<const double> vals,
                                                      std::span<const double> q);
  absl::StatusOr<v1::FusePredictResponse> FusePredict(std::string_view model,
                                                      std::string_view routing_key,
                                                      std::span<const lmu::Feature> x,
                                                      std::span<const double> q);

  // Opens a Fuse.Learn stream for `model` whose batches all go to the shard of `routing_key`
  // (reads the model's shard count first: NOT_FOUND if absent). A model without a fuse part is
  // refused in each batch's ack (FAILED_PRECONDITION). INVALID_ARGUMENT if window is 0.
  absl::StatusOr<std::unique_ptr<FuseLearnSession>> OpenFuseLearn(std::string_view model,
                                                                  std::string_view routing_key,
                                                                  size_t window = 64);

  // Opens an ingest stream for `model` (reads its shard count first: NOT_FOUND if absent).
  absl::StatusOr<std::unique_ptr<IngestSession>> OpenIngest(std::string_view model,
                                                            IngestSession::Options options);
  absl::StatusOr<std::unique_ptr<IngestSession>> OpenIngest(std::string_view model) {
    return OpenIngest(model, IngestSession::Options());
  }

  // Opens an LMU update stream for `model` (reads its shard count first: NOT_FOUND if
  // absent). A model without an LMU part is refused in each batch's ack (FAILED_PRECONDITION).
  absl::StatusOr<std::unique_ptr<LmuUpdateSession>> OpenLmuUpdate(
      std::string_view model, LmuUpdateSession::Options options);
  absl::StatusOr<std::unique_ptr<LmuUpdateSession>> OpenLmuUpdate(std::string_view model) {
    return OpenLmuUpdate(model, LmuUpdateSession::Options());
  }

  // The shard of `routing_key` in `model`, as the server computes it.
  absl::StatusOr<uint32_t> ShardOf(std::string_view model, std::string_view routing_key);

  // The grpc.health.v1 status of `service` on the server that answered Connect: true when
  // SERVING. "" is the process (SERVING until it drains), "streamlearn.ready" its readiness
  // (the cluster mode: it holds and serves its share of the shards). NOT_FOUND for a service
  // the server does not know.
  absl::StatusOr<bool> Healthy(std::string_view service = "");

  // The server that answered Connect.
  const std::string& address() const { return address_; }
  const std::shared_ptr<Router>& router() const { return router_; }

 private:
  Client(std::string address, Options options, std::shared_ptr<Router> router);
  absl::StatusOr<uint32_t> ShardCount(std::string_view model) ABSL_LOCKS_EXCLUDED(mu_);
  template <typename Session>
  absl::StatusOr<std::unique_ptr<Session>> OpenSession(std::string_view model,
                                                       typename Session::Options options);
  std::unique_ptr<grpc::ClientContext> NewContext() const;
  // Runs call(channel) on the owner of the shard of `routing_key` (any server when `model` is
  // empty), again after a retryable failure (RetryableStatus) until retry_timeout.
  // retry false: one attempt (CreateModel: a retry after a lost answer would say
  // ALREADY_EXISTS).
  absl::Status Call(std::string_view model, std::string_view routing_key,
                    const std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&,
                                                     grpc::ClientContext*)>& call,
                    bool retry = true);

  const std::string address_;
  const Options options_;
  const std::shared_ptr<Router> router_;

  Mutex mu_;
  // Model -> shards.
  std::map<std::string, uint32_t, std::less<>> shard_counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_CLIENT_H_
