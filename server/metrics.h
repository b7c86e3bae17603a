// Metrics: the server's Prometheus metrics, one Registry, and an optional HTTP exposer.
//
// Names start with streamlearn_ and carry their unit (docs/DECISIONS.md, "Observability").
// Per-model series are labelled {model, shard} only, never by key; the RPC series are labelled
// {method, code}, both from small fixed sets. docs/OPERATIONS.md explains each one.
//
//   streamlearn_rpc_total{method,code}            counter: unary RPCs and Ingest batches
//   streamlearn_rpc_latency_seconds{method}       histogram: server-side handling time
//   streamlearn_sau_events_total{model,shard}     counter: events applied
//   streamlearn_sau_duplicate_events_total{...}   counter: events acknowledged as duplicates
//   streamlearn_sau_alarms_total{model,shard}     counter: events whose margin went negative
//   streamlearn_sau_rj_red_events_total{...}      counter: events at RJ level red
//   streamlearn_sau_regulations_total{...}        counter: self-regulating actions (docs/SAU.md)
//   streamlearn_sau_{margin,rj_gap,rj_level,beta_floor,lambda_star,clip_rate,denominator,
//                    version}{model,shard}        gauges from the last applied event
//   streamlearn_sau_engine_{key_scale,residual_norm,s_norm,a_norm,condition}{model,shard}
//                                                 gauges of the ridge and vla engines
//                                                 (docs/ENGINES.md); the prf gauges above
//                                                 stay 0 for their models
//   streamlearn_sau_engine_{skipped_keys,jittered_factors}_total{model,shard}
//                                                 counters: vla keys under key_eps, ridge
//                                                 readouts whose factor needed jitter
//   streamlearn_lmu_{samples,duplicate_samples,inserts,rebuilds,tripwires}_total{model,shard}
//                                                 counters (rebuilds, tripwires: the table's)
//   streamlearn_lmu_{lookup,insert}_probes_max{model,shard}   gauges: lifetime maxima
//   streamlearn_lmu_{delta_load,ring_used,stash_used,emergency_used,rebuild_seconds,
//                    base_keys,delta_keys}{model,shard}       gauges from the table after a batch
//   streamlearn_audit_records_total{model,shard}  counter: audit records appended
//   streamlearn_audit_chain_length{model,shard}   gauge: index of the next record
//   streamlearn_snapshots_total{model,shard}      counter: snapshots written
//   streamlearn_snapshot_failures_total{...}      counter: snapshots that failed
//   streamlearn_snapshot_{last_timestamp_seconds,duration_seconds,bytes}{model,shard}
//                                                 gauges of the last snapshot written
//   streamlearn_store_write_seconds               histogram: one store write (no labels)
//   streamlearn_store_write_bytes_total           counter: bytes written (no labels)
//   streamlearn_recovery_{replayed_batches,seconds}{model,shard}  gauges: the last recovery
//   streamlearn_log_backlog_batches{model,shard}  gauge: batches logged since the last snapshot
//   streamlearn_audit_{archived,live}_records{model,shard}  gauges: the chain's records in
//                                                 archive segments / still in the store
//   streamlearn_audit_live_records_bound{model,shard}  gauge: the most the store keeps while
//                                                 archiving keeps up
//   streamlearn_audit_archive_failures_total{model,shard}  counter: archive passes that failed
//   streamlearn_fuse_{gate,gate_min,gate_max,abs_error}{model,shard}  gauges: Fuse health
//   streamlearn_control_actions_total{model,shard}  counter: control-plane actions
//   streamlearn_store_memory_bytes{kind}          gauge, read at each scrape: RocksDB's own
//                                                 accounting (kind block_cache, memtables,
//                                                 table_readers; WatchStoreMemory)
//   streamlearn_process_heap_bytes{kind}          gauge, read at each scrape: malloc's own
//                                                 statistics (allocated, free, mmapped)
//
// Series of a (model, shard) appear at its first Record call of their kind, so a model
// without a store or a Fuse part exports none of theirs.
//
//   Metrics metrics;
//   if (auto s = metrics.StartExposer("0.0.0.0:9464"); !s.ok()) ...   // optional
//   metrics.RecordRpc("Query", absl::StatusCode::kOk, 0.0002);
//   metrics.RecordIngest("demo", 1, outcome);
//   metrics.RecordUpdate("demo", 1, update_outcome, shard.TableStats());
//   metrics.RecordSnapshot("demo", 1, /*seconds=*/0.03, /*bytes=*/1 << 20);
//
// The exposer is optional because stopping its HTTP server takes about two seconds; tests
// read registry() directly instead.
// Ownership: owns the Registry (shared with the exposer) and the exposer.
// Thread safety: all methods are thread-safe except StartExposer, which must be called
// before the metrics are shared between threads.
#ifndef STREAMLEARN_SERVER_METRICS_H_
#define STREAMLEARN_SERVER_METRICS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "core/common/mutex.h"
#include "core/lmu/lmu_table.h"
#include "core/shard/lmu_shard.h"
#include "core/shard/sau_shard.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/storage/storage_observer.h"
#include "server/storage/store.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace streamlearn::server {

