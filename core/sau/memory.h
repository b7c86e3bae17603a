// Memory: the engine behind a model's SAU part (docs/ENGINES.md), one type over the three.
//
//   prf    SauEstimator (docs/SAU.md): decayed softmax attention from positive random
//          features, with the e-process, the RJ window and the floor policy. The default.
//   ridge  RidgeMemory (seed 003): exact ridge recall C (G + eps s I)^-1 q.
//   vla    VlaMemory (seed 004, corrected): a delta-rule memory shaped by a penalty inverse.
//
// A shard holds a Memory and does not care which engine it is: the same checks, ingest,
// query, digest and snapshot calls reach the engine the spec names. The prf engine's own
// diagnostics (margin, RJ, floor) stay in EventDiagnostics and QueryResult; the ridge and vla
// engines fill their parts of them (EventDiagnostics::ridge / vla, QueryResult::engine) and
// leave the prf fields zero.
//
//   absl::StatusOr<Memory> mem = Memory::Create(spec);  // validates the engine's fields
//   if (auto s = mem->CheckEvent(k, v); !s.ok()) ...
//   EventDiagnostics d = mem->Ingest(k, v);
//   QueryResult y = mem->Query(q, ReadoutPath::kStabilized, /*low_rank=*/false);
//   std::string bytes = mem->Serialize();                // RestoreMemory(spec, bytes)
//
// Thread safety: as the engine's (const methods concurrently; Ingest exclusive). Copies share
// the immutable parameters, as each engine's copies do.
#ifndef STREAMLEARN_CORE_SAU_MEMORY_H_
#define STREAMLEARN_CORE_SAU_MEMORY_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/common/digest.h"
#include "core/sau/ridge_memory.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/sau_spec.h"
#include "core/sau/vla_memory.h"

namespace streamlearn::sau {

// The state-wide figures of a ridge or vla memory, cheap next to a write (O(state)), read after
// a batch (acks, metrics) and in digest records.
struct EngineStateSummary {
  uint64_t writes = 0;   // events written (vla: not counting skipped keys)
  uint64_t skipped = 0;  // vla: keys shorter than key_eps
  double scale = 0;      // ridge: max ||k||^2
  double s_norm = 0;     // vla: ||S||_F
  double a_norm = 0;     // vla: ||A||_F
};

class Memory {
 public:
  // Validates the engine's fields (INVALID_ARGUMENT naming them, "sau.<field>") and builds an
  // empty memory. The prf engine resolves its defaults as SauEstimator::Create does.
  static absl::StatusOr<Memory> Create(const SauSpec& spec);
  // Create's checks without building the state (the prf engine's defaults resolved first).
  static absl::Status Validate(const SauSpec& spec);
  // A prf memory around an existing estimator.
  explicit Memory(SauEstimator prf);

  Engine engine() const { return static_cast<Engine>(impl_.index()); }
  // The resolved spec (engine options included).
  const SauSpec& spec() const { return spec_; }

  // Dimensions and finiteness, naming the field and the index.
  absl::Status CheckEvent(std::span<const double> k, std::span<const double> v) const;
  absl::Status CheckQuery(std::span<const double> q) const;
  // The magnitude bounds on client input (docs/ENGINES.md, "Input bounds"; docs/SAU.md for
  // prf). REQUIRES: CheckEvent / CheckQuery ok.
  absl::Status CheckEventBounds(std::span<const double> k, std::span<const double> v) const;
  absl::Status CheckQueryBounds(std::span<const double> q) const;

  // REQUIRES: CheckEvent(k, v).ok().
  EventDiagnostics Ingest(std::span<const double> k, std::span<const double> v);
  // `*this = src; return Ingest(k, v);`, bit for bit, without copying the prf engine's
  // decayed sums first (SauEstimator::IngestFrom). REQUIRES: src.CheckEvent(k, v).ok(),
  // &src != this.
  EventDiagnostics IngestFrom(const Memory& src, std::span<const double> k,
                              std::span<const double> v);
  // REQUIRES: CheckQuery(q).ok(); low_rank only for prf with r_v > 0. The ridge and vla
  // engines have one readout: `path` does not change it.
  QueryResult Query(std::span<const double> q, ReadoutPath path, bool low_rank) const;

  // False when a ridge or vla state holds a non-finite value (an overflow the input bounds
  // did not prevent); the shard then refuses the batch. Always true for prf, whose bounds are
  // proven (docs/SAU.md "Input bounds"). O(1) for ridge, O(d d_v) for vla: it checks what
  // the bounds do not already rule out (memory.cc).
  bool StateFinite() const;

  uint64_t events() const;  // every ingested event, skipped vla keys included
  size_t state_bytes() const;
  Digest StateDigest() const;
  EngineStateSummary Summary() const;  // zeros for prf

  // The snapshot bytes: SerializeSauState for prf (unchanged), a "streamlearn.memory"
  // container for ridge and vla.
  std::string Serialize() const;

  // The engine itself, or null when it is another one.
  const SauEstimator* prf() const { return std::get_if<SauEstimator>(&impl_); }
  SauEstimator* mutable_prf() { return std::get_if<SauEstimator>(&impl_); }
  const RidgeMemory* ridge() const { return std::get_if<RidgeMemory>(&impl_); }
  const VlaMemory* vla() const { return std::get_if<VlaMemory>(&impl_); }

 private:
  using Impl = std::variant<SauEstimator, RidgeMemory, VlaMemory>;  // in Engine's order
  Memory(SauSpec spec, Impl impl) : spec_(std::move(spec)), impl_(std::move(impl)) {}
  friend absl::StatusOr<Memory> RestoreMemory(const SauSpec& spec, std::string_view bytes);

  SauSpec spec_;
  Impl impl_;
};

// Rebuilds a memory from Memory::Serialize's bytes. Errors: DATA_LOSS (corrupt, truncated),
// FAILED_PRECONDITION (written under another engine or other parameters: named),
// INVALID_ARGUMENT (invalid spec).
absl::StatusOr<Memory> RestoreMemory(const SauSpec& spec, std::string_view bytes);

// The bound on |k_i|, |v_i|, |q_i| of client input for the ridge and vla engines
// (docs/ENGINES.md, "Input bounds").
inline constexpr double kEngineInputBound = 1e100;

}  // namespace streamlearn::sau

#endif  // STREAMLEARN_CORE_SAU_MEMORY_H_
