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
                           "Published SAU version of the shard.")) {}

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

}  // namespace streamlearn::server
