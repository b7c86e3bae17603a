#include "server/metrics.h"

#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace streamlearn::server {
namespace {

// 50 us .. 10 s: an Ingest batch of a few events up to a large batch on a busy shard.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* const kBuckets = new prometheus::Histogram::BucketBoundaries{
      50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
      50e-3, 100e-3, 250e-3, 500e-3, 1.0,  2.5,    5.0,  10.0};
  return *kBuckets;
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
                                  "Ids in the current cuckoo delta.")) {}

Metrics::~Metrics() = default;

absl::Status Metrics::StartExposer(const std::string& address) {
  try {
    auto exposer = std::make_unique<prometheus::Exposer>(address);
    exposer->RegisterCollectable(registry_);
    exposer_ = std::move(exposer);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on '", address, "': ", e.what()));
  }
  return absl::OkStatus();
}

void Metrics::RecordRpc(std::string_view method, absl::StatusCode code, double seconds) {
  RpcSeries& series = SeriesFor(method, code);
  series.total->Increment();
  series.latency->Observe(seconds);
}

Metrics::RpcSeries& Metrics::SeriesFor(std::string_view method, absl::StatusCode code) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(std::string(method), code);
  auto it = rpcs_.find(key);
  if (it != rpcs_.end()) return it->second;
  RpcSeries series{
      .total = &rpc_total_.Add({{"method", key.first}, {"code", absl::StatusCodeToString(code)}}),
      .latency = &rpc_latency_.Add({{"method", key.first}}, LatencyBuckets()),
  };
  return rpcs_.emplace(std::move(key), series).first->second;
}

Metrics::ShardSeries& Metrics::SeriesFor(const std::string& model, uint32_t shard) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(model, shard);
  auto it = shards_.find(key);
  if (it != shards_.end()) return it->second;
  const prometheus::Labels labels{{"model", model}, {"shard", std::to_string(shard)}};
  ShardSeries series{
      .events = &events_total_.Add(labels),
      .duplicates = &duplicates_total_.Add(labels),
      .alarms = &alarms_total_.Add(labels),
      .margin = &margin_.Add(labels),
      .rj_gap = &rj_gap_.Add(labels),
      .rj_level = &rj_level_.Add(labels),
      .beta_floor = &beta_floor_.Add(labels),
      .lambda_star = &lambda_star_.Add(labels),
      .clip_rate = &clip_rate_.Add(labels),
      .denominator = &denominator_.Add(labels),
      .version = &version_.Add(labels),
  };
  return shards_.emplace(std::move(key), series).first->second;
}

void Metrics::RecordIngest(const std::string& model, uint32_t shard, const IngestOutcome& outcome) {
  ShardSeries& s = SeriesFor(model, shard);
  s.events->Increment(outcome.applied);
  s.duplicates->Increment(static_cast<double>(outcome.duplicates.size()));
  s.version->Set(static_cast<double>(outcome.version));
  s.alarms->Increment(outcome.alarms);
  if (!outcome.has_last) return;
  const sau::EventDiagnostics& d = outcome.last;
  s.margin->Set(d.margin);
  s.rj_gap->Set(d.rj_gap);
  s.rj_level->Set(static_cast<double>(static_cast<int>(d.rj_level)));
  s.beta_floor->Set(d.beta_floor);
  s.lambda_star->Set(d.lambda_star);
  s.clip_rate->Set(d.clip_rate);
  s.denominator->Set(d.den);
}

void Metrics::TotalCounter::Advance(uint64_t total) {
  uint64_t prev = seen.load(std::memory_order_relaxed);
  while (total > prev) {
    if (seen.compare_exchange_weak(prev, total, std::memory_order_relaxed)) {
      counter->Increment(static_cast<double>(total - prev));
      return;
    }
  }
}

Metrics::LmuSeries& Metrics::LmuSeriesFor(const std::string& model, uint32_t shard) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(model, shard);
  auto it = lmu_shards_.find(key);
  if (it != lmu_shards_.end()) return it->second;
  const prometheus::Labels labels{{"model", model}, {"shard", std::to_string(shard)}};
  // try_emplace: LmuSeries holds atomics, so it is built in place.
  LmuSeries& s = lmu_shards_.try_emplace(std::move(key)).first->second;
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
  return s;
}

void Metrics::RecordUpdate(const std::string& model, uint32_t shard, const UpdateOutcome& outcome,
                           const lmu::LmuTableStats& table) {
  LmuSeries& s = LmuSeriesFor(model, shard);
  s.samples->Increment(outcome.applied);
  s.duplicates->Increment(static_cast<double>(outcome.duplicates.size()));
  s.inserts->Increment(outcome.inserted);
  s.rebuilds.Advance(table.rebuilds);
  s.tripwires.Advance(table.tripwires);
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

}  // namespace streamlearn::server
