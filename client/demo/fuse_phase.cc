#include "client/demo/fuse_phase.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "client/lib/fuse_session.h"
#include "core/common/status_macros.h"
#include "core/workloads/scenario.h"
#include "core/workloads/scenario_tally.h"
#include "client/demo/scenario_wire.h"
#include "fmt/format.h"

namespace streamlearn::demo {

namespace {

using workloads::PhaseFigures;
using workloads::Scenario;
using workloads::ScenarioPhase;
using workloads::ScenarioSample;

// Nearest-rank percentile; 0 for an empty set.
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(k, 1, v.size()) - 1];
}

const char* RjName(v1::RjLevel level) {
  switch (level) {
    case v1::RJ_LEVEL_YELLOW: return "yellow";
    case v1::RJ_LEVEL_RED: return "red";
    default: return "green";
  }
}

// The run number of `name` if it is <prefix>-<digits>, else 0.
uint64_t RunNumber(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() + 1 || name.compare(0, prefix.size(), prefix) != 0 ||
      name[prefix.size()] != '-') {
    return 0;
  }
  uint64_t n = 0;
  for (size_t i = prefix.size() + 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || n > (uint64_t{1} << 40)) return 0;
    n = 10 * n + static_cast<uint64_t>(name[i] - '0');
  }
  return n;
}

// Creates <prefix>-<n>, n = 1 + the highest run on the server (a few retries if another
// client takes that name first).
absl::StatusOr<v1::ModelInfo> CreateFreshModel(Client& client, const std::string& prefix,
                                               const workloads::ScenarioOptions& so,
                                               uint64_t* run) {
  absl::StatusOr<std::vector<v1::ModelInfo>> models = client.ListModels();
  if (!models.ok()) return models.status();
  uint64_t last = 0;
  for (const v1::ModelInfo& m : *models) last = std::max(last, RunNumber(m.spec().name(), prefix));
  for (int attempt = 0; attempt < 8; ++attempt) {
    *run = last + 1 + static_cast<uint64_t>(attempt);
    absl::StatusOr<v1::ModelInfo> info =
        client.CreateModel(client::ScenarioModelSpec(fmt::format("{}-{}", prefix, *run), so));
    if (info.status().code() == absl::StatusCode::kAlreadyExists) continue;
    if (!info.ok()) return info.status();
    RETURN_IF_ERROR(client::CheckScenarioModel(*info, so));
    return info;
  }
  return absl::AlreadyExistsError(
      fmt::format("could not find a free model name {}-<n> after {} tries", prefix, last + 8));
}

// What the rows average over: the samples and batches since the last row.
struct Window {
  uint64_t n = 0;
  double se_fused = 0, se_sau = 0, se_lmu = 0, gate = 0;
  uint64_t red = 0;
  std::vector<double> latency_ms;
};

std::string PhaseStory(ScenarioPhase p, const workloads::ScenarioOptions& o) {
  switch (p) {
    case ScenarioPhase::kSteady:
      return fmt::format(
          "steady: {} query clusters on fixed axes; x = a segment id + {} of {} stable ids. "
          "Expect attention to dominate (gate high), RJ green, the LMU's ring empty",
          o.clusters, o.nnz, o.vocab);
    case ScenarioPhase::kNovelty:
      return fmt::format(
          "novelty: the clusters drift ({:g} per coordinate per sample) and every sample "
          "carries {} ids from a pool of {} new ones. Expect RJ red, the gate clamped to <= 0.4, "
          "beta_floor and lambda* raised, the LMU's tau_low lowered and a rebuild",
          o.drift_step, o.burst_nnz, o.burst_ids);
    case ScenarioPhase::kStabilization:
      return "stabilization: the drift stops and the new ids recur. Expect RJ to recover, the "
             "clamp to be released and the gate to return to attention";
  }
  return "";
}

}  // namespace

