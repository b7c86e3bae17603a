#include "server/auditor_service.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/audit/append_body.h"
#include "core/common/status_macros.h"
#include "server/status_conversion.h"

namespace streamlearn::server {
namespace {

constexpr size_t kReadChunkRecords = 512;
constexpr size_t kReadChunkBytes = 1 << 20;

}  // namespace

absl::Status AuditorService::FindShard(const std::string& model, uint32_t shard,
                                      FoundShard* out) const {
  absl::StatusOr<std::shared_ptr<Model>> m = registry_->Find(model);
  if (!m.ok()) return m.status();
  if (shard >= (*m)->num_shards()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shard %d is out of range: model '%s' has %d shard(s)", shard, model,
        (*m)->num_shards()));
  }
  out->keep = persistence_->Find(model);
  if (out->keep == nullptr) {
    return absl::InternalError(absl::StrCat("model '", model, "' has no audit chains"));
  }
  // Cluster mode: a shard's chain is read and written where the shard is served.
  if (!persistence_->TryUseShard(*out->keep, shard, &out->use)) {
    return persistence_->NotServed(model, shard);
  }
  out->writer = &out->keep->shard(shard);
  return absl::OkStatus();
}

grpc::Status AuditorService::Append(grpc::ServerContext* context,
                                    const v1::AppendRequest* in,
                                    v1::AppendResponse* response) {
  RpcTimer timer(metrics_, "Auditor.Append");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kAuditAppend);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  v1::AppendRequest copy;
  absl::StatusOr<const v1::AppendRequest*> request = ScopedRequest(*caller, *in, &copy);
  if (!request.ok()) return ToGrpcStatus(timer.Done(request.status()));
  absl::Status s = DoAppend(**request, response);
  if (forwarder_ != nullptr) {
    s = forwarder_->Unary(*context, s, "Auditor.Append", response,
                          [&](const std::string& owner, grpc::ClientContext* ctx,
                              v1::AppendResponse* r) {
                            return v1::Auditor::NewStub(forwarder_->Channel(owner))
                                ->Append(ctx, **request, r);
                          });
  }
  return ToGrpcStatus(timer.Done(s));
}

grpc::Status AuditorService::Read(grpc::ServerContext* context, const v1::ReadRequest* in,
                                  grpc::ServerWriter<v1::ReadResponse>* writer) {
  RpcTimer timer(metrics_, "Auditor.Read");
  absl::StatusOr<Caller> caller = gate_->Admit(*context, Rpc::kAuditRead);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  v1::ReadRequest copy;
  absl::StatusOr<const v1::ReadRequest*> request = ScopedRequest(*caller, *in, &copy);
  if (!request.ok()) return ToGrpcStatus(timer.Done(request.status()));
  absl::Status s = DoRead(context, **request, writer);
  std::optional<std::string> owner;
  if (forwarder_ != nullptr) owner = forwarder_->Target(*context, s);
  if (owner.has_value()) {
    // Nothing was written yet (the shard was refused first): relay the owner's chunks, under
    // the caller's deadline.
    std::unique_ptr<grpc::ClientContext> ctx = forwarder_->HopContext(*context, /*unary=*/false);
    ctx->set_deadline(context->deadline());
    std::unique_ptr<grpc::ClientReader<v1::ReadResponse>> reader =
        v1::Auditor::NewStub(forwarder_->Channel(*owner))->Read(ctx.get(), **request);
    v1::ReadResponse chunk;
    while (reader->Read(&chunk)) {
      if (!writer->Write(chunk)) {
        ctx->TryCancel();  // the caller went away
        break;
      }
    }
    s = Forwarder::FromGrpc(reader->Finish(), *owner);
    forwarder_->Count("Auditor.Read", s.code());
  }
  return ToGrpcStatus(timer.Done(s));
}

