#include "server/metrics.h"

#include <chrono>
#include <initializer_list>
#include <exception>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "server/heap.h"

namespace streamlearn::server {
namespace {

// 50 us .. 10 s: an Ingest batch of a few events up to a large batch on a busy shard.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
      50e-3, 100e-3, 250e-3, 500e-3, 1.0,  2.5,    5.0,  10.0};
  return *kBuckets;
}

// 10 us .. 1 s: an event-log append of one small batch up to a large snapshot.
const prometheus::Histogram::BucketBoundaries& StoreWriteBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3,  2.5e-3,
      5e-3,  10e-3, 25e-3, 50e-3,  100e-3, 250e-3, 500e-3, 1.0};
  return *kBuckets;
}

double UnixNowSeconds() {
  const std::chrono::duration<double> since_epoch =
      std::chrono::system_clock::now().time_since_epoch();
  return since_epoch.count();
}

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& registry,
                                                   const std::string& name,
                                                   const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

}  // namespace

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      rpc_total_(CounterFamily(*registry_, "streamlearn_rpc_total",
                               "Finished RPCs (unary) and Ingest batches by method and code.")),
      rpc_latency_(prometheus::BuildHistogram()
                       .Name("streamlearn_rpc_latency_seconds")
                       .Help("Server-side handling time of a unary RPC or an Ingest batch.")
                       .Register(*registry_)),
      events_total_(CounterFamily(*registry_, "streamlearn_sau_events_total",
                                  "Events applied to the shard's SAU.")),
      duplicates_total_(CounterFamily(*registry_, "streamlearn_sau_duplicate_events_total",
                                      "Events acknowledged as duplicates (t not new).")),
      alarms_total_(CounterFamily(*registry_, "streamlearn_sau_alarms_total",
                                  "Ingested events whose e-process margin went negative (an alarm).")),
      rj_red_events_total_(CounterFamily(*registry_, "streamlearn_sau_rj_red_events_total",
                                         "Ingested events at RJ level red.")),
      regulations_total_(CounterFamily(*registry_, "streamlearn_sau_regulations_total",
                                       "Self-regulating actions taken: gamma widened or stepped "
                                       "back, c_hi raised (docs/SAU.md).")),
      margin_(GaugeFamily(*registry_, "streamlearn_sau_margin",
                          "E-process margin log(1/alpha) - log E_mix at the last event.")),
      rj_gap_(GaugeFamily(*registry_, "streamlearn_sau_rj_gap",
                          "RJ half-split gap at the last event.")),
      rj_level_(GaugeFamily(*registry_, "streamlearn_sau_rj_level",
                            "RJ level at the last event: 0 green, 1 yellow, 2 red.")),
      beta_floor_(GaugeFamily(*registry_, "streamlearn_sau_beta_floor",
                              "Denominator floor in force for the next event.")),
      lambda_star_(GaugeFamily(*registry_, "streamlearn_sau_lambda_star",
                               "Denominator ridge lambda_* in force for the next event.")),
      clip_rate_(GaugeFamily(*registry_, "streamlearn_sau_clip_rate",
                             "Cumulative fraction of clipped log-features (rho_clip).")),
      denominator_(GaugeFamily(*registry_, "streamlearn_sau_denominator",
                               "Raw whitened denominator at the last event's key.")),
      version_(GaugeFamily(*registry_, "streamlearn_sau_version",
                           "Published SAU version of the shard.")),
      engine_key_scale_(GaugeFamily(*registry_, "streamlearn_sau_engine_key_scale",
                                    "Ridge engine: max ||k||^2 so far, the unit of its ridge.")),
      engine_residual_norm_(GaugeFamily(*registry_, "streamlearn_sau_engine_residual_norm",
                                        "VLA engine: ||v - S k^|| at the last event.")),
      engine_s_norm_(GaugeFamily(*registry_, "streamlearn_sau_engine_s_norm",
                                 "VLA engine: ||S||_F after the last batch.")),
      engine_a_norm_(GaugeFamily(*registry_, "streamlearn_sau_engine_a_norm",
                                 "VLA engine: ||A||_F after the last batch.")),
      engine_condition_(GaugeFamily(*registry_, "streamlearn_sau_engine_condition",
                                    "Ridge engine: condition number of G~ at the last readout.")),
      engine_skipped_keys_total_(
          CounterFamily(*registry_, "streamlearn_sau_engine_skipped_keys_total",
                        "VLA engine: keys shorter than key_eps, not written.")),
      engine_jittered_factors_total_(
          CounterFamily(*registry_, "streamlearn_sau_engine_jittered_factors_total",
                        "Ridge engine: readouts whose Cholesky factor needed jitter.")),
      lmu_samples_total_(CounterFamily(*registry_, "streamlearn_lmu_samples_total",
                                       "Samples applied to the shard's LMU.")),
      lmu_duplicates_total_(CounterFamily(*registry_, "streamlearn_lmu_duplicate_samples_total",
                                          "LMU samples acknowledged as duplicates (t not new).")),
      lmu_inserts_total_(CounterFamily(*registry_, "streamlearn_lmu_inserts_total",
                                       "New feature ids inserted into the LMU table.")),
      lmu_rebuilds_total_(CounterFamily(*registry_, "streamlearn_lmu_rebuilds_total",
                                        "LMU base rebuilds published.")),
      lmu_tripwires_total_(CounterFamily(*registry_, "streamlearn_lmu_tripwires_total",
                                         "LMU emergency-slot uses (hard alarm; inserts froze).")),
      lmu_lookup_probes_max_(GaugeFamily(*registry_, "streamlearn_lmu_lookup_probes_max",
                                         "Largest LOCATE probe count over the table's life.")),
      lmu_insert_probes_max_(GaugeFamily(*registry_, "streamlearn_lmu_insert_probes_max",
                                         "Largest INSERT probe count over the table's life.")),
      lmu_delta_load_(GaugeFamily(*registry_, "streamlearn_lmu_delta_load",
                                  "Load of the LMU cuckoo delta (keys / capacity).")),
      lmu_ring_used_(GaugeFamily(*registry_, "streamlearn_lmu_ring_used",
                                 "Entries in the delta's overflow ring.")),
      lmu_stash_used_(GaugeFamily(*registry_, "streamlearn_lmu_stash_used",
                                  "Entries in the delta's stash.")),
      lmu_emergency_used_(GaugeFamily(*registry_, "streamlearn_lmu_emergency_used",
                                      "1 while the delta's emergency slot holds an id.")),
      lmu_rebuild_seconds_(GaugeFamily(*registry_, "streamlearn_lmu_rebuild_seconds",
                                       "Trigger-to-publish time of the last rebuild (T_rb).")),
      lmu_base_keys_(GaugeFamily(*registry_, "streamlearn_lmu_base_keys",
                                 "Ids in the published MPHF base.")),
      lmu_delta_keys_(GaugeFamily(*registry_, "streamlearn_lmu_delta_keys",
                                  "Ids in the current cuckoo delta.")),
      audit_records_total_(CounterFamily(*registry_, "streamlearn_audit_records_total",
                                         "Records appended to the shard's audit chain.")),
      audit_chain_length_(GaugeFamily(*registry_, "streamlearn_audit_chain_length",
                                      "Length of the shard's audit chain (the next record's index).")),
      snapshots_total_(CounterFamily(*registry_, "streamlearn_snapshots_total",
                                     "Snapshots of the shard written.")),
      snapshot_failures_total_(CounterFamily(*registry_, "streamlearn_snapshot_failures_total",
                                             "Snapshots of the shard that failed.")),
      snapshot_last_timestamp_(GaugeFamily(*registry_, "streamlearn_snapshot_last_timestamp_seconds",
                                           "Unix time at which the last snapshot was written.")),
      snapshot_duration_(GaugeFamily(*registry_, "streamlearn_snapshot_duration_seconds",
                                     "Time the last snapshot took to write.")),
      snapshot_bytes_(GaugeFamily(*registry_, "streamlearn_snapshot_bytes",
                                  "Size of the last snapshot written.")),
      recovery_replayed_batches_(GaugeFamily(*registry_, "streamlearn_recovery_replayed_batches",
                                             "Log batches replayed by the shard's last recovery.")),
      recovery_seconds_(GaugeFamily(*registry_, "streamlearn_recovery_seconds",
                                    "Duration of the shard's last recovery (load and replay).")),
      log_backlog_batches_(GaugeFamily(*registry_, "streamlearn_log_backlog_batches",
                                       "Batches in the event log since the shard's last snapshot.")),
      audit_archived_records_(GaugeFamily(*registry_, "streamlearn_audit_archived_records",
                                          "Audit records of the shard's chain in archive segments.")),
      audit_live_records_(GaugeFamily(*registry_, "streamlearn_audit_live_records",
                                      "Audit records of the shard's chain still in the store.")),
      audit_live_records_bound_(GaugeFamily(
          *registry_, "streamlearn_audit_live_records_bound",
          "The most audit records of the shard's chain the store keeps while archiving keeps "
          "up (--audit_live_records + --audit_segment_records).")),
      audit_archive_failures_total_(CounterFamily(
          *registry_, "streamlearn_audit_archive_failures_total",
          "Archive passes of the shard's audit chain that failed.")),
      fuse_gate_(GaugeFamily(*registry_, "streamlearn_fuse_gate",
                             "Fuse Gate in force (weight of the SAU prediction).")),
      fuse_gate_min_(GaugeFamily(*registry_, "streamlearn_fuse_gate_min",
                                 "Lower clamp g_min(m_t) of the Fuse Gate.")),
      fuse_gate_max_(GaugeFamily(*registry_, "streamlearn_fuse_gate_max",
                                 "Upper clamp g_max(m_t) of the Fuse Gate.")),
      fuse_abs_error_(GaugeFamily(*registry_, "streamlearn_fuse_abs_error",
                                  "Absolute error |y - y_hat| of the last fused sample.")),
      control_actions_total_(CounterFamily(*registry_, "streamlearn_control_actions_total",
                                           "Actions taken by the shard's control plane.")),
      store_write_seconds_(prometheus::BuildHistogram()
                               .Name("streamlearn_store_write_seconds")
                               .Help("Time of one write to the store (snapshot or log append).")
                               .Register(*registry_)
                               .Add({}, StoreWriteBuckets())),
      store_write_bytes_total_(CounterFamily(*registry_, "streamlearn_store_write_bytes_total",
                                             "Bytes written to the store.")
                                   .Add({})),
      forwarded_total_(CounterFamily(
          *registry_, "streamlearn_forwarded_total",
          "Requests and batches forwarded to their shard's owner (cluster mode), by the "
          "owner's answer.")),
      cluster_owned_shards_(GaugeFamily(*registry_, "streamlearn_cluster_owned_shards",
                                        "Shards whose lease this server holds (cluster mode).")
                                .Add({})),
      cluster_lease_events_total_(CounterFamily(
          *registry_, "streamlearn_cluster_lease_events_total",
          "Shard lease events of this server: acquired, taken_over, renewed, released, lost, "
          "renew_failed (cluster mode).")) {}

