#include "core/lmu/lmu_snapshot.h"

#include <bit>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "core/common/byte_codec.h"
#include "core/common/digest.h"
#include "core/common/status_macros.h"
#include "core/lmu/mphf.h"

namespace streamlearn::lmu {

namespace {

// The spec parameters stored and checked, as (name, value); integers and enums as exact doubles.
std::vector<std::pair<std::string, double>> SpecParams(const LmuSpec& s) {
  return {
      {"m", s.m},
      {"lr", s.lr},
      {"schedule", static_cast<double>(s.schedule)},
      {"l2", s.l2},
      {"delta_buckets", static_cast<double>(s.delta_buckets)},
      {"bucket_size", s.bucket_size},
      {"stash", s.stash},
      {"max_relocations", s.max_relocations},
      {"ring", s.ring},
      {"tau_low", s.tau_low},
      {"tau_high", s.tau_high},
  };
}

// Identifies the secret without revealing it or any key in use: SHA-256 of a key derived for
// a purpose nothing else uses.
Digest SecretFingerprint(const HashSecret& secret) {
  const HashKey k = DeriveHashKey(secret, static_cast<HashPurpose>(0x5f), 0);
  Sha256 h;
  h.Update("streamlearn.lmu.secret-fingerprint.v1");
  h.U64(k.k0);
  h.U64(k.k1);
  return h.Finish();
}

std::string_view DigestBytes(const Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

absl::Status Loss(const std::string& what) {
  return absl::DataLossError(absl::StrCat("LMU snapshot: ", what));
}

}  // namespace

// Reaches the private state of the learner, its table and a base (friend of each).
struct LmuSnapshotAccess {
  static std::string Serialize(const LmuLearner& lmu) {
    const LmuTable& t = lmu.table_;
    const LmuTable::Generation& g = t.cell_.Current();

    ByteWriter params;
    params.Bytes(DigestBytes(SecretFingerprint(t.secret_)));
    const auto spec_params = SpecParams(lmu.spec_);
    params.U64(spec_params.size());
    for (const auto& [name, value] : spec_params) {
      params.Bytes(name);
      params.F64(value);
    }

    ByteWriter learner;
    learner.U64(lmu.samples_);
    learner.F64s(lmu.bias_);
    learner.U64(t.ver_delta_.load(std::memory_order_relaxed));
    learner.U8(t.rebuild_running_ ? 1 : 0);
    learner.U8(t.frozen_.load() ? 1 : 0);
    {
      MutexLock lock(&t.stats_mu_);
      learner.U64(t.stats_.rebuilds);
      learner.U64(t.stats_.tripwires);
      learner.U64(t.stats_.tau_high_crossings);
    }

    ByteWriter base;
    base.U64(g.base->generation());
    std::string blob;
    g.base->mphf().Serialize(&blob);
    base.Bytes(blob);
    std::vector<uint64_t> ids, slots;
    ids.reserve(g.base->size());
    slots.reserve(g.base->size());
    for (const BaseEntry& e : g.base->entries()) {
      ids.push_back(e.id);
      slots.push_back(e.slot);
    }
    base.U64s(ids);
    base.U64s(slots);

    // The delta: its entries, then (since the layout decides where later inserts go) each
    // entry's position and the walk's and the drain's counters. Snapshots written before the
    // positions were kept end after the slots.
    ByteWriter delta;
    const CuckooDelta::State state = g.delta->Dump();
    ids.clear();
    slots.clear();
    std::vector<uint64_t> positions;
    positions.reserve(state.entries.size());
    for (const CuckooDelta::Placed& e : state.entries) {
      ids.push_back(e.id);
      slots.push_back(e.payload);
      positions.push_back(e.position);
    }
    delta.U64s(ids);
    delta.U64s(slots);
    delta.U64s(positions);
    delta.U64(state.draws);
    delta.U64(state.drain_cursor);

    ByteWriter weights;
    const WeightArena& w = t.weights_;
    const uint64_t rows = w.size();
    const int m = w.m();
    weights.U64(rows);
    weights.U64(static_cast<uint64_t>(m));
    for (uint64_t slot = 0; slot < rows; ++slot) {
      for (int o = 0; o < m; ++o) weights.F64(w.Load(slot, o));
    }

    ByteWriter control;
    control.F64(lmu.lr_scale_);
    control.U8(t.tau_low_override_.has_value() ? 1 : 0);
    control.F64(t.tau_low_override_.value_or(0.0));

    ByteWriter growth;
    {
      MutexLock lock(&t.stats_mu_);
      growth.U64(g.delta->options().buckets);
      growth.U64(t.stats_.delta_growths);
    }
    growth.U8(t.pressure_ ? 1 : 0);

    SnapshotBuilder b(kLmuSnapshotKind);
    b.AddSection(kLmuSectionParams, params.Take());
    b.AddSection(kLmuSectionLearner, learner.Take());
    b.AddSection(kLmuSectionBase, base.Take());
    b.AddSection(kLmuSectionDelta, delta.Take());
    b.AddSection(kLmuSectionWeights, weights.Take());
    b.AddSection(kLmuSectionControl, control.Take());
    b.AddSection(kLmuSectionGrowth, growth.Take());
    return b.Finish();
  }

