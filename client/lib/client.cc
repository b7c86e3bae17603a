#include "client/lib/client.h"

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "client/lib/grpc_status.h"
#include "health.grpc.pb.h"
#include "core/common/routing.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace streamlearn {

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& addresses,
                                                        const Options& options) {
  std::vector<std::string> seeds;
  for (absl::string_view a : absl::StrSplit(addresses, ',', absl::SkipWhitespace())) {
    seeds.emplace_back(absl::StripAsciiWhitespace(a));
  }
  if (seeds.empty()) return absl::InvalidArgumentError("server address is empty");
  for (const std::string& seed : seeds) {
    if (absl::Status s = CheckTokenTransport(options.credentials, seed); !s.ok()) return s;
  }
  absl::StatusOr<ChannelFactory> make_channel = MakeChannelFactory(options.credentials);
  if (!make_channel.ok()) return make_channel.status();
  const Router::Options router_options{.route = options.route, .make_channel = *make_channel};
  // Each seed gets an equal part of connect_timeout, in turn, until one is ready.
  auto router = std::make_shared<Router>(seeds, router_options);
  const auto per_seed = options.connect_timeout / static_cast<int>(seeds.size());
  for (const std::string& seed : seeds) {
    if (router->Channel(seed)->WaitForConnected(std::chrono::system_clock::now() + per_seed)) {
      if (router->Fallback() != seed) {
        // The first seed that answered takes the calls any server answers.
        std::vector<std::string> ordered = {seed};
        for (const std::string& other : seeds) {
          if (other != seed) ordered.push_back(other);
        }
        router = std::make_shared<Router>(ordered, router_options);
      }
      return std::unique_ptr<Client>(new Client(seed, options, std::move(router)));
    }
  }
  return absl::UnavailableError(
      "cannot connect to a streamlearn server at " + addresses + " within " +
      std::to_string(options.connect_timeout.count()) + " ms" +
      (options.credentials.uses_tls()
           ? " (TLS: is the server's certificate signed by the CA given, for this host name?)"
           : ""));
}

Client::Client(std::string address, Options options, std::shared_ptr<Router> router)
    : address_(std::move(address)), options_(options), router_(std::move(router)) {}

std::unique_ptr<grpc::ClientContext> Client::NewContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
  return ctx;
}