// The health of one shard's Fuse and control plane after a step (docs/FUSE.md, "The control
// plane"), as RecordFuse exports it.
struct FuseHealth {
  double gate = 0;         // Gate in force
  double g_min = 0;        // its clamp bounds g_min(m_t), g_max(m_t)
  double g_max = 0;
  double y_err_abs = 0;    // |y - y_hat| of the last fused sample
  double margin = 0;       // SAU health the gate was computed from
  double rj_gap = 0;
  int rj_level = 0;        // 0 green, 1 yellow, 2 red
  double beta_floor = 0;
  double lambda_star = 0;
  double den = 0;
  uint64_t actions = 0;    // control actions the shard has taken so far (a running total)
  // Over the ridge or vla engine (docs/FUSE.md, "Other engines") the prf fields above are 0
  // and their series are not written; the engine's are: ridge its scale (max ||k||^2) and the
  // condition number of its last readout, vla ||e|| of its last write and ||S||_F.
  sau::Engine engine = sau::Engine::kPrf;
  double key_scale = 0, condition = 0;
  double residual_norm = 0, s_norm = 0;
};

class Metrics final : public storage::StorageObserver {
 public:
  Metrics();
  ~Metrics();

  Metrics(const Metrics&) = delete;

  // Bounds the per-shard series (docs/OPERATIONS.md, "Metrics"): shards 0..max_shards-1 of a
  // model have series of their own and its other shards share one labelled shard="<max>+"
  // (counters are their sums, gauges the last value any of them set); the first max_models
  // models to report have series of their own and the rest share model="_other".
  // REQUIRES: called before anything is recorded.
  void SetCardinalityLimits(uint32_t max_shards, uint32_t max_models) {
    max_shard_series_ = max_shards;
    max_model_series_ = max_models;
  }
  Metrics& operator=(const Metrics&) = delete;

  // Serves registry() over HTTP at `address` ("host:port") under /metrics.
  // Errors: UNAVAILABLE when the address cannot be bound.
  absl::Status StartExposer(const std::string& address);
  // The port the exposer listens on (the kernel's choice for "host:0"); 0 without an exposer.
  int exposer_port() const;

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  // The source of streamlearn_store_memory_bytes, called at each scrape; nullptr (the
  // default) exports none. The caller clears it before what it reads goes away.
  using StoreMemorySource = std::function<storage::Store::MemoryUsage()>;
  void WatchStoreMemory(StoreMemorySource source);
  // What a scrape exports of memory now: the store's (when watched) and the C heap's
  // (streamlearn_process_heap_bytes); the exposer's view, tests read it here.
  std::vector<prometheus::MetricFamily> CollectMemory() const;

  // One finished unary RPC or one stream batch (method "Ingest" or "Update", code of its
  // in-band status).
  void RecordRpc(std::string_view method, absl::StatusCode code, double seconds);

  // After a successful batch: counts the applied and duplicate events and, when the batch
  // applied at least one event, sets the shard's gauges from its last diagnostics.
  void RecordIngest(const std::string& model, uint32_t shard, const IngestOutcome& outcome);

  // After a successful LMU batch: counts applied samples, duplicates and new ids; advances the
  // rebuild and tripwire counters to the table's totals; sets the gauges from `table`.
  void RecordUpdate(const std::string& model, uint32_t shard, const UpdateOutcome& outcome,
                    const lmu::LmuTableStats& table);

  // After `n` audit records were appended to the shard's chain; `next_index` is the index the
  // next record will get (the chain's length). head_hex is not exported.
  void RecordAuditRecords(const std::string& model, uint32_t shard, uint64_t n,
                          const std::string& head_hex, uint64_t next_index) override;

  // After a snapshot of the shard was written: `seconds` from start to durable, `bytes`
  // written. Sets the last-snapshot timestamp to now (Unix time).
  void RecordSnapshot(const std::string& model, uint32_t shard, double seconds,
                      uint64_t bytes) override;
  void RecordSnapshotFailure(const std::string& model, uint32_t shard) override;

