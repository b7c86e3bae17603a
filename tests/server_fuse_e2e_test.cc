// End-to-end tests of the Fuse service over real gRPC channels: an in-process Server on
// 127.0.0.1:0 with a fixed LMU secret, driven through the client library (FuseLearnSession,
// Client::FusePredict) and the generated stubs, checked bit for bit against an in-process
// fuse::FuseUnit built from the model's effective spec and fed the same samples (FuseDgp).
// With a data_dir: restarts (shutdown + a new server on the same directory), Admin.Snapshot of
// the fuse part, recovery after a snapshot plus more samples, and the audit chain read with
// Auditor.Read and checked by the one-pass AuditVerifier. And the real streamlearn-server binary
// killed with SIGKILL mid-stream and right after a snapshot: the recovered state equals the
// reference fed exactly the committed batches, bit for bit.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "client/lib/client.h"
#include "client/lib/fuse_session.h"
#include "core/audit/audit_record.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/verifier.h"
#include "core/common/digest.h"
#include "core/workloads/fuse_dgp.h"
#include "core/fuse/fuse_spec.h"
#include "core/fuse/fuse_unit.h"
#include "fuse.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/server.h"
#include "server/storage/store.h"
#include "server/storage/spec_conversion.h"
#include "tests/test_server.h"

extern char** environ;

namespace streamlearn::server {
namespace {

using test_util::ChannelTo;
using test_util::SeriesValue;
using test_util::SetDeadline;

constexpr size_t kMaxBatch = 256;
constexpr uint64_t kCheckpointEvery = 64;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

lmu::HashSecret TestSecret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(0x33 ^ (i * 29));
  return s;
}

// fuse_test_util.h's stream: q in 4 tight clusters of R^8, 8 features over 2000 ids, values
// centred at 3; a drift moves the clusters (the e-process alarms, RJ turns red).
fuse::FuseDgp::Options Stream(int64_t drift_at) {
  fuse::FuseDgp::Options o;
  o.key_spread = 0.1;
  o.attention_offset = 3.0;
  o.drift_at = drift_at;
  return o;
}

// d = 8, r = 256, tau = 0.5 (the core tests' SAU); an LMU delta of C = 1024 so 2000 ids force
// rebuilds, inline (records reproducible); lambda_max and margin small but non-zero.
v1::ModelSpec FusedSpec(const std::string& name, v1::FusePattern pattern, uint32_t shards = 2) {
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.set_shards(shards);
  v1::FuseSpec* f = spec.mutable_fuse();
  f->set_pattern(pattern);
  f->mutable_sau()->set_d(8);
  f->mutable_sau()->set_r(256);
  f->mutable_sau()->set_tau(0.5);
  f->mutable_sau()->set_seed(11);
  f->mutable_lmu()->set_delta_buckets(256);
  f->mutable_lmu()->set_lambda_max(1);
  f->mutable_lmu()->set_margin(64);
  f->mutable_lmu()->set_inline_rebuild(true);
  return spec;
}

// The reference: a FuseUnit of the model's effective spec and the server's secret.
std::unique_ptr<fuse::FuseUnit> ReferenceUnit(const v1::ModelInfo& info) {
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(info.spec());
  EXPECT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->has_fuse);
  absl::StatusOr<std::unique_ptr<fuse::FuseUnit>> unit =
      fuse::FuseUnit::Create(spec->fuse, TestSecret());
  EXPECT_TRUE(unit.ok()) << unit.status();
  return unit.ok() ? *std::move(unit) : nullptr;
}

std::vector<FuseSample> Samples(fuse::FuseDgp& dgp, uint64_t first_t, int n) {
  std::vector<FuseSample> out;
  for (int i = 0; i < n; ++i) {
    fuse::FuseEvent e = dgp.Next();
    out.push_back(
        {.t = first_t + i, .x = std::move(e.x), .q = std::move(e.q), .y = std::move(e.y)});
  }
  return out;
}

template <typename Repeated>
bool SameBits(const Repeated& wire, const std::vector<double>& want) {
  if (static_cast<size_t>(wire.size()) != want.size()) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::bit_cast<uint64_t>(wire[static_cast<int>(i)]) != std::bit_cast<uint64_t>(want[i])) {
      return false;
    }
  }
  return true;
}

bool SameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

// A record's number; 0 when absent, as the server's health reads it (the ridge and vla
// engines' records have no margin, RJ, den, beta_floor or lambda_star); NaN if not a number.
double NumberOf(const AuditRecord& r, std::string_view key) {
  double x = 0;
  const AuditValue* v = r.Find(key);
  if (v == nullptr) return 0.0;
  return v->AsNumber(&x) ? x : kNaN;
}

