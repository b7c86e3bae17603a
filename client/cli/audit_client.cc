#include "client/cli/audit_client.h"

#include <utility>

#include "client/lib/grpc_status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace streamlearn::cli {
namespace {

constexpr auto kRpcTimeout = std::chrono::seconds(30);
constexpr auto kLongRpcTimeout = std::chrono::minutes(30);  // snapshot, backup

std::unique_ptr<grpc::ClientContext> NewContext(std::chrono::seconds timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

// Auditor.Read, one chunk at a time.
class ServerAuditLines final : public AuditLineSource {
 public:
  ServerAuditLines(v1::Auditor::Stub* stub, const v1::ReadRequest& request) {
    reader_ = stub->Read(&ctx_, request);
  }
  ~ServerAuditLines() override {
    if (!finished_) Cancel();
  }

  bool Next(std::string_view* line) override {
    while (pos_ >= chunk_.records_size()) {
      if (finished_ || !reader_->Read(&chunk_)) {
        FinishStream();
        return false;
      }
      pos_ = 0;
    }
    *line = chunk_.records(pos_++).line();
    return true;
  }
  absl::Status status() override { return status_; }
  void Cancel() override {
    if (finished_) return;
    ctx_.TryCancel();
    FinishStream();
    status_ = absl::OkStatus();
  }

 private:
  void FinishStream() {
    if (finished_) return;
    finished_ = true;
    chunk_.Clear();
    pos_ = 0;
    status_ = FromGrpcStatus(reader_->Finish());
  }

  grpc::ClientContext ctx_;  // no deadline: a long chain takes as long as it takes
  std::unique_ptr<grpc::ClientReader<v1::ReadResponse>> reader_;
  v1::ReadResponse chunk_;
  int pos_ = 0;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<AuditClient>> AuditClient::Connect(
    const std::string& address, const ClientCredentials& credentials,
    std::chrono::milliseconds connect_timeout) {
  if (address.empty()) return absl::InvalidArgumentError("server address is empty");
  if (absl::Status s = CheckTokenTransport(credentials, address); !s.ok()) return s;
  absl::StatusOr<ChannelFactory> make_channel = MakeChannelFactory(credentials);
  if (!make_channel.ok()) return make_channel.status();
  std::shared_ptr<grpc::Channel> channel = (*make_channel)(address);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + connect_timeout)) {
    return absl::UnavailableError("cannot connect to streamlearn server at " + address +
                                  " within " + std::to_string(connect_timeout.count()) + " ms");
  }
  return std::unique_ptr<AuditClient>(new AuditClient(std::move(channel)));
}

AuditClient::AuditClient(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)),
      auditor_(v1::Auditor::NewStub(channel_)),
      admin_(v1::Admin::NewStub(channel_)) {}

absl::StatusOr<v1::HeadResponse> AuditClient::Head(const std::string& model, uint32_t shard) {
  v1::HeadRequest request;
  request.set_model(model);
  request.set_shard(shard);
  v1::HeadResponse response;
  auto ctx = NewContext(kRpcTimeout);
  if (absl::Status s = FromGrpcStatus(auditor_->Head(ctx.get(), request, &response)); !s.ok()) {
    return s;
  }
  return response;
}

namespace {

// One unary Auditor call with the usual deadline.
template <typename Request, typename Response>
absl::StatusOr<Response> CallAuditor(
    v1::Auditor::Stub* stub,
    grpc::Status (v1::Auditor::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    const Request& request) {
  Response response;
  auto ctx = NewContext(kRpcTimeout);
  if (absl::Status s = FromGrpcStatus((stub->*method)(ctx.get(), request, &response)); !s.ok()) {
    return s;
  }
  return response;
}

}  // namespace

absl::StatusOr<v1::TreeHeadResponse> AuditClient::TreeHead(const v1::TreeHeadRequest& request) {
  return CallAuditor(auditor_.get(), &v1::Auditor::Stub::TreeHead, request);
}

absl::StatusOr<v1::InclusionProofResponse> AuditClient::InclusionProof(
    const v1::InclusionProofRequest& request) {
  return CallAuditor(auditor_.get(), &v1::Auditor::Stub::InclusionProof, request);
}

absl::StatusOr<v1::ConsistencyProofResponse> AuditClient::ConsistencyProof(
    const v1::ConsistencyProofRequest& request) {
  return CallAuditor(auditor_.get(), &v1::Auditor::Stub::ConsistencyProof, request);
}

absl::StatusOr<v1::AppendResponse> AuditClient::Append(const std::string& model, uint32_t shard,
                                                       const std::string& json) {
  v1::AppendRequest request;
  request.set_model(model);
  request.set_shard(shard);
  request.set_json(json);
  v1::AppendResponse response;
  auto ctx = NewContext(kRpcTimeout);
  if (absl::Status s = FromGrpcStatus(auditor_->Append(ctx.get(), request, &response));
      !s.ok()) {
    return s;
  }
  return response;
}

std::unique_ptr<AuditLineSource> AuditClient::Read(const std::string& model, uint32_t shard,
                                                   uint64_t from) {
  v1::ReadRequest request;
  request.set_model(model);
  request.set_shard(shard);
  request.set_from_index(from);
  return std::make_unique<ServerAuditLines>(auditor_.get(), request);
}

absl::StatusOr<v1::SnapshotResponse> AuditClient::Snapshot(const std::string& model) {
  v1::SnapshotRequest request;
  request.set_name(model);
  v1::SnapshotResponse response;
  auto ctx = NewContext(kLongRpcTimeout);
  if (absl::Status s = FromGrpcStatus(admin_->Snapshot(ctx.get(), request, &response));
      !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<v1::BackupResponse> AuditClient::Backup(const std::string& name) {
  v1::BackupRequest request;
  request.set_name(name);
  v1::BackupResponse response;
  auto ctx = NewContext(kLongRpcTimeout);
  if (absl::Status s = FromGrpcStatus(admin_->Backup(ctx.get(), request, &response)); !s.ok()) {
    return s;
  }
  return response;
}

}  // namespace streamlearn::cli