  static absl::StatusOr<std::unique_ptr<LmuLearner>> Restore(const LmuSpec& spec,
                                                             const HashSecret& secret,
                                                             std::string_view bytes) {
    RETURN_IF_ERROR(ValidateLmuSpec(spec));
    absl::StatusOr<SnapshotContainer> c = SnapshotContainer::Open(bytes, kLmuSnapshotKind);
    if (!c.ok()) return c.status();
    std::string_view sec[5];
    for (uint32_t tag = kLmuSectionParams; tag <= kLmuSectionWeights; ++tag) {
      absl::StatusOr<std::string_view> v = c->Section(tag);
      if (!v.ok()) return v.status();
      sec[tag - 1] = *v;
    }

    // Parameters and secret.
    ByteReader pr(sec[0]);
    std::string_view fp;
    uint64_t count = 0;
    absl::Status s = pr.BytesView(&fp);
    if (s.ok()) s = pr.U64(&count);
    if (!s.ok()) return s;
    const auto want = SpecParams(spec);
    if (count != want.size()) {
      return Loss(absl::StrFormat("%d spec parameters stored, expected %d", count, want.size()));
    }
    for (const auto& [name, value] : want) {
      std::string_view got_name;
      double got = 0;
      s = pr.BytesView(&got_name);
      if (s.ok()) s = pr.F64(&got);
      if (!s.ok()) return s;
      if (got_name != name) {
        return Loss(absl::StrFormat("spec parameter '%s' found where '%s' was expected",
                                    std::string(got_name), name));
      }
      if (std::bit_cast<uint64_t>(got) != std::bit_cast<uint64_t>(value)) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "LMU snapshot: spec parameter %s is %.17g in the snapshot, %.17g in the spec", name,
            got, value));
      }
    }
    if (s = pr.ExpectDone("LMU parameter section"); !s.ok()) return s;
    if (fp != DigestBytes(SecretFingerprint(secret))) {
      return absl::FailedPreconditionError(
          "LMU snapshot: hash secret mismatch: the snapshot was taken under another secret");
    }

    // Learner scalars.
    ByteReader lr(sec[1]);
    uint64_t samples = 0, ver_delta = 0, rebuilds = 0, tripwires = 0, crossings = 0;
    uint8_t pending = 0, frozen = 0;
    std::vector<double> bias;
    s = lr.U64(&samples);
    if (s.ok()) s = lr.F64s(&bias);
    if (s.ok()) s = lr.U64(&ver_delta);
    if (s.ok()) s = lr.U8(&pending);
    if (s.ok()) s = lr.U8(&frozen);
    if (s.ok()) s = lr.U64(&rebuilds);
    if (s.ok()) s = lr.U64(&tripwires);
    if (s.ok()) s = lr.U64(&crossings);
    if (s.ok()) s = lr.ExpectDone("LMU learner section");
    if (!s.ok()) return s;
    if (bias.size() != static_cast<size_t>(spec.m)) {
      return Loss(absl::StrFormat("bias has %d outputs, m = %d", bias.size(), spec.m));
    }
    if (pending > 1 || frozen > 1) return Loss("rebuild flags are not 0 or 1");

    // Weights.
    ByteReader wr(sec[4]);
    uint64_t rows = 0, m = 0;
    s = wr.U64(&rows);
    if (s.ok()) s = wr.U64(&m);
    if (!s.ok()) return s;
    if (m != static_cast<uint64_t>(spec.m)) {
      return Loss(absl::StrFormat("weight rows have %d outputs, m = %d", m, spec.m));
    }
    if (rows > WeightArena::kChunkRows * WeightArena::kMaxChunks || rows * m * 8 != wr.remaining()) {
      return Loss(absl::StrFormat("weight section holds %d bytes for %d rows of %d outputs",
                                  wr.remaining(), rows, m));
    }

