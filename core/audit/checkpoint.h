// Signed checkpoints over the audit chain, and AuditLogWriter, which interleaves them.
//
// Every `every` records, the writer signs the chain head with Ed25519 and appends a checkpoint
// record (itself chained) whose body is
//   {"checkpoint":{"head":<hex>,"index":<uint>,"key_fingerprint":<hex>,"signature":<hex>},
//    "kind":"checkpoint"}
// `index` is the index of the last record covered and `head` its merkle_curr. The signed
// message is CheckpointMessage(index, head):
//   "streamlearn.audit.checkpoint.v1" || index (8 bytes, little-endian) || head (32 bytes).
// Records counted toward `every` are all non-checkpoint records, genesis included.
//
// Example:
//   AuditLogWriter w(*key, /*every=*/64);
//   std::vector<std::string> lines;
//   w.AppendGenesis("spec", w_digest, &lines);
//   w.Append(body, &lines);   // appends one line, or two when a checkpoint falls due
//
// Thread safety: not thread-safe.
#ifndef STREAMLEARN_CORE_AUDIT_CHECKPOINT_H_
#define STREAMLEARN_CORE_AUDIT_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/audit/audit_record.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/merkle_chain.h"
#include "core/common/digest.h"

namespace streamlearn {

inline constexpr std::string_view kAuditKindCheckpoint = "checkpoint";

std::string CheckpointMessage(uint64_t index, const Digest& head);

// Body of a checkpoint record for (index, head) signed by `key`.
absl::StatusOr<AuditRecord> MakeCheckpointBody(const Ed25519PrivateKey& key, uint64_t index,
                                               const Digest& head);

std::string HexEncode(std::string_view bytes);
// False on odd length or a non-hex digit.
bool HexDecode(std::string_view hex, std::string* out);

class AuditLogWriter {
 public:
  // REQUIRES: every >= 1. The writer keeps a copy of the key (it shares the EVP_PKEY).
  AuditLogWriter(Ed25519PrivateKey key, uint64_t every);

  absl::Status AppendGenesis(std::string_view model_spec, const Digest& w_digest,
                             std::vector<std::string>* lines);
  // Appends the canonical envelope line of `body`, then a checkpoint line when one is due.
  // On an error nothing is appended and the writer is unchanged.
  absl::Status Append(const AuditRecord& body, std::vector<std::string>* lines);
  // The same for a body already in canonical form (core/audit/step_records.h).
  absl::Status AppendCanonical(std::string_view canonical_body, std::vector<std::string>* lines);

  // Continues a stored chain: `size` is the next index, `head` the last merkle_curr and
  // `since_checkpoint` the records counted since the last checkpoint (< every).
  void Resume(uint64_t size, const Digest& head, uint64_t since_checkpoint) {
    chain_.Resume(size, head);
    since_checkpoint_ = since_checkpoint;
  }
  uint64_t every() const { return every_; }
  uint64_t since_checkpoint() const { return since_checkpoint_; }

  const MerkleChain& chain() const { return chain_; }
  // The merkle_curr of the last record Append or AppendCanonical appended (not of the
  // checkpoint that may have followed it); undefined before the first append.
  const Digest& record_curr() const { return record_curr_; }

 private:
  Ed25519PrivateKey key_;
  uint64_t every_;
  uint64_t since_checkpoint_ = 0;
  MerkleChain chain_;
  Digest record_curr_{};
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_AUDIT_CHECKPOINT_H_