Metrics::~Metrics() = default;

void Metrics::RecordForward(std::string_view method, absl::StatusCode code) {
  forwarded_total_.Add({{"method", std::string(method)}, {"code", absl::StatusCodeToString(code)}})
      .Increment();
}

void Metrics::SetOwnedShards(size_t n) { cluster_owned_shards_.Set(static_cast<double>(n)); }

void Metrics::RecordLeaseEvent(std::string_view event, uint64_t n) {
  if (n == 0) return;
  cluster_lease_events_total_.Add({{"event", std::string(event)}})
      .Increment(static_cast<double>(n));
}

absl::Status Metrics::StartExposer(const std::string& address) {
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address);
    exposer->RegisterCollectable(registry_);
    exposer->RegisterCollectable(store_memory_);
    exposer_ = std::move(exposer);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on '", address, "': ", e.what()));
  }
  return absl::OkStatus();
}

void Metrics::WatchStoreMemory(StoreMemorySource source) {
  store_memory_->Watch(std::move(source));
}

std::vector<prometheus::MetricFamily> Metrics::CollectMemory() const {
  return store_memory_->Collect();
}

void Metrics::MemoryCollectable::Watch(StoreMemorySource source) {
  MutexLock lock(&mu_);
  source_ = std::move(source);
}

