#include "core/lmu/lmu_table.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"

namespace streamlearn::lmu {

LmuTable::LmuTable(const LmuSpec& spec, const HashSecret& secret)
    : spec_(spec),
      secret_(secret),
      weights_(spec.m),
      delta_buckets_(spec.delta_buckets),
      cell_(Generation{std::make_shared<const LmuBase>(), NewDelta(0, spec.delta_buckets)}) {
  stats_.locate_bound = LocateBound(DeltaOptions(delta_buckets_));
  stats_.insert_bound = InsertBound(DeltaOptions(delta_buckets_));
  stats_.delta_buckets = delta_buckets_;
}

LmuTable::~LmuTable() {
  if (builder_.joinable()) builder_.join();
}

CuckooDelta::Options LmuTable::DeltaOptions(uint32_t buckets) const {
  CuckooDelta::Options o;
  o.buckets = buckets;
  o.bucket_size = spec_.bucket_size;
  o.stash = spec_.stash;
  o.max_relocations = spec_.max_relocations;
  o.ring = spec_.ring;
  return o;
}

std::shared_ptr<CuckooDelta> LmuTable::NewDelta(uint64_t generation, uint32_t buckets) const {
  return std::make_shared<CuckooDelta>(DeltaOptions(buckets),
                                       DeriveHashKey(secret_, HashPurpose::kCuckooA, generation),
                                       DeriveHashKey(secret_, HashPurpose::kCuckooB, generation));
}

bool LmuTable::Locate(uint64_t id, uint64_t* slot, int* probes) const {
  const Generation& g = cell_.Current();
  *probes = 1;
  if (g.base->Locate(id, slot)) return true;
  const CuckooDelta::LocateResult r = g.delta->Locate(id);
  *probes += r.probes;
  if (r.found) *slot = r.payload;
  return r.found;
}

int LmuTable::LocateMany(const Generation& g, const WeightArena& w, const uint64_t* ids,
                         size_t n, uint64_t* slots) {
  const LmuBase& base = *g.base;
  base.Positions(ids, n, slots);
  for (size_t j = 0; j < n; ++j) {
    if (const BaseEntry* e = base.EntryAt(slots[j])) __builtin_prefetch(e);
  }
  int max_probes = 1;
  for (size_t j = 0; j < n; ++j) {
    const BaseEntry* e = base.EntryAt(slots[j]);
    if (e != nullptr && e->id == ids[j]) {
      slots[j] = e->slot;
      w.Prefetch(e->slot);
      continue;
    }
    const CuckooDelta::LocateResult r = g.delta->Locate(ids[j]);
    max_probes = std::max(max_probes, 1 + r.probes);
    slots[j] = r.found ? r.payload : kAbsent;
  }
  return max_probes;
}

absl::StatusOr<uint64_t> LmuTable::LocateOrInsert(uint64_t id, Probes* probes) {
  const Generation& g = cell_.Current();
  uint64_t slot = 0;
  probes->locate = 1;
  probes->insert = 0;
  if (g.base->Locate(id, &slot)) return slot;
  const CuckooDelta::LocateResult found = g.delta->Locate(id);
  probes->locate += found.probes;
  if (found.found) return found.payload;

  if (frozen_) {  // the tripwire fired: wait for the rebuild it started
    RETURN_IF_ERROR(FinishRebuild());
  }
  const Generation& cur = cell_.Current();
  slot = weights_.Append();
  CuckooDelta::InsertResult ins = cur.delta->Insert(id, slot);
  bool tripwire = ins.where == CuckooDelta::Where::kEmergency;
  bool published = false;  // the pressure of this insert went into a publish already
  if (ins.where == CuckooDelta::Where::kFull) {
    // Past the emergency slot: the "unreachable" path. Rebuild now and insert into the fresh
    // delta; the id keeps its slot, nothing is lost.
    tripwire = true;
    pressure_ = true;
    MaybeStartRebuild();
    RETURN_IF_ERROR(FinishRebuild());
    published = true;
    ins = cell_.Current().delta->Insert(id, slot);
  }
  probes->insert = ins.probes;
  if (rebuild_running_) since_snapshot_.push_back({id, slot});
  const CuckooDelta& delta = *cell_.Current().delta;
  {
    MutexLock lock(&stats_mu_);
    stats_.max_insert_probes = std::max(stats_.max_insert_probes, ins.probes);
    stats_.max_locate_probes = std::max(stats_.max_locate_probes, probes->locate);
    if (delta.load() > spec_.tau_high) ++stats_.tau_high_crossings;
    if (tripwire) ++stats_.tripwires;
  }
  if ((tripwire && !published) || delta.load() > spec_.tau_high) pressure_ = true;
  ver_delta_.fetch_add(1, std::memory_order_release);
  if (tripwire) frozen_ = true;
  if (tripwire || delta.load() >= tau_low() || delta.ring_used() > 0) MaybeStartRebuild();
  return slot;
}

void LmuTable::MaybeStartRebuild() {
  if (rebuild_running_) return;
  const Generation& g = cell_.Current();
  std::vector<BaseEntry> delta_entries;
  delta_entries.reserve(g.delta->size());
  g.delta->ForEach([&](uint64_t id, uint64_t slot) { delta_entries.push_back({id, slot}); });
  rebuild_running_ = true;
  since_snapshot_.clear();
  rebuild_started_ = std::chrono::steady_clock::now();
  build_done_.store(false, std::memory_order_relaxed);
  std::shared_ptr<const LmuBase> old_base = g.base;
  const uint64_t generation = old_base->generation() + 1;
  auto build = [this, old_base, generation, entries = std::move(delta_entries)]() mutable {
    entries.insert(entries.end(), old_base->entries().begin(), old_base->entries().end());
    built_ = LmuBase::Build(entries, secret_, generation);
    build_done_.store(true, std::memory_order_release);
  };
  {
    MutexLock lock(&stats_mu_);
    stats_.rebuild_running = true;
  }
  if (spec_.background_rebuild) {
    builder_ = std::thread(std::move(build));
  } else {
    build();
    (void)FinishRebuild();
  }
}

absl::Status LmuTable::Poll() {
  if (!rebuild_running_ || !build_done_.load(std::memory_order_acquire)) return absl::OkStatus();
  return FinishRebuild();
}

absl::Status LmuTable::FinishRebuild() {
  if (!rebuild_running_) return absl::OkStatus();
  if (builder_.joinable()) builder_.join();
  rebuild_running_ = false;
  if (!built_.ok()) {
    MutexLock lock(&stats_mu_);
    stats_.rebuild_running = false;
    return absl::InternalError(absl::StrFormat("LMU rebuild failed: %s", built_.status().message()));
  }
  std::shared_ptr<const LmuBase> base = *std::move(built_);
  built_ = nullptr;
  // The fresh delta's size: doubled, once per publish, if this cycle was under pressure.
  uint32_t buckets = NextDeltaBuckets(pressure_);
  std::shared_ptr<CuckooDelta> delta = NewDelta(base->generation(), buckets);
  bool tripwire = false, full = false;
  for (const BaseEntry& e : since_snapshot_) {
    const CuckooDelta::InsertResult r = delta->Insert(e.id, e.slot);
    tripwire |= r.where == CuckooDelta::Where::kEmergency || r.where == CuckooDelta::Where::kFull;
    full = r.where == CuckooDelta::Where::kFull;
    if (full) break;
  }
  if (full) {
    // The ids that arrived during the rebuild do not all fit the fresh delta (its salts put
    // too many of them in one place): build once more, here, over them as well, and start
    // from an empty delta, so that no id is lost (docs/LMU.md, "The tripwire").
    std::vector<BaseEntry> all(base->entries().begin(), base->entries().end());
    all.insert(all.end(), since_snapshot_.begin(), since_snapshot_.end());
    absl::StatusOr<std::shared_ptr<const LmuBase>> rebuilt =
        LmuBase::Build(all, secret_, base->generation());
    if (!rebuilt.ok()) {
      MutexLock lock(&stats_mu_);
      stats_.rebuild_running = false;
      return absl::InternalError(
          absl::StrFormat("LMU rebuild failed: %s", rebuilt.status().message()));
    }
    base = *std::move(rebuilt);
    // The fresh delta could not hold one rebuild's arrivals: pressure, if not counted yet.
    if (buckets == delta_buckets_) buckets = NextDeltaBuckets(true);
    delta = NewDelta(base->generation(), buckets);
  }
  since_snapshot_.clear();
  Generation* next = cell_.BeginWrite();
  next->base = std::move(base);
  next->delta = std::move(delta);
  cell_.Publish(next);
  frozen_ = tripwire && !full;  // after the synchronous build the delta is empty
  const bool grew = buckets != delta_buckets_;
  delta_buckets_ = buckets;
  pressure_ = tripwire && !full;  // the next cycle starts under pressure after a tripwire
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                       rebuild_started_).count();
  {
    MutexLock lock(&stats_mu_);
    stats_.rebuild_running = false;
    ++stats_.rebuilds;
    stats_.last_rebuild_seconds = seconds;
    stats_.max_rebuild_seconds = std::max(stats_.max_rebuild_seconds, seconds);
    if (tripwire) ++stats_.tripwires;
    if (grew) ++stats_.delta_growths;
    stats_.delta_buckets = delta_buckets_;
  }
  // Ids that arrived during a long rebuild may already fill the new delta past tau_low.
  const CuckooDelta& fresh = *cell_.Current().delta;
  if (frozen_ || fresh.load() >= tau_low() || fresh.ring_used() > 0) MaybeStartRebuild();
  return absl::OkStatus();
}

