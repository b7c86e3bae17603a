#include "client/lib/grpc_status.h"

namespace streamlearn {
namespace {

absl::Status FromCode(int code, const std::string& message) {
  // Codes 0..16 are the canonical set shared by gRPC and abseil.
  if (code < 0 || code > 16) {
    return absl::UnknownError("status code " + std::to_string(code) + ": " + message);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return FromCode(static_cast<int>(status.error_code()), status.error_message());
}

absl::Status FromBatchStatus(const v1::BatchStatus& status) {
  return FromCode(status.code(), status.message());
}

std::string StatusCodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

}  // namespace streamlearn
