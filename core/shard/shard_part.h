// ShardPart: what every part of a model shard (the SAU, the LMU, the fused learner) is to the
// code that keeps it: a kind, the log sequence number of the last batch it includes, a
// snapshot of its state, the state's digest, and whether a failed commit fenced it.
//
// Each part applies batches of its own type (SauShard::Ingest, LmuShard::Update,
// FuseShard::Learn) through the same gate (batch_gate.h) and the same commit hook protocol;
// this interface is what snapshots, recovery checks and the model's loops over its parts use,
// so they are written once rather than once per part.
//
//   for (ShardPart* p : model.parts(i)) {
//     absl::StatusOr<PartSnapshot> s = p->TakeSnapshot();   // UNAVAILABLE when fenced
//   }
//
// Thread safety: every method is thread-safe (each part's own locking).
#ifndef STREAMLEARN_CORE_SHARD_SHARD_PART_H_
#define STREAMLEARN_CORE_SHARD_SHARD_PART_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "core/common/digest.h"

namespace streamlearn {

// The part a log entry, a snapshot or a request belongs to. The values are stored (log and
// snapshot keys, log entry tags): do not renumber.
enum class PartKind : uint8_t { kSau = 1, kLmu = 2, kFuse = 3 };
inline constexpr PartKind kPartKinds[] = {PartKind::kSau, PartKind::kLmu, PartKind::kFuse};
std::string_view PartName(PartKind kind);  // "sau" / "lmu" / "fuse"

// A part's state at one log_seq, serialized (a checksummed container of the part's kind).
struct PartSnapshot {
  uint64_t log_seq = 0;       // the last logged batch it includes
  uint64_t steps = 0;         // events / samples applied in all
  Digest state_digest{};
  std::string blob;
};

class ShardPart {
 public:
  virtual ~ShardPart() = default;

  virtual PartKind kind() const = 0;
  // The log sequence number of the last committed batch the current state includes.
  virtual uint64_t log_seq() const = 0;
  // The current state, serialized. UNAVAILABLE when fenced (the state holds a batch that was
  // never committed).
  virtual absl::StatusOr<PartSnapshot> TakeSnapshot() const = 0;
  // The digest of the current state (may walk the whole state).
  virtual Digest StateDigest() const = 0;
  // Whether a failed commit left the state ahead of the store (SAU: never; it publishes only
  // after its hook succeeded).
  virtual bool fenced() const = 0;
};

}  // namespace streamlearn

#endif  // STREAMLEARN_CORE_SHARD_SHARD_PART_H_
