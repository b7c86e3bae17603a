#include "client/lib/client.h"

#include <utility>

#include "client/lib/grpc_status.h"
#include "core/common/routing.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace streamlearn {

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const Options& options) {
  if (address.empty()) return absl::InvalidArgumentError("server address is empty");
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  const auto deadline = std::chrono::system_clock::now() + options.connect_timeout;
  if (!channel->WaitForConnected(deadline)) {
    return absl::UnavailableError(
        "cannot connect to streamlearn server at " + address + " within " +
        std::to_string(options.connect_timeout.count()) + " ms");
  }
  return std::unique_ptr<Client>(new Client(address, options, std::move(channel)));
}

Client::Client(std::string address, Options options, std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      options_(options),
      channel_(std::move(channel)),
      admin_(v1::Admin::NewStub(channel_)),
      sau_(v1::SAU::NewStub(channel_)),
      lmu_(v1::LMU::NewStub(channel_)),
      fuse_(v1::Fuse::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> Client::NewContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + options_.rpc_timeout);
  return ctx;
}

absl::StatusOr<v1::ModelInfo> Client::CreateModel(const v1::ModelSpec& spec) {
  v1::CreateModelRequest request;
  *request.mutable_spec() = spec;
  v1::ModelInfo info;
  auto ctx = NewContext();
  if (absl::Status s = FromGrpcStatus(admin_->CreateModel(ctx.get(), request, &info)); !s.ok()) {
    return s;
  }
  return info;
}

absl::StatusOr<v1::ModelInfo> Client::GetModel(std::string_view name) {
  v1::GetModelRequest request;
  request.set_name(std::string(name));
  v1::ModelInfo info;
  auto ctx = NewContext();
  if (absl::Status s = FromGrpcStatus(admin_->GetModel(ctx.get(), request, &info)); !s.ok()) {
    return s;
  }
  return info;
}

absl::StatusOr<v1::ShardMapResponse> Client::ShardMap(std::string_view model) {
  v1::ShardMapRequest request;
  request.set_model(std::string(model));
  v1::ShardMapResponse response;
  auto ctx = NewContext();
  if (absl::Status s = FromGrpcStatus(admin_->ShardMap(ctx.get(), request, &response));
      !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<std::vector<v1::ModelInfo>> Client::ListModels() {
  v1::ListModelsResponse response;
  auto ctx = NewContext();
  if (absl::Status s = FromGrpcStatus(
          admin_->ListModels(ctx.get(), v1::ListModelsRequest(), &response));
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
  auto ctx = NewContext();
  if (absl::Status s = FromGrpcStatus(sau_->Query(ctx.get(), request, &response)); !s.ok()) {
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
  v1::PredictRequest request;
  request.set_model(std::string(model));
  request.set_routing_key(std::string(routing_key));
  request.mutable_ids()->Add(ids.begin(), ids.end());
  request.mutable_vals()->Add(vals.begin(), vals.end());
  v1::PredictResponse response;
  auto ctx = NewContext();
  if (absl::Status s = FromGrpcStatus(lmu_->Predict(ctx.get(), request, &response)); !s.ok()) {
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
  auto ctx = NewContext();
  if (absl::Status s = FromGrpcStatus(fuse_->Predict(ctx.get(), request, &response)); !s.ok()) {
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
  s->session_.reset(new BatchSession<FuseLearnTraits>(channel_, std::string(model), *shards,
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
      new Session(channel_, std::string(model), *shards, std::move(options)));
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
