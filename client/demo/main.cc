// streamlearn-demo: streams a synthetic workload (DGP-A, then DGP-C drift) into a server and
// compares the server's SAU estimate at a probe query with exact decayed attention computed
// here from the same events (docs/CLIENT.md, "The demo"); then an LMU phase (lmu_phase.h) and
// a Fuse phase, the worked scenario of docs/FUSE.md on a fused model (fuse_phase.h).
//
//   streamlearn-demo --server localhost:50051 [--model demo] [--events 20000] [--quiet]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "client/demo/ack_monitor.h"
#include "client/demo/fuse_phase.h"
#include "client/demo/lmu_phase.h"
#include "client/demo/report.h"
#include "client/demo/workload.h"
#include "client/lib/client.h"
#include "client/lib/grpc_status.h"
#include "core/common/release_process.h"
#include "core/sau/exact_attention.h"
#include "core/sau/feature_map.h"
#include "fmt/format.h"

ABSL_FLAG(std::string, server, "localhost:50051", "server address host:port");
ABSL_FLAG(std::string, model, "demo", "model name; created, or reused if it exists");
ABSL_FLAG(uint64_t, events, 20000, "events to stream: the first half DGP-A, the rest DGP-C");
ABSL_FLAG(bool, quiet, false, "print only the summary");
ABSL_FLAG(uint64_t, seed, 20240601,
          "seed of the workload (core DGP streams: DGP-A from seed, DGP-C from seed + 1)");
ABSL_FLAG(uint64_t, every, 0, "events between table rows; 0 = events/20 (at least one batch)");
ABSL_FLAG(uint32_t, r, 256, "random features of a newly created model");
ABSL_FLAG(double, input_scale, 0, "input scale a of a newly created model; 0 = server default");
ABSL_FLAG(std::string, routing_key, "demo", "routing key of every event");
ABSL_FLAG(uint64_t, lmu_samples, 30000,
          "samples for the LMU phase (model <model>-lmu) after the SAU phase; 0 skips it");
ABSL_FLAG(bool, fuse, true,
          "run the Fuse phase after the LMU phase: the worked scenario of docs/FUSE.md on a "
          "new fused model <model>-fuse-<run>");
ABSL_FLAG(uint64_t, fuse_seed, 2, "seed of the Fuse phase's scenario");
ABSL_FLAG(uint32_t, fuse_batch, 25, "samples per Fuse.Learn batch");

namespace streamlearn::demo {
namespace {

constexpr uint32_t kD = 16;
constexpr uint32_t kDv = 4;
constexpr double kGamma = 0.99;
constexpr int kBatch = 64;
constexpr int kClusters = 4;
constexpr int kClusterPeriod = 2000;

int Fail(const absl::Status& status) {
  std::cerr << "error: " << StatusCodeName(status.code()) << ": " << status.message() << "\n";
  return 1;
}

// Creates the demo model, or reuses an existing one with the same dimensions.
absl::StatusOr<v1::ModelInfo> CreateOrReuse(Client& client, const std::string& name,
                                            bool* reused) {
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.set_shards(1);
  v1::SauSpec* sau = spec.mutable_sau();
  sau->set_d(kD);
  sau->set_d_v(kDv);
  sau->set_r(absl::GetFlag(FLAGS_r));
  sau->set_gamma(kGamma);
  sau->set_input_scale(absl::GetFlag(FLAGS_input_scale));
  absl::StatusOr<v1::ModelInfo> info = client.CreateModel(spec);
  *reused = false;
  if (info.ok() || info.status().code() != absl::StatusCode::kAlreadyExists) return info;
  *reused = true;
  info = client.GetModel(name);
  if (!info.ok()) return info;
  if (info->spec().sau().d() != kD || info->spec().sau().d_v() != kDv) {
    return absl::FailedPreconditionError(fmt::format(
        "model '{}' exists with d={} d_v={}; the demo needs d={} d_v={} (pick another --model)",
        name, info->spec().sau().d(), info->spec().sau().d_v(), kD, kDv));
  }
  return info;
}

// What the exact reference needs of the model's effective spec: the kernel (gamma, tau) and
// the input conditioning, which it applies to q and k exactly as the model does.
struct ReferenceSpec {
  double gamma, tau;
  sau::InputMode input_mode;
  double input_scale;  // a

