// The definitions of BatchSession's members (batch_session.h). Included only by the .cc file
// of each instance, which instantiates it explicitly (ingest_session.cc,
// lmu_update_session.cc, fuse_session.cc); users include batch_session.h through the
// instance's header.
#ifndef STREAMLEARN_CLIENT_LIB_BATCH_SESSION_IMPL_H_
#define STREAMLEARN_CLIENT_LIB_BATCH_SESSION_IMPL_H_

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>
#include <vector>

#include "client/lib/batch_session.h"
#include "client/lib/grpc_status.h"
#include "core/common/routing.h"

namespace streamlearn {

namespace batch_session_internal {

// Whether a stream that ended with `status` (not cancelled by the session) may be resent
// elsewhere: everything but the statuses that say the request itself is wrong or not allowed.
inline bool StreamEndRetryable(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kAlreadyExists:
      return false;
    default:
      return true;
  }
}

inline std::string Millis(std::chrono::milliseconds ms) {
  return std::to_string(ms.count()) + " ms";
}

}  // namespace batch_session_internal

template <typename Traits>
BatchSession<Traits>::BatchSession(std::shared_ptr<Router> router, std::string model,
                                   uint32_t shards, Options options)
    : model_(std::move(model)),
      shards_(shards),
      options_(std::move(options)),
      router_(std::move(router)) {
  assert(shards_ > 0);
  assert(options_.window >= 1);
  {
    MutexLock lock(&mu_);
    last_progress_ = Clock::now();
  }
  supervisor_ = std::thread([this] { SupervisorLoop(); });
}

template <typename Traits>
BatchSession<Traits>::~BatchSession() {
  EndAll(/*graceful=*/false);
}

template <typename Traits>
uint32_t BatchSession<Traits>::ShardOf(std::string_view routing_key) const {
  return ShardFor(routing_key, shards_);
}

template <typename Traits>
BatchStats BatchSession<Traits>::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

template <typename Traits>
absl::Status BatchSession<Traits>::Send(Request request) {
  const std::string stream = Traits::kStream;
  if (finished_) return absl::FailedPreconditionError(stream + " session is finished");
  const int items = Traits::Items(request);
  if (items == 0) {
    return absl::InvalidArgumentError(stream + " batch has no " + Traits::kItems);
  }
  if (request.model().empty()) {
    request.set_model(model_);
  } else if (request.model() != model_) {
    return absl::InvalidArgumentError("batch for model '" + request.model() + "' sent on the " +
                                      stream + " session of model '" + model_ + "'");
  }
  const uint32_t shard = ShardOf(request.routing_key());
  uint64_t id = 0;
  absl::Status error;
  {
    MutexLock lock(&mu_);
    while (outstanding_.size() >= options_.window && error_.ok()) cv_.Wait(&mu_);
    error = error_;
    if (error.ok()) {
      id = next_id_++;
      if (outstanding_.empty()) last_progress_ = Clock::now();  // the stall clock starts
      outstanding_.emplace(
          id, Outstanding{.request = std::make_shared<const Request>(std::move(request)),
                          .events = static_cast<uint32_t>(items),
                          .shard = shard});
      ++stats_.batches_sent;
      stats_.events_sent += static_cast<uint64_t>(items);
    }
  }
  if (!error.ok()) {
    Finish().IgnoreError();
    return final_status_;
  }
  MutexLock write(&write_mu_);
  Write(id);  // a failed write is resent by the supervisor
  return absl::OkStatus();
}

