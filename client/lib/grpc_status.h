// Status conversion between gRPC and abseil: the one place the client translates codes.
//
// gRPC and abseil share the canonical status codes, so a conversion keeps the code and the
// message. An ingest acknowledgement carries a per-batch status in-band (BatchStatus, common
// .proto); it converts the same way.
//
//   grpc::Status s = stub->GetModel(&ctx, req, &info);
//   if (absl::Status st = FromGrpcStatus(s); !st.ok()) return st;
//
// Thread safety: plain functions, no state.
#ifndef STREAMLEARN_CLIENT_LIB_GRPC_STATUS_H_
#define STREAMLEARN_CLIENT_LIB_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "common.pb.h"
#include "grpcpp/support/status.h"

namespace streamlearn {

// Keeps code and message; an unknown numeric code becomes UNKNOWN.
absl::Status FromGrpcStatus(const grpc::Status& status);

// The in-band status of one ingested batch. code 0 is OK.
absl::Status FromBatchStatus(const v1::BatchStatus& status);

// "NOT_FOUND" for absl::StatusCode::kNotFound: the gRPC code name, as users see it in docs.
std::string StatusCodeName(absl::StatusCode code);

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_GRPC_STATUS_H_