template <typename Request, typename Response>
grpc::Status AuditorService::Unary(
    grpc::ServerContext* context, const Request* in, Response* response, Rpc rpc,
    absl::Status (AuditorService::*handler)(const Request&, Response*),
    grpc::Status (v1::Auditor::Stub::*forward)(grpc::ClientContext*, const Request&,
                                               Response*)) {
  RpcTimer timer(metrics_, RpcName(rpc));
  absl::StatusOr<Caller> caller = gate_->Admit(*context, rpc);
  if (!caller.ok()) return ToGrpcStatus(timer.Done(caller.status()));
  Request copy;
  absl::StatusOr<const Request*> request = ScopedRequest(*caller, *in, &copy);
  if (!request.ok()) return ToGrpcStatus(timer.Done(request.status()));
  absl::Status s = (this->*handler)(**request, response);
  if (forwarder_ != nullptr) {
    s = forwarder_->Unary(*context, s, RpcName(rpc), response,
                          [&](const std::string& owner, grpc::ClientContext* ctx, Response* r) {
                            return (v1::Auditor::NewStub(forwarder_->Channel(owner)).get()->*
                                    forward)(ctx, **request, r);
                          });
  }
  return ToGrpcStatus(timer.Done(s));
}

grpc::Status AuditorService::Head(grpc::ServerContext* context, const v1::HeadRequest* in,
                                  v1::HeadResponse* response) {
  return Unary(context, in, response, Rpc::kAuditHead, &AuditorService::DoHead,
               &v1::Auditor::Stub::Head);
}

grpc::Status AuditorService::TreeHead(grpc::ServerContext* context,
                                      const v1::TreeHeadRequest* in,
                                      v1::TreeHeadResponse* response) {
  return Unary(context, in, response, Rpc::kAuditTreeHead, &AuditorService::DoTreeHead,
               &v1::Auditor::Stub::TreeHead);
}

grpc::Status AuditorService::InclusionProof(grpc::ServerContext* context,
                                            const v1::InclusionProofRequest* in,
                                            v1::InclusionProofResponse* response) {
  return Unary(context, in, response, Rpc::kAuditInclusionProof,
               &AuditorService::DoInclusionProof, &v1::Auditor::Stub::InclusionProof);
}

grpc::Status AuditorService::ConsistencyProof(grpc::ServerContext* context,
                                              const v1::ConsistencyProofRequest* in,
                                              v1::ConsistencyProofResponse* response) {
  return Unary(context, in, response, Rpc::kAuditConsistencyProof,
               &AuditorService::DoConsistencyProof, &v1::Auditor::Stub::ConsistencyProof);
}

absl::Status AuditorService::DoAppend(const v1::AppendRequest& request,
                                      v1::AppendResponse* response) {
  if (draining_ != nullptr && draining_->load(std::memory_order_acquire)) {
    return absl::UnavailableError("the server is shutting down; append again after restart");
  }
  if (request.json().size() > kAuditAppendMaxBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "json has %d bytes; the limit is %d", request.json().size(), kAuditAppendMaxBytes));
  }
  FoundShard shard;
  RETURN_IF_ERROR(FindShard(request.model(), request.shard(), &shard));
  absl::StatusOr<std::string> body = EncodeAppendBody(request.json());
  if (!body.ok()) return body.status();
  storage::Bodies bodies;
  bodies.Add()->append(*body);
  absl::StatusOr<storage::Receipt> r = shard->chain().Commit(bodies, nullptr);
  if (!r.ok()) return r.status();
  response->set_index(r->first_index);
  response->set_merkle_curr(ToHex(r->first_curr));
  response->set_next_index(r->next_index);
  metrics_->RecordAuditRecords(request.model(), request.shard(), r->next_index - r->first_index,
                               ToHex(r->head), r->next_index);
  return absl::OkStatus();
}

