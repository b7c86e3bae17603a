#include "core/shard/sau_shard.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "core/common/byte_codec.h"
#include "core/common/status_macros.h"
#include "core/shard/batch_gate.h"

namespace streamlearn {

namespace {

constexpr std::string_view kSauShardKind = "streamlearn.sau_shard";
constexpr uint32_t kSectionSauHeader = 1;
constexpr uint32_t kSectionEstimator = 2;

}  // namespace

SauShard::SauShard(const sau::Memory& initial)
    : cell_(Version{.version = 0,
                    .last_t = 0,
                    .log_seq = 0,
                    .has_last = false,
                    .last = {},
                    .memory = initial}) {}

SauShard::SauShard(Version initial) : cell_(std::move(initial)) {}

absl::StatusOr<std::unique_ptr<SauShard>> SauShard::Restore(const sau::SauSpec& spec,
                                                            std::string_view blob) {
  absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(blob, kSauShardKind);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::string_view> header = c->Section(kSectionSauHeader);
  if (!header.ok()) return header.status();
  absl::StatusOr<std::string_view> body = c->Section(kSectionEstimator);
  if (!body.ok()) return body.status();
  uint64_t version = 0, last_t = 0, log_seq = 0;
  ByteReader r(*header);
  for (uint64_t* field : {&version, &last_t, &log_seq}) {
    RETURN_IF_ERROR(r.U64(field));
  }
  RETURN_IF_ERROR(r.ExpectDone("sau shard header"));
  absl::StatusOr<sau::Memory> mem = sau::RestoreMemory(spec, *body);
  if (!mem.ok()) return mem.status();
  return std::unique_ptr<SauShard>(new SauShard(Version{.version = version,
                                                        .last_t = last_t,
                                                        .log_seq = log_seq,
                                                        .has_last = false,
                                                        .last = {},
                                                        .memory = *std::move(mem)}));
}

SauShardSnapshot SauShard::Snapshot() const {
  auto pin = cell_.Read();
  SauShardSnapshot out;
  out.version = pin->version;
  out.last_t = pin->last_t;
  out.log_seq = pin->log_seq;
  out.events = pin->memory.events();
  out.state_digest = pin->memory.StateDigest();
  ByteWriter header;
  header.U64(pin->version);
  header.U64(pin->last_t);
  header.U64(pin->log_seq);
  SnapshotBuilder b(kSauShardKind);
  b.AddSection(kSectionSauHeader, header.Take());
  b.AddSection(kSectionEstimator, pin->memory.Serialize());
  out.blob = b.Finish();
  return out;
}

uint64_t SauShard::log_seq() const { return cell_.Read()->log_seq; }

absl::StatusOr<PartSnapshot> SauShard::TakeSnapshot() const {
  SauShardSnapshot s = Snapshot();
  return PartSnapshot{.log_seq = s.log_seq,
                      .steps = s.events,
                      .state_digest = s.state_digest,
                      .blob = std::move(s.blob)};
}

Digest SauShard::StateDigest() const { return cell_.Read()->memory.StateDigest(); }

absl::StatusOr<IngestOutcome> SauShard::Ingest(std::span<const EventView> batch,
                                               const BatchLimits& limits,
                                               const SauCommitHook* hook) {
  RETURN_IF_ERROR(CheckBatchSize(batch.size(), limits.max_batch, "events"));
  MutexLock lock(&write_mu_);
  const Version& cur = cell_.Current();
  if (absl::Status s = CheckBatchItems(batch, "event", [&](const EventView& e) {
        RETURN_IF_ERROR(cur.memory.CheckEvent(e.k, e.v));
        if (!limits.bound_inputs) return absl::OkStatus();
        return cur.memory.CheckEventBounds(e.k, e.v);
      });
      !s.ok()) {
    return s;
  }
  RETURN_IF_ERROR(
      CheckTSteps(batch, "event", cur.memory.events() > 0, cur.last_t, limits));

  IngestOutcome out;
  out.engine = cur.memory.engine();
  // Duplicates first, so a batch of nothing new publishes nothing.
  std::vector<size_t>& fresh = fresh_;
  fresh.clear();
  TOrder order(cur.memory.events() > 0, cur.last_t);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (order.Accept(batch[i].t)) {
      fresh.push_back(i);
    } else {
      out.duplicates.push_back(batch[i].t);
    }
  }
  const uint64_t last_t = order.last_t();
  if (fresh.empty()) {
    out.version = cur.version;
    return out;
  }
  // The next version is written from the current one by the batch's first event
  // (Memory::IngestFrom), so a reused slot gets only the small fields copied here.
  Version* next = cell_.BeginWriteWith([](const Version& from, Version* to) {
    to->version = from.version;
    to->last_t = from.last_t;
    to->log_seq = from.log_seq;
    to->has_last = from.has_last;
    to->last = from.last;
  });
  diags_.clear();
  for (size_t i : fresh) {
    next->last = i == fresh.front() ? next->memory.IngestFrom(cur.memory, batch[i].k, batch[i].v)
                                    : next->memory.Ingest(batch[i].k, batch[i].v);
    out.alarms += next->last.alarm ? 1 : 0;
    out.red_events += next->last.rj_level == sau::RjLevel::kRed ? 1 : 0;
    out.regulations += (next->last.gamma_change != 0 ? 1 : 0) + (next->last.c_hi_raised ? 1 : 0);
    if (hook != nullptr) diags_.push_back(next->last);
  }
  if (next->memory.engine() != sau::Engine::kPrf) {
    // Not published: the next BeginWrite starts again from the current version.
    if (!next->memory.StateFinite()) {
      return absl::OutOfRangeError(absl::StrFormat(
          "the batch would leave the %s memory's state non-finite (an overflow); nothing was "
          "applied: scale the keys and values down",
          sau::EngineName(next->memory.engine())));
    }
    out.engine_state = next->memory.Summary();
  }
  next->has_last = true;
  next->last_t = last_t;
  next->version = cur.version + 1;
  next->log_seq = cur.log_seq + 1;
  if (hook != nullptr) {
    // Not published on failure: the next BeginWrite starts again from the current version.
    if (absl::Status s = (*hook)(SauCommit{.batch = batch,
                                           .applied = fresh,
                                           .diags = diags_,
                                           .version = next->version,
                                           .log_seq = next->log_seq,
                                           .state = &next->memory});
        !s.ok()) {
      return s;
    }
  }
  out.version = next->version;
  out.applied = static_cast<uint32_t>(fresh.size());
  out.has_last = true;
  out.last = next->last;
  cell_.Publish(next);
  return out;
}

