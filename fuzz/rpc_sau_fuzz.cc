// Fuzz target rpc_sau: request validation of SAU.Ingest and SAU.Query. Each frame
// (fuzz/rpc_frames.h) is an IngestRequest (even op) or a QueryRequest (odd op) parsed from
// its bytes, scoped to its caller as the service does (server/auth/gatekeeper.h,
// ScopedRequest), then handed to SauRequestHandler (server/sau_request_handler.h) over the
// fixture's fresh models (fuzz/rpc_fixture.h: "m", 2 SAU shards, and "acme/f", fused); the
// frames of one input go to one stream.
//
// Invariants: a name the caller may not use is INVALID_ARGUMENT or PERMISSION_DENIED; the
// ack carries the handler's status; a refused batch applies nothing and leaves every shard's
// state as it was; an accepted one accounts for every event (applied or duplicate) on a shard
// of the model; an accepted query reads d_v finite values (docs/SAU.md, "Input bounds": the
// state and every readout stay finite).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/rpc_fixture.h"
#include "fuzz/rpc_frames.h"
#include "sau.pb.h"
#include "server/auth/gatekeeper.h"
#include "server/sau_request_handler.h"

namespace streamlearn::fuzz {
namespace {

void CheckScopeRefusal(const absl::Status& s) {
  FUZZ_CHECK(absl::IsInvalidArgument(s) || absl::IsPermissionDenied(s), s.ToString());
}

void Ingest(RpcFixture& fx, server::SauRequestHandler& handler,
            server::SauRequestHandler::IngestSession& session, const server::Caller& caller,
            const v1::IngestRequest& in) {
  v1::IngestRequest copy;
  absl::StatusOr<const v1::IngestRequest*> req = server::ScopedRequest(caller, in, &copy);
  if (!req.ok()) return CheckScopeRefusal(req.status());
  fx.Prepare((*req)->model());
  const std::vector<Digest> before = fx.Digests((*req)->model(), PartKind::kSau);
  v1::IngestAck ack;
  const absl::Status s = handler.Ingest(**req, &session, &ack);
  CheckAckStatus(s, ack.status());
  if (!s.ok()) {
    FUZZ_CHECK(ack.applied() == 0 && ack.duplicate_t_size() == 0, s.ToString());
    FUZZ_CHECK(fx.Digests((*req)->model(), PartKind::kSau) == before,
               absl::StrCat("a refused batch changed the state: ", s.ToString()));
    return;
  }
  FUZZ_CHECK(ack.applied() + static_cast<uint64_t>(ack.duplicate_t_size()) ==
                 static_cast<uint64_t>((*req)->events_size()),
             "events lost");
  FUZZ_CHECK(ack.shard() < before.size(), "a shard out of range");
}

void Query(RpcFixture& fx, const server::SauRequestHandler& handler,
           const server::Caller& caller, const v1::QueryRequest& in) {
  v1::QueryRequest copy;
  absl::StatusOr<const v1::QueryRequest*> req = server::ScopedRequest(caller, in, &copy);
  if (!req.ok()) return CheckScopeRefusal(req.status());
  fx.Prepare((*req)->model());
  v1::QueryResponse response;
  const absl::Status s = handler.Query(**req, &response);
  if (!s.ok()) return;
  absl::StatusOr<std::shared_ptr<Model>> m = fx.registry.Find((*req)->model());
  FUZZ_CHECK(m.ok(), "answered for an unknown model");
  FUZZ_CHECK(response.y_hat_size() == (*m)->spec().sau.d_v, "y_hat of another size");
  for (double y : response.y_hat()) {
    FUZZ_CHECK(std::isfinite(y), absl::StrCat("a readout is not finite: ", y));
  }
  FUZZ_CHECK(response.shard() < (*m)->num_shards(), "a shard out of range");
}

void Run(std::string_view input) {
  RpcFixture fx({TwoShardModel(PartKind::kSau), FuseModel()});
  server::SauRequestHandler handler(&fx.registry, &RpcFixture::metrics(), kMaxBatch);
  server::SauRequestHandler::IngestSession session;
  for (const RpcFrame& f : SplitFrames(input)) {
    const server::Caller caller = CallerOf(f.caller);
    if (f.op % 2 == 0) {
      v1::IngestRequest req;
      if (req.ParseFromArray(f.message.data(), static_cast<int>(f.message.size()))) {
        Ingest(fx, handler, session, caller, req);
      }
    } else {
      v1::QueryRequest req;
      if (req.ParseFromArray(f.message.data(), static_cast<int>(f.message.size()))) {
        Query(fx, handler, caller, req);
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