    // Base.
    ByteReader br(sec[2]);
    uint64_t generation = 0;
    std::string_view blob;
    std::vector<uint64_t> base_ids, base_slots;
    s = br.U64(&generation);
    if (s.ok()) s = br.BytesView(&blob);
    if (s.ok()) s = br.U64s(&base_ids);
    if (s.ok()) s = br.U64s(&base_slots);
    if (s.ok()) s = br.ExpectDone("LMU base section");
    if (!s.ok()) return s;
    if (base_ids.size() != base_slots.size()) {
      return Loss(absl::StrFormat("base has %d ids and %d slots", base_ids.size(),
                                  base_slots.size()));
    }
    absl::StatusOr<Mphf> mphf = Mphf::Deserialize(blob);
    if (!mphf.ok()) {
      return Loss(absl::StrCat("MPHF blob: ", mphf.status().message()));
    }
    if (mphf->size() != base_ids.size()) {
      return Loss(absl::StrFormat("MPHF over %d keys, base has %d entries", mphf->size(),
                                  base_ids.size()));
    }
    auto base = std::make_shared<LmuBase>();
    base->generation_ = generation;
    base->mphf_ = *std::move(mphf);
    base->entries_.resize(base_ids.size());
    for (size_t i = 0; i < base_ids.size(); ++i) {
      if (base->mphf_(base_ids[i]) != i) {
        return Loss(absl::StrFormat("base entry %d (id %d) is not at its MPHF position", i,
                                    base_ids[i]));
      }
      if (base_slots[i] >= rows) {
        return Loss(absl::StrFormat("base id %d has slot %d, the arena has %d rows", base_ids[i],
                                    base_slots[i], rows));
      }
      base->entries_[i] = {base_ids[i], base_slots[i]};
    }

    // Delta dump.
    ByteReader dr(sec[3]);
    std::vector<uint64_t> delta_ids, delta_slots;
    std::optional<CuckooDelta::State> layout;  // absent in snapshots of older builds
    s = dr.U64s(&delta_ids);
    if (s.ok()) s = dr.U64s(&delta_slots);
    if (s.ok() && !dr.done()) {
      layout.emplace();
      std::vector<uint64_t> positions;
      s = dr.U64s(&positions);
      if (s.ok()) s = dr.U64(&layout->draws);
      if (s.ok()) s = dr.U64(&layout->drain_cursor);
      if (s.ok() && positions.size() != delta_ids.size()) {
        return Loss(absl::StrFormat("delta has %d ids and %d positions", delta_ids.size(),
                                    positions.size()));
      }
      for (size_t i = 0; s.ok() && i < positions.size(); ++i) {
        layout->entries.push_back({delta_ids[i], delta_slots[i], positions[i]});
      }
    }
    if (s.ok()) s = dr.ExpectDone("LMU delta section");
    if (!s.ok()) return s;
    if (delta_ids.size() != delta_slots.size()) {
      return Loss(absl::StrFormat("delta has %d ids and %d slots", delta_ids.size(),
                                  delta_slots.size()));
    }
    if (base_ids.size() + delta_ids.size() != rows) {
      return Loss(absl::StrFormat("%d base + %d delta ids for %d weight rows", base_ids.size(),
                                  delta_ids.size(), rows));
    }

    // Control inputs (optional section).
    double lr_scale = 1.0;
    std::optional<double> tau_low_override;
    for (const auto& [tag, payload] : c->sections()) {
      if (tag != kLmuSectionControl) continue;
      ByteReader cr(payload);
      uint8_t has_tau = 0;
      double tau = 0;
      s = cr.F64(&lr_scale);
      if (s.ok()) s = cr.U8(&has_tau);
      if (s.ok()) s = cr.F64(&tau);
      if (s.ok()) s = cr.ExpectDone("LMU control section");
      if (!s.ok()) return s;
      if (!(lr_scale > 0 && lr_scale <= 1) || has_tau > 1 ||
          (has_tau == 1 && !(tau > 0 && tau < spec.tau_high))) {
        return Loss(absl::StrFormat("control inputs out of range (lr scale %g, tau_low %g)",
                                    lr_scale, tau));
      }
      if (has_tau == 1) tau_low_override = tau;
      break;
    }