// Streams `batches` through `session` (all sent before the first ack is taken) and checks
// every ack against `unit` fed the same samples: predictions, health, actions, versions.
// Returns the number of control actions seen.
uint64_t LearnAndCompare(FuseLearnSession& session, fuse::FuseUnit& unit,
                         const std::vector<std::vector<FuseSample>>& batches) {
  for (const auto& b : batches) EXPECT_TRUE(session.Send(b).ok());
  uint64_t actions = 0;
  uint64_t last_index = 0;
  for (const auto& b : batches) {
    absl::StatusOr<FuseLearnResult> r = session.Next();
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return actions;
    EXPECT_TRUE(r->status.ok()) << r->status;
    const v1::LearnAck& ack = r->ack;
    EXPECT_EQ(ack.applied(), b.size());
    EXPECT_EQ(ack.predictions_size(), static_cast<int>(b.size()));
    EXPECT_EQ(ack.shard(), session.shard());
    std::vector<std::string> want_actions;
    fuse::FuseStep last;
    for (size_t i = 0; i < b.size() && i < static_cast<size_t>(ack.predictions_size()); ++i) {
      absl::StatusOr<fuse::FuseStep> step = unit.Learn(b[i].t, b[i].x, b[i].q, b[i].y);
      EXPECT_TRUE(step.ok()) << step.status();
      const v1::FusePrediction& p = ack.predictions(static_cast<int>(i));
      EXPECT_EQ(p.t(), b[i].t);
      EXPECT_TRUE(SameBits(p.y_hat(), step->prediction.y_hat)) << "t = " << b[i].t;
      EXPECT_TRUE(SameBits(p.y_hat_sau(), step->prediction.y_hat_sau));
      EXPECT_TRUE(SameBits(p.y_hat_lmu(), step->prediction.y_hat_lmu));
      EXPECT_TRUE(SameBits(p.gate(), step->prediction.gate));
      for (const control::ControlAction& a : step->actions) {
        want_actions.push_back(absl::StrCat(std::string(control::ActionName(a.action)), ":",
                                            std::string(control::CauseName(a.cause))));
      }
      last = *std::move(step);
    }
    actions += want_actions.size();
    const v1::FuseHealth& h = ack.health();
    EXPECT_EQ(std::vector<std::string>(h.actions().begin(), h.actions().end()), want_actions);
    EXPECT_TRUE(SameBits(h.gate(), last.prediction.gate));
    EXPECT_TRUE(SameBits(h.g_max(), last.prediction.g_max));
    EXPECT_TRUE(SameBits(h.margin(), NumberOf(last.record, "margin")));
    EXPECT_TRUE(SameBits(h.rj_gap(), NumberOf(last.record, "rj_gap")));
    EXPECT_TRUE(SameBits(h.den(), NumberOf(last.record, "den")));
    EXPECT_TRUE(SameBits(h.beta_floor(), NumberOf(last.record, "beta_floor")));
    EXPECT_TRUE(SameBits(h.lambda_star(), NumberOf(last.record, "lambda_star")));
    EXPECT_TRUE(SameBits(h.delta_load(), NumberOf(last.record, "delta_load")));
    EXPECT_EQ(h.lmu_lr_scale(), unit.control().controls().lmu_lr_scale);
    // The engine and its diagnostics (zero for prf).
    EXPECT_EQ(static_cast<int>(h.engine()), static_cast<int>(unit.sau().engine()));
    EXPECT_TRUE(SameBits(h.condition(), last.prediction.engine.condition));
    EXPECT_TRUE(SameBits(h.residual(), last.prediction.engine.residual));
    EXPECT_TRUE(SameBits(h.ridge().scale(), NumberOf(last.record, "scale")));
    EXPECT_TRUE(SameBits(h.ridge().key_norm2(), NumberOf(last.record, "key_norm2")));
    EXPECT_TRUE(SameBits(h.vla().residual_norm(), NumberOf(last.record, "residual_norm")));
    EXPECT_TRUE(SameBits(h.vla().s_norm(), NumberOf(last.record, "s_norm")));
    if (unit.sau().engine() == sau::Engine::kRidge) EXPECT_GE(h.condition(), 1.0);
    if (unit.sau().engine() == sau::Engine::kVla) EXPECT_GT(h.vla().s_norm(), 0.0);
    EXPECT_EQ(ack.ver_sau(), unit.sau().events());
    EXPECT_EQ(ack.ver_base(), unit.main_lmu().TableStats().ver_base);
    EXPECT_EQ(ack.ver_delta(), unit.main_lmu().TableStats().ver_delta);
    // One fuse_learn record per sample (and a fuse_control after each alarm, and checkpoints).
    EXPECT_GE(ack.audit_next_index(), last_index + b.size());
    EXPECT_EQ(ack.merkle_curr().size(), 64u);
    last_index = ack.audit_next_index();
  }
  return actions;
}

std::vector<std::vector<FuseSample>> Batches(fuse::FuseDgp& dgp, uint64_t first_t, int n,
                                             int per_batch) {
  std::vector<std::vector<FuseSample>> out;
  for (int done = 0; done < n; done += per_batch) {
    out.push_back(Samples(dgp, first_t + done, std::min(per_batch, n - done)));
  }
  return out;
}

Server::Options TestOptions() {
  Server::Options options;
  options.max_batch = kMaxBatch;
  options.lmu_secret = TestSecret();
  options.audit_checkpoint_every = kCheckpointEvery;
  options.fuse_digest_every = 100;
  return options;
}

std::unique_ptr<Client> Connect(const Server& server) {
  absl::StatusOr<std::unique_ptr<Client>> c =
      test_util::ConnectClient(test_util::AddressOf(server));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

const v1::FuseShardInfo& FuseShardOf(const v1::ModelInfo& info, uint32_t shard) {
  return info.fuse_shards(static_cast<int>(shard));
}

class FuseE2eTest : public test_util::SharedServerSuite<FuseE2eTest> {
 public:
  static Server::Options SuiteOptions() { return TestOptions(); }
};

TEST_F(FuseE2eTest, EachPatternLearnsLikeALocalFuseUnit) {
  std::unique_ptr<Client> client = Connect(*server_);
  ASSERT_NE(client, nullptr);
  const v1::FusePattern patterns[] = {v1::FUSE_PATTERN_META_LINEAR,
                                      v1::FUSE_PATTERN_ATTENTION_AS_FEATURE,
                                      v1::FUSE_PATTERN_LINEAR_AS_GATE};
  for (v1::FusePattern pattern : patterns) {
    const std::string name = absl::StrCat("fused_", v1::FusePattern_Name(pattern));
    SCOPED_TRACE(name);
    absl::StatusOr<v1::ModelInfo> info = client->CreateModel(FusedSpec(name, pattern));
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_TRUE(info->spec().has_fuse());
    EXPECT_FALSE(info->spec().has_sau());
    EXPECT_EQ(info->spec().fuse().pattern(), pattern);
    EXPECT_EQ(info->spec().fuse().sau().d_v(), 1u);  // zero took lmu.m
    EXPECT_EQ(info->spec().fuse().control().alarm_g_max(), 0.4);  // defaults filled in
    ASSERT_EQ(info->fuse_shards_size(), 2);
    EXPECT_EQ(info->w_digest().size(), 64u);
    std::unique_ptr<fuse::FuseUnit> unit = ReferenceUnit(*info);
    ASSERT_NE(unit, nullptr);
    EXPECT_EQ(FuseShardOf(*info, 0).state_digest(), ToHex(unit->StateDigest()));

    absl::StatusOr<std::unique_ptr<FuseLearnSession>> session =
        client->OpenFuseLearn(name, "user-7", /*window=*/8);
    ASSERT_TRUE(session.ok()) << session.status();
    fuse::FuseDgp dgp(Stream(/*drift_at=*/700), 3);
    const uint64_t actions = LearnAndCompare(**session, *unit, Batches(dgp, 1, 1400, 50));
    EXPECT_GT(actions, 0u);  // the drift made the control plane act
    EXPECT_TRUE((*session)->Finish().ok());
    const uint32_t shard = (*session)->shard();

    // Predict is read-only and equals FuseUnit::Predict.
    for (int i = 0; i < 5; ++i) {
      fuse::FuseEvent e = dgp.Next();
      absl::StatusOr<v1::FusePredictResponse> p = client->FusePredict(name, "user-7", e.x, e.q);
      ASSERT_TRUE(p.ok()) << p.status();
      absl::StatusOr<fuse::FusePrediction> want = unit->Predict(e.x, e.q);
      ASSERT_TRUE(want.ok());
      EXPECT_TRUE(SameBits(p->y_hat(), want->y_hat));
      EXPECT_TRUE(SameBits(p->y_hat_sau(), want->y_hat_sau));
      EXPECT_TRUE(SameBits(p->y_hat_lmu(), want->y_hat_lmu));
      EXPECT_TRUE(SameBits(p->gate(), want->gate));
      EXPECT_TRUE(SameBits(p->rj_gap(), want->rj_gap));
      EXPECT_TRUE(SameBits(p->margin(), want->margin));
      EXPECT_TRUE(SameBits(p->den(), want->den));
      EXPECT_EQ(p->ver_sau(), want->ver_sau);
      EXPECT_EQ(p->ver_base(), want->ver_base);
      EXPECT_EQ(p->ver_delta(), want->ver_delta);
      EXPECT_EQ(p->shard(), shard);
    }
    absl::StatusOr<v1::ModelInfo> after = client->GetModel(name);
    ASSERT_TRUE(after.ok());
    const v1::FuseShardInfo& fs = FuseShardOf(*after, shard);
    EXPECT_EQ(fs.state_digest(), ToHex(unit->StateDigest()));
    EXPECT_EQ(fs.steps(), 1400u);
    EXPECT_EQ(fs.last_t(), 1400u);
    EXPECT_EQ(fs.log_seq(), 28u);
    EXPECT_EQ(fs.actions(), actions);
    EXPECT_EQ(FuseShardOf(*after, 1 - shard).steps(), 0u);
    // Metrics: the control-action counter follows the shard's running total.
    EXPECT_EQ(SeriesValue(*server_, "streamlearn_control_actions_total", name, shard),
              static_cast<double>(actions));
    EXPECT_FALSE(std::isnan(SeriesValue(*server_, "streamlearn_fuse_gate", name, shard)));
  }
}

TEST_F(FuseE2eTest, DuplicatesAreAcknowledgedAndNotApplied) {
  std::unique_ptr<Client> client = Connect(*server_);
  ASSERT_NE(client, nullptr);
  const std::string name = "fused_dups";
  ASSERT_TRUE(client->CreateModel(FusedSpec(name, v1::FUSE_PATTERN_LINEAR_AS_GATE, 1)).ok());
  absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, "k");
  ASSERT_TRUE(s.ok());
  fuse::FuseDgp dgp(Stream(-1), 5);
  const std::vector<FuseSample> batch = Samples(dgp, 100, 10);
  ASSERT_TRUE((*s)->Send(batch).ok());
  absl::StatusOr<FuseLearnResult> first = (*s)->Next();
  ASSERT_TRUE(first.ok() && first->status.ok());
  const std::string digest = FuseShardOf(*client->GetModel(name), 0).state_digest();
  ASSERT_TRUE((*s)->Send(batch).ok());  // a retry
  absl::StatusOr<FuseLearnResult> again = (*s)->Next();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->status.ok()) << again->status;
  EXPECT_EQ(again->ack.applied(), 0u);
  EXPECT_EQ(again->ack.duplicate_t_size(), 10);
  EXPECT_EQ(again->ack.predictions_size(), 0);
  EXPECT_EQ(again->ack.audit_next_index(), first->ack.audit_next_index());
  EXPECT_EQ(again->ack.merkle_curr(), first->ack.merkle_curr());
  EXPECT_EQ(FuseShardOf(*client->GetModel(name), 0).state_digest(), digest);
  EXPECT_EQ((*s)->Next().status().code(), absl::StatusCode::kFailedPrecondition);  // none left
  EXPECT_TRUE((*s)->Finish().ok());
}

