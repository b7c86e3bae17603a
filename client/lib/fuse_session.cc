#include "client/lib/fuse_session.h"

#include <utility>

#include "client/lib/batch_session_impl.h"

namespace streamlearn {

template class BatchSession<FuseLearnTraits>;

FuseLearnSession::~FuseLearnSession() {
  session_.reset();  // cancels the stream if unfinished; the reader thread ends first
}

void FuseLearnSession::OnAck(const FuseLearnResult& r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    acks_.push_back(r);
  }
  cv_.notify_all();
}

void FuseLearnSession::OnClose() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
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
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !acks_.empty() || closed_; });
  if (acks_.empty()) {
    lock.unlock();
    absl::Status s = session_->Finish();
    return s.ok() ? absl::InternalError("learn stream ended with batches unacknowledged") : s;
  }
  FuseLearnResult r = std::move(acks_.front());
  acks_.pop_front();
  ++returned_;
  return r;
}

absl::Status FuseLearnSession::Finish() { return session_->Finish(); }

}  // namespace streamlearn