  // One write to the store (a snapshot or an event-log append), any model.
  void RecordStoreWrite(double seconds, uint64_t bytes) override;

  // After the shard was recovered: `replayed_batches` log batches replayed on top of its
  // snapshot in `seconds` (load plus replay).
  void RecordRecovery(const std::string& model, uint32_t shard, uint64_t replayed_batches,
                      double seconds) override;

  // Batches in the shard's event log since its last snapshot (what a recovery would replay).
  void SetLogBacklog(const std::string& model, uint32_t shard, uint64_t batches) override;
  // The shard's audit records archived and still in the store (docs/AUDIT.md, "Bounded
  // storage").
  void SetAuditArchive(const std::string& model, uint32_t shard, uint64_t archived,
                       uint64_t live, uint64_t live_bound) override;
  void RecordAuditArchiveFailure(const std::string& model, uint32_t shard) override;

  // After a Fuse step: sets the gate gauges, advances the control-action counter to
  // h.actions, and sets the shard's SAU health gauges (margin, RJ, beta_floor, lambda_*, den)
  // from `h`.
  void RecordFuse(const std::string& model, uint32_t shard, const FuseHealth& h);

  // After a ridge or vla readout: its condition number, and a jittered factor counted.
  void RecordEngineQuery(const std::string& model, uint32_t shard, const sau::EngineReadout& r);

  // Cluster mode: one request or batch forwarded to its shard's owner, by the owner's answer.
  void RecordForward(std::string_view method, absl::StatusCode code);
  // Cluster mode: the shards this server holds leases for.
  void SetOwnedShards(size_t n);
  // Cluster mode: n lease events ("acquired", "taken_over" (another server's expired lease),
  // "renewed", "released", "lost", "renew_failed").
  void RecordLeaseEvent(std::string_view event, uint64_t n = 1);

 private:
  using ShardKey = std::pair<std::string, uint32_t>;

  struct ShardSeries {
    prometheus::Counter* events;
    prometheus::Counter* duplicates;
    prometheus::Counter* alarms;
    prometheus::Counter* rj_red_events;
    prometheus::Counter* regulations;
    prometheus::Gauge* margin;
    prometheus::Gauge* rj_gap;
    prometheus::Gauge* rj_level;
    prometheus::Gauge* beta_floor;
    prometheus::Gauge* lambda_star;
    prometheus::Gauge* clip_rate;
    prometheus::Gauge* denominator;
    prometheus::Gauge* version;
  };

  // A counter that follows a monotone total kept elsewhere (the LMU table's rebuilds and
  // tripwires): Advance(total) adds what is new. Concurrent callers with stale totals never
  // count anything twice.
  // A counter fed running totals, one per shard (several shards may share the series:
  // SetCardinalityLimits); it adds what each shard's total grew by.
  struct TotalCounter {
    prometheus::Counter* counter;
    Mutex mu;
    std::map<uint32_t, uint64_t> seen ABSL_GUARDED_BY(mu);
    void Advance(uint32_t shard, uint64_t total) ABSL_LOCKS_EXCLUDED(mu);
  };

  struct EngineSeries {
    prometheus::Gauge* key_scale;
    prometheus::Gauge* residual_norm;
    prometheus::Gauge* s_norm;
    prometheus::Gauge* a_norm;
    prometheus::Gauge* condition;
    prometheus::Counter* jittered_factors;
    TotalCounter skipped_keys;
  };

  struct LmuSeries {
    prometheus::Counter* samples;
    prometheus::Counter* duplicates;
    prometheus::Counter* inserts;
    TotalCounter rebuilds;
    TotalCounter tripwires;
    prometheus::Gauge* lookup_probes_max;
    prometheus::Gauge* insert_probes_max;
    prometheus::Gauge* delta_load;
    prometheus::Gauge* ring_used;
    prometheus::Gauge* stash_used;
    prometheus::Gauge* emergency_used;
    prometheus::Gauge* rebuild_seconds;
    prometheus::Gauge* base_keys;
    prometheus::Gauge* delta_keys;
  };

  struct RpcSeries {
    prometheus::Counter* total;
    prometheus::Histogram* latency;
  };

  struct AuditSeries {
    prometheus::Counter* records;
    prometheus::Gauge* chain_length;
  };

  struct SnapshotSeries {
    prometheus::Counter* total;
    prometheus::Gauge* last_timestamp;
    prometheus::Gauge* duration;
    prometheus::Gauge* bytes;
  };

  struct RecoverySeries {
    prometheus::Gauge* replayed_batches;
    prometheus::Gauge* seconds;
  };