// Spoiled batches are refused in their ack with a clear message, apply nothing (the shard's
// digest and audit head stay), and the stream goes on.
TEST_F(FuseE2eTest, BadInputIsRejectedInBandAndChangesNothing) {
  const std::string name = "fused_bad";
  std::unique_ptr<Client> client = Connect(*server_);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->CreateModel(FusedSpec(name, v1::FUSE_PATTERN_META_LINEAR, 1)).ok());
  auto fuse_stub = v1::Fuse::NewStub(ChannelTo(*server_));
  auto auditor = v1::Auditor::NewStub(ChannelTo(*server_));
  fuse::FuseDgp dgp(Stream(-1), 9);
  std::vector<fuse::FuseEvent> events;
  for (int i = 0; i < 200; ++i) events.push_back(dgp.Next());
  constexpr uint32_t kN = 4;
  auto make_batch = [&](uint64_t first_t) {
    v1::LearnRequest r;
    r.set_model(name);
    r.set_routing_key("k");
    for (uint32_t i = 0; i < kN; ++i) {
      const fuse::FuseEvent& e = events[(first_t + i) % events.size()];
      v1::FuseSample* s = r.add_samples();
      s->set_t(first_t + i);
      for (const lmu::Feature& f : e.x) {
        s->add_ids(f.id);
        s->add_vals(f.val);
      }
      s->mutable_q()->Add(e.q.begin(), e.q.end());
      s->mutable_y()->Add(e.y.begin(), e.y.end());
    }
    return r;
  };
  auto state = [&] {
    absl::StatusOr<v1::ModelInfo> info = client->GetModel(name);
    v1::HeadRequest hr;
    hr.set_model(name);
    v1::HeadResponse head;
    grpc::ClientContext ctx;
    EXPECT_TRUE(auditor->Head(&ctx, hr, &head).ok());
    return absl::StrCat(FuseShardOf(*info, 0).state_digest(), "/",
                        FuseShardOf(*info, 0).log_seq(), "/", head.next_index(), "/",
                        head.merkle_curr());
  };
  using Case = test_util::RejectionCase<v1::LearnRequest>;
  const grpc::StatusCode kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  const std::vector<Case> cases = {
      {"q of the wrong dimension",
       [](v1::LearnRequest& r) { r.mutable_samples(2)->mutable_q()->RemoveLast(); },
       kInvalid, {"sample 2", "q has 7 values", "d = 8"}},
      {"NaN in y", [](v1::LearnRequest& r) { r.mutable_samples(1)->set_y(0, kNaN); }, kInvalid,
       {"sample 1", "y[0] is NaN"}},
      {"y of the wrong size", [](v1::LearnRequest& r) { r.mutable_samples(3)->add_y(1.0); },
       kInvalid, {"sample 3", "y has 2 values", "m = 1"}},
      {"empty x",
       [](v1::LearnRequest& r) {
         r.mutable_samples(0)->clear_ids();
         r.mutable_samples(0)->clear_vals();
       },
       kInvalid, {"sample 0", "x is empty"}},
      {"reserved id",
       [](v1::LearnRequest& r) { r.mutable_samples(2)->set_ids(0, fuse::kReservedIdBase + 3); },
       kInvalid, {"sample 2", "reserved"}},
      {"ids and vals differ",
       [](v1::LearnRequest& r) { r.mutable_samples(1)->add_ids(5); }, kInvalid,
       {"sample 1", "ids has"}},
      {"Inf in q",
       [](v1::LearnRequest& r) {
         r.mutable_samples(3)->set_q(4, std::numeric_limits<double>::infinity());
       },
       kInvalid, {"sample 3", "q[4] is Inf"}},
      {"huge finite q", [](v1::LearnRequest& r) { r.mutable_samples(3)->set_q(4, -1e308); },
       kInvalid, {"sample 3", "q[4] = -1e+308 is outside [-1e+100, 1e+100]"}},
      {"huge finite y", [](v1::LearnRequest& r) { r.mutable_samples(2)->set_y(0, 1e300); },
       kInvalid, {"sample 2", "y[0] = 1e+300 is outside [-1e+50, 1e+50]"}},
      {"huge finite x", [](v1::LearnRequest& r) { r.mutable_samples(1)->set_vals(0, 1e300); },
       kInvalid, {"sample 1", "x[0] (id ", "= 1e+300 is outside [-1e+50, 1e+50]"}},
      {"5000 features in one sample",
       [](v1::LearnRequest& r) {
         v1::FuseSample* s = r.mutable_samples(0);
         for (uint64_t id = 1000000; s->ids_size() < 5000; ++id) {
           s->add_ids(id);
           s->add_vals(1.0);
         }
       },
       kInvalid, {"sample 0", "5000 features; at most 4096 per sample (--max_features)"}},
      {"t = 2^64 - 1",
       [](v1::LearnRequest& r) {
         r.mutable_samples(1)->set_t(std::numeric_limits<uint64_t>::max());
       },
       kInvalid, {"sample 1 (t=18446744073709551615)", "ahead of the shard's last t"}},
      {"unknown model", [](v1::LearnRequest& r) { r.set_model("no_such_model"); },
       grpc::StatusCode::NOT_FOUND, {"no_such_model", "not found"}},
  };
  test_util::LockStepStream<v1::LearnRequest, v1::LearnAck> stream(
      [&](grpc::ClientContext* ctx) { return fuse_stub->Learn(ctx); });
  uint64_t next_t = 1;
  test_util::ExpectRejectedInBandThenAccepted<v1::LearnRequest, v1::LearnAck>(
      stream, cases, make_batch, kN, state, &next_t);
  // Too many samples in one request.
  v1::LearnRequest big = make_batch(next_t);
  while (big.samples_size() <= static_cast<int>(kMaxBatch)) *big.add_samples() = big.samples(0);
  const std::string before = state();
  const v1::LearnAck ack = stream.Send(big);
  EXPECT_EQ(ack.status().code(), static_cast<int>(kInvalid));
  EXPECT_NE(ack.status().message().find("max_batch"), std::string::npos);
  EXPECT_EQ(state(), before);
  EXPECT_TRUE(stream.Finish().ok());

  // Predict: the same checks, as the RPC's status.
  std::vector<double> short_q(7, 0.5);
  EXPECT_EQ(client->FusePredict(name, "k", events[0].x, short_q).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->FusePredict(name, "k", std::span<const lmu::Feature>(), events[0].q)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->FusePredict("no_such_model", "k", events[0].x, events[0].q).status().code(),
            absl::StatusCode::kNotFound);
  std::vector<double> huge_q(events[0].q.begin(), events[0].q.end());
  huge_q[0] = 1e200;
  const absl::Status huge = client->FusePredict(name, "k", events[0].x, huge_q).status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.message().find("q[0] = 1e+200 is outside"), std::string::npos) << huge;
}