template <typename Traits>
bool BatchSession<Traits>::Write(uint64_t id) {
  std::string address;
  uint32_t shard = 0;
  {
    MutexLock lock(&mu_);
    auto it = outstanding_.find(id);
    if (it == outstanding_.end()) return true;
    shard = it->second.shard;
    // A shard's batches stay on the stream where some are still unacknowledged.
    if (auto sl = shard_lane_.find(shard); sl != shard_lane_.end() && sl->second.second > 0) {
      address = sl->second.first;
    }
  }
  // The map may be read here (an RPC): outside mu_.
  if (address.empty()) address = router_->AddressOf(model_, shard);

  std::shared_ptr<const Request> request;
  Lane* lane = nullptr;
  bool open = false;
  {
    MutexLock lock(&mu_);
    auto it = outstanding_.find(id);
    if (it == outstanding_.end()) return true;
    std::unique_ptr<Lane>& slot = lanes_[address];
    if (slot == nullptr) {
      slot = std::make_unique<Lane>();
      slot->stub = Traits::Service::NewStub(router_->Channel(address));
      slot->context = std::make_unique<grpc::ClientContext>();
      open = true;
      ++stats_.streams_opened;
    }
    lane = slot.get();
    Outstanding& b = it->second;
    lane->pending.push_back(id);
    b.lane = address;
    b.written = Clock::now();
    if (++b.sends > 1) ++stats_.resends;
    auto& [lane_address, count] = shard_lane_[shard];
    lane_address = address;
    ++count;
    // A failed lane takes no writes: the batch waits in its queue for Recover, behind the
    // shard's earlier ones.
    if (lane->failed) return false;
    request = b.request;
  }
  if (open) {
    // The lane is registered (the supervisor can cancel its context) before the call starts.
    lane->stream = Traits::Open(*lane->stub, lane->context.get());
    lane->reader = std::thread([this, address, lane] { ReaderLoop(address, lane); });
  }
  if (lane->stream->Write(*request)) return true;
  {
    MutexLock lock(&mu_);
    if (!lane->failed) {
      FailLane(lane, absl::UnavailableError("the " + std::string(Traits::kStream) +
                                            " stream to " + address + " broke while writing"),
               /*cancel=*/false);
    }
  }
  WakeAll();
  return false;
}

template <typename Traits>
void BatchSession<Traits>::WakeAll() {
  cv_.SignalAll();
  supervisor_cv_.Signal();
}

template <typename Traits>
void BatchSession<Traits>::FailLane(Lane* lane, absl::Status why, bool cancel) {
  lane->failed = true;
  lane->why = why;
  last_failure_ = std::move(why);
  if (cancel && !lane->cancelled) {
    lane->cancelled = true;
    lane->context->TryCancel();
  }
}

template <typename Traits>
typename BatchSession<Traits>::Result BatchSession<Traits>::MakeResult(uint64_t id,
                                                                       const Outstanding& b,
                                                                       Ack ack) const {
  Result r;
  r.batch = id;
  r.routing_key = b.request->routing_key();
  r.events = b.events;
  r.expected_shard = b.shard;
  r.sends = b.sends;
  r.status = FromBatchStatus(ack.status());
  if (r.status.ok() && ack.shard() != r.expected_shard) {
    r.status = absl::InternalError(
        "routing mismatch: the server applied routing key '" + r.routing_key + "' to shard " +
        std::to_string(ack.shard()) + ", the client computed shard " +
        std::to_string(r.expected_shard) + " of " + std::to_string(shards_));
  }
  r.ack = std::move(ack);
  return r;
}

template <typename Traits>
void BatchSession<Traits>::ReaderLoop(std::string address, Lane* lane) {
  Ack ack;
  absl::Status protocol;  // the server broke the one-ack-per-batch contract: not retried
  while (lane->stream->Read(&ack)) {
    uint64_t id = 0;
    Outstanding batch;
    {
      MutexLock lock(&mu_);
      // Given up (cancelled): what is left on it is resent. A lane that failed without a
      // cancel (a write failed: the stream is ending) still takes the acks the server sent.
      if (lane->failed && lane->cancelled) break;
      if (lane->pending.empty()) {
        protocol = absl::InternalError("server " + address + " sent an " +
                                       std::string(Traits::kStream) +
                                       " ack without an outstanding batch");
        FailLane(lane, protocol, /*cancel=*/true);
        break;
      }
      id = lane->pending.front();
      const absl::Status in_band = FromBatchStatus(ack.status());
      if (options_.resend && RetryableStatus(in_band)) {
        // Not applied (NOT-OWNER, a failed write or hop, fenced); the server holds back the
        // shard's later batches on this stream: resend from this one on a new stream.
        FailLane(lane, in_band, /*cancel=*/true);
        break;
      }
      lane->pending.pop_front();
      auto it = outstanding_.find(id);
      assert(it != outstanding_.end());
      batch = std::move(it->second);
      outstanding_.erase(it);
      if (auto sl = shard_lane_.find(batch.shard); sl != shard_lane_.end()) {
        if (--sl->second.second == 0) shard_lane_.erase(sl);
      }
      ++stats_.batches_acked;
      if (!in_band.ok()) ++stats_.batches_rejected;
      stats_.events_applied += ack.applied();
      stats_.duplicates += static_cast<uint64_t>(ack.duplicate_t_size());
      last_progress_ = Clock::now();
      backoff_ = std::chrono::milliseconds(50);
      ++in_callback_;
    }
    Result result = MakeResult(id, batch, std::move(ack));
    if (options_.on_ack) {
      MutexLock callback(&ack_mu_);
      options_.on_ack(result);
    }
    {
      MutexLock lock(&mu_);
      --in_callback_;
    }
    cv_.SignalAll();
    ack.Clear();
  }
  {
    MutexLock lock(&mu_);
    if (!lane->failed) {
      FailLane(lane,
               absl::UnavailableError("the " + std::string(Traits::kStream) + " stream to " +
                                      address + " ended"),
               /*cancel=*/false);
    }
    lane->done = true;
  }
  WakeAll();
  if (!protocol.ok()) Fail(protocol);
}