  explicit ReferenceSpec(const v1::SauSpec& s)
      : gamma(s.gamma() > 0 ? s.gamma() : kGamma),
        tau(s.tau() > 0 ? s.tau() : std::sqrt(static_cast<double>(s.d()))),
        input_mode(s.input_mode() == v1::INPUT_MODE_RAW ? sau::InputMode::kRaw
                                                        : sau::InputMode::kL2Scaled),
        input_scale(s.input_scale() > 0 ? s.input_scale() : 1.0) {}

  std::vector<double> Condition(std::span<const double> x) const {
    std::vector<double> out(x.size());
    sau::ConditionInput(input_mode, input_scale, x, out.data());
    return out;
  }
};

int Run() {
  const std::string model = absl::GetFlag(FLAGS_model);
  const std::string routing_key = absl::GetFlag(FLAGS_routing_key);
  const uint64_t events = absl::GetFlag(FLAGS_events);
  const bool quiet = absl::GetFlag(FLAGS_quiet);
  if (events == 0) return Fail(absl::InvalidArgumentError("--events must be >= 1"));
  uint64_t every = absl::GetFlag(FLAGS_every);
  if (every == 0) every = std::max<uint64_t>(kBatch, events / 20);

  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(absl::GetFlag(FLAGS_server));
  if (!client.ok()) return Fail(client.status());
  bool reused = false;
  absl::StatusOr<v1::ModelInfo> info = CreateOrReuse(**client, model, &reused);
  if (!info.ok()) return Fail(info.status());
  const v1::SauSpec& sau = info->spec().sau();
  absl::StatusOr<uint32_t> shard = (*client)->ShardOf(model, routing_key);
  if (!shard.ok()) return Fail(shard.status());
  uint64_t t_offset = 0;  // continue after the shard's last t so nothing is a duplicate
  for (const v1::ShardInfo& s : info->shards()) {
    if (s.shard() == *shard) t_offset = s.last_t();
  }

  Workload::Options wo;
  wo.d = static_cast<int>(sau.d());
  wo.d_v = static_cast<int>(sau.d_v());
  wo.seed = absl::GetFlag(FLAGS_seed);
  wo.phase_a_events = events / 2;
  wo.clusters = kClusters;
  wo.cluster_period = kClusterPeriod;
  Workload workload(wo);
  const ReferenceSpec ro(sau);
  sau::ExactAttentionProbes reference({ro.Condition(workload.probe())},
                                      static_cast<int>(sau.d_v()), ro.tau, ro.gamma);

  std::cout << fmt::format(
      "{} model '{}': d={} d_v={} r={} gamma={:g} tau={:g} input_scale={:g}{} W {}\n",
      reused ? "reusing" : "created", model, sau.d(), sau.d_v(), sau.r(), ro.gamma, ro.tau,
      ro.input_scale, ro.input_mode == sau::InputMode::kRaw ? " (raw inputs)" : "",
      info->w_digest().substr(0, 16));
  std::cout << fmt::format(
      "workload: seed {}, {} events in batches of {} on routing key '{}' (shard {}): DGP-A for "
      "{}, then DGP-C with {} clusters switching every {}\n",
      wo.seed, events, kBatch, routing_key, *shard, wo.phase_a_events, kClusters,
      kClusterPeriod);
  if (t_offset > 0) {
    std::cout << fmt::format(
        "note: the shard already holds events up to t={}; they are not in the exact reference "
        "(their weight decays as gamma^n: {:.1e} after 1000 events)\n",
        t_offset, std::pow(ro.gamma, 1000.0));
  }

  AckMonitor monitor;
  IngestSession::Options so;
  so.window = 64;
  so.on_ack = [&monitor](const BatchResult& r) { monitor.OnAck(r); };
  absl::StatusOr<std::unique_ptr<IngestSession>> session = (*client)->OpenIngest(model, so);
  if (!session.ok()) return Fail(session.status());

  Report report(std::cout, quiet);
  const auto start = std::chrono::steady_clock::now();
  Workload::Event e;
  v1::IngestRequest request;
  uint64_t next_checkpoint = every;
  int last_cluster = -1;
  for (uint64_t i = 0; i < events; ++i) {
    workload.Next(&e);
    reference.Add(ro.Condition(e.k), e.v);
    if (request.events_size() == 0) request.set_routing_key(routing_key);
    v1::Event* ev = request.add_events();
    ev->set_t(t_offset + i + 1);
    ev->mutable_k()->Add(e.k.begin(), e.k.end());
    ev->mutable_v()->Add(e.v.begin(), e.v.end());
    const bool last = i + 1 == events;
    if (request.events_size() < kBatch && !last) continue;
    if (absl::Status s = (*session)->Send(std::move(request)); !s.ok()) return Fail(s);
    request.Clear();
    if (i + 1 < next_checkpoint && !last) continue;
    while (next_checkpoint <= i + 1) next_checkpoint += every;

    // Checkpoint: wait for the acks, then read our own writes on both readout paths.
    if (absl::Status s = (*session)->Flush(); !s.ok()) return Fail(s);
    const AckMonitor::Snapshot acks = monitor.Get();
    if (!acks.rejections.empty()) return Fail(absl::InternalError(acks.rejections.front()));
    CheckpointRow row;
    row.events = i + 1;
    row.t = t_offset + i + 1;
    row.phase_c = e.phase == Workload::Phase::kC;
    row.cluster = e.cluster;
    row.drift = row.phase_c && e.cluster != last_cluster;
    last_cluster = e.cluster;
    row.diag = acks.last;
    for (const v1::ReadoutPath path : {v1::READOUT_PATH_CORRECTNESS, v1::READOUT_PATH_STABILIZED}) {
      absl::StatusOr<v1::QueryResponse> q =
          (*client)->Query(model, routing_key, workload.probe(), path, false, acks.version);
      if (!q.ok()) return Fail(q.status());
      std::vector<double>& y =
          path == v1::READOUT_PATH_CORRECTNESS ? row.y_correctness : row.y_stabilized;
      y.assign(q->y_hat().begin(), q->y_hat().end());
      if (y.size() != sau.d_v()) {
        return Fail(absl::InternalError(fmt::format("query returned {} values, expected d_v={}",
                                                    y.size(), sau.d_v())));
      }
    }
    row.y_exact = reference.Value(0);
    report.Row(row);
  }
  const absl::Status finished = (*session)->Finish();
  RunTotals totals;
  totals.stats = (*session)->stats();
  totals.acks = monitor.Get();
  totals.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.Summary(totals);
  if (!finished.ok()) return Fail(finished);
  if (totals.stats.batches_rejected > 0) {
    return Fail(absl::InternalError(fmt::format("{} batch(es) rejected; first: {}",
                                                totals.stats.batches_rejected,
                                                totals.acks.rejections.front())));
  }
  if (const uint64_t n = absl::GetFlag(FLAGS_lmu_samples); n > 0) {
    LmuPhaseOptions lo{.model = model + "-lmu", .routing_key = routing_key, .samples = n,
                       .seed = absl::GetFlag(FLAGS_seed), .quiet = quiet};
    if (absl::Status s = RunLmuPhase(**client, lo, std::cout); !s.ok()) return Fail(s);
  }
  if (absl::GetFlag(FLAGS_fuse)) {
    FusePhaseOptions fo{.model_prefix = model + "-fuse", .routing_key = routing_key,
                        .seed = absl::GetFlag(FLAGS_fuse_seed),
                        .batch = absl::GetFlag(FLAGS_fuse_batch), .quiet = quiet};
    if (absl::Status s = RunFusePhase(**client, fo, std::cout); !s.ok()) return Fail(s);
  }
  return 0;
}

}  // namespace
}  // namespace streamlearn::demo

int main(int argc, char** argv) {
  streamlearn::ReleaseProcessDefaults();
  absl::SetProgramUsageMessage(
      "streams DGP-A then DGP-C drift into a model and compares the SAU estimate at a probe "
      "query with exact decayed attention.\n  streamlearn-demo --server HOST:PORT [--model "
      "demo] [--events 20000] [--quiet]");
  absl::ParseCommandLine(argc, argv);
  return streamlearn::demo::Run();
}
