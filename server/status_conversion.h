// Status conversion: the one place where absl::Status becomes a gRPC status.
//
// core/ reports errors as absl::Status with the standard codes, which are numerically the
// gRPC codes, so the conversion keeps the code and the message unchanged. Errors leave the
// server either as the status of an RPC (ToGrpcStatus) or in-band, inside an Ingest
// acknowledgement (ToBatchStatus); both go through this file.
//
//   absl::StatusOr<...> r = registry.Create(spec);
//   if (!r.ok()) return ToGrpcStatus(r.status());
//
// Thread safety: plain functions without shared state.
#ifndef STREAMLEARN_SERVER_STATUS_CONVERSION_H_
#define STREAMLEARN_SERVER_STATUS_CONVERSION_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "common.pb.h"

namespace streamlearn::server {

// Same code, same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Fills a BatchStatus with the same code (0 = OK) and message.
void ToBatchStatus(const absl::Status& status, v1::BatchStatus* out);

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_STATUS_CONVERSION_H_