  struct FuseSeries {
    prometheus::Gauge* gate;
    prometheus::Gauge* gate_min;
    prometheus::Gauge* gate_max;
    prometheus::Gauge* abs_error;
    TotalCounter actions;
  };

  // The cached series of (model, shard) in `*cache` (one of the maps below, read and
  // written here under mu_: the analysis does not follow the pointer); on a miss, builds them
  // in place with make(labels, series). Takes mu_.
  template <typename Series, typename Make>
  Series& CachedSeries(std::map<ShardKey, Series>* cache, const std::string& model,
                       uint32_t shard, const Make& make) ABSL_LOCKS_EXCLUDED(mu_);

  ShardSeries& SeriesFor(const std::string& model, uint32_t shard) ABSL_LOCKS_EXCLUDED(mu_);
  RpcSeries& SeriesFor(std::string_view method, absl::StatusCode code) ABSL_LOCKS_EXCLUDED(mu_);
  LmuSeries& LmuSeriesFor(const std::string& model, uint32_t shard) ABSL_LOCKS_EXCLUDED(mu_);
  EngineSeries& EngineSeriesFor(const std::string& model, uint32_t shard)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Read at scrape time rather than set: RocksDB's figures change without any call of ours.
  class MemoryCollectable final : public prometheus::Collectable {
   public:
    void Watch(StoreMemorySource source) ABSL_LOCKS_EXCLUDED(mu_);
    std::vector<prometheus::MetricFamily> Collect() const override ABSL_LOCKS_EXCLUDED(mu_);

   private:
    mutable Mutex mu_;
    StoreMemorySource source_ ABSL_GUARDED_BY(mu_);
  };

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<MemoryCollectable> store_memory_ = std::make_shared<MemoryCollectable>();
  std::unique_ptr<prometheus::Exposer> exposer_;

  prometheus::Family<prometheus::Counter>& rpc_total_;
  prometheus::Family<prometheus::Histogram>& rpc_latency_;
  prometheus::Family<prometheus::Counter>& events_total_;
  prometheus::Family<prometheus::Counter>& duplicates_total_;
  prometheus::Family<prometheus::Counter>& alarms_total_;
  prometheus::Family<prometheus::Counter>& rj_red_events_total_;
  prometheus::Family<prometheus::Counter>& regulations_total_;
  prometheus::Family<prometheus::Gauge>& margin_;
  prometheus::Family<prometheus::Gauge>& rj_gap_;
  prometheus::Family<prometheus::Gauge>& rj_level_;
  prometheus::Family<prometheus::Gauge>& beta_floor_;
  prometheus::Family<prometheus::Gauge>& lambda_star_;
  prometheus::Family<prometheus::Gauge>& clip_rate_;
  prometheus::Family<prometheus::Gauge>& denominator_;
  prometheus::Family<prometheus::Gauge>& version_;
  prometheus::Family<prometheus::Gauge>& engine_key_scale_;
  prometheus::Family<prometheus::Gauge>& engine_residual_norm_;
  prometheus::Family<prometheus::Gauge>& engine_s_norm_;
  prometheus::Family<prometheus::Gauge>& engine_a_norm_;
  prometheus::Family<prometheus::Gauge>& engine_condition_;
  prometheus::Family<prometheus::Counter>& engine_skipped_keys_total_;
  prometheus::Family<prometheus::Counter>& engine_jittered_factors_total_;
  prometheus::Family<prometheus::Counter>& lmu_samples_total_;
  prometheus::Family<prometheus::Counter>& lmu_duplicates_total_;
  prometheus::Family<prometheus::Counter>& lmu_inserts_total_;
  prometheus::Family<prometheus::Counter>& lmu_rebuilds_total_;
  prometheus::Family<prometheus::Counter>& lmu_tripwires_total_;
  prometheus::Family<prometheus::Gauge>& lmu_lookup_probes_max_;
  prometheus::Family<prometheus::Gauge>& lmu_insert_probes_max_;
  prometheus::Family<prometheus::Gauge>& lmu_delta_load_;
  prometheus::Family<prometheus::Gauge>& lmu_ring_used_;
  prometheus::Family<prometheus::Gauge>& lmu_stash_used_;
  prometheus::Family<prometheus::Gauge>& lmu_emergency_used_;
  prometheus::Family<prometheus::Gauge>& lmu_rebuild_seconds_;
  prometheus::Family<prometheus::Gauge>& lmu_base_keys_;
  prometheus::Family<prometheus::Gauge>& lmu_delta_keys_;
  prometheus::Family<prometheus::Counter>& audit_records_total_;
  prometheus::Family<prometheus::Gauge>& audit_chain_length_;
  prometheus::Family<prometheus::Counter>& snapshots_total_;
  prometheus::Family<prometheus::Counter>& snapshot_failures_total_;
  prometheus::Family<prometheus::Gauge>& snapshot_last_timestamp_;
  prometheus::Family<prometheus::Gauge>& snapshot_duration_;
  prometheus::Family<prometheus::Gauge>& snapshot_bytes_;
  prometheus::Family<prometheus::Gauge>& recovery_replayed_batches_;
  prometheus::Family<prometheus::Gauge>& recovery_seconds_;
  prometheus::Family<prometheus::Gauge>& log_backlog_batches_;
  prometheus::Family<prometheus::Gauge>& audit_archived_records_;
  prometheus::Family<prometheus::Gauge>& audit_live_records_;
  prometheus::Family<prometheus::Gauge>& audit_live_records_bound_;
  prometheus::Family<prometheus::Counter>& audit_archive_failures_total_;
  prometheus::Family<prometheus::Gauge>& fuse_gate_;
  prometheus::Family<prometheus::Gauge>& fuse_gate_min_;
  prometheus::Family<prometheus::Gauge>& fuse_gate_max_;
  prometheus::Family<prometheus::Gauge>& fuse_abs_error_;
  prometheus::Family<prometheus::Counter>& control_actions_total_;
  // The store's series have no labels: made once, by the constructor.
  prometheus::Histogram& store_write_seconds_;
  prometheus::Counter& store_write_bytes_total_;
  prometheus::Family<prometheus::Counter>& forwarded_total_;
  prometheus::Gauge& cluster_owned_shards_;
  prometheus::Family<prometheus::Counter>& cluster_lease_events_total_;