// The Fuse service refuses models without a fuse part, and the SAU and LMU services refuse
// fused models, naming the part and the service to use.
TEST_F(FuseE2eTest, PartsAreCheckedByEveryService) {
  std::unique_ptr<Client> client = Connect(*server_);
  ASSERT_NE(client, nullptr);
  v1::ModelSpec plain;
  plain.set_name("plain_sau_lmu");
  plain.mutable_sau()->set_d(8);
  plain.mutable_sau()->set_d_v(1);
  plain.mutable_sau()->set_r(16);
  plain.mutable_lmu();
  ASSERT_TRUE(client->CreateModel(plain).ok());
  ASSERT_TRUE(client->CreateModel(FusedSpec("fused_parts", v1::FUSE_PATTERN_META_LINEAR)).ok());
  fuse::FuseDgp dgp(Stream(-1), 1);
  fuse::FuseEvent e = dgp.Next();

  // Fuse on a model without a fuse part.
  absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn("plain_sau_lmu", "k");
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Send(Samples(dgp, 1, 2)).ok());
  absl::StatusOr<FuseLearnResult> r = (*s)->Next();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r->status.message().find("has no fuse part"), std::string::npos) << r->status;
  EXPECT_TRUE((*s)->Finish().ok());
  absl::StatusOr<v1::FusePredictResponse> p = client->FusePredict("plain_sau_lmu", "k", e.x, e.q);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);

  // SAU and LMU on a fused model.
  absl::StatusOr<v1::QueryResponse> q = client->Query("fused_parts", "k", e.q);
  EXPECT_EQ(q.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(q.status().message().find("use the Fuse service"), std::string::npos) << q.status();
  const std::vector<uint64_t> ids = {1, 2};
  const std::vector<double> vals = {1, 1};
  absl::StatusOr<v1::PredictResponse> lp = client->Predict("fused_parts", "k", ids, vals);
  EXPECT_EQ(lp.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(lp.status().message().find("use the Fuse service"), std::string::npos);
  absl::StatusOr<std::unique_ptr<IngestSession>> ingest = client->OpenIngest("fused_parts");
  ASSERT_TRUE(ingest.ok());
  v1::IngestRequest ir;
  ir.set_routing_key("k");
  v1::Event* ev = ir.add_events();
  ev->set_t(1);
  ev->mutable_k()->Add(e.q.begin(), e.q.end());
  ev->add_v(1.0);
  ASSERT_TRUE((*ingest)->Send(ir).ok());
  ASSERT_TRUE((*ingest)->Flush().ok());
  EXPECT_EQ((*ingest)->stats().batches_rejected, 1u);
  EXPECT_TRUE((*ingest)->Finish().ok());

  // Specs: a fuse part beside another part, and a bad fuse field, name what is wrong.
  v1::ModelSpec both = FusedSpec("fused_and_sau", v1::FUSE_PATTERN_META_LINEAR);
  *both.mutable_sau() = plain.sau();
  absl::StatusOr<v1::ModelInfo> bad = client->CreateModel(both);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fuse part alone"), std::string::npos) << bad.status();
  v1::ModelSpec mismatch = FusedSpec("fused_mismatch", v1::FUSE_PATTERN_META_LINEAR);
  mismatch.mutable_fuse()->mutable_sau()->set_d_v(2);
  bad = client->CreateModel(mismatch);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fuse.sau.d_v = 2"), std::string::npos) << bad.status();
  v1::ModelSpec no_d = FusedSpec("fused_no_d", v1::FUSE_PATTERN_META_LINEAR);
  no_d.mutable_fuse()->mutable_sau()->set_d(0);
  bad = client->CreateModel(no_d);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fuse.sau.d"), std::string::npos) << bad.status();
  v1::ModelSpec clamp = FusedSpec("fused_clamp", v1::FUSE_PATTERN_META_LINEAR);
  clamp.mutable_fuse()->mutable_control()->set_g_max(2);
  bad = client->CreateModel(clamp);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fuse.control.g_max"), std::string::npos)
      << bad.status();
}

// ---------------------------------------------------------------------------------------------
// With a data directory.

class FuseDurableTest : public ::testing::Test {
 protected:
  // A directory of this process's own: ctest runs other tests of this file in parallel
  // processes.
  void SetUp() override {
    static int counter = 0;
    dir_ = (std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("fuse_e2e_", getpid(), "_", counter++))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<Server> Start(uint64_t snapshot_every_steps = 0,
                                const std::string& config_path = "") {
    Server::Options o = TestOptions();
    o.data_dir = dir_;
    o.config_path = config_path;
    o.snapshot_every_steps = snapshot_every_steps;
    o.snapshot_interval = absl::ZeroDuration();
    return test_util::StartLoopbackServer(o);
  }

  std::string dir_;
};

// Reads a shard's chain with Auditor.Read and verifies it; returns the record kinds seen.
std::map<std::string, int> VerifyChain(const Server& server, const std::string& model,
                                       uint32_t shard) {
  std::map<std::string, int> kinds;
  auto stub = v1::Auditor::NewStub(ChannelTo(server));
  v1::HeadRequest hreq;
  hreq.set_model(model);
  hreq.set_shard(shard);
  v1::HeadResponse head;
  grpc::ClientContext hctx;
  EXPECT_TRUE(stub->Head(&hctx, hreq, &head).ok());
  EXPECT_TRUE(head.durable());
  EXPECT_EQ(head.checkpoint_every(), kCheckpointEvery);
  absl::StatusOr<Ed25519PublicKey> key = Ed25519PublicKey::FromPem(head.public_key_pem());
  EXPECT_TRUE(key.ok()) << key.status();
  if (!key.ok()) return kinds;
  AuditVerifier verifier({.public_key = &*key, .checkpoint_every = head.checkpoint_every()});
  v1::ReadRequest rreq;
  rreq.set_model(model);
  rreq.set_shard(shard);
  grpc::ClientContext rctx;
  SetDeadline(&rctx);
  auto reader = stub->Read(&rctx, rreq);
  v1::ReadResponse chunk;
  uint64_t n = 0;
  absl::Status failure;
  while (reader->Read(&chunk)) {
    for (const v1::AuditLine& line : chunk.records()) {
      EXPECT_EQ(line.index(), n++);
      if (absl::Status st = verifier.Feed(line.line()); !st.ok() && failure.ok()) failure = st;
      absl::StatusOr<AuditRecord> env = ParseAuditJson(line.line());
      const AuditValue* body = env.ok() ? env->Find("body") : nullptr;
      const AuditRecord* b = body != nullptr ? body->get_if<AuditRecord>() : nullptr;
      const AuditValue* kind = b != nullptr ? b->Find("kind") : nullptr;
      if (kind != nullptr && kind->get_if<std::string>()) ++kinds[*kind->get_if<std::string>()];
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(failure.ok()) << failure;
  if (failure.ok()) {
    EXPECT_TRUE(verifier.Finish().ok()) << verifier.Finish();
  }
  EXPECT_EQ(n, head.next_index());
  return kinds;
}

TEST_F(FuseDurableTest, RestartSnapshotAndRecoveryAreBitIdenticalAndAudited) {
  const std::string name = "fused_durable";
  const std::string key = "user-1";
  fuse::FuseDgp dgp(Stream(/*drift_at=*/600), 21);
  std::unique_ptr<fuse::FuseUnit> unit;
  uint32_t shard = 0;
  std::string digest;
  {
    std::unique_ptr<Server> server = Start();
    std::unique_ptr<Client> client = Connect(*server);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<v1::ModelInfo> info =
        client->CreateModel(FusedSpec(name, v1::FUSE_PATTERN_LINEAR_AS_GATE));
    ASSERT_TRUE(info.ok()) << info.status();
    unit = ReferenceUnit(*info);
    absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
    ASSERT_TRUE(s.ok());
    shard = (*s)->shard();
    LearnAndCompare(**s, *unit, Batches(dgp, 1, 900, 40));  // alarms after the drift
    ASSERT_TRUE((*s)->Finish().ok());
    digest = FuseShardOf(*client->GetModel(name), shard).state_digest();
    EXPECT_EQ(digest, ToHex(unit->StateDigest()));
    server->Shutdown(absl::Seconds(5));
  }
  {
    // Restart: recovery replays the whole log (no snapshot yet).
    std::unique_ptr<Server> server = Start();
    std::unique_ptr<Client> client = Connect(*server);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<v1::ModelInfo> info = client->GetModel(name);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(FuseShardOf(*info, shard).state_digest(), digest);
    EXPECT_EQ(FuseShardOf(*info, shard).log_seq(), 23u);
    std::map<std::string, int> kinds = VerifyChain(*server, name, shard);
    EXPECT_EQ(kinds["fuse_learn"], 900);
    EXPECT_GT(kinds["fuse_control"], 0);  // the drift's alarms
    EXPECT_GT(kinds["checkpoint"], 0);

    // Admin.Snapshot covers the fuse part.
    auto admin = v1::Admin::NewStub(ChannelTo(*server));
    v1::SnapshotRequest sreq;
    sreq.set_name(name);
    v1::SnapshotResponse sresp;
    grpc::ClientContext sctx;
    ASSERT_TRUE(admin->Snapshot(&sctx, sreq, &sresp).ok());
    ASSERT_EQ(sresp.shards_size(), 2);
    for (const v1::ShardSnapshot& ss : sresp.shards()) {
      EXPECT_EQ(ss.part(), "fuse");
      if (ss.shard() == shard) {
        EXPECT_TRUE(ss.taken());
        EXPECT_EQ(ss.log_seq(), 23u);
        EXPECT_EQ(ss.steps(), 900u);
      } else {
        EXPECT_EQ(ss.steps(), 0u);  // nothing learned there
      }
    }
    // More samples after the snapshot, still equal to the reference.
    absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
    ASSERT_TRUE(s.ok());
    LearnAndCompare(**s, *unit, Batches(dgp, 901, 300, 25));
    ASSERT_TRUE((*s)->Finish().ok());
    digest = FuseShardOf(*client->GetModel(name), shard).state_digest();
    EXPECT_EQ(digest, ToHex(unit->StateDigest()));
    server->Shutdown(absl::Seconds(5));
  }
  {
    // Recovery from the snapshot plus the 12 batches logged after it.
    std::unique_ptr<Server> server = Start();
    std::unique_ptr<Client> client = Connect(*server);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<v1::ModelInfo> info = client->GetModel(name);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(FuseShardOf(*info, shard).state_digest(), digest);
    EXPECT_EQ(FuseShardOf(*info, shard).steps(), 1200u);
    EXPECT_EQ(FuseShardOf(*info, shard).log_seq(), 35u);
    // Predictions go on exactly.
    absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
    ASSERT_TRUE(s.ok());
    LearnAndCompare(**s, *unit, Batches(dgp, 1201, 100, 50));
    ASSERT_TRUE((*s)->Finish().ok());
    fuse::FuseEvent e = dgp.Next();
    absl::StatusOr<v1::FusePredictResponse> p = client->FusePredict(name, key, e.x, e.q);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(SameBits(p->y_hat(), unit->Predict(e.x, e.q)->y_hat));
    std::map<std::string, int> kinds = VerifyChain(*server, name, shard);
    EXPECT_EQ(kinds["fuse_learn"], 1300);
    EXPECT_EQ(kinds["snapshot"], 1);
    VerifyChain(*server, name, 1 - shard);  // genesis and its snapshot record
    server->Shutdown(absl::Seconds(5));
  }
}

// A fused model over the ridge or vla engine (docs/FUSE.md, "Other engines") is served like one
// over prf: every ack equals a local FuseUnit's step, the state survives a restart (log replay)
// and a snapshot bit for bit, and its audit chain verifies (no prf rules apply to it).
// A spec stored before antithetic pairs and delta growth became the defaults has neither
// `antithetic` nor `max_delta_buckets` (it could not tell false from unset): it still means
// unpaired rows and a delta that never grows, so a restart rebuilds the same W and recovers
// the same state. The test writes such a spec over the stored one. A config file that names
// the model and leaves both fields unset still describes it (read as the old server read it),
// so the server starts.
TEST_F(FuseDurableTest, AStoredSpecWithoutAntitheticRecoversWithUnpairedRows) {
  const std::string name = "fused_old_spec";
  const std::string key = "user-1";
  fuse::FuseDgp dgp(Stream(/*drift_at=*/-1), 23);
  std::unique_ptr<fuse::FuseUnit> unit;
  uint32_t shard = 0;
  std::string digest;
  {
    std::unique_ptr<Server> server = Start();
    std::unique_ptr<Client> client = Connect(*server);
    ASSERT_NE(client, nullptr);
    v1::ModelSpec spec = FusedSpec(name, v1::FUSE_PATTERN_META_LINEAR);
    spec.mutable_fuse()->mutable_sau()->set_antithetic(false);
    spec.mutable_fuse()->mutable_lmu()->set_max_delta_buckets(256);  // = delta_buckets: fixed
    absl::StatusOr<v1::ModelInfo> info = client->CreateModel(spec);
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_TRUE(info->spec().fuse().sau().has_antithetic());
    EXPECT_FALSE(info->spec().fuse().sau().antithetic());
    unit = ReferenceUnit(*info);
    absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
    ASSERT_TRUE(s.ok());
    shard = (*s)->shard();
    LearnAndCompare(**s, *unit, Batches(dgp, 1, 200, 40));
    ASSERT_TRUE((*s)->Finish().ok());
    digest = FuseShardOf(*client->GetModel(name), shard).state_digest();
    server->Shutdown(absl::Seconds(5));
  }
  {
    absl::StatusOr<std::unique_ptr<storage::Store>> store =
        storage::Store::Open({.path = dir_ + "/db"});
    ASSERT_TRUE(store.ok()) << store.status();
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs =
        (*store)->ListSpecs();
    ASSERT_TRUE(specs.ok() && specs->size() == 1u) << specs.status();
    v1::ModelSpec wire;
    ASSERT_TRUE(wire.ParseFromString(specs->front().second));
    wire.mutable_fuse()->mutable_sau()->clear_antithetic();
    wire.mutable_fuse()->mutable_lmu()->clear_max_delta_buckets();
    storage::StoreBatch batch;
    batch.PutSpec(name, wire.SerializeAsString());
    ASSERT_TRUE((*store)->Write(batch).ok());
  }
  {
    // The config entry is the spec as first written, without the two fields: read as a new
    // request it would pair the rows (r = 256) and let the delta grow 4x.
    std::string entry;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(
                    FusedSpec(name, v1::FUSE_PATTERN_META_LINEAR), &entry)
                    .ok());
    const std::string config = dir_ + "-config.json";
    std::ofstream(config) << "{\"models\": [" << entry << "]}";
    std::unique_ptr<Server> server = Start(0, config);  // fails the test if it does not start
    std::unique_ptr<Client> client = Connect(*server);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<v1::ModelInfo> info = client->GetModel(name);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_TRUE(info->spec().fuse().sau().has_antithetic());
    EXPECT_FALSE(info->spec().fuse().sau().antithetic());
    EXPECT_EQ(info->spec().fuse().lmu().max_delta_buckets(), 256u);
    EXPECT_EQ(FuseShardOf(*info, shard).state_digest(), digest);
    absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
    ASSERT_TRUE(s.ok());
    LearnAndCompare(**s, *unit, Batches(dgp, 201, 100, 50));
    ASSERT_TRUE((*s)->Finish().ok());
    VerifyChain(*server, name, shard);
    server->Shutdown(absl::Seconds(5));
  }
}

TEST_F(FuseDurableTest, FuseOverRidgeAndVlaIsServedRecoveredAndAuditedLikePrf) {
  struct Engine {
    const char* name;
    v1::Engine wire;
  };
  const Engine engines[] = {{"ridge", v1::ENGINE_RIDGE}, {"vla", v1::ENGINE_VLA}};
  const std::string key = "user-7";
  std::map<std::string, std::unique_ptr<fuse::FuseUnit>> units;
  std::map<std::string, std::string> digests;
  std::map<std::string, fuse::FuseDgp> streams;
  uint32_t shard = 0;
  {
    std::unique_ptr<Server> server = Start();
    std::unique_ptr<Client> client = Connect(*server);
    ASSERT_NE(client, nullptr);
    for (const Engine& e : engines) {
      SCOPED_TRACE(e.name);
      const std::string name = absl::StrCat("fused_", e.name);
      v1::ModelSpec spec = FusedSpec(name, v1::FUSE_PATTERN_META_LINEAR);
      v1::SauSpec* sau = spec.mutable_fuse()->mutable_sau();
      sau->set_engine(e.wire);
      sau->clear_r();  // prf parameters: refused for the other engines
      sau->clear_tau();
      sau->clear_seed();
      absl::StatusOr<v1::ModelInfo> info = client->CreateModel(spec);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->spec().fuse().sau().engine(), e.wire);
      units[name] = ReferenceUnit(*info);
      ASSERT_NE(units[name], nullptr);
      ASSERT_EQ(units[name]->sau().engine(), e.wire == v1::ENGINE_RIDGE ? sau::Engine::kRidge
                                                                         : sau::Engine::kVla);
      streams.emplace(name, fuse::FuseDgp(Stream(/*drift_at=*/-1), 31));
      absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
      ASSERT_TRUE(s.ok());
      shard = (*s)->shard();
      EXPECT_EQ(LearnAndCompare(**s, *units[name], Batches(streams.at(name), 1, 400, 40)), 0u);
      ASSERT_TRUE((*s)->Finish().ok());
      digests[name] = FuseShardOf(*client->GetModel(name), shard).state_digest();
      EXPECT_EQ(digests[name], ToHex(units[name]->StateDigest()));
      // Prometheus: the engine's series, not the prf ones.
      const sau::Memory& mem = units[name]->sau();
      if (mem.engine() == sau::Engine::kRidge) {
        EXPECT_EQ(SeriesValue(*server, "streamlearn_sau_engine_key_scale", name, shard),
                  mem.ridge()->scale());
        EXPECT_GE(SeriesValue(*server, "streamlearn_sau_engine_condition", name, shard), 1.0);
      } else {
        EXPECT_EQ(SeriesValue(*server, "streamlearn_sau_engine_s_norm", name, shard),
                  mem.vla()->s_norm());
        EXPECT_GT(SeriesValue(*server, "streamlearn_sau_engine_residual_norm", name, shard), 0.0);
      }
      EXPECT_TRUE(std::isnan(SeriesValue(*server, "streamlearn_sau_margin", name, shard)));
      // Admin.Snapshot covers it; more samples follow the snapshot.
      auto admin = v1::Admin::NewStub(ChannelTo(*server));
      v1::SnapshotRequest sreq;
      sreq.set_name(name);
      v1::SnapshotResponse sresp;
      grpc::ClientContext sctx;
      ASSERT_TRUE(admin->Snapshot(&sctx, sreq, &sresp).ok());
      s = client->OpenFuseLearn(name, key);
      ASSERT_TRUE(s.ok());
      LearnAndCompare(**s, *units[name], Batches(streams.at(name), 401, 100, 25));
      ASSERT_TRUE((*s)->Finish().ok());
      digests[name] = FuseShardOf(*client->GetModel(name), shard).state_digest();
      EXPECT_EQ(digests[name], ToHex(units[name]->StateDigest()));
    }
    server->Shutdown(absl::Seconds(5));
  }
  {
    // Recovery: the snapshot plus the batches logged after it.
    std::unique_ptr<Server> server = Start();
    std::unique_ptr<Client> client = Connect(*server);
    ASSERT_NE(client, nullptr);
    for (const Engine& e : engines) {
      SCOPED_TRACE(e.name);
      const std::string name = absl::StrCat("fused_", e.name);
      absl::StatusOr<v1::ModelInfo> info = client->GetModel(name);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(FuseShardOf(*info, shard).state_digest(), digests[name]);
      EXPECT_EQ(FuseShardOf(*info, shard).steps(), 500u);
      absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
      ASSERT_TRUE(s.ok());
      LearnAndCompare(**s, *units[name], Batches(streams.at(name), 501, 60, 30));
      ASSERT_TRUE((*s)->Finish().ok());
      fuse::FuseEvent ev = streams.at(name).Next();
      absl::StatusOr<v1::FusePredictResponse> p = client->FusePredict(name, key, ev.x, ev.q);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_TRUE(SameBits(p->y_hat(), units[name]->Predict(ev.x, ev.q)->y_hat));
      std::map<std::string, int> kinds = VerifyChain(*server, name, shard);
      EXPECT_EQ(kinds["fuse_learn"], 560);
      EXPECT_EQ(kinds["fuse_control"], 0);
      EXPECT_EQ(kinds["snapshot"], 1);
    }
    server->Shutdown(absl::Seconds(5));
  }
}

// ---------------------------------------------------------------------------------------------
// kill -9 of the real server binary.

const char kServerBinary[] = STREAMLEARN_BINARY_DIR "/server/streamlearn-server";

// One streamlearn-server child on 127.0.0.1 and a port of its choosing (read from its log).
class ServerProcess {
 public:
  ServerProcess(const std::vector<std::string>& flags, std::string log) : log_(std::move(log)) {
    std::vector<std::string> args = {kServerBinary, "--listen=127.0.0.1:0", "--metrics="};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;  // posix_spawn, not fork: gRPC threads run here
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int err = posix_spawn(&pid_, kServerBinary, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) {
      ADD_FAILURE() << "cannot start " << kServerBinary << " (build the streamlearn-server "
                    << "target): " << std::strerror(err);
      pid_ = -1;
    }
  }
  ~ServerProcess() { Kill(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The bound port from the "(port N)" log line; 0 if it did not listen within 60 s.
  int WaitForPort() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(log_);
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string log = ss.str();
      const size_t at = log.find("(port ");
      if (at != std::string::npos && log.find(')', at) != std::string::npos) {
        return std::atoi(log.c_str() + at + 6);
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        ADD_FAILURE() << "the server exited:\n" << log;
        pid_ = -1;
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return 0;
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  const std::string log_;
  pid_t pid_ = -1;
};

TEST_F(FuseDurableTest, KillNineMidStreamAndAfterASnapshotRecoversTheCommittedState) {
  std::filesystem::create_directories(dir_);
  const std::string secret_path = dir_ + "/test.secret";
  {
    const lmu::HashSecret secret = TestSecret();
    const int fd = open(secret_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, secret.data(), secret.size()), static_cast<ssize_t>(secret.size()));
    close(fd);
  }
  const std::vector<std::string> flags = {
      "--data_dir=" + dir_ + "/data", "--lmu_secret_file=" + secret_path,
      absl::StrCat("--audit_checkpoint_every=", kCheckpointEvery), "--snapshot_every_steps=300",
      "--snapshot_interval=0", "--fuse_digest_every=100"};
  const std::string name = "fused_kill";
  const std::string key = "k";
  constexpr int kPer = 30;
  fuse::FuseDgp dgp(Stream(/*drift_at=*/300), 4);
  const std::vector<std::vector<FuseSample>> batches = Batches(dgp, 1, 33 * kPer, kPer);
  auto start = [&](int life) {
    auto p = std::make_unique<ServerProcess>(flags, absl::StrCat(dir_, "/life", life, ".log"));
    const int port = p->WaitForPort();
    EXPECT_GT(port, 0);
    return std::make_pair(std::move(p), port);
  };
  auto connect = [](int port) {
    absl::StatusOr<std::unique_ptr<Client>> c =
        test_util::ConnectClient(absl::StrCat("127.0.0.1:", port));
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  };
  std::unique_ptr<fuse::FuseUnit> unit;
  size_t fed = 0;  // batches the reference has learned
  auto feed_to = [&](uint64_t last_t) {
    while (fed < batches.size() && batches[fed].back().t <= last_t) {
      for (const FuseSample& x : batches[fed]) ASSERT_TRUE(unit->Learn(x.t, x.x, x.q, x.y).ok());
      ++fed;
    }
  };

  // Life 1: 14 batches acknowledged, 6 more in flight when the server is killed.
  {
    auto [process, port] = start(1);
    std::unique_ptr<Client> client = connect(port);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<v1::ModelInfo> info =
        client->CreateModel(FusedSpec(name, v1::FUSE_PATTERN_META_LINEAR, 1));
    ASSERT_TRUE(info.ok()) << info.status();
    unit = ReferenceUnit(*info);
    absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
    ASSERT_TRUE(s.ok());
    for (int b = 0; b < 12; ++b) ASSERT_TRUE((*s)->Send(batches[b]).ok());
    for (int b = 0; b < 12; ++b) {
      absl::StatusOr<FuseLearnResult> r = (*s)->Next();
      ASSERT_TRUE(r.ok() && r->status.ok());
    }
    for (int b = 12; b < 20; ++b) ASSERT_TRUE((*s)->Send(batches[b]).ok());
    for (int b = 12; b < 14; ++b) {  // two more acks; the server is busy with the rest
      absl::StatusOr<FuseLearnResult> r = (*s)->Next();
      ASSERT_TRUE(r.ok() && r->status.ok());
    }
    process->Kill();
  }
  // Life 2: the state is exactly the reference fed the committed batches; resending every
  // batch applies each uncommitted one whole and reports the committed ones as duplicates.
  {
    auto [process, port] = start(2);
    std::unique_ptr<Client> client = connect(port);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<v1::ModelInfo> info = client->GetModel(name);
    ASSERT_TRUE(info.ok()) << info.status();
    const uint64_t last_t = FuseShardOf(*info, 0).last_t();
    EXPECT_GE(last_t, 14u * kPer);  // nothing acknowledged is lost
    EXPECT_EQ(last_t % kPer, 0u);   // nothing half applied
    std::printf("[kill -9] life 2 starts at last_t %llu (acknowledged %d, sent %d)\n",
                static_cast<unsigned long long>(last_t), 14 * kPer, 20 * kPer);
    feed_to(last_t);
    EXPECT_EQ(FuseShardOf(*info, 0).state_digest(), ToHex(unit->StateDigest()));
    absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
    ASSERT_TRUE(s.ok());
    std::vector<std::vector<FuseSample>> fresh;
    for (size_t b = 0; b < 28; ++b) {
      if (b < fed) {
        ASSERT_TRUE((*s)->Send(batches[b]).ok());
        absl::StatusOr<FuseLearnResult> r = (*s)->Next();
        ASSERT_TRUE(r.ok() && r->status.ok());
        EXPECT_EQ(r->ack.applied(), 0u);
        EXPECT_EQ(r->ack.duplicate_t_size(), kPer);
      } else {
        fresh.push_back(batches[b]);
      }
    }
    LearnAndCompare(**s, *unit, fresh);
    fed = 28;
    ASSERT_TRUE((*s)->Finish().ok());
    // A snapshot now, then kill -9 right after it returns.
    auto admin = v1::Admin::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                        grpc::InsecureChannelCredentials()));
    v1::SnapshotRequest sreq;
    sreq.set_name(name);
    v1::SnapshotResponse sresp;
    grpc::ClientContext sctx;
    ASSERT_TRUE(admin->Snapshot(&sctx, sreq, &sresp).ok());
    ASSERT_EQ(sresp.shards_size(), 1);
    EXPECT_EQ(sresp.shards(0).part(), "fuse");
    EXPECT_EQ(sresp.shards(0).steps(), 28u * kPer);
    process->Kill();
  }
  // Life 3: from that snapshot; 5 more batches; the whole chain verifies across the kills.
  {
    auto [process, port] = start(3);
    std::unique_ptr<Client> client = connect(port);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<v1::ModelInfo> info = client->GetModel(name);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(FuseShardOf(*info, 0).state_digest(), ToHex(unit->StateDigest()));
    absl::StatusOr<std::unique_ptr<FuseLearnSession>> s = client->OpenFuseLearn(name, key);
    ASSERT_TRUE(s.ok());
    LearnAndCompare(**s, *unit, std::vector<std::vector<FuseSample>>(batches.begin() + 28,
                                                                      batches.end()));
    ASSERT_TRUE((*s)->Finish().ok());
    info = client->GetModel(name);
    EXPECT_EQ(FuseShardOf(*info, 0).state_digest(), ToHex(unit->StateDigest()));
    EXPECT_EQ(FuseShardOf(*info, 0).steps(), 33u * kPer);

    // The chain, read through this process's Auditor.
    auto stub = v1::Auditor::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                         grpc::InsecureChannelCredentials()));
    v1::HeadRequest hreq;
    hreq.set_model(name);
    v1::HeadResponse head;
    grpc::ClientContext hctx;
    ASSERT_TRUE(stub->Head(&hctx, hreq, &head).ok());
    absl::StatusOr<Ed25519PublicKey> pub = Ed25519PublicKey::FromPem(head.public_key_pem());
    ASSERT_TRUE(pub.ok());
    AuditVerifier verifier({.public_key = &*pub, .checkpoint_every = head.checkpoint_every()});
    v1::ReadRequest rreq;
    rreq.set_model(name);
    grpc::ClientContext rctx;
    SetDeadline(&rctx);
    auto reader = stub->Read(&rctx, rreq);
    v1::ReadResponse chunk;
    uint64_t n = 0;
    absl::Status failure;
    while (reader->Read(&chunk)) {
      for (const v1::AuditLine& line : chunk.records()) {
        ++n;
        if (absl::Status st = verifier.Feed(line.line()); !st.ok() && failure.ok()) failure = st;
      }
    }
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_TRUE(failure.ok()) << failure;
    EXPECT_TRUE(verifier.Finish().ok());
    EXPECT_EQ(n, head.next_index());
    EXPECT_GT(n, 33u * kPer);
    process->Kill();
  }
}

}  // namespace
}  // namespace streamlearn::server
