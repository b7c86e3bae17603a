// MerkleChain: the hash chain over audit record bodies (docs/DECISIONS.md 5, docs/AUDIT.md).
//
//   merkle_prev(0) = 32 zero bytes
//   merkle_curr(i) = SHA-256(merkle_prev(i) || EncodeCanonical(body(i)))
//   merkle_prev(i+1) = merkle_curr(i)
//
// Record 0 is the genesis record: body {"kind":"genesis","model_spec":<string>,
// "w_digest":<64 lowercase hex>}; it commits the chain to the model spec and the digest of the
// random-feature matrix W. Every record travels as an envelope
//   {"body":{...},"index":<uint>,"merkle_curr":<hex>,"merkle_prev":<hex>}
// whose canonical encoding is one line of the log. The envelope's hashes are a convenience for
// readers; the verifier recomputes them from the bodies.
//
// Example:
//   MerkleChain chain;
//   absl::StatusOr<ChainEntry> g = chain.AppendGenesis("sau:r=256", w_digest);
//   absl::StatusOr<ChainEntry> e = chain.Append(body);   // e->index == 1
//
// Thread safety: not thread-safe; one writer owns a chain.
#ifndef STREAMLEARN_CORE_AUDIT_MERKLE_CHAIN_H_
#define STREAMLEARN_CORE_AUDIT_MERKLE_CHAIN_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/audit/audit_record.h"
#include "core/common/digest.h"

namespace streamlearn {

inline constexpr std::string_view kAuditKindGenesis = "genesis";

// SHA-256(prev || canonical_body).
Digest MerkleStep(const Digest& prev, std::string_view canonical_body);

// The chain a genesis belongs to: one per (model, shard). Written into the genesis so that a
// chain exported from one shard cannot pass as another's (every shard of a model starts from
// the same spec and W).
struct ChainId {
  std::string model;
  uint32_t shard = 0;
};

// {"kind":"genesis","model":...,"model_spec":...,"shard":...,"w_digest":hex}; without an id
// (core tests, a chain of no server) "model" and "shard" are left out.
// The record format of the chains this build writes, named by the genesis ("record_format").
// 1 (a genesis without the field): chains written before prf events carried "clipped" (the
// log-features an event clipped) and "median_den" (the floor policy's input on a trigger); the
// verifier cannot recompute the clip rate or a triggered beta_floor from them and checks those
// two by their bounds only (docs/AUDIT.md, "Record formats"). 2: with both. 3: a prf event
// that clipped above c_hi also carries "clipped_hi", so that a verifier recomputes the clip
// level's self-regulation (with 2 it checks a raise by its step and cap only).
inline constexpr uint64_t kAuditRecordFormat = 3;

// The genesis body; it names kAuditRecordFormat.
AuditRecord GenesisBody(std::string_view model_spec, const Digest& w_digest,
                        const ChainId* id = nullptr);

// The canonical envelope line of a record whose body is already canonical.
std::string EnvelopeLine(std::string_view canonical_body, uint64_t index, const Digest& prev,
                         const Digest& curr);

// Parses 64 hex digits (either case) into *out; false on any other input.
bool ParseHexDigest(std::string_view hex, Digest* out);

struct ChainEntry {
  uint64_t index = 0;
  Digest merkle_prev{};
  Digest merkle_curr{};
  AuditRecord envelope;  // see top of file
};

class MerkleChain {
 public:
  MerkleChain() = default;

  // REQUIRES: size() == 0.
  absl::StatusOr<ChainEntry> AppendGenesis(std::string_view model_spec, const Digest& w_digest);
  // Fails (INVALID_ARGUMENT) only if the body has no canonical encoding; the chain is then
  // unchanged.
  absl::StatusOr<ChainEntry> Append(const AuditRecord& body);
  // The fast path for bodies already in canonical form (the caller guarantees it, e.g. the
  // step-record encoders of core/audit/step_records.h): appends and returns the envelope's
  // canonical line, byte-identical to EncodeCanonical(Append(parsed body)->envelope).
  std::string AppendCanonical(std::string_view canonical_body);

  // Continues a chain whose next index is `size` and whose last merkle_curr is `head` (the
  // state recovered from a stored log).
  void Resume(uint64_t size, const Digest& head) {
    size_ = size;
    head_ = head;
  }

  const Digest& head() const { return head_; }
  uint64_t size() const { return size_; }  // index the next record will get

 private:
  Digest head_{};
  uint64_t size_ = 0;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_MERKLE_CHAIN_H_
