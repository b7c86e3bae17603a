#include "server/storage/shard_writer.h"

#include <utility>

#include "core/audit/audit_record.h"
#include "core/common/digest.h"
#include "core/audit/fuse_records.h"
#include "core/audit/step_records.h"
#include "server/storage/log_entry.h"

namespace streamlearn::storage {
namespace {

size_t Slot(PartKind p) { return static_cast<size_t>(p) - 1; }

// Whether a state digest is due after a batch took a part from `before` to `after` steps: one
// every `every` steps (never with 0).
bool DigestDue(uint64_t before, uint64_t after, uint64_t every) {
  return every > 0 && after / every > before / every;
}

}  // namespace

ShardWriter::ShardWriter(std::unique_ptr<ShardStore> store, const std::string& model,
                         uint32_t shard, Ed25519PrivateKey key, const PersistenceOptions& options,
                         StorageObserver* observer)
    : options_(options),
      observer_(observer),
      store_(std::move(store)),
      chain_(store_.get(), model, shard, std::move(key), options.checkpoint_every) {}

uint64_t ShardWriter::steps_since_snapshot() const {
  return sau_.steps_since.load(std::memory_order_relaxed) +
         lmu_.steps_since.load(std::memory_order_relaxed) +
         fuse_.steps_since.load(std::memory_order_relaxed);
}

absl::Status ShardWriter::CommitBatch(PartKind part, uint64_t seq, const std::string& entry,
                                      Bodies& bodies, uint64_t steps, Receipt* receipt) {
  const LogAppend log{.part = part, .seq = seq, .entry = entry};
  const absl::Time start = absl::Now();
  absl::StatusOr<Receipt> r = chain_.Commit(bodies, &log);
  if (!r.ok()) return r.status();
  *receipt = *r;
  PartState& ps = this->part(part);
  ps.steps_since.fetch_add(steps, std::memory_order_relaxed);
  ps.batches_since.fetch_add(1, std::memory_order_relaxed);
  if (observer_ != nullptr) {
    observer_->RecordStoreWrite(absl::ToDoubleSeconds(absl::Now() - start), entry.size());
    observer_->RecordAuditRecords(chain_.model(), chain_.shard(), r->next_index - r->first_index,
                                  ToHex(r->head), r->next_index);
  }
  return absl::OkStatus();
}

absl::Status ShardWriter::CommitSau(const SauCommit& c, Receipt* receipt) {
  std::string& entry = entries_[Slot(PartKind::kSau)];
  EncodeSauEntry(c.batch, &entry);
  const Digest batch_digest = Sha256Of(entry);
  const uint64_t after = c.state->events();
  const bool digest_due = DigestDue(after - c.applied.size(), after, options_.sau_digest_every);
  SauStateSummary summary;
  if (digest_due) summary = SummarizeSau(*c.state);

  Bodies& bodies = bodies_[Slot(PartKind::kSau)];
  bodies.Clear();
  for (size_t i = 0; i < c.applied.size(); ++i) {
    const sau::EventDiagnostics& d = c.diags[i];
    const uint64_t t = c.batch[c.applied[i]].t;
    AppendSauEventBody(
        SauEventRecord{.engine = c.state->engine(),
                       .t = t,
                       .log_seq = c.log_seq,
                       .ver_sau = c.version,
                       .diag = &d,
                       .batch_digest = i == 0 ? &batch_digest : nullptr,
                       .state = digest_due && i + 1 == c.applied.size() ? &summary : nullptr},
        bodies.Add());
    // The alarm's policy action, right after the alarm (docs/DECISIONS.md 6).
    if (d.alarm) AppendSauAlarmBody(t, c.log_seq, d, bodies.Add());
  }
  return CommitBatch(PartKind::kSau, c.log_seq, entry, bodies, c.applied.size(), receipt);
}

absl::Status ShardWriter::CommitLmu(const LmuCommit& c, Receipt* receipt) {
  std::string& entry = entries_[Slot(PartKind::kLmu)];
  EncodeLmuEntry(c.batch, &entry);
  const Digest batch_digest = Sha256Of(entry);
  const lmu::LmuTableStats ts = c.learner->TableStats();
  const uint64_t after = c.learner->samples();
  const bool digest_due =
      DigestDue(after - c.outcome->applied, after, options_.lmu_digest_every);
  Digest state{};
  if (digest_due) state = c.learner->StateDigest();

  Bodies& bodies = bodies_[Slot(PartKind::kLmu)];
  bodies.Clear();
  AppendLmuUpdateBody(LmuUpdateRecord{.t_first = c.t_first,
                                      .t_last = c.t_last,
                                      .applied = c.outcome->applied,
                                      .duplicates = c.outcome->duplicates.size(),
                                      .log_seq = c.log_seq,
                                      .inserted = c.outcome->inserted,
                                      .c_lookup_p100 = c.outcome->c_lookup_p100,
                                      .c_insert_p100 = c.outcome->c_insert_p100,
                                      .table = &ts,
                                      .batch_digest = &batch_digest,
                                      .state_digest = digest_due ? &state : nullptr},
                      bodies.Add());
  return CommitBatch(PartKind::kLmu, c.log_seq, entry, bodies, c.outcome->applied, receipt);
}

absl::Status ShardWriter::CommitFuse(const FuseCommit& c, Receipt* receipt) {
  std::string& entry = entries_[Slot(PartKind::kFuse)];
  EncodeFuseEntry(c.batch, &entry);
  const Digest batch_digest = Sha256Of(entry);
  const std::vector<FuseApplied>& steps = c.outcome->steps;
  const uint64_t after = c.unit->steps();
  const bool digest_due = DigestDue(after - steps.size(), after, options_.fuse_digest_every);
  Digest state{};
  if (digest_due) state = c.unit->StateDigest();

  Bodies& bodies = bodies_[Slot(PartKind::kFuse)];
  bodies.Clear();
  for (size_t i = 0; i < steps.size(); ++i) {
    const FuseApplied& a = steps[i];
    if (absl::Status s = AppendFuseLearnBody(
            a.step.record, c.log_seq, i == 0 ? &batch_digest : nullptr,
            digest_due && i + 1 == steps.size() ? &state : nullptr, bodies.Add());
        !s.ok()) {
      return s;
    }
    // The alarm's actions right after the alarm (docs/DECISIONS.md 6; fuse_records.h).
    if (a.negative_margin) {
      if (absl::Status s = AppendFuseControlBody(c.batch[a.index].t, c.log_seq, a.next_actions,
                                                 bodies.Add());
          !s.ok()) {
        return s;
      }
    }
  }
  return CommitBatch(PartKind::kFuse, c.log_seq, entry, bodies, steps.size(), receipt);
}

ModelWriters::ModelWriters(std::vector<std::unique_ptr<ShardWriter>> shards, bool serving) {
  for (std::unique_ptr<ShardWriter>& w : shards) {
    auto slot = std::make_unique<Slot>();
    slot->writer = std::move(w);
    slot->serving.store(serving, std::memory_order_relaxed);
    shards_.push_back(std::move(slot));
  }
}

bool ModelWriters::TryUse(uint32_t i, Use* use) {
  Use held(&shards_[i]->gate);
  if (!shards_[i]->serving.load(std::memory_order_acquire)) return false;
  *use = std::move(held);
  return true;
}

}  // namespace streamlearn::storage