absl::StatusOr<QueryOutcome> SauShard::Query(std::span<const double> q, sau::ReadoutPath path,
                                             bool low_rank, uint64_t min_version) const {
  auto pin = cell_.Read();
  if (pin->version < min_version) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "shard is at version %d, older than min_version %d", pin->version, min_version));
  }
  RETURN_IF_ERROR(pin->memory.CheckQuery(q));
  RETURN_IF_ERROR(pin->memory.CheckQueryBounds(q));
  if (low_rank && pin->memory.engine() != sau::Engine::kPrf) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "low_rank readout requested but the %s engine has none (only prf with sau.r_v > 0)",
        sau::EngineName(pin->memory.engine())));
  }
  if (low_rank && pin->memory.spec().r_v == 0) {
    return absl::InvalidArgumentError(
        "low_rank readout requested but the model has no low-rank values (sau.r_v = 0)");
  }
  QueryOutcome out;
  out.result = pin->memory.Query(q, path, low_rank);
  for (double y : out.result.y_hat) {
    if (!std::isfinite(y)) {
      return absl::OutOfRangeError(absl::StrFormat(
          "the %s readout at this query is not finite (an overflow); scale the query down",
          sau::EngineName(pin->memory.engine())));
    }
  }
  out.version = pin->version;
  out.events = pin->memory.events();
  return out;
}

ShardStats SauShard::Stats() const {
  auto pin = cell_.Read();
  ShardStats s;
  s.version = pin->version;
  s.events = pin->memory.events();
  s.last_t = pin->last_t;
  s.digest = pin->memory.StateDigest();
  if (pin->has_last) s.last = pin->last;
  if (const sau::SauEstimator* prf = pin->memory.prf()) {
    const sau::Regulator& reg = prf->state().regulator;
    s.gamma = reg.gamma();
    s.c_hi = reg.c_hi();
    s.gamma_raises = reg.gamma_raises();
    s.gamma_lowers = reg.gamma_lowers();
    s.c_hi_raises = reg.c_hi_raises();
  }
  return s;
}

}  // namespace streamlearn
