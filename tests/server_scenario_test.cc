// The worked scenario of docs/FUSE.md (core/workloads/scenario.h) end to end: an in-process
// server with a data directory, the fused model the demo creates (Admin.CreateModel with
// ScenarioModelSpec), the samples over one Fuse.Learn stream through the client library, one
// batch in flight. Asserted from the acks alone: the shape of core/workloads/scenario_test.cc
// (attention while steady; RJ red, the gate clamped to <= 0.4 and beta_floor raised in the
// novelty spike; the gate back after it; the fused error within 2% of the better part), the
// server's predictions equal to an in-process FuseUnit's bit for bit. The figures that depend
// on how the machine schedules threads are printed always and asserted only on request (see
// the end of the test): per phase the Learn round trip's p99 <= 2 x p50 (docs/FUSE.md SLO), and,
// the server's LMU rebuilding in the background, the ring left empty while steady and a
// rebuild published during the novelty burst (core/workloads/scenario_test.cc asserts those with
// inline rebuilds, where they are functions of the samples).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <memory>
#include <string>
#include <vector>

#include "client/lib/client.h"
#include "client/lib/fuse_session.h"
#include "core/workloads/scenario.h"
#include "core/workloads/scenario_tally.h"
#include "client/demo/scenario_wire.h"
#include "core/fuse/fuse_unit.h"
#include "gtest/gtest.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

using workloads::PhaseFigures;
using workloads::Scenario;
using workloads::ScenarioOptions;
using workloads::ScenarioPhase;
using workloads::ScenarioSample;

// The 1-minute load average, or 0 if unknown.
double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  in >> load;
  return load;
}

// Samples per Learn request. Large enough that a batch's round trip (~1 ms at 25 samples)
// is mostly the fused steps rather than the RPC's fixed cost and scheduler noise on a shared
// 2-core machine; small enough for >= 60 batches in the shortest phase.
constexpr size_t kBatch = 25;

lmu::HashSecret Secret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(7 * i + 3);
  return s;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(k, 1, v.size()) - 1];
}

bool SameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

class ServerScenarioTest : public test_util::SharedServerSuite<ServerScenarioTest> {
 public:
  static std::string DataDir() {
    return (std::filesystem::temp_directory_path() /
            ("server_scenario_test." + std::to_string(::getpid())))
        .string();
  }
  static server::Server::Options SuiteOptions() {
    std::filesystem::remove_all(DataDir());
    server::Server::Options o;
    o.data_dir = DataDir();  // the demo's server keeps its state under ./data: the same path
    o.metrics = "";
    o.lmu_secret = Secret();
    return o;
  }
  static void TearDownTestSuite() {
    SharedServerSuite::TearDownTestSuite();
    std::filesystem::remove_all(DataDir());
  }
};