absl::Status AuditorService::DoRead(grpc::ServerContext* context, const v1::ReadRequest& request,
                                    grpc::ServerWriter<v1::ReadResponse>* writer) {
  FoundShard shard;
  RETURN_IF_ERROR(FindShard(request.model(), request.shard(), &shard));
  const storage::ShardStore* store = shard->store();
  if (store == nullptr) {
    return absl::FailedPreconditionError(
        "this server has no data_dir: audit records are not kept (use Head, or start the "
        "server with --data_dir)");
  }
  // Read up to the head as of now; records appended meanwhile belong to a later Read. Every
  // chunk names that head, so a client can tell how far this read goes and check the last
  // record against it, whatever was appended since it asked Head.
  const storage::ChainHead head = shard->chain().head();
  const uint64_t end = head.next_index;
  const std::string head_hex = ToHex(head.head);
  const uint64_t limit = request.limit() == 0 ? UINT64_MAX : request.limit();
  v1::ReadResponse chunk;
  bool wrote = false;
  const auto write_chunk = [&] {
    chunk.set_head_next_index(end);
    chunk.set_head_merkle_curr(head_hex);
    wrote = true;
    return writer->Write(chunk);
  };
  size_t chunk_bytes = 0;
  uint64_t sent = 0;
  absl::Status failure;
  absl::Status scan = store->ScanAudit(
      request.from_index(), [&](uint64_t index, std::string_view line) {
        if (index >= end || sent >= limit) return false;
        if (context->IsCancelled()) {
          failure = absl::CancelledError("the client cancelled the read");
          return false;
        }
        v1::AuditLine* rec = chunk.add_records();
        rec->set_index(index);
        rec->set_line(std::string(line));
        chunk_bytes += line.size();
        ++sent;
        if (chunk.records_size() >= static_cast<int>(kReadChunkRecords) ||
            chunk_bytes >= kReadChunkBytes) {
          if (!write_chunk()) {
            failure = absl::CancelledError("the client went away");
            return false;
          }
          chunk.Clear();
          chunk_bytes = 0;
        }
        return true;
      });
  if (!scan.ok()) return scan;
  if (!failure.ok()) return failure;
  if ((chunk.records_size() > 0 || !wrote) && !write_chunk()) {
    return absl::CancelledError("the client went away");
  }
  return absl::OkStatus();
}

absl::Status AuditorService::DoHead(const v1::HeadRequest& request, v1::HeadResponse* response) {
  FoundShard shard;
  RETURN_IF_ERROR(FindShard(request.model(), request.shard(), &shard));
  const storage::ChainHead h = shard->chain().head();
  response->set_next_index(h.next_index);
  response->set_merkle_curr(ToHex(h.head));
  absl::StatusOr<std::string> pem = persistence_->public_key().ToPem();
  if (!pem.ok()) return pem.status();
  response->set_public_key_pem(*pem);
  response->set_key_fingerprint(persistence_->public_key().fingerprint());
  response->set_checkpoint_every(persistence_->options().checkpoint_every);
  response->set_durable(persistence_->durable());
  response->set_shards(shard.keep->num_shards());
  response->set_model(request.model());
  return absl::OkStatus();
}

absl::Status AuditorService::DoTreeHead(const v1::TreeHeadRequest& request,
                                        v1::TreeHeadResponse* response) {
  FoundShard shard;
  RETURN_IF_ERROR(FindShard(request.model(), request.shard(), &shard));
  absl::StatusOr<storage::SignedTreeHead> sth = shard->chain().SignedHead(request.size());
  if (!sth.ok()) return sth.status();
  response->set_note(sth->note);
  response->set_origin(sth->head.origin);
  response->set_size(sth->head.size);
  response->set_root(ToHex(sth->head.root));
  return absl::OkStatus();
}

absl::Status AuditorService::DoInclusionProof(const v1::InclusionProofRequest& request,
                                              v1::InclusionProofResponse* response) {
  FoundShard shard;
  RETURN_IF_ERROR(FindShard(request.model(), request.shard(), &shard));
  absl::StatusOr<storage::ShardChain::Inclusion> proof =
      shard->chain().InclusionProof(request.index(), request.tree_size());
  if (!proof.ok()) return proof.status();
  response->set_index(request.index());
  response->set_tree_size(proof->tree_size);
  response->set_line(std::move(proof->line));
  for (const Digest& d : proof->path) response->add_hashes(ToHex(d));
  return absl::OkStatus();
}

absl::Status AuditorService::DoConsistencyProof(const v1::ConsistencyProofRequest& request,
                                                v1::ConsistencyProofResponse* response) {
  FoundShard shard;
  RETURN_IF_ERROR(FindShard(request.model(), request.shard(), &shard));
  absl::StatusOr<storage::ShardChain::Consistency> proof =
      shard->chain().ConsistencyProof(request.first_size(), request.second_size());
  if (!proof.ok()) return proof.status();
  response->set_first_size(request.first_size());
  response->set_second_size(proof->second_size);
  for (const Digest& d : proof->hashes) response->add_hashes(ToHex(d));
  return absl::OkStatus();
}

}  // namespace streamlearn::server