  // Series are looked up once and cached: Family::Add builds a metric on every call. Map
  // nodes never move, so a returned reference stays valid after mu_ is released.
  Mutex mu_;  // guards every map below
  std::map<ShardKey, ShardSeries> shards_ ABSL_GUARDED_BY(mu_);
  // Cardinality (SetCardinalityLimits): models with series of their own.
  std::set<std::string> series_models_ ABSL_GUARDED_BY(mu_);
  uint32_t max_shard_series_ = 32;
  uint32_t max_model_series_ = 512;
  std::map<ShardKey, LmuSeries> lmu_shards_ ABSL_GUARDED_BY(mu_);
  std::map<ShardKey, EngineSeries> engine_shards_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, absl::StatusCode>, RpcSeries> rpcs_ ABSL_GUARDED_BY(mu_);
  std::map<ShardKey, AuditSeries> audit_ ABSL_GUARDED_BY(mu_);
  std::map<ShardKey, SnapshotSeries> snapshots_ ABSL_GUARDED_BY(mu_);
  std::map<ShardKey, prometheus::Counter*> snapshot_failures_ ABSL_GUARDED_BY(mu_);
  std::map<ShardKey, RecoverySeries> recoveries_ ABSL_GUARDED_BY(mu_);
  std::map<ShardKey, prometheus::Gauge*> log_backlog_ ABSL_GUARDED_BY(mu_);
  struct AuditArchiveSeries {
    prometheus::Gauge* archived = nullptr;
    prometheus::Gauge* live = nullptr;
    prometheus::Gauge* live_bound = nullptr;
  };
  std::map<ShardKey, AuditArchiveSeries> audit_archive_ ABSL_GUARDED_BY(mu_);
  std::map<ShardKey, prometheus::Counter*> audit_archive_failures_ ABSL_GUARDED_BY(mu_);
  std::map<ShardKey, FuseSeries> fuse_ ABSL_GUARDED_BY(mu_);
};

// Times one unary RPC or Ingest batch and records it on Done().
//
//   RpcTimer timer(metrics, "Query");
//   return ToGrpcStatus(timer.Done(handler.Query(request, response)));
//
// `*metrics` must outlive the timer. Not thread-safe; one timer per call.
class RpcTimer {
 public:
  RpcTimer(Metrics* metrics, std::string_view method)
      : metrics_(metrics), method_(method), start_(std::chrono::steady_clock::now()) {}

  // Records the call with the code of `status` and returns `status` unchanged.
  absl::Status Done(absl::Status status) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
    metrics_->RecordRpc(method_, status.code(), elapsed.count());
    return status;
  }

 private:
  Metrics* const metrics_;
  const std::string_view method_;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace streamlearn::server

#endif  // STREAMLEARN_SERVER_METRICS_H_
