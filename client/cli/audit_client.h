// AuditClient: the Auditor service (audit.proto) and Admin.Snapshot / Admin.Backup for the
// `streamlearn audit`, `snapshot` and `backup` commands.
//
// Like streamlearn::Client (client/lib/client.h), every call returns the server's gRPC code
// and message unchanged as an absl::Status. Read streams the records of one chain in the
// server's chunks (at most 512 records or 1 MiB each), so a chain of any length is read in
// constant memory.
//
//   absl::StatusOr<std::unique_ptr<AuditClient>> c = AuditClient::Connect("localhost:50051");
//   absl::StatusOr<v1::HeadResponse> head = (*c)->Head("clicks", 0);
//   std::unique_ptr<AuditLineSource> lines = (*c)->Read("clicks", 0, /*from=*/0);
//   for (std::string_view line; lines->Next(&line);) ...
//   if (absl::Status s = lines->status(); !s.ok()) ...
//
// Thread safety: the client's methods are thread-safe; a line source belongs to one thread.
#ifndef STREAMLEARN_CLIENT_CLI_AUDIT_CLIENT_H_
#define STREAMLEARN_CLIENT_CLI_AUDIT_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "client/cli/audit_lines.h"
#include "client/lib/credentials.h"
#include "grpcpp/channel.h"

namespace streamlearn::cli {

class AuditClient {
 public:
  // UNAVAILABLE naming the address if the server cannot be reached within connect_timeout.
  static absl::StatusOr<std::unique_ptr<AuditClient>> Connect(
      const std::string& address, const ClientCredentials& credentials = {},
      std::chrono::milliseconds connect_timeout = std::chrono::milliseconds(5000));

  absl::StatusOr<v1::HeadResponse> Head(const std::string& model, uint32_t shard);
  absl::StatusOr<v1::AppendResponse> Append(const std::string& model, uint32_t shard,
                                            const std::string& json);
  // The records of (model, shard) from index `from` to the head as of the call.
  std::unique_ptr<AuditLineSource> Read(const std::string& model, uint32_t shard, uint64_t from);

  // The RFC 6962 tree over a chain (audit.proto): a signed tree head and proofs.
  absl::StatusOr<v1::TreeHeadResponse> TreeHead(const v1::TreeHeadRequest& request);
  absl::StatusOr<v1::InclusionProofResponse> InclusionProof(
      const v1::InclusionProofRequest& request);
  absl::StatusOr<v1::ConsistencyProofResponse> ConsistencyProof(
      const v1::ConsistencyProofRequest& request);

  // Snapshots and backups may take a while on a large model: a longer deadline.
  absl::StatusOr<v1::SnapshotResponse> Snapshot(const std::string& model);
  absl::StatusOr<v1::BackupResponse> Backup(const std::string& name);

 private:
  explicit AuditClient(std::shared_ptr<grpc::Channel> channel);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Auditor::Stub> auditor_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

}  // namespace streamlearn::cli

#endif  // STREAMLEARN_CLIENT_CLI_AUDIT_CLIENT_H_