template <typename Traits>
void BatchSession<Traits>::SupervisorLoop() {
  constexpr auto kTick = std::chrono::milliseconds(100);
  while (true) {
    bool recover = false;
    absl::Status stalled;
    {
      MutexLock lock(&mu_);
      supervisor_cv_.WaitUntil(&mu_, Clock::now() + kTick);
      if (stopping_ || !error_.ok()) return;
      const Clock::time_point now = Clock::now();
      for (auto& [address, lane] : lanes_) {
        if (lane->failed || lane->pending.empty()) continue;
        auto it = outstanding_.find(lane->pending.front());
        if (it != outstanding_.end() && now - it->second.written > options_.ack_timeout) {
          FailLane(lane.get(),
                   absl::DeadlineExceededError(
                       "no " + std::string(Traits::kStream) + " ack from " + address + " in " +
                       batch_session_internal::Millis(options_.ack_timeout)),
                   /*cancel=*/true);
        }
      }
      for (auto& [address, lane] : lanes_) recover = recover || lane->failed;
      if (!outstanding_.empty() && now - last_progress_ > options_.retry_timeout) {
        stalled = absl::UnavailableError(
            "no " + std::string(Traits::kStream) + " batch acknowledged in " +
            batch_session_internal::Millis(options_.retry_timeout) + " (" +
            std::to_string(outstanding_.size()) + " outstanding); last failure: " +
            (last_failure_.ok() ? std::string("none") : last_failure_.ToString()));
      }
    }
    if (!stalled.ok()) {
      Fail(stalled);
      return;
    }
    // The writer may hold write_mu_ in a Write that only a cancel above unblocks: never wait
    // for it here.
    if (recover && write_mu_.try_lock()) {
      Recover();
      write_mu_.unlock();
    }
  }
}