uint32_t LmuTable::NextDeltaBuckets(bool pressed) const {
  const bool grow = pressed && spec_.max_delta_buckets >= 2 * uint64_t{delta_buckets_};
  return grow ? 2 * delta_buckets_ : delta_buckets_;
}

std::vector<BaseEntry> LmuTable::Entries() const {
  const Generation& g = cell_.Current();
  std::vector<BaseEntry> out(g.base->entries());
  g.delta->ForEach([&](uint64_t id, uint64_t slot) { out.push_back({id, slot}); });
  return out;
}

LmuTableStats LmuTable::Stats() const {
  auto pin = cell_.Read();
  LmuTableStats s;
  {
    MutexLock lock(&stats_mu_);
    s = stats_;
  }
  s.ver_base = pin->base->generation();
  s.ver_delta = ver_delta();
  s.base_keys = pin->base->size();
  s.frozen = frozen_;
  s.weight_slots = weights_.size();
  // The delta's counters are the writer's; Stats is called by the writer or tolerates a
  // slightly stale view (they are plain reads of monotone sizes).
  s.delta_keys = pin->delta->size();
  s.delta_load = pin->delta->load();
  s.stash_used = pin->delta->stash_used();
  s.ring_used = pin->delta->ring_used();
  s.emergency_used = pin->delta->emergency_used();
  s.max_locate_probes = std::max(s.max_locate_probes, 1 + pin->delta->max_locate_probes());
  s.max_insert_probes = std::max(s.max_insert_probes, pin->delta->max_insert_probes());
  return s;
}

}  // namespace streamlearn::lmu
