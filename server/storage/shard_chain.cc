#include "server/storage/shard_chain.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "core/audit/audit_record.h"
#include "core/audit/merkle_chain.h"
#include "core/common/status_macros.h"

namespace streamlearn::storage {

ShardChain::ShardChain(ShardStore* store, std::string model, uint32_t shard,
                       Ed25519PrivateKey key, uint64_t checkpoint_every)
    : store_(store),
      model_(std::move(model)),
      shard_(shard),
      key_(key),
      writer_(std::move(key), checkpoint_every) {
  if (store_ != nullptr) {
    tree_ = std::make_unique<MerkleTreeCache>(
        [store = store_](uint64_t begin, uint64_t end,
                         const std::function<void(uint64_t, std::string_view)>& visit) {
          return store->ScanAudit(begin, [&](uint64_t index, std::string_view line) {
            if (index >= end) return false;
            visit(index, line);
            return true;
          });
        });
  }
}

absl::StatusOr<uint64_t> ShardChain::TreeSize(uint64_t requested, const char* what) const {
  if (tree_ == nullptr) {
    return absl::FailedPreconditionError(
        "this server has no data_dir: audit records are not kept, so there is no tree to "
        "prove against (start the server with --data_dir)");
  }
  const uint64_t committed = head().next_index;
  if (requested == 0) return committed;
  if (requested > committed) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s %d is beyond the chain of model '%s' shard %d, which has %d record(s)", what,
        requested, model_, shard_, committed));
  }
  return requested;
}

absl::StatusOr<SignedTreeHead> ShardChain::SignedHead(uint64_t size) const {
  ASSIGN_OR_RETURN(const uint64_t n, TreeSize(size, "tree size"));
  SignedTreeHead out;
  out.head.origin = TreeHeadOrigin(model_, shard_);
  out.head.size = n;
  ASSIGN_OR_RETURN(out.head.root, tree_->Root(n));
  ASSIGN_OR_RETURN(out.note, SignTreeHead(key_, out.head));
  return out;
}

absl::StatusOr<ShardChain::Inclusion> ShardChain::InclusionProof(uint64_t index,
                                                                 uint64_t size) const {
  Inclusion out;
  ASSIGN_OR_RETURN(out.tree_size, TreeSize(size, "tree size"));
  if (index >= out.tree_size) {
    return absl::OutOfRangeError(absl::StrFormat(
        "index %d is not in the tree of %d record(s) of model '%s' shard %d", index,
        out.tree_size, model_, shard_));
  }
  bool found = false;
  RETURN_IF_ERROR(store_->ScanAudit(index, [&](uint64_t at, std::string_view l) {
    found = at == index;
    if (found) out.line.assign(l);
    return false;
  }));
  if (!found) {
    return absl::DataLossError(absl::StrFormat(
        "audit record %d of model '%s' shard %d is missing from the store", index, model_,
        shard_));
  }
  ASSIGN_OR_RETURN(out.path, tree_->InclusionProof(index, out.tree_size));
  return out;
}

absl::StatusOr<ShardChain::Consistency> ShardChain::ConsistencyProof(uint64_t first,
                                                                     uint64_t second) const {
  Consistency out;
  ASSIGN_OR_RETURN(out.second_size, TreeSize(second, "second tree size"));
  if (first == 0 || first > out.second_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "first_size must be in 1..%d (the second tree's size); got %d", out.second_size,
        first));
  }
  ASSIGN_OR_RETURN(out.hashes, tree_->ConsistencyProof(first, out.second_size));
  return out;
}

