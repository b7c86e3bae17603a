// Metrics: the server's Prometheus metrics, one Registry, and an optional HTTP exposer.
//
// Names start with streamlearn_ and carry their unit (DESIGN: observability). Per-model
// series are labelled {model, shard} only, never by key; the RPC series are labelled
// {method, code}, both from small fixed sets.
//
//   streamlearn_rpc_total{method,code}            counter: unary RPCs and Ingest batches
//   streamlearn_rpc_latency_seconds{method}       histogram: server-side handling time
//   streamlearn_sau_events_total{model,shard}     counter: events applied
//   streamlearn_sau_duplicate_events_total{...}   counter: events acknowledged as duplicates
//   streamlearn_sau_alarms_total{model,shard}     counter: events whose margin went negative
//   streamlearn_sau_{margin,rj_gap,rj_level,beta_floor,lambda_star,clip_rate,denominator,
//                    version}{model,shard}        gauges from the last applied event
//   streamlearn_lmu_{samples,duplicate_samples,inserts,rebuilds,tripwires}_total{model,shard}
//                                                 counters (rebuilds, tripwires: the table's)
//   streamlearn_lmu_{lookup,insert}_probes_max{model,shard}   gauges: lifetime maxima
//   streamlearn_lmu_{delta_load,ring_used,stash_used,emergency_used,rebuild_seconds,
//                    base_keys,delta_keys}{model,shard}       gauges from the table after a batch
//
//   Metrics metrics;
//   if (auto s = metrics.StartExposer("0.0.0.0:9464"); !s.ok()) ...   // optional
//   metrics.RecordRpc("Query", absl::StatusCode::kOk, 0.0002);
//   metrics.RecordIngest("demo", 1, outcome);
//   metrics.RecordUpdate("demo", 1, update_outcome, shard.TableStats());
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
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "core/lmu/lmu_table.h"
#include "core/shard/lmu_shard.h"
#include "core/shard/sau_shard.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace streamlearn::server {

class Metrics {
 public:
  Metrics();
  ~Metrics();

  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Serves registry() over HTTP at `address` ("host:port") under /metrics.
  // Errors: UNAVAILABLE when the address cannot be bound.
  absl::Status StartExposer(const std::string& address);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

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

 private:
  struct ShardSeries {
    prometheus::Counter* events;
    prometheus::Counter* duplicates;
    prometheus::Counter* alarms;
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
  struct TotalCounter {
    prometheus::Counter* counter;
    std::atomic<uint64_t> seen{0};
    void Advance(uint64_t total);
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

  ShardSeries& SeriesFor(const std::string& model, uint32_t shard);
  RpcSeries& SeriesFor(std::string_view method, absl::StatusCode code);
  LmuSeries& LmuSeriesFor(const std::string& model, uint32_t shard);

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;

  prometheus::Family<prometheus::Counter>& rpc_total_;
  prometheus::Family<prometheus::Histogram>& rpc_latency_;
  prometheus::Family<prometheus::Counter>& events_total_;
  prometheus::Family<prometheus::Counter>& duplicates_total_;
  prometheus::Family<prometheus::Counter>& alarms_total_;
  prometheus::Family<prometheus::Gauge>& margin_;
  prometheus::Family<prometheus::Gauge>& rj_gap_;
  prometheus::Family<prometheus::Gauge>& rj_level_;
  prometheus::Family<prometheus::Gauge>& beta_floor_;
  prometheus::Family<prometheus::Gauge>& lambda_star_;
  prometheus::Family<prometheus::Gauge>& clip_rate_;
  prometheus::Family<prometheus::Gauge>& denominator_;
  prometheus::Family<prometheus::Gauge>& version_;
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

  // Series are looked up once and cached: Family::Add builds a metric on every call. Map
  // nodes never move, so a returned reference stays valid after mu_ is released.
  std::mutex mu_;  // guards shards_, lmu_shards_ and rpcs_
  std::map<std::pair<std::string, uint32_t>, ShardSeries> shards_;
  std::map<std::pair<std::string, uint32_t>, LmuSeries> lmu_shards_;
  std::map<std::pair<std::string, absl::StatusCode>, RpcSeries> rpcs_;
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
