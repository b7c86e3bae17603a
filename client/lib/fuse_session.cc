#include "client/lib/fuse_session.h"

#include <optional>
#include <utility>

#include "client/lib/batch_session_impl.h"

namespace streamlearn {

template class BatchSession<FuseLearnTraits>;

FuseLearnSession::~FuseLearnSession() {
  session_.reset();  // cancels the stream if unfinished; the reader thread ends first
}

void FuseLearnSession::OnAck(const FuseLearnResult& r) {
  {
    MutexLock lock(&mu_);
    acks_.push_back(r);
  }
  cv_.SignalAll();
}

void FuseLearnSession::OnClose() {
  {
    MutexLock lock(&mu_);
    closed_ = true;
  }
  cv_.SignalAll();
}

absl::Status FuseLearnSession::Send(std::span<const FuseSample> samples) {
  v1::LearnRequest request;
  for (const FuseSample& s : samples) {
    v1::FuseSample* out = request.add_samples();
    out->set_t(s.t);
    for (const lmu::Feature& f : s.x) {
      out->add_ids(f.id);
      out->add_vals(f.val);
    }
    out->mutable_q()->Add(s.q.begin(), s.q.end());
    out->mutable_y()->Add(s.y.begin(), s.y.end());
  }
  return Send(std::move(request));
}

absl::Status FuseLearnSession::Send(v1::LearnRequest request) {
  if (request.routing_key().empty()) request.set_routing_key(routing_key_);
  absl::Status s = session_->Send(std::move(request));
  if (s.ok()) ++sent_;
  return s;
}

absl::StatusOr<FuseLearnResult> FuseLearnSession::Next() {
  if (returned_ == sent_) {
    return absl::FailedPreconditionError("learn session: every batch sent has been returned");
  }
  std::optional<FuseLearnResult> r;
  {
    MutexLock lock(&mu_);
    while (acks_.empty() && !closed_) cv_.Wait(&mu_);
    if (!acks_.empty()) {
      r = std::move(acks_.front());
      acks_.pop_front();
    }
  }
  if (!r.has_value()) {
    absl::Status s = session_->Finish();
    return s.ok() ? absl::InternalError("learn stream ended with batches unacknowledged") : s;
  }
  ++returned_;
  return *std::move(r);
}

absl::Status FuseLearnSession::Finish() { return session_->Finish(); }

}  // namespace streamlearn