template <typename Traits>
void BatchSession<Traits>::Recover() {
  write_mu_.AssertHeld();
  std::vector<std::pair<std::string, std::unique_ptr<Lane>>> failed;
  {
    MutexLock lock(&mu_);
    for (auto it = lanes_.begin(); it != lanes_.end();) {
      if (it->second->failed) {
        failed.emplace_back(it->first, std::move(it->second));
        it = lanes_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::vector<uint64_t> resend;
  absl::Status fatal;
  for (auto& [address, lane] : failed) {
    // A lane the session gave up (a retryable ack, ack_timeout) was cancelled already. One
    // that failed by itself (the server ended it, a write failed: the call is over) is not
    // cancelled here: a cancel, even after the server's status arrived, would turn that status
    // into CANCELLED, and a status no resend cures would be resent until retry_timeout. Its
    // reader reads to the end of the stream (keeping the acks sent before it) and returns.
    if (lane->reader.joinable()) lane->reader.join();
    const absl::Status ended =
        lane->stream != nullptr ? FromGrpcStatus(lane->stream->Finish()) : absl::OkStatus();
    MutexLock lock(&mu_);
    if (!lane->cancelled && !ended.ok() &&
        !batch_session_internal::StreamEndRetryable(ended) && fatal.ok()) {
      fatal = absl::Status(ended.code(), "the " + std::string(Traits::kStream) +
                                             " stream to " + address +
                                             " failed: " + std::string(ended.message()));
    }
    if (!ended.ok() && !lane->cancelled) last_failure_ = ended;
    for (uint64_t id : lane->pending) {
      auto it = outstanding_.find(id);
      if (it == outstanding_.end()) continue;
      resend.push_back(id);
      it->second.lane.clear();
      if (auto sl = shard_lane_.find(it->second.shard); sl != shard_lane_.end()) {
        if (--sl->second.second == 0) shard_lane_.erase(sl);
      }
    }
  }
  if (!fatal.ok()) {
    Fail(fatal);
    return;
  }
  if (!options_.resend && !resend.empty()) {
    // No resending: the first stream that failed with batches on it ends the session.
    absl::Status why;
    {
      MutexLock lock(&mu_);
      why = last_failure_;
    }
    Fail(why.ok() ? absl::UnavailableError("the " + std::string(Traits::kStream) +
                                           " stream ended with batches unacknowledged")
                  : why);
    return;
  }
  if (resend.empty()) return;  // a stream that ended idle
  for (const auto& [address, lane] : failed) {
    router_->Failover(address);
    router_->Refresh(model_, address).IgnoreError();  // else the fallback forwards
  }
  std::chrono::milliseconds pause;
  {
    MutexLock lock(&mu_);
    pause = backoff_;
    backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(1000));
  }
  std::this_thread::sleep_for(pause);
  std::sort(resend.begin(), resend.end());  // Send order: each shard's order
  for (uint64_t id : resend) Write(id);     // a failure here is the next round's
}

template <typename Traits>
void BatchSession<Traits>::Fail(absl::Status status) {
  {
    MutexLock lock(&mu_);
    if (!error_.ok()) return;
    error_ = std::move(status);
    for (auto& [address, lane] : lanes_) {
      if (!lane->cancelled) {
        lane->cancelled = true;
        lane->context->TryCancel();
      }
    }
  }
  WakeAll();
  CloseOnce();
}

template <typename Traits>
void BatchSession<Traits>::CloseOnce() {
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
  }
  if (options_.on_close) {
    MutexLock callback(&ack_mu_);  // after any on_ack in progress
    options_.on_close();
  }
}

template <typename Traits>
absl::Status BatchSession<Traits>::Flush() {
  if (finished_) return final_status_;
  MutexLock lock(&mu_);
  while ((!outstanding_.empty() || in_callback_ > 0) && error_.ok()) cv_.Wait(&mu_);
  return error_;
}

template <typename Traits>
absl::Status BatchSession<Traits>::Finish() {
  if (finished_) return final_status_;
  const absl::Status status = Flush();
  EndAll(/*graceful=*/status.ok());
  finished_ = true;
  final_status_ = status;
  return final_status_;
}

template <typename Traits>
void BatchSession<Traits>::EndAll(bool graceful) {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [address, lane] : lanes_) {
      if (!graceful && !lane->cancelled) {
        lane->cancelled = true;
        lane->context->TryCancel();
      }
    }
  }
  WakeAll();
  if (supervisor_.joinable()) supervisor_.join();
  {
    MutexLock write(&write_mu_);
    std::map<std::string, std::unique_ptr<Lane>> lanes;
    {
      MutexLock lock(&mu_);
      lanes.swap(lanes_);
    }
    // Graceful (every batch has its ack): half-close, give each server ack_timeout to end its
    // stream, then cancel what is left (a paused server must not hold Finish).
    for (auto& [address, lane] : lanes) {
      if (!graceful || lane->stream == nullptr) continue;
      bool failed = false;
      {
        MutexLock lock(&mu_);  // its reader may be failing the lane right now
        failed = lane->failed;
      }
      if (!failed) lane->stream->WritesDone();
    }
    const Clock::time_point deadline = Clock::now() + options_.ack_timeout;
    for (auto& [address, lane] : lanes) {
      if (graceful) {
        MutexLock lock(&mu_);
        while (!lane->done && lane->stream != nullptr && cv_.WaitUntil(&mu_, deadline)) {
        }
      }
      lane->context->TryCancel();
      if (lane->reader.joinable()) lane->reader.join();
      if (lane->stream != nullptr) (void)lane->stream->Finish();
    }
  }
  CloseOnce();
}

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_BATCH_SESSION_IMPL_H_