namespace {

// A gauge family with one series per kind (label "kind").
prometheus::MetricFamily GaugeByKind(
    const char* name, const char* help,
    std::initializer_list<std::pair<const char*, uint64_t>> kinds) {
  prometheus::MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = prometheus::MetricType::Gauge;
  for (const auto& [kind, bytes] : kinds) {
    prometheus::ClientMetric metric;
    metric.label.push_back({"kind", kind});
    metric.gauge.value = static_cast<double>(bytes);
    family.metric.push_back(std::move(metric));
  }
  return family;
}

}  // namespace

std::vector<prometheus::MetricFamily> Metrics::MemoryCollectable::Collect() const {
  std::vector<prometheus::MetricFamily> families;
  // The allocator's own statistics (server/heap.h: glibc's mallinfo2 or jemalloc's stats).
  const HeapStats heap = ReadHeapStats();
  families.push_back(GaugeByKind(
      "streamlearn_process_heap_bytes",
      "The C heap by the allocator's own accounting: allocated (in use), free (held by the "
      "allocator but not in use), mapped (glibc: large chunks mapped one by one; jemalloc: "
      "all its active extents)",
      {{"allocated", heap.allocated}, {"free", heap.free}, {"mmapped", heap.mapped}}));
  MutexLock lock(&mu_);  // held while the source runs: Watch(nullptr) waits for it
  if (!source_) return families;
  const storage::Store::MemoryUsage m = source_();
  families.push_back(GaugeByKind("streamlearn_store_memory_bytes",
                                 "Memory the embedded store (RocksDB) accounts for, by kind",
                                 {{"block_cache", m.block_cache},
                                  {"memtables", m.memtables},
                                  {"table_readers", m.table_readers}}));
  return families;
}