TEST_F(ServerScenarioTest, LearnStreamFollowsTheWorkedScenario) {
  absl::StatusOr<std::unique_ptr<Client>> client = test_util::ConnectClient(address_);
  ASSERT_TRUE(client.ok()) << client.status();
  const ScenarioOptions options;
  absl::StatusOr<v1::ModelInfo> info =
      (*client)->CreateModel(client::ScenarioModelSpec("scenario-1", options));
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_TRUE(client::CheckScenarioModel(*info, options).ok())
      << client::CheckScenarioModel(*info, options);

  // The same scenario in process, for the bit-for-bit comparison.
  absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> unit =
      fuse::FuseUnit::Create(workloads::ScenarioFuseSpec(options), Secret());
  ASSERT_TRUE(unit.ok()) << unit.status();

  absl::StatusOr<std::unique_ptr<FuseLearnSession>> session =
      (*client)->OpenFuseLearn("scenario-1", "scenario", /*window=*/1);
  ASSERT_TRUE(session.ok()) << session.status();

  const double load_before = LoadAverage();
  Scenario scenario(options);
  workloads::ScenarioTally tally(scenario);
  std::array<std::vector<double>, 3> latency_ms, core_ms;
  std::array<uint64_t, 3> rebuilds{};
  std::array<double, 3> min_tau_low{1, 1, 1};
  uint64_t ver_base = 0, mismatches = 0;
  std::vector<ScenarioSample> batch;
  std::vector<FuseSample> wire;
  while (!scenario.done()) {
    batch.clear();
    wire.clear();
    while (!scenario.done() && batch.size() < kBatch &&
           (batch.empty() || scenario.PhaseOf(scenario.emitted() + 1) == batch.front().phase)) {
      batch.push_back(scenario.Next());
      const ScenarioSample& s = batch.back();
      wire.push_back(FuseSample{.t = s.t, .x = s.x, .q = s.q, .y = s.y});
    }
    const auto start = std::chrono::steady_clock::now();
    ASSERT_TRUE((*session)->Send(wire).ok());
    absl::StatusOr<FuseLearnResult> r = (*session)->Next();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->status.ok()) << r->status;
    ASSERT_EQ(r->ack.predictions_size(), static_cast<int>(batch.size()));
    client::TallyAck(r->ack, batch, &tally);

    const size_t p = static_cast<size_t>(batch.front().phase) - 1;
    latency_ms[p].push_back(ms);
    rebuilds[p] += r->ack.ver_base() - ver_base;
    ver_base = r->ack.ver_base();
    min_tau_low[p] = std::min(min_tau_low[p], r->ack.health().lmu_tau_low());
    std::vector<fuse::FuseStep> steps;
    const auto core_start = std::chrono::steady_clock::now();
    for (const ScenarioSample& s : batch) {
      absl::StatusOr<fuse::FuseStep> step = (*unit)->Learn(s.t, s.x, s.q, s.y);
      ASSERT_TRUE(step.ok()) << step.status();
      steps.push_back(*std::move(step));
    }
    core_ms[p].push_back(std::chrono::duration<double, std::milli>(
                             std::chrono::steady_clock::now() - core_start).count());
    for (size_t i = 0; i < batch.size(); ++i) {
      const ScenarioSample& s = batch[i];
      const fuse::FuseStep* step = &steps[i];
      const v1::FusePrediction& got = r->ack.predictions(static_cast<int>(i));
      const fuse::FusePrediction& want = step->prediction;
      const bool same = got.t() == s.t && SameBits(got.y_hat(0), want.y_hat[0]) &&
                        SameBits(got.y_hat_sau(0), want.y_hat_sau[0]) &&
                        SameBits(got.y_hat_lmu(0), want.y_hat_lmu[0]) &&
                        SameBits(got.gate(), want.gate);
      if (!same && mismatches++ == 0) {
        ADD_FAILURE() << "t = " << s.t << ": the server predicted y_hat " << got.y_hat(0)
                      << " gate " << got.gate() << ", the core " << want.y_hat[0] << " gate "
                      << want.gate;
      }
    }
  }
  ASSERT_TRUE((*session)->Finish().ok());
  EXPECT_EQ(mismatches, 0u);

  std::printf(
      "[ scenario ] %-13s %7s %6s %6s %5s %6s %6s %9s %7s %7s %7s %4s %8s %8s %8s %6s %11s\n",
      "phase", "samples", "gate", "tail", "red", "alarms", "g_max", "floor", "fused", "SAU", "LMU",
      "ring", "rebuilds", "p50 ms", "p99 ms", "p99/50", "core p99/50");
  for (ScenarioPhase phase : workloads::kScenarioPhases) {
    const PhaseFigures& f = tally.phase(phase);
    const size_t i = static_cast<size_t>(phase) - 1;
    const double p50 = Percentile(latency_ms[i], 0.5), p99 = Percentile(latency_ms[i], 0.99);
    std::printf("[ scenario ] %-13s %7llu %6.3f %6.3f %5llu %6llu %6.2f %9.3g %7.4f %7.4f %7.4f "
                "%4u %8llu %8.3f %8.3f %6.2f %11.2f\n",
                std::string(PhaseName(phase)).c_str(), static_cast<unsigned long long>(f.samples),
                f.MeanGate(), f.TailGate(), static_cast<unsigned long long>(f.red_steps),
                static_cast<unsigned long long>(f.alarms), f.min_g_max, f.max_beta_floor,
                f.MseFused(), f.MseSau(), f.MseLmu(), f.max_ring_used,
                static_cast<unsigned long long>(rebuilds[i]), p50, p99, p99 / p50,
                Percentile(core_ms[i], 0.99) / Percentile(core_ms[i], 0.5));
  }
  const PhaseFigures total = tally.Total();
  std::printf("[ scenario ] whole run: MSE fused %.4f, SAU alone %.4f, LMU alone %.4f; fused / "
              "better part = %.3f; %zu samples per batch\n",
              total.MseFused(), total.MseSau(), total.MseLmu(),
              total.MseFused() / std::min(total.MseSau(), total.MseLmu()), kBatch);

  const PhaseFigures& steady = tally.phase(ScenarioPhase::kSteady);
  const PhaseFigures& novelty = tally.phase(ScenarioPhase::kNovelty);
  const PhaseFigures& stable = tally.phase(ScenarioPhase::kStabilization);
  EXPECT_GE(steady.TailGate(), 0.6);
  EXPECT_LE(steady.red_steps, steady.samples / 100);

  EXPECT_GT(novelty.red_steps, 0u);
  EXPECT_LE(novelty.min_g_max, 0.4);
  EXPECT_GT(novelty.clamped_samples, 0u);  // batches that ended clamped
  EXPECT_LE(novelty.max_gate_clamped, 0.4);
  EXPECT_GT(novelty.max_beta_floor, info->spec().fuse().sau().beta_floor());
  EXPECT_LT(min_tau_low[1], info->spec().fuse().lmu().tau_low());  // the LMU warning

  EXPECT_TRUE(stable.TailGate() >= 0.6 || std::abs(stable.TailGate() - steady.TailGate()) <= 0.1)
      << stable.TailGate();
  EXPECT_LE(total.MseFused(), 1.02 * std::min(total.MseSau(), total.MseLmu()));

  // The figures above that depend on scheduling are asserted only on request
  // (STREAMLEARN_ASSERT_LATENCY=1, on a quiet machine):
  // - docs/FUSE.md SLO: p99 <= 2 x p50, per phase, of the Learn round trip per batch. A tail
  //   bound of 2x a ~1 ms round trip measures the scheduler as much as the code on a shared
  //   machine (one preemption is a slice of several ms; the in-process core shows the same
  //   tails on the same batches), and the project measures speed in benchmarks
  //   (bench/rpc_fuse_bench.cc reports p99/p50 beside an empty handler), not in timed tests.
  // - The LMU's ring and rebuild counts: the server rebuilds in the background, as in
  //   production, so when a rebuild publishes depends on when the builder thread runs
  //   (rebuild_seconds = 4 ms is the spec's budget, not a promise of the machine). The
  //   predictions and the state do not depend on it, and are compared bit for bit above.
  const double load = std::max(load_before, LoadAverage());
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const char* assert_latency = std::getenv("STREAMLEARN_ASSERT_LATENCY");
  if (assert_latency == nullptr || std::string(assert_latency) != "1") {
    std::printf("[ scenario ] latency SLO, ring and rebuild counts reported, not asserted (load "
                "average %.2f on %u cores; STREAMLEARN_ASSERT_LATENCY=1 asserts them)\n",
                load, cores);
    RecordProperty("latency_slo", "reported only; load " + std::to_string(load));
    return;
  }
  EXPECT_EQ(steady.max_ring_used, 0u);
  EXPECT_GT(rebuilds[1], 0u);
  for (ScenarioPhase phase : workloads::kScenarioPhases) {
    SCOPED_TRACE(PhaseName(phase));
    const size_t i = static_cast<size_t>(phase) - 1;
    EXPECT_LE(Percentile(latency_ms[i], 0.99), 2 * Percentile(latency_ms[i], 0.5))
        << "load average " << load << " on " << cores << " cores";
  }
}

}  // namespace
}  // namespace streamlearn