    // The delta's growth (optional section).
    uint64_t delta_buckets = spec.delta_buckets, growths = 0;
    uint8_t pressure = 0;
    for (const auto& [tag, payload] : c->sections()) {
      if (tag != kLmuSectionGrowth) continue;
      ByteReader gr(payload);
      s = gr.U64(&delta_buckets);
      if (s.ok()) s = gr.U64(&growths);
      if (s.ok()) s = gr.U8(&pressure);
      if (s.ok()) s = gr.ExpectDone("LMU growth section");
      if (!s.ok()) return s;
      // A grown delta is a power of two within [delta_buckets, the spec's cap], reached by
      // `growths` doublings.
      if (pressure > 1 || delta_buckets < spec.delta_buckets ||
          delta_buckets > DeltaBucketsCap(spec) || growths > 24 ||
          delta_buckets != uint64_t{spec.delta_buckets} << growths) {
        return Loss(absl::StrFormat(
            "delta of %d buckets after %d growths, for a spec of %d buckets growing to at most %d",
            delta_buckets, growths, spec.delta_buckets, DeltaBucketsCap(spec)));
      }
      break;
    }

    // Build the learner.
    auto lmu = std::make_unique<LmuLearner>(spec, secret);
    lmu->lr_scale_ = lr_scale;
    lmu->table_.tau_low_override_ = tau_low_override;
    LmuTable& t = lmu->table_;
    t.delta_buckets_ = static_cast<uint32_t>(delta_buckets);
    t.pressure_ = pressure == 1;
    WeightArena& w = t.weights_;
    for (uint64_t slot = 0; slot < rows; ++slot) {
      w.Append();
      for (int o = 0; o < spec.m; ++o) {
        double x = 0;
        (void)wr.F64(&x);  // the length was checked above
        w.Store(slot, o, x);
      }
    }
    std::shared_ptr<CuckooDelta> delta = t.NewDelta(generation, t.delta_buckets_);
    bool overflow = false;
    uint64_t unused = 0;
    for (size_t i = 0; i < delta_ids.size(); ++i) {
      const uint64_t id = delta_ids[i];
      if (delta_slots[i] >= rows) {
        return Loss(absl::StrFormat("delta id %d has slot %d, the arena has %d rows", id,
                                    delta_slots[i], rows));
      }
      if (base->Locate(id, &unused)) {
        return Loss(absl::StrFormat("id %d is in both the base and the delta", id));
      }
    }
    if (layout.has_value()) {
      if (s = delta->Restore(*layout); !s.ok()) {
        return Loss(absl::StrFormat("delta layout: %s", s.message()));
      }
    }
    for (size_t i = 0; !layout.has_value() && i < delta_ids.size(); ++i) {
      // An older snapshot: re-insert in dump order (can place differently, or fail).
      const uint64_t id = delta_ids[i];
      if (delta->Locate(id).found) {
        return Loss(absl::StrFormat("id %d appears twice", id));
      }
      const CuckooDelta::InsertResult r = delta->Insert(id, delta_slots[i]);
      if (r.where == CuckooDelta::Where::kFull) {
        return absl::InternalError(absl::StrFormat(
            "LMU snapshot: the delta of generation %d cannot take back its %d entries",
            generation, delta_ids.size()));
      }
      overflow |= r.where == CuckooDelta::Where::kEmergency;
    }
    LmuTable::Generation* next = t.cell_.BeginWrite();
    next->base = std::move(base);
    next->delta = std::move(delta);
    t.cell_.Publish(next);
    t.ver_delta_.store(ver_delta, std::memory_order_release);
    {
      MutexLock lock(&t.stats_mu_);
      t.stats_.rebuilds = rebuilds;
      t.stats_.tripwires = tripwires;
      t.stats_.tau_high_crossings = crossings;
      t.stats_.delta_buckets = t.delta_buckets_;
      t.stats_.delta_growths = growths;
    }
    lmu->bias_ = std::move(bias);
    lmu->samples_ = samples;

    // A rebuild pending at snapshot time starts again now, building the same generation
    // number. (Whenever the delta's load is at tau_low or above, the original has one pending.)
    // The frozen flag is the live one's; in an older snapshot's re-inserted delta, a use of
    // the emergency slot trips the wire as an insert would.
    t.frozen_ = frozen == 1 || overflow;
    if (pending == 1 || t.frozen_) t.MaybeStartRebuild();
    return lmu;
  }
};

std::string SerializeLmu(const LmuLearner& lmu) { return LmuSnapshotAccess::Serialize(lmu); }

absl::StatusOr<std::unique_ptr<LmuLearner>> RestoreLmu(const LmuSpec& spec,
                                                       const HashSecret& secret,
                                                       std::string_view bytes) {
  return LmuSnapshotAccess::Restore(spec, secret, bytes);
}

}  // namespace streamlearn::lmu