absl::StatusOr<uint64_t> ShardChain::Archive(uint64_t live_records,
                                             uint64_t segment_records) const {
  // One pass at a time: a snapshot's pass and the background thread's would otherwise both
  // count (and log) the segments only one of them wrote.
  MutexLock archive_lock(&archive_mu_);
  ASSIGN_OR_RETURN(const uint64_t committed, TreeSize(0, "tree size"));
  const uint64_t start = store_->ArchivedBelow();
  const uint64_t target =
      committed <= live_records
          ? start
          : std::max(start, (committed - live_records) / segment_records * segment_records);
  uint64_t archived = start;
  while (archived < target) {
    // One file per segment, ending on a multiple of segment_records (with a power of two, a
    // segment is one perfect subtree of the Merkle tree).
    const uint64_t end = std::min(target, (archived / segment_records + 1) * segment_records);
    ASSIGN_OR_RETURN(const SignedTreeHead seal, SignedHead(end));
    RETURN_IF_ERROR(store_->ArchiveAudit(end, seal.note));
    archived = store_->ArchivedBelow();
    if (archived < end) {
      return absl::InternalError(absl::StrFormat(
          "audit chain of model '%s' shard %d: archiving through record %d left it at %d",
          model_, shard_, end - 1, archived));
    }
  }
  // The tree cache keeps, for the archived prefix, only subtrees of a segment's size and more
  // (a proof into a segment recomputes the rest from it): bounded by the live tail.
  tree_->Forget(archived, std::bit_width(segment_records) - 1);
  return archived - start;
}

absl::Status ShardChain::Resume() {
  if (store_ == nullptr) return absl::OkStatus();
  absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> last =
      store_->LastAudit();
  if (!last.ok()) return last.status();
  if (!last->has_value()) return absl::OkStatus();
  const auto& [index, line] = **last;
  absl::StatusOr<AuditRecord> env = ParseAuditJson(line);
  const AuditValue* curr = env.ok() ? env->Find("merkle_curr") : nullptr;
  const std::string* hex = curr != nullptr ? curr->get_if<std::string>() : nullptr;
  Digest head{};
  if (hex == nullptr || !ParseHexDigest(*hex, &head)) {
    return absl::DataLossError(absl::StrFormat(
        "audit chain of model '%s' shard %d: the newest record (index %d) has no readable "
        "merkle_curr", model_, shard_, index));
  }
  MutexLock lock(&mu_);
  writer_.Resume(index + 1, head, writer_.every() - 1);
  return absl::OkStatus();
}

void ShardChain::ResumeAt(const ChainHead& head, uint64_t since_checkpoint) {
  MutexLock lock(&mu_);
  writer_.Resume(head.next_index, head.head, since_checkpoint);
}

absl::StatusOr<Receipt> ShardChain::Commit(
    Bodies& bodies, const LogAppend* log,
    const std::function<void(const Receipt&, ShardWrite*)>& extra) {
  MutexLock lock(&mu_);
  Receipt receipt;
  receipt.first_index = writer_.chain().size();
  if (bodies.size() == 0) {
    receipt.next_index = receipt.first_index;
    receipt.head = writer_.chain().head();
    return receipt;
  }
  AuditLogWriter next = writer_;  // advanced only once the write succeeded
  lines_.clear();
  for (size_t i = 0; i < bodies.size(); ++i) {
    RETURN_IF_ERROR(next.AppendCanonical(bodies.at(i), &lines_));
    if (i == 0) receipt.first_curr = next.record_curr();
  }
  receipt.next_index = next.chain().size();
  receipt.head = next.chain().head();
  if (store_ != nullptr) {
    ShardWrite& write = write_;  // reused: its vector keeps its capacity
    write.log.reset();
    write.audit.clear();
    write.snapshot.reset();
    if (log != nullptr) write.log = *log;
    for (size_t i = 0; i < lines_.size(); ++i) {
      write.audit.push_back({.index = receipt.first_index + i, .line = lines_[i]});
    }
    if (extra) extra(receipt, &write);
    RETURN_IF_ERROR(store_->Commit(write));
  }
  writer_ = std::move(next);
  return receipt;
}

ChainHead ShardChain::head() const {
  MutexLock lock(&mu_);
  return ChainHead{.next_index = writer_.chain().size(), .head = writer_.chain().head()};
}

}  // namespace streamlearn::storage
