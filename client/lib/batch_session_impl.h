// The definitions of BatchSession's members (batch_session.h). Included only by the .cc file
// of each instance, which instantiates it explicitly (ingest_session.cc,
// lmu_update_session.cc); users include batch_session.h through the instance's header.
#ifndef STREAMLEARN_CLIENT_LIB_BATCH_SESSION_IMPL_H_
#define STREAMLEARN_CLIENT_LIB_BATCH_SESSION_IMPL_H_

#include <cassert>
#include <string>
#include <utility>

#include "client/lib/batch_session.h"
#include "client/lib/grpc_status.h"
#include "core/common/routing.h"

namespace streamlearn {

template <typename Traits>
BatchSession<Traits>::BatchSession(std::shared_ptr<grpc::Channel> channel, std::string model,
                                   uint32_t shards, Options options)
    : model_(std::move(model)),
      shards_(shards),
      options_(std::move(options)),
      stub_(Traits::Service::NewStub(std::move(channel))) {
  assert(shards_ > 0);
  assert(options_.window >= 1);
  stream_ = Traits::Open(*stub_, &context_);
  reader_ = std::thread([this] { ReaderLoop(); });
}

template <typename Traits>
BatchSession<Traits>::~BatchSession() {
  if (finished_) return;
  context_.TryCancel();
  if (reader_.joinable()) reader_.join();
  stream_->Finish();  // CANCELLED; releases the call
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
  bool reader_done = false;
  {
    MutexLock lock(&mu_);
    while (pending_.size() >= options_.window && !reader_done_) cv_.Wait(&mu_);
    reader_done = reader_done_;
    if (!reader_done) {
      // Registered before the write so that the reader always finds the batch of an ack.
      pending_.push_back({stats_.batches_sent, request.routing_key(),
                          static_cast<uint32_t>(items), ShardOf(request.routing_key())});
      ++stats_.batches_sent;
      stats_.events_sent += static_cast<uint64_t>(items);
    }
  }
  if (reader_done) {
    return Finish().ok() ? absl::UnavailableError(stream + " stream closed by the server")
                         : final_status_;
  }
  if (!stream_->Write(request)) {
    // The stream is broken; its status comes from Finish once the reader has drained it.
    absl::Status s = Finish();
    return s.ok() ? absl::UnavailableError(stream + " stream closed while writing") : s;
  }
  return absl::OkStatus();
}

template <typename Traits>
absl::Status BatchSession<Traits>::Flush() {
  if (finished_) return final_status_;
  bool stream_ended = false;
  {
    MutexLock lock(&mu_);
    while (!pending_.empty() && !reader_done_) cv_.Wait(&mu_);
    stream_ended = !pending_.empty();
  }
  if (!stream_ended) return absl::OkStatus();
  absl::Status s = Finish();
  return s.ok() ? absl::InternalError(std::string(Traits::kStream) +
                                      " stream ended with batches unacknowledged")
                : s;
}

template <typename Traits>
absl::Status BatchSession<Traits>::Finish() {
  if (finished_) return final_status_;
  stream_->WritesDone();  // false if the stream is already broken; harmless
  if (reader_.joinable()) reader_.join();
  absl::Status status = FromGrpcStatus(stream_->Finish());
  finished_ = true;
  MutexLock lock(&mu_);
  if (status.ok() && !protocol_error_.empty()) {
    status = absl::InternalError(protocol_error_);
  } else if (status.ok() && !pending_.empty()) {
    status = absl::InternalError("server closed the " + std::string(Traits::kStream) +
                                 " stream with " + std::to_string(pending_.size()) + " of " +
                                 std::to_string(stats_.batches_sent) +
                                 " batches unacknowledged");
  }
  final_status_ = status;
  return final_status_;
}

template <typename Traits>
typename BatchSession<Traits>::Result BatchSession<Traits>::MakeResult(PendingBatch pending,
                                                                       Ack ack) const {
  Result r;
  r.batch = pending.batch;
  r.routing_key = std::move(pending.routing_key);
  r.events = pending.events;
  r.expected_shard = pending.expected_shard;
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
void BatchSession<Traits>::ReaderLoop() {
  Ack ack;
  bool protocol_broken = false;
  while (stream_->Read(&ack)) {
    PendingBatch pending;
    {
      MutexLock lock(&mu_);
      if (pending_.empty()) {
        protocol_error_ = "server sent an " + std::string(Traits::kStream) +
                          " ack without an outstanding batch";
        protocol_broken = true;
        break;
      }
      pending = pending_.front();  // stays queued until on_ack returns (Flush waits on it)
    }
    Result result = MakeResult(std::move(pending), std::move(ack));
    if (options_.on_ack) options_.on_ack(result);
    {
      MutexLock lock(&mu_);
      pending_.pop_front();
      ++stats_.batches_acked;
      if (!result.status.ok()) ++stats_.batches_rejected;
      stats_.events_applied += result.ack.applied();
      stats_.duplicates += static_cast<uint64_t>(result.ack.duplicate_t_size());
    }
    cv_.SignalAll();
    ack.Clear();
  }
  if (protocol_broken) context_.TryCancel();
  {
    MutexLock lock(&mu_);
    reader_done_ = true;
  }
  cv_.SignalAll();
  if (options_.on_close) options_.on_close();
}

}  // namespace streamlearn

#endif  // STREAMLEARN_CLIENT_LIB_BATCH_SESSION_IMPL_H_