int Metrics::exposer_port() const {
  if (exposer_ == nullptr) return 0;
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void Metrics::RecordRpc(std::string_view method, absl::StatusCode code, double seconds) {
  RpcSeries& series = SeriesFor(method, code);
  series.total->Increment();
  series.latency->Observe(seconds);
}

Metrics::RpcSeries& Metrics::SeriesFor(std::string_view method, absl::StatusCode code) {
  MutexLock lock(&mu_);
  auto key = std::make_pair(std::string(method), code);
  auto it = rpcs_.find(key);
  if (it != rpcs_.end()) return it->second;
  RpcSeries series{
      .total = &rpc_total_.Add({{"method", key.first}, {"code", absl::StatusCodeToString(code)}}),
      .latency = &rpc_latency_.Add({{"method", key.first}}, LatencyBuckets()),
  };
  return rpcs_.emplace(std::move(key), series).first->second;
}

template <typename Series, typename Make>
Series& Metrics::CachedSeries(std::map<ShardKey, Series>* cache, const std::string& model,
                              uint32_t shard, const Make& make) {
  MutexLock lock(&mu_);
  // The series this (model, shard) reports into (SetCardinalityLimits).
  const uint32_t bucket = std::min(shard, max_shard_series_);
  std::string label_model = model;
  if (!series_models_.contains(model)) {
    if (series_models_.size() < max_model_series_) {
      series_models_.insert(model);
    } else {
      label_model = "_other";
    }
  }
  ShardKey key(label_model, bucket);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  const prometheus::Labels labels{
      {"model", label_model},
      {"shard", bucket < max_shard_series_ ? std::to_string(bucket)
                                           : absl::StrCat(max_shard_series_, "+")}};
  // try_emplace: a series may hold atomics, so it is built in place.
  Series& series = cache->try_emplace(std::move(key)).first->second;
  make(labels, series);
  return series;
}

Metrics::ShardSeries& Metrics::SeriesFor(const std::string& model, uint32_t shard) {
  return CachedSeries(&shards_, model, shard,
                      [this](const prometheus::Labels& labels, ShardSeries& s) {
                        s = ShardSeries{
                            .events = &events_total_.Add(labels),
                            .duplicates = &duplicates_total_.Add(labels),
                            .alarms = &alarms_total_.Add(labels),
                            .rj_red_events = &rj_red_events_total_.Add(labels),
                            .regulations = &regulations_total_.Add(labels),
                            .margin = &margin_.Add(labels),
                            .rj_gap = &rj_gap_.Add(labels),
                            .rj_level = &rj_level_.Add(labels),
                            .beta_floor = &beta_floor_.Add(labels),
                            .lambda_star = &lambda_star_.Add(labels),
                            .clip_rate = &clip_rate_.Add(labels),
                            .denominator = &denominator_.Add(labels),
                            .version = &version_.Add(labels),
                        };
                      });
}

void Metrics::RecordIngest(const std::string& model, uint32_t shard, const IngestOutcome& outcome) {
  ShardSeries& s = SeriesFor(model, shard);
  s.events->Increment(outcome.applied);
  s.duplicates->Increment(static_cast<double>(outcome.duplicates.size()));
  s.version->Set(static_cast<double>(outcome.version));
  s.alarms->Increment(outcome.alarms);
  s.rj_red_events->Increment(outcome.red_events);
  s.regulations->Increment(outcome.regulations);
  if (!outcome.has_last) return;
  const sau::EventDiagnostics& d = outcome.last;
  if (outcome.engine != sau::Engine::kPrf) {
    EngineSeries& e = EngineSeriesFor(model, shard);
    if (outcome.engine == sau::Engine::kRidge) {
      e.key_scale->Set(outcome.engine_state.scale);
    } else {
      e.residual_norm->Set(d.vla.residual_norm);
      e.s_norm->Set(outcome.engine_state.s_norm);
      e.a_norm->Set(outcome.engine_state.a_norm);
      e.skipped_keys.Advance(shard, outcome.engine_state.skipped);
    }
    return;
  }
  s.margin->Set(d.margin);
  s.rj_gap->Set(d.rj_gap);
  s.rj_level->Set(static_cast<double>(static_cast<int>(d.rj_level)));
  s.beta_floor->Set(d.beta_floor);
  s.lambda_star->Set(d.lambda_star);
  s.clip_rate->Set(d.clip_rate);
  s.denominator->Set(d.den);
}

void Metrics::TotalCounter::Advance(uint32_t shard, uint64_t total) {
  MutexLock lock(&mu);
  uint64_t& prev = seen[shard];
  if (total > prev) {
    counter->Increment(static_cast<double>(total - prev));
    prev = total;
  }
}

Metrics::EngineSeries& Metrics::EngineSeriesFor(const std::string& model, uint32_t shard) {
  return CachedSeries(&engine_shards_, model, shard,
                      [this](const prometheus::Labels& labels, EngineSeries& s) {
                        s.key_scale = &engine_key_scale_.Add(labels);
                        s.residual_norm = &engine_residual_norm_.Add(labels);
                        s.s_norm = &engine_s_norm_.Add(labels);
                        s.a_norm = &engine_a_norm_.Add(labels);
                        s.condition = &engine_condition_.Add(labels);
                        s.skipped_keys.counter = &engine_skipped_keys_total_.Add(labels);
                        s.jittered_factors = &engine_jittered_factors_total_.Add(labels);
                      });
}

void Metrics::RecordEngineQuery(const std::string& model, uint32_t shard,
                                const sau::EngineReadout& r) {
  EngineSeries& e = EngineSeriesFor(model, shard);
  e.condition->Set(r.condition);
  if (r.jitter > 0) e.jittered_factors->Increment();
}

Metrics::LmuSeries& Metrics::LmuSeriesFor(const std::string& model, uint32_t shard) {
  return CachedSeries(&lmu_shards_, model, shard,
                      [this](const prometheus::Labels& labels, LmuSeries& s) {
                        s.samples = &lmu_samples_total_.Add(labels);
                        s.duplicates = &lmu_duplicates_total_.Add(labels);
                        s.inserts = &lmu_inserts_total_.Add(labels);
                        s.rebuilds.counter = &lmu_rebuilds_total_.Add(labels);
                        s.tripwires.counter = &lmu_tripwires_total_.Add(labels);
                        s.lookup_probes_max = &lmu_lookup_probes_max_.Add(labels);
                        s.insert_probes_max = &lmu_insert_probes_max_.Add(labels);
                        s.delta_load = &lmu_delta_load_.Add(labels);
                        s.ring_used = &lmu_ring_used_.Add(labels);
                        s.stash_used = &lmu_stash_used_.Add(labels);
                        s.emergency_used = &lmu_emergency_used_.Add(labels);
                        s.rebuild_seconds = &lmu_rebuild_seconds_.Add(labels);
                        s.base_keys = &lmu_base_keys_.Add(labels);
                        s.delta_keys = &lmu_delta_keys_.Add(labels);
                      });
}

void Metrics::RecordUpdate(const std::string& model, uint32_t shard, const UpdateOutcome& outcome,
                           const lmu::LmuTableStats& table) {
  LmuSeries& s = LmuSeriesFor(model, shard);
  s.samples->Increment(outcome.applied);
  s.duplicates->Increment(static_cast<double>(outcome.duplicates.size()));
  s.inserts->Increment(outcome.inserted);
  s.rebuilds.Advance(shard, table.rebuilds);
  s.tripwires.Advance(shard, table.tripwires);
  s.lookup_probes_max->Set(table.max_locate_probes);
  s.insert_probes_max->Set(table.max_insert_probes);
  s.delta_load->Set(table.delta_load);
  s.ring_used->Set(table.ring_used);
  s.stash_used->Set(table.stash_used);
  s.emergency_used->Set(table.emergency_used ? 1 : 0);
  s.rebuild_seconds->Set(table.last_rebuild_seconds);
  s.base_keys->Set(static_cast<double>(table.base_keys));
  s.delta_keys->Set(static_cast<double>(table.delta_keys));
}

void Metrics::RecordAuditRecords(const std::string& model, uint32_t shard, uint64_t n,
                                 const std::string& /*head_hex*/, uint64_t next_index) {
  AuditSeries& s = CachedSeries(&audit_, model, shard,
                                [this](const prometheus::Labels& labels, AuditSeries& a) {
                                  a.records = &audit_records_total_.Add(labels);
                                  a.chain_length = &audit_chain_length_.Add(labels);
                                });
  s.records->Increment(static_cast<double>(n));
  s.chain_length->Set(static_cast<double>(next_index));
}

void Metrics::RecordSnapshot(const std::string& model, uint32_t shard, double seconds,
                             uint64_t bytes) {
  SnapshotSeries& s =
      CachedSeries(&snapshots_, model, shard,
                   [this](const prometheus::Labels& labels, SnapshotSeries& series) {
                     series.total = &snapshots_total_.Add(labels);
                     series.last_timestamp = &snapshot_last_timestamp_.Add(labels);
                     series.duration = &snapshot_duration_.Add(labels);
                     series.bytes = &snapshot_bytes_.Add(labels);
                   });
  s.total->Increment();
  s.duration->Set(seconds);
  s.bytes->Set(static_cast<double>(bytes));
  s.last_timestamp->Set(UnixNowSeconds());
}

void Metrics::RecordSnapshotFailure(const std::string& model, uint32_t shard) {
  prometheus::Counter* failures =
      CachedSeries(&snapshot_failures_, model, shard,
                   [this](const prometheus::Labels& labels, prometheus::Counter*& c) {
                     c = &snapshot_failures_total_.Add(labels);
                   });
  failures->Increment();
}

void Metrics::RecordStoreWrite(double seconds, uint64_t bytes) {
  store_write_seconds_.Observe(seconds);
  store_write_bytes_total_.Increment(static_cast<double>(bytes));
}

void Metrics::RecordRecovery(const std::string& model, uint32_t shard, uint64_t replayed_batches,
                             double seconds) {
  RecoverySeries& s = CachedSeries(&recoveries_, model, shard,
                                   [this](const prometheus::Labels& labels, RecoverySeries& r) {
                                     r.replayed_batches = &recovery_replayed_batches_.Add(labels);
                                     r.seconds = &recovery_seconds_.Add(labels);
                                   });
  s.replayed_batches->Set(static_cast<double>(replayed_batches));
  s.seconds->Set(seconds);
}

void Metrics::SetLogBacklog(const std::string& model, uint32_t shard, uint64_t batches) {
  prometheus::Gauge* backlog =
      CachedSeries(&log_backlog_, model, shard,
                   [this](const prometheus::Labels& labels, prometheus::Gauge*& g) {
                     g = &log_backlog_batches_.Add(labels);
                   });
  backlog->Set(static_cast<double>(batches));
}

void Metrics::SetAuditArchive(const std::string& model, uint32_t shard, uint64_t archived,
                              uint64_t live, uint64_t live_bound) {
  AuditArchiveSeries& g = CachedSeries(
      &audit_archive_, model, shard,
      [this](const prometheus::Labels& labels, AuditArchiveSeries& s) {
        s.archived = &audit_archived_records_.Add(labels);
        s.live = &audit_live_records_.Add(labels);
        s.live_bound = &audit_live_records_bound_.Add(labels);
      });
  g.archived->Set(static_cast<double>(archived));
  g.live->Set(static_cast<double>(live));
  g.live_bound->Set(static_cast<double>(live_bound));
}

void Metrics::RecordAuditArchiveFailure(const std::string& model, uint32_t shard) {
  prometheus::Counter* failures =
      CachedSeries(&audit_archive_failures_, model, shard,
                   [this](const prometheus::Labels& labels, prometheus::Counter*& c) {
                     c = &audit_archive_failures_total_.Add(labels);
                   });
  failures->Increment();
}

void Metrics::RecordFuse(const std::string& model, uint32_t shard, const FuseHealth& h) {
  FuseSeries& f = CachedSeries(&fuse_, model, shard,
                               [this](const prometheus::Labels& labels, FuseSeries& series) {
                                 series.gate = &fuse_gate_.Add(labels);
                                 series.gate_min = &fuse_gate_min_.Add(labels);
                                 series.gate_max = &fuse_gate_max_.Add(labels);
                                 series.abs_error = &fuse_abs_error_.Add(labels);
                                 series.actions.counter = &control_actions_total_.Add(labels);
                               });
  f.gate->Set(h.gate);
  f.gate_min->Set(h.g_min);
  f.gate_max->Set(h.g_max);
  f.abs_error->Set(h.y_err_abs);
  f.actions.Advance(shard, h.actions);

  if (h.engine != sau::Engine::kPrf) {
    EngineSeries& e = EngineSeriesFor(model, shard);
    if (h.engine == sau::Engine::kRidge) {
      e.key_scale->Set(h.key_scale);
      e.condition->Set(h.condition);
    } else {
      e.residual_norm->Set(h.residual_norm);
      e.s_norm->Set(h.s_norm);
    }
    return;
  }
  ShardSeries& s = SeriesFor(model, shard);
  s.margin->Set(h.margin);
  s.rj_gap->Set(h.rj_gap);
  s.rj_level->Set(static_cast<double>(h.rj_level));
  s.beta_floor->Set(h.beta_floor);
  s.lambda_star->Set(h.lambda_star);
  s.denominator->Set(h.den);
}

}  // namespace streamlearn::server
