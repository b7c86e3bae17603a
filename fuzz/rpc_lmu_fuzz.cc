// Fuzz target rpc_lmu: request validation of LMU.Update and LMU.Predict. Each frame
// (fuzz/rpc_frames.h) is an UpdateRequest (even op) or a PredictRequest (odd op) parsed from
// its bytes, scoped to its caller as the service does, then handed to LmuRequestHandler
// (server/lmu_request_handler.h) over the fixture's fresh models (fuzz/rpc_fixture.h: "m",
// 2 LMU shards, and "acme/f", fused); the frames of one input go to one stream.
//
// Invariants: a name the caller may not use is INVALID_ARGUMENT or PERMISSION_DENIED; the
// ack carries the handler's status; a refused batch (INVALID_ARGUMENT, NOT_FOUND,
// FAILED_PRECONDITION) applies nothing and leaves every shard's state as it was; an accepted
// one accounts for every sample and, when it applied one, reports its m predictions; an
// accepted Predict reads m values per sample (one sample, or one per count).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/rpc_fixture.h"
#include "fuzz/rpc_frames.h"
#include "lmu.pb.h"
#include "server/auth/gatekeeper.h"
#include "server/lmu_request_handler.h"

namespace streamlearn::fuzz {
namespace {

void CheckScopeRefusal(const absl::Status& s) {
  FUZZ_CHECK(absl::IsInvalidArgument(s) || absl::IsPermissionDenied(s), s.ToString());
}

void Update(RpcFixture& fx, server::LmuRequestHandler& handler,
            server::LmuRequestHandler::UpdateSession& session, const server::Caller& caller,
            const v1::UpdateRequest& in) {
  v1::UpdateRequest copy;
  absl::StatusOr<const v1::UpdateRequest*> req = server::ScopedRequest(caller, in, &copy);
  if (!req.ok()) return CheckScopeRefusal(req.status());
  fx.Prepare((*req)->model());
  const std::vector<Digest> before = fx.Digests((*req)->model(), PartKind::kLmu);
  v1::UpdateAck ack;
  const absl::Status s = handler.Update(**req, &session, &ack);
  CheckAckStatus(s, ack.status());
  if (!s.ok()) {
    FUZZ_CHECK(ack.applied() == 0 && ack.duplicate_t_size() == 0, s.ToString());
    if (absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsFailedPrecondition(s)) {
      FUZZ_CHECK(fx.Digests((*req)->model(), PartKind::kLmu) == before,
                 absl::StrCat("a refused batch changed the state: ", s.ToString()));
    }
    return;
  }
  FUZZ_CHECK(ack.applied() + static_cast<uint64_t>(ack.duplicate_t_size()) ==
                 static_cast<uint64_t>(server::LmuRequestHandler::Items(**req)),
             "samples lost");
  FUZZ_CHECK(ack.shard() < before.size(), "a shard out of range");
  absl::StatusOr<std::shared_ptr<Model>> m = fx.registry.Find((*req)->model());
  FUZZ_CHECK(m.ok(), "updated an unknown model");
  if (ack.applied() > 0) {
    FUZZ_CHECK(ack.last_prediction_size() == (*m)->spec().lmu.m, "a prediction of another size");
  }
}

void Predict(RpcFixture& fx, const server::LmuRequestHandler& handler,
             const server::Caller& caller, const v1::PredictRequest& in) {
  v1::PredictRequest copy;
  absl::StatusOr<const v1::PredictRequest*> req = server::ScopedRequest(caller, in, &copy);
  if (!req.ok()) return CheckScopeRefusal(req.status());
  fx.Prepare((*req)->model());
  v1::PredictResponse response;
  const absl::Status s = handler.Predict(**req, &response);
  if (!s.ok()) return;
  absl::StatusOr<std::shared_ptr<Model>> m = fx.registry.Find((*req)->model());
  FUZZ_CHECK(m.ok(), "answered for an unknown model");
  // m values per sample: one sample without counts, counts_size() with them.
  const int samples = std::max(1, (*req)->counts_size());
  FUZZ_CHECK(response.y_hat_size() == samples * static_cast<int>((*m)->spec().lmu.m),
             "y_hat of another size");
  FUZZ_CHECK(response.shard() < (*m)->num_shards(), "a shard out of range");
}

void Run(std::string_view input) {
  RpcFixture fx({TwoShardModel(PartKind::kLmu), FuseModel()});
  server::LmuRequestHandler handler(&fx.registry, &RpcFixture::metrics(), kMaxBatch);
  server::LmuRequestHandler::UpdateSession session;
  for (const RpcFrame& f : SplitFrames(input)) {
    const server::Caller caller = CallerOf(f.caller);
    if (f.op % 2 == 0) {
      v1::UpdateRequest req;
      if (req.ParseFromArray(f.message.data(), static_cast<int>(f.message.size()))) {
        Update(fx, handler, session, caller, req);
      }
    } else {
      v1::PredictRequest req;
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