absl::Status RunFusePhase(Client& client, const FusePhaseOptions& o, std::ostream& out) {
  workloads::ScenarioOptions so;
  so.seed = o.seed;
  if (o.batch == 0) return absl::InvalidArgumentError("--fuse_batch must be >= 1");
  uint64_t run = 0;
  absl::StatusOr<v1::ModelInfo> info = CreateFreshModel(client, o.model_prefix, so, &run);
  if (!info.ok()) return info.status();
  const std::string model = info->spec().name();
  const v1::FuseSpec& fs = info->spec().fuse();
  out << fmt::format(
      "\nFuse phase: the worked scenario of docs/FUSE.md (core/workloads/scenario.h, seed {}) "
      "on a new fused model '{}' (run {}; each run starts a fresh model so the three phases "
      "show from a fresh learner{})\n",
      so.seed, model, run,
      run == 2 ? ", run 1 is still on the server"
               : run > 2 ? fmt::format(", runs 1-{} are still on the server", run - 1) : "");
  out << fmt::format(
      "  model: linear-as-gate, y = Gate y_sau + (1 - Gate) y_lmu; SAU d={} r={} tau={:g} "
      "gamma={:g}; LMU lr={:g} C={} (tau_low {:g}); gate clamp {:g} for {} samples on an alarm "
      "or RJ red\n",
      fs.sau().d(), fs.sau().r(), fs.sau().tau(), fs.sau().gamma(), fs.lmu().lr(),
      fs.lmu().delta_buckets() * (fs.lmu().bucket_size() > 0 ? fs.lmu().bucket_size() : 4),
      fs.lmu().tau_low(), fs.control().alarm_g_max(), fs.control().clamp_window());
  Scenario scenario(so);
  double lo = scenario.value(0), hi = scenario.value(0);
  for (int c = 1; c < so.clusters; ++c) {
    lo = std::min(lo, scenario.value(c));
    hi = std::max(hi, scenario.value(c));
  }
  out << fmt::format(
      "  target: y = a(q) + l(x) + noise: the SAU sees only q (cluster values {:.1f} .. {:.1f}), "
      "the LMU only x (a segment id, sparse linear effects); {} + {} + {} samples in Learn "
      "batches of {}, one batch in flight (the latency is each batch's round trip)\n",
      lo, hi, so.steady, so.novelty, so.stabilization, o.batch);

  absl::StatusOr<std::unique_ptr<FuseLearnSession>> session =
      client.OpenFuseLearn(model, o.routing_key, /*window=*/1);
  if (!session.ok()) return session.status();

  workloads::ScenarioTally tally(scenario, fs.control().alarm_g_max());
  std::vector<double> phase_latency_ms;
  Window w;
  const std::string header = fmt::format(
      "{:<13} {:>6} {:>5} {:>5} {:>7} {:<10} {:>9} {:>8} {:>4} {:>5} {:>23} {:>14}\n", "phase", "t",
      "gate", "g_max", "margin", "RJ (red)", "beta_flr", "lambda*", "ring", "load",
      "MSE fused / SAU / LMU", "p50 / p99 ms");
  std::vector<ScenarioSample> batch;
  std::vector<FuseSample> wire;
  v1::FuseHealth health;
  ScenarioPhase phase = ScenarioPhase::kSteady;
  if (!o.quiet) {
    out << "  rows: gate = mean since the previous row; RJ = the level at the row's last sample "
           "(red steps since the previous row); g_max (the gate clamp), margin, beta_floor, "
           "lambda*, the LMU's ring and delta load at the row's last sample; MSE and the Learn "
           "round-trip percentiles since the previous row\n";
  }
  out << "-- " << PhaseStory(phase, so) << "\n";
  if (!o.quiet) out << header;
  while (!scenario.done()) {
    batch.clear();
    wire.clear();
    // A batch never straddles two phases, so each phase's latency is its own.
    while (!scenario.done() && batch.size() < o.batch &&
           (batch.empty() || scenario.PhaseOf(scenario.emitted() + 1) == batch.front().phase)) {
      batch.push_back(scenario.Next());
      const ScenarioSample& s = batch.back();
      wire.push_back(FuseSample{.t = s.t, .x = s.x, .q = s.q, .y = s.y});
    }
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR((*session)->Send(wire));
    absl::StatusOr<FuseLearnResult> r = (*session)->Next();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!r.ok()) return r.status();
    if (!r->status.ok()) return r->status;
    if (r->ack.predictions_size() != static_cast<int>(batch.size())) {
      return absl::InternalError(fmt::format("ack of t {}..{} carries {} predictions, expected {}",
                                             batch.front().t, batch.back().t,
                                             r->ack.predictions_size(), batch.size()));
    }
    client::TallyAck(r->ack, batch, &tally);
    health = r->ack.health();
    phase_latency_ms.push_back(ms);
    w.latency_ms.push_back(ms);
    w.red += static_cast<uint64_t>(client::CountActions(health, "raise_beta_floor:rj_red"));
    for (size_t i = 0; i < batch.size(); ++i) {
      const v1::FusePrediction& p = r->ack.predictions(static_cast<int>(i));
      const double y = batch[i].y[0];
      w.se_fused += (y - p.y_hat(0)) * (y - p.y_hat(0));
      w.se_sau += (y - p.y_hat_sau(0)) * (y - p.y_hat_sau(0));
      w.se_lmu += (y - p.y_hat_lmu(0)) * (y - p.y_hat_lmu(0));
      w.gate += p.gate();
      ++w.n;
    }

    const uint64_t t = batch.back().t;
    const bool phase_end = t == scenario.PhaseEnd(phase);
    if (!o.quiet && (t % o.every < batch.size() || phase_end)) {
      out << fmt::format(
          "{:<13} {:>6} {:>5.2f} {:>5.2f} {:>7.2f} {:<10} {:>9.3g} {:>8.3g} {:>4} {:>5.2f} "
          "{:>23} {:>14}\n",
          PhaseName(phase), t, w.gate / w.n, health.g_max(), health.margin(),
          fmt::format("{} ({})", RjName(health.rj_level()), w.red), health.beta_floor(),
          health.lambda_star(), health.ring_used(), health.delta_load(),
          fmt::format("{:.3f} / {:.3f} / {:.3f}", w.se_fused / w.n, w.se_sau / w.n,
                      w.se_lmu / w.n),
          fmt::format("{:.2f} / {:.2f}", Percentile(w.latency_ms, 0.5),
                      Percentile(w.latency_ms, 0.99)));
      w = Window();
    }
    if (!phase_end) continue;
    const PhaseFigures& f = tally.phase(phase);
    out << fmt::format(
        "== {} (t {}-{}): MSE fused {:.4f}, SAU alone {:.4f}, LMU alone {:.4f}; gate mean "
        "{:.2f} (last 20%: {:.2f}), lowest clamp {:.2f}; RJ red on {} steps, {} alarm(s), "
        "beta_floor up to {:.3g}; LMU ring <= {}, load <= {:.2f}; Learn round trip p50 {:.2f} "
        "ms, p99 {:.2f} ms ({} batches)\n",
        PhaseName(phase), scenario.PhaseBegin(phase), scenario.PhaseEnd(phase), f.MseFused(),
        f.MseSau(), f.MseLmu(), f.MeanGate(), f.TailGate(), f.min_g_max, f.red_steps, f.alarms,
        f.max_beta_floor, f.max_ring_used, f.max_delta_load, Percentile(phase_latency_ms, 0.5),
        Percentile(phase_latency_ms, 0.99), phase_latency_ms.size());
    phase_latency_ms.clear();
    w = Window();
    if (scenario.done()) break;
    phase = scenario.PhaseOf(t + 1);
    out << "-- " << PhaseStory(phase, so) << "\n";
    if (!o.quiet) out << header;
  }
  RETURN_IF_ERROR((*session)->Finish());
  const PhaseFigures total = tally.Total();
  out << fmt::format(
      "Fuse summary: over {} samples MSE fused {:.4f}, SAU alone {:.4f}, LMU alone {:.4f}: the "
      "fused error is {:.0f}% of the better part's. The gate trusted attention while its memory "
      "was current, leaned on the exact linear model while RJ was red, and came back; try\n"
      "  streamlearn describe {}     (the fused shard: steps, gate clamp, control actions)\n",
      total.samples, total.MseFused(), total.MseSau(), total.MseLmu(),
      100 * total.MseFused() / std::min(total.MseSau(), total.MseLmu()), model);
  return absl::OkStatus();
}

}  // namespace streamlearn::demo
