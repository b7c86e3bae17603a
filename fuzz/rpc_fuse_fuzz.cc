// Fuzz target rpc_fuse: request validation of Fuse.Learn and Fuse.Predict. Each frame
// (fuzz/rpc_frames.h) is a LearnRequest (even op) or a FusePredictRequest (odd op) parsed
// from its bytes, scoped to its caller as the service does, then handed to
// FuseRequestHandler (server/fuse_request_handler.h) over the fixture's fresh models
// (fuzz/rpc_fixture.h: "acme/f", fused, and "m", 2 SAU shards); the frames of one input go
// to one stream.
//
// Invariants: a name the caller may not use is INVALID_ARGUMENT or PERMISSION_DENIED; the
// ack carries the handler's status; a refused batch (INVALID_ARGUMENT, NOT_FOUND,
// FAILED_PRECONDITION) applies nothing and leaves the state as it was; an accepted one
// accounts for every sample and carries one prediction per applied sample, each of m values;
// an accepted Predict reads m values.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fuse.pb.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/rpc_fixture.h"
#include "fuzz/rpc_frames.h"
#include "server/auth/gatekeeper.h"
#include "server/fuse_request_handler.h"

namespace streamlearn::fuzz {
namespace {

void CheckScopeRefusal(const absl::Status& s) {
  FUZZ_CHECK(absl::IsInvalidArgument(s) || absl::IsPermissionDenied(s), s.ToString());
}

void Learn(RpcFixture& fx, server::FuseRequestHandler& handler,
           server::FuseRequestHandler::LearnSession& session, const server::Caller& caller,
           const v1::LearnRequest& in) {
  v1::LearnRequest copy;
  absl::StatusOr<const v1::LearnRequest*> req = server::ScopedRequest(caller, in, &copy);
  if (!req.ok()) return CheckScopeRefusal(req.status());
  fx.Prepare((*req)->model());
  const std::vector<Digest> before = fx.Digests((*req)->model(), PartKind::kFuse);
  v1::LearnAck ack;
  const absl::Status s = handler.Learn(**req, &session, &ack);
  CheckAckStatus(s, ack.status());
  if (!s.ok()) {
    FUZZ_CHECK(ack.applied() == 0 && ack.predictions_size() == 0, s.ToString());
    if (absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsFailedPrecondition(s)) {
      FUZZ_CHECK(fx.Digests((*req)->model(), PartKind::kFuse) == before,
                 absl::StrCat("a refused batch changed the state: ", s.ToString()));
    }
    return;
  }
  FUZZ_CHECK(ack.applied() + static_cast<uint64_t>(ack.duplicate_t_size()) ==
                 static_cast<uint64_t>((*req)->samples_size()),
             "samples lost");
  FUZZ_CHECK(ack.predictions_size() == static_cast<int>(ack.applied()),
             "predictions and applied samples differ");
  FUZZ_CHECK(ack.shard() < before.size(), "a shard out of range");
  absl::StatusOr<std::shared_ptr<Model>> m = fx.registry.Find((*req)->model());
  FUZZ_CHECK(m.ok(), "learned on an unknown model");
  for (const v1::FusePrediction& p : ack.predictions()) {
    FUZZ_CHECK(p.y_hat_size() == (*m)->spec().fuse.lmu.m, "a prediction of another size");
  }
}

void Predict(RpcFixture& fx, const server::FuseRequestHandler& handler,
             const server::Caller& caller, const v1::FusePredictRequest& in) {
  v1::FusePredictRequest copy;
  absl::StatusOr<const v1::FusePredictRequest*> req = server::ScopedRequest(caller, in, &copy);
  if (!req.ok()) return CheckScopeRefusal(req.status());
  fx.Prepare((*req)->model());
  v1::FusePredictResponse response;
  const absl::Status s = handler.Predict(**req, &response);
  if (!s.ok()) return;
  absl::StatusOr<std::shared_ptr<Model>> m = fx.registry.Find((*req)->model());
  FUZZ_CHECK(m.ok(), "answered for an unknown model");
  FUZZ_CHECK(response.y_hat_size() == (*m)->spec().fuse.lmu.m, "y_hat of another size");
  FUZZ_CHECK(response.shard() < (*m)->num_shards(), "a shard out of range");
}

void Run(std::string_view input) {
  RpcFixture fx({FuseModel(), TwoShardModel(PartKind::kSau)});
  server::FuseRequestHandler handler(&fx.registry, &RpcFixture::metrics(), kMaxBatch);
  server::FuseRequestHandler::LearnSession session;
  for (const RpcFrame& f : SplitFrames(input)) {
    const server::Caller caller = CallerOf(f.caller);
    if (f.op % 2 == 0) {
      v1::LearnRequest req;
      if (req.ParseFromArray(f.message.data(), static_cast<int>(f.message.size()))) {
        Learn(fx, handler, session, caller, req);
      }
    } else {
      v1::FusePredictRequest req;
      if (req.ParseFromArray(f.message.data(), static_cast<int>(f.message.size()))) {
        Predict(fx, handler, caller, req);
      }
    }
  }
}

}  // namespace
}  // namespace streamlearn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  streamlearn::fuzz::Run(streamlearn::fuzz::AsText(data, size));
  return 0;
}