absl::Status Client::Call(
    std::string_view model, std::string_view routing_key,
    const std::function<grpc::Status(const std::shared_ptr<grpc::Channel>&,
                                     grpc::ClientContext*)>& call,
    bool retry) {
  std::optional<uint32_t> shard;
  if (!model.empty() && options_.route) {
    absl::StatusOr<uint32_t> s = ShardOf(model, routing_key);
    if (!s.ok()) return s.status();
    shard = *s;
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.retry_timeout;
  std::chrono::milliseconds backoff(50);
  while (true) {
    const std::string address =
        shard.has_value() ? router_->AddressOf(model, *shard) : router_->Fallback();
    auto ctx = NewContext();
    const absl::Status s = FromGrpcStatus(call(router_->Channel(address), ctx.get()));
    if (s.ok() || !retry || !RetryableStatus(s) ||
        std::chrono::steady_clock::now() + backoff > deadline) {
      return s;
    }
    router_->Failover(address);
    if (shard.has_value()) router_->Refresh(model, address).IgnoreError();
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

absl::StatusOr<bool> Client::Healthy(std::string_view service) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(std::string(service));
  grpc::health::v1::HealthCheckResponse response;
  auto ctx = NewContext();
  if (absl::Status s = FromGrpcStatus(grpc::health::v1::Health::NewStub(
                                          router_->Channel(address_))
                                          ->Check(ctx.get(), request, &response));
      !s.ok()) {
    return s;
  }
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

absl::StatusOr<v1::ModelInfo> Client::CreateModel(const v1::ModelSpec& spec) {
  v1::CreateModelRequest request;
  *request.mutable_spec() = spec;
  v1::ModelInfo info;
  if (absl::Status s = Call(
          "", "",
          [&](const std::shared_ptr<grpc::Channel>& c, grpc::ClientContext* ctx) {
            return v1::Admin::NewStub(c)->CreateModel(ctx, request, &info);
          },
          /*retry=*/false);
      !s.ok()) {
    return s;
  }
  return info;
}

absl::StatusOr<v1::ModelInfo> Client::GetModel(std::string_view name) {
  v1::GetModelRequest request;
  request.set_name(std::string(name));
  v1::ModelInfo info;
  if (absl::Status s =
          Call("", "",
               [&](const std::shared_ptr<grpc::Channel>& c, grpc::ClientContext* ctx) {
                 return v1::Admin::NewStub(c)->GetModel(ctx, request, &info);
               });
      !s.ok()) {
    return s;
  }
  return info;
}

absl::StatusOr<v1::ShardMapResponse> Client::ShardMap(std::string_view model) {
  v1::ShardMapRequest request;
  request.set_model(std::string(model));
  v1::ShardMapResponse response;
  if (absl::Status s =
          Call("", "",
               [&](const std::shared_ptr<grpc::Channel>& c, grpc::ClientContext* ctx) {
                 return v1::Admin::NewStub(c)->ShardMap(ctx, request, &response);
               });
      !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<std::vector<v1::ModelInfo>> Client::ListModels() {
  v1::ListModelsResponse response;
  if (absl::Status s =
          Call("", "",
               [&](const std::shared_ptr<grpc::Channel>& c, grpc::ClientContext* ctx) {
                 return v1::Admin::NewStub(c)->ListModels(ctx, v1::ListModelsRequest(),
                                                          &response);
               });
      !s.ok()) {
    return s;
  }
  return std::vector<v1::ModelInfo>(response.models().begin(), response.models().end());
}

absl::StatusOr<v1::QueryResponse> Client::Query(std::string_view model,
                                                std::string_view routing_key,
                                                std::span<const double> q,
                                                v1::ReadoutPath path, bool low_rank,
                                                uint64_t min_version) {
  v1::QueryRequest request;
  request.set_model(std::string(model));
  request.set_routing_key(std::string(routing_key));
  request.mutable_q()->Add(q.begin(), q.end());
  request.set_path(path);
  request.set_low_rank(low_rank);
  request.set_min_version(min_version);
  v1::QueryResponse response;
  if (absl::Status s =
          Call(model, routing_key,
               [&](const std::shared_ptr<grpc::Channel>& c, grpc::ClientContext* ctx) {
                 return v1::SAU::NewStub(c)->Query(ctx, request, &response);
               });
      !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<uint32_t> Client::ShardCount(std::string_view model) {
  {
    MutexLock lock(&mu_);
    if (auto it = shard_counts_.find(model); it != shard_counts_.end()) return it->second;
  }
  absl::StatusOr<v1::ModelInfo> info = GetModel(model);
  if (!info.ok()) return info.status();
  // The effective spec has defaults filled in; guard anyway (0 means 1 in the proto).
  const uint32_t shards = info->spec().shards() == 0 ? 1 : info->spec().shards();
  MutexLock lock(&mu_);
  shard_counts_.emplace(std::string(model), shards);
  return shards;
}

absl::StatusOr<uint32_t> Client::ShardOf(std::string_view model, std::string_view routing_key) {
  absl::StatusOr<uint32_t> shards = ShardCount(model);
  if (!shards.ok()) return shards.status();
  return ShardFor(routing_key, *shards);
}

absl::StatusOr<v1::PredictResponse> Client::Predict(std::string_view model,
                                                    std::string_view routing_key,
                                                    std::span<const uint64_t> ids,
                                                    std::span<const double> vals) {
  return PredictMany(model, routing_key, ids, vals, {});  // no counts: one sample
}

absl::StatusOr<v1::PredictResponse> Client::PredictMany(std::string_view model,
                                                        std::string_view routing_key,
                                                        std::span<const uint64_t> ids,
                                                        std::span<const double> vals,
                                                        std::span<const uint32_t> counts) {
  v1::PredictRequest request;
  request.set_model(std::string(model));
  request.set_routing_key(std::string(routing_key));
  request.mutable_ids()->Add(ids.begin(), ids.end());
  request.mutable_vals()->Add(vals.begin(), vals.end());
  request.mutable_counts()->Add(counts.begin(), counts.end());
  v1::PredictResponse response;
  if (absl::Status s =
          Call(model, routing_key,
               [&](const std::shared_ptr<grpc::Channel>& c, grpc::ClientContext* ctx) {
                 return v1::LMU::NewStub(c)->Predict(ctx, request, &response);
               });
      !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<v1::FusePredictResponse> Client::FusePredict(std::string_view model,
                                                            std::string_view routing_key,
                                                            std::span<const uint64_t> ids,
                                                            std::span<const double> vals,
                                                            std::span<const double> q) {
  v1::FusePredictRequest request;
  request.set_model(std::string(model));
  request.set_routing_key(std::string(routing_key));
  request.mutable_ids()->Add(ids.begin(), ids.end());
  request.mutable_vals()->Add(vals.begin(), vals.end());
  request.mutable_q()->Add(q.begin(), q.end());
  v1::FusePredictResponse response;
  if (absl::Status s =
          Call(model, routing_key,
               [&](const std::shared_ptr<grpc::Channel>& c, grpc::ClientContext* ctx) {
                 return v1::Fuse::NewStub(c)->Predict(ctx, request, &response);
               });
      !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<v1::FusePredictResponse> Client::FusePredict(std::string_view model,
                                                            std::string_view routing_key,
                                                            std::span<const lmu::Feature> x,
                                                            std::span<const double> q) {
  std::vector<uint64_t> ids;
  std::vector<double> vals;
  ids.reserve(x.size());
  vals.reserve(x.size());
  for (const lmu::Feature& f : x) {
    ids.push_back(f.id);
    vals.push_back(f.val);
  }
  return FusePredict(model, routing_key, ids, vals, q);
}

absl::StatusOr<std::unique_ptr<FuseLearnSession>> Client::OpenFuseLearn(
    std::string_view model, std::string_view routing_key, size_t window) {
  if (window == 0) return absl::InvalidArgumentError("session window must be >= 1");
  absl::StatusOr<uint32_t> shards = ShardCount(model);
  if (!shards.ok()) return shards.status();
  std::unique_ptr<FuseLearnSession> s(new FuseLearnSession(std::string(routing_key)));
  FuseLearnSession* raw = s.get();
  BatchSession<FuseLearnTraits>::Options options{
      .window = window,
      .on_ack = [raw](const FuseLearnResult& r) { raw->OnAck(r); },
      .on_close = [raw] { raw->OnClose(); }};
  s->session_.reset(new BatchSession<FuseLearnTraits>(router_, std::string(model), *shards,
                                                      std::move(options)));
  return s;
}

template <typename Session>
absl::StatusOr<std::unique_ptr<Session>> Client::OpenSession(std::string_view model,
                                                             typename Session::Options options) {
  if (options.window == 0) return absl::InvalidArgumentError("session window must be >= 1");
  absl::StatusOr<uint32_t> shards = ShardCount(model);
  if (!shards.ok()) return shards.status();
  return std::unique_ptr<Session>(
      new Session(router_, std::string(model), *shards, std::move(options)));
}

absl::StatusOr<std::unique_ptr<IngestSession>> Client::OpenIngest(
    std::string_view model, IngestSession::Options options) {
  return OpenSession<IngestSession>(model, std::move(options));
}

absl::StatusOr<std::unique_ptr<LmuUpdateSession>> Client::OpenLmuUpdate(
    std::string_view model, LmuUpdateSession::Options options) {
  return OpenSession<LmuUpdateSession>(model, std::move(options));
}

}  // namespace streamlearn
