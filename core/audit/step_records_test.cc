// The per-step audit records: every body is canonical and carries its documented fields, and
// a log written the way the server writes it (SAU events, alarm controls, LMU updates, signed
// checkpoints, all in one per-shard chain) passes the one-pass verifier, while each kind of
// tampering is caught at the right record by the right rule.
#include "core/audit/step_records.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/audit/audit_record.h"
#include "core/audit/checkpoint.h"
#include "core/audit/merkle_chain.h"
#include "core/audit/verifier.h"
#include "core/common/status_macros.h"
#include "core/sau/counter_rng.h"
#include "core/workloads/dgp.h"
#include "core/shard/lmu_shard.h"
#include "core/shard/sau_shard.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

const Ed25519PrivateKey& Key() {
  static const Ed25519PrivateKey* k = new Ed25519PrivateKey(*Ed25519PrivateKey::Generate());
  return *k;
}

std::set<std::string> Keys(const AuditRecord& r) {
  std::set<std::string> keys;
  for (const AuditField& f : r.fields()) keys.insert(f.key);
  return keys;
}

AuditRecord ParseStrict(const std::string& body) {
  absl::StatusOr<AuditRecord> r = ParseAuditJson(body, {.require_canonical = true});
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << body;
  return r.ok() ? *r : AuditRecord{};
}

std::string Str(const AuditRecord& r, std::string_view key) {
  const AuditValue* v = r.Find(key);
  return v != nullptr && v->get_if<std::string>() != nullptr ? *v->get_if<std::string>() : "<none>";
}

double Num(const AuditRecord& r, std::string_view key) {
  double x = std::nan("");
  const AuditValue* v = r.Find(key);
  if (v != nullptr) v->AsNumber(&x);
  return x;
}

sau::EventDiagnostics SomeDiagnostics() {
  sau::EventDiagnostics d;
  d.margin = -0.125;
  d.log_e_mix = 3.5;
  d.rj_gap = 0.3;
  d.rj_gap_eq16 = 0.31;
  d.rj_threshold = 0.2;
  d.rj_level = sau::RjLevel::kYellow;
  d.beta_floor = 1e-12;
  d.lambda_star = 0.01;
  d.clip_rate = 0.0013;
  d.max_exponent = 2.5;
  d.den = 4.0;
  d.shr = 0.99;
  d.nu2_hat = 1.5;
  d.bprime_hat = 0.75;
  d.epoch = 3;
  d.alarm = true;
  return d;
}

const std::set<std::string> kSauEventFields = {
    "beta_floor", "bprime_hat", "clip_rate", "den",          "epoch",        "kind",
    "lambda_star", "log_e_mix", "log_seq",   "margin",       "max_exponent", "nu2_hat",
    "rj_exceeded", "rj_gap",    "rj_gap_eq16", "rj_level",   "rj_threshold", "shr",
    "t",           "ver_sau"};
const std::set<std::string> kStateFields = {"den_below_floor", "den_min", "kahan_residual_max",
                                            "state_digest"};

TEST(StepRecords, SauEventBodiesAreCanonicalWithTheDocumentedFields) {
  const Digest batch = Sha256Of("batch bytes");
  const SauStateSummary state{.digest = Sha256Of("state"),
                              .den_min = 0.5,
                              .den_below_floor = 2,
                              .kahan_residual_max = 1e-17};
  struct Case {
    const char* name;
    sau::RjLevel level;
    bool with_batch;
    bool with_state;
  };
  const Case cases[] = {
      {"green, middle of a batch", sau::RjLevel::kGreen, false, false},
      {"yellow, first of a batch", sau::RjLevel::kYellow, true, false},
      {"red, last of a batch with a state digest", sau::RjLevel::kRed, false, true},
      {"red, a batch of one with everything", sau::RjLevel::kRed, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    sau::EventDiagnostics d = SomeDiagnostics();
    d.rj_level = c.level;
    std::string body;
    AppendSauEventBody({.t = 42,
                        .log_seq = 7,
                        .ver_sau = 9,
                        .diag = &d,
                        .batch_digest = c.with_batch ? &batch : nullptr,
                        .state = c.with_state ? &state : nullptr},
                       &body);
    const AuditRecord r = ParseStrict(body);
    std::set<std::string> expected = kSauEventFields;
    if (c.level == sau::RjLevel::kRed) expected.insert("actions");
    // The floor policy's input, on an event where it triggered (RJ red or an alarm).
    if (c.level == sau::RjLevel::kRed || d.alarm) expected.insert("median_den");
    if (c.with_batch) expected.insert("batch_digest");
    if (c.with_state) expected.insert(kStateFields.begin(), kStateFields.end());
    EXPECT_EQ(Keys(r), expected);
    EXPECT_EQ(Str(r, "kind"), "sau_event");
    EXPECT_EQ(Num(r, "t"), 42);
    EXPECT_EQ(Num(r, "log_seq"), 7);
    EXPECT_EQ(Num(r, "ver_sau"), 9);
    EXPECT_EQ(Num(r, "margin"), -0.125);
    EXPECT_EQ(Num(r, "epoch"), 3);
    EXPECT_EQ(Num(r, "clip_rate"), 0.0013);
    EXPECT_EQ(*r.Find("rj_exceeded")->get_if<bool>(), true);  // 0.3 > 0.2
    EXPECT_EQ(Str(r, "rj_level"), RjLevelName(c.level));
    if (c.level == sau::RjLevel::kRed) {
      EXPECT_NE(body.find(R"("actions":[{"action":"raise_beta_floor","cause":"rj_red"}])"),
                std::string::npos)
          << body;
    }
    if (c.with_batch) {
      EXPECT_EQ(Str(r, "batch_digest"), ToHex(batch));
    }
    if (c.with_state) {
      EXPECT_EQ(Str(r, "state_digest"), ToHex(state.digest));
      EXPECT_EQ(Num(r, "den_min"), 0.5);
      EXPECT_EQ(Num(r, "den_below_floor"), 2);
      EXPECT_EQ(Num(r, "kahan_residual_max"), 1e-17);
    }
  }
}

TEST(StepRecords, NonFiniteDiagnosticsStayEncodable) {
  sau::EventDiagnostics d = SomeDiagnostics();
  d.max_exponent = -std::numeric_limits<double>::infinity();  // before any feature was seen
  d.rj_gap = std::nan("");
  const SauStateSummary state{.den_min = std::numeric_limits<double>::infinity()};
  std::string body;
  AppendSauEventBody({.t = 1, .diag = &d, .state = &state}, &body);
  const AuditRecord r = ParseStrict(body);
  EXPECT_EQ(Str(r, "max_exponent"), "-Infinity");
  EXPECT_EQ(Str(r, "rj_gap"), "NaN");
  EXPECT_EQ(Str(r, "den_min"), "Infinity");
  EXPECT_EQ(*r.Find("rj_exceeded")->get_if<bool>(), false);  // NaN > threshold is false
}

TEST(StepRecords, SauControlLmuUpdateAndSnapshotBodies) {
  {
    SCOPED_TRACE("sau_control");
    const sau::EventDiagnostics d = SomeDiagnostics();
    std::string body;
    AppendSauAlarmBody(42, 7, d, &body);
    const AuditRecord r = ParseStrict(body);
    EXPECT_EQ(Keys(r), (std::set<std::string>{"actions", "beta_floor", "epoch_next", "kind",
                                              "log_seq", "t"}));
    EXPECT_EQ(Str(r, "kind"), "sau_control");
    EXPECT_EQ(Num(r, "epoch_next"), 4);
    EXPECT_EQ(Num(r, "beta_floor"), 1e-12);
    EXPECT_NE(body.find(R"({"action":"raise_beta_floor","cause":"alarm"})"), std::string::npos);
    EXPECT_NE(body.find(R"({"action":"restart_eprocess","cause":"alarm"})"), std::string::npos);
  }
  lmu::LmuTableStats ts;
  ts.ver_base = 3;
  ts.ver_delta = 99;
  ts.base_keys = 1000;
  ts.delta_keys = 17;
  ts.delta_load = 0.25;
  ts.stash_used = 1;
  ts.ring_used = 0;
  ts.emergency_used = false;
  ts.locate_bound = 6;
  ts.insert_bound = 12;
  const Digest batch = Sha256Of("lmu batch"), state = Sha256Of("lmu state");
  for (bool with_state : {false, true}) {
    SCOPED_TRACE(with_state ? "lmu_update with state" : "lmu_update");
    std::string body;
    AppendLmuUpdateBody({.t_first = 10,
                         .t_last = 20,
                         .applied = 9,
                         .duplicates = 2,
                         .log_seq = 5,
                         .inserted = 4,
                         .c_lookup_p100 = 3,
                         .c_insert_p100 = 5,
                         .table = &ts,
                         .batch_digest = &batch,
                         .state_digest = with_state ? &state : nullptr},
                        &body);
    const AuditRecord r = ParseStrict(body);
    std::set<std::string> expected = {
        "applied",       "base_keys",      "batch_digest", "c_insert_p100", "c_lookup_p100",
        "delta_keys",    "delta_load",     "duplicates",   "emergency_used", "insert_bound",
        "inserted",      "kind",           "locate_bound", "log_seq",       "ring_used",
        "stash_used",    "t_first",        "t_last",       "ver_base",      "ver_delta"};
    if (with_state) expected.insert("state_digest");
    EXPECT_EQ(Keys(r), expected);
    EXPECT_EQ(Str(r, "kind"), "lmu_update");
    EXPECT_EQ(Num(r, "c_lookup_p100"), 3);
    EXPECT_EQ(Num(r, "locate_bound"), 6);
    EXPECT_EQ(Num(r, "c_insert_p100"), 5);
    EXPECT_EQ(Num(r, "insert_bound"), 12);
    EXPECT_EQ(Num(r, "delta_load"), 0.25);
    EXPECT_EQ(Str(r, "batch_digest"), ToHex(batch));
    if (with_state) {
      EXPECT_EQ(Str(r, "state_digest"), ToHex(state));
    }
  }
  {
    SCOPED_TRACE("snapshot");
    std::string body;
    AppendSnapshotBody({.part = "lmu",
                        .log_seq = 12,
                        .snapshot_seq = 2,
                        .steps = 3456,
                        .blob_digest = Sha256Of("blob"),
                        .state_digest = Sha256Of("state")},
                       &body);
    const AuditRecord r = ParseStrict(body);
    EXPECT_EQ(Keys(r), (std::set<std::string>{"blob_digest", "kind", "log_seq", "part",
                                              "snapshot_seq", "state_digest", "steps"}));
    EXPECT_EQ(Str(r, "kind"), "snapshot");
    EXPECT_EQ(Str(r, "part"), "lmu");
    EXPECT_EQ(Num(r, "steps"), 3456);
    EXPECT_EQ(Str(r, "blob_digest"), ToHex(Sha256Of("blob")));
  }
}

// ---------------------------------------------------------------------------------------
// End to end: a real SauShard and LmuShard writing one chain the way the server does.

constexpr uint64_t kCheckpointEvery = 16;
constexpr uint64_t kStateEvery = 50;  // K: a state summary at the end of a batch crossing K
constexpr char kModelSpec[] = "test:sau(d=8,d_v=4,r=64,a=8);lmu(m=1)";

sau::SauSpec DriftSpec() {
  sau::SauSpec s;
  s.d = 8;
  s.d_v = 4;
  s.r = 64;
  s.seed = 17;
  s.input_scale = 8;  // a = 8: the half-split gap exceeds its threshold often (RJ red)
  s.warmup = 100;
  return s;
}

lmu::LmuSpec SmallLmuSpec(bool background) {
  lmu::LmuSpec s;
  s.delta_buckets = 64;
  s.lambda_max = 0;
  s.margin = 0;
  s.background_rebuild = background;
  return s;
}

// Bodies in chain order (genesis first, checkpoints not included) and the lines written.
struct ChainUnderTest {
  AuditLogWriter writer{Key(), kCheckpointEvery};
  std::vector<std::string> bodies;
  std::vector<std::string> lines;

  // Like server/storage/shard_chain.h: all of a commit's bodies or none.
  absl::Status Commit(const std::vector<std::string>& batch) {
    AuditLogWriter next = writer;
    std::vector<std::string> out;
    for (const std::string& b : batch) {
      RETURN_IF_ERROR(next.AppendCanonical(b, &out));
    }
    writer = next;
    bodies.insert(bodies.end(), batch.begin(), batch.end());
    lines.insert(lines.end(), out.begin(), out.end());
    return absl::OkStatus();
  }
};

Digest SauBatchDigest(std::span<const EventView> batch) {
  Sha256 h;
  for (const EventView& e : batch) {
    h.U64(e.t);
    h.F64s(e.k);
    h.F64s(e.v);
  }
  return h.Finish();
}

Digest LmuBatchDigest(std::span<const SampleView> batch) {
  Sha256 h;
  for (const SampleView& s : batch) {
    h.U64(s.t);
    for (const lmu::Feature& f : s.x) {
      h.U64(f.id);
      h.F64(f.val);
    }
    h.F64s(s.y);
  }
  return h.Finish();
}

// The records of one SAU batch, built exactly as the server builds them.
std::vector<std::string> SauBodies(const SauCommit& c) {
  const Digest batch_digest = SauBatchDigest(c.batch);
  const uint64_t after = c.state->events();
  const uint64_t before = after - c.applied.size();
  const bool state_due = after / kStateEvery > before / kStateEvery;
  const SauStateSummary summary = state_due ? SummarizeSau(*c.state) : SauStateSummary{};
  std::vector<std::string> bodies;
  for (size_t j = 0; j < c.applied.size(); ++j) {
    const sau::EventDiagnostics& d = c.diags[j];
    const uint64_t t = c.batch[c.applied[j]].t;
    std::string body;
    AppendSauEventBody({.t = t,
                        .log_seq = c.log_seq,
                        .ver_sau = c.version,
                        .diag = &d,
                        .batch_digest = j == 0 ? &batch_digest : nullptr,
                        .state = state_due && j + 1 == c.applied.size() ? &summary : nullptr},
                       &body);
    bodies.push_back(std::move(body));
    if (d.alarm) {
      body.clear();
      AppendSauAlarmBody(t, c.log_seq, d, &body);
      bodies.push_back(std::move(body));
    }
  }
  return bodies;
}

std::vector<std::string> LmuBodies(const LmuCommit& c) {
  const lmu::LmuTableStats ts = c.learner->TableStats();
  const Digest batch_digest = LmuBatchDigest(c.batch);
  const Digest state = c.learner->StateDigest();
  std::string body;
  AppendLmuUpdateBody({.t_first = c.t_first,
                       .t_last = c.t_last,
                       .applied = c.outcome->applied,
                       .duplicates = c.outcome->duplicates.size(),
                       .log_seq = c.log_seq,
                       .inserted = c.outcome->inserted,
                       .c_lookup_p100 = c.outcome->c_lookup_p100,
                       .c_insert_p100 = c.outcome->c_insert_p100,
                       .table = &ts,
                       .batch_digest = &batch_digest,
                       .state_digest = c.log_seq % 2 == 0 ? &state : nullptr},
                      &body);
  return {body};
}

struct LmuSamples {
  std::vector<std::vector<lmu::Feature>> x;
  std::vector<std::vector<double>> y;
  std::vector<SampleView> views;
};

LmuSamples MakeLmuSamples(int n, uint64_t first_t, uint64_t seed) {
  LmuSamples s;
  sau::CounterRng rng(seed, 7);
  for (int i = 0; i < n; ++i) {
    std::vector<lmu::Feature> x;
    const int nnz = 1 + static_cast<int>(rng.NextU64() % 4);
    for (int j = 0; j < nnz; ++j) {
      x.push_back({1 + rng.NextU64() % 400, rng.NextUniform() * 2 - 1});
    }
    s.x.push_back(std::move(x));
    s.y.push_back({rng.NextUniform() * 2 - 1});
  }
  for (int i = 0; i < n; ++i) s.views.push_back({.t = first_t + i, .x = s.x[i], .y = s.y[i]});
  return s;
}

struct RunResult {
  ChainUnderTest chain_under_test;
  uint64_t events = 0;
  uint64_t alarms = 0;
  uint64_t red_events = 0;
  uint64_t lmu_batches = 0;
  Digest w_digest{};
};

// 2400 DGP-C events (a new cluster every 400 events, so the e-process alarms after each
// change), in batches of 1..37 events, some of them repeated (duplicates), with an LMU batch
// after every third SAU batch.
RunResult RunServerLikeStream() {
  RunResult out;
  auto est = sau::SauEstimator::Create(DriftSpec());
  EXPECT_TRUE(est.ok()) << est.status();
  out.w_digest = est->w_digest();
  SauShard sau(*est);
  LmuShard lmu(SmallLmuSpec(/*background=*/false), lmu::HashSecret{});
  EXPECT_TRUE(out.chain_under_test.writer
                  .AppendGenesis(kModelSpec, out.w_digest, &out.chain_under_test.lines)
                  .ok());
  out.chain_under_test.bodies.push_back(*EncodeCanonical(GenesisBody(kModelSpec, out.w_digest)));

  const SauCommitHook sau_hook = [&](const SauCommit& c) {
    return out.chain_under_test.Commit(SauBodies(c));
  };
  const LmuCommitHook lmu_hook = [&](const LmuCommit& c) {
    return out.chain_under_test.Commit(LmuBodies(c));
  };

  sau::Dgp dgp({.kind = sau::Dgp::Kind::kC, .d = 8, .d_v = 4, .phase_length = 400}, 23);
  std::vector<sau::DgpEvent> raw;
  for (int i = 0; i < 2400; ++i) raw.push_back(dgp.Next());
  std::vector<EventView> views;
  for (size_t i = 0; i < raw.size(); ++i) views.push_back({1000 + i, raw[i].k, raw[i].v});

  std::mt19937_64 rng(99);
  uint64_t lmu_t = 1;
  size_t pos = 0;
  for (int batch_no = 0; pos < views.size(); ++batch_no) {
    const size_t n = std::min<size_t>(1 + rng() % 37, views.size() - pos);
    // Every fifth batch re-sends the last two events already applied (acked as duplicates).
    const size_t back = batch_no % 5 == 4 && pos >= 2 ? 2 : 0;
    absl::StatusOr<IngestOutcome> o =
        sau.Ingest(std::span(views).subspan(pos - back, n + back), 4096, &sau_hook);
    EXPECT_TRUE(o.ok()) << o.status();
    if (!o.ok()) return out;
    EXPECT_EQ(o->applied, n);
    out.events += o->applied;
    out.alarms += o->alarms;
    out.red_events += o->red_events;
    pos += n;
    if (batch_no % 3 == 2) {
      const LmuSamples s = MakeLmuSamples(1 + static_cast<int>(rng() % 20), lmu_t, batch_no);
      lmu_t += s.views.size();
      absl::StatusOr<UpdateOutcome> u = lmu.Update(s.views, 4096, &lmu_hook);
      EXPECT_TRUE(u.ok()) << u.status();
      ++out.lmu_batches;
    }
  }
  // An all-duplicate batch logs nothing.
  const size_t lines_before = out.chain_under_test.lines.size();
  EXPECT_TRUE(sau.Ingest(std::span(views).subspan(0, 5), 4096, &sau_hook).ok());
  EXPECT_EQ(out.chain_under_test.lines.size(), lines_before);
  EXPECT_EQ(sau.log_seq(), sau.Stats().version);
  return out;
}

const RunResult& ServerLikeRun() {
  static const RunResult* run = new RunResult(RunServerLikeStream());
  return *run;
}

AuditVerifierOptions VerifierOptions(const Digest& w_digest) {
  return {.public_key = &Key().PublicKey(),
          .checkpoint_every = kCheckpointEvery,
          .model_spec = kModelSpec,
          .w_digest = w_digest};
}

// Feeds every line, then Finish; the first error.
absl::Status VerifyLines(const std::vector<std::string>& lines, AuditVerifier* v) {
  for (const std::string& line : lines) {
    RETURN_IF_ERROR(v->Feed(line));
  }
  return v->Finish();
}

std::vector<std::string> WriteLines(const std::vector<std::string>& bodies) {
  AuditLogWriter w(Key(), kCheckpointEvery);
  std::vector<std::string> lines;
  for (const std::string& b : bodies) EXPECT_TRUE(w.AppendCanonical(b, &lines).ok());
  return lines;
}

// The line position of each body (checkpoints skipped).
std::vector<size_t> BodyPositions(const std::vector<std::string>& lines) {
  std::vector<size_t> pos;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(R"("kind":"checkpoint")") == std::string::npos) pos.push_back(i);
  }
  return pos;
}

TEST(StepRecordsEndToEnd, ServerLikeLogWithAlarmsRedEventsAndLmuUpdatesVerifies) {
  const RunResult& run = ServerLikeRun();
  EXPECT_EQ(run.events, 2400u);
  EXPECT_GT(run.alarms, 0u) << "the stream must make the e-process alarm";
  EXPECT_GT(run.red_events, 0u) << "the stream must make RJ go red";
  EXPECT_GT(run.lmu_batches, 0u);
  std::printf("%llu events, %llu alarms, %llu red events, %llu LMU batches, %zu lines\n",
              static_cast<unsigned long long>(run.events),
              static_cast<unsigned long long>(run.alarms),
              static_cast<unsigned long long>(run.red_events),
              static_cast<unsigned long long>(run.lmu_batches), run.chain_under_test.lines.size());
  // Each record is written once, in order; checkpoints every 16.
  ASSERT_EQ(run.chain_under_test.bodies.size(), 1 + run.events + run.alarms + run.lmu_batches);
  EXPECT_EQ(run.chain_under_test.lines, WriteLines(run.chain_under_test.bodies));
  for (const std::string& line : run.chain_under_test.lines) {
    ASSERT_TRUE(ParseAuditJson(line, {.require_canonical = true}).ok()) << line;
  }
  AuditVerifier v(VerifierOptions(run.w_digest));
  const absl::Status st = VerifyLines(run.chain_under_test.lines, &v);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(v.records(), run.chain_under_test.lines.size());
}

struct Tamper {
  const char* name;
  // Changes the log; returns the position of the first bad record.
  std::function<size_t(std::vector<std::string>* lines, std::mt19937_64& rng)> apply;
  AuditRule rule;
};

// Index of the first body of `kind` after body `from` that satisfies `pred`.
size_t FindBody(const std::vector<std::string>& bodies, size_t from,
                const std::function<bool(const AuditRecord&)>& pred) {
  for (size_t i = from; i < bodies.size(); ++i) {
    if (pred(*ParseAuditJson(bodies[i]))) return i;
  }
  ADD_FAILURE() << "no such body";
  return bodies.size();
}

std::string WithoutField(const std::string& body, std::string_view key) {
  const AuditRecord r = *ParseAuditJson(body);
  AuditRecord out;
  for (const AuditField& f : r.fields()) {
    if (f.key != key) out.Set(f.key, f.value);
  }
  return *EncodeCanonical(out);
}

TEST(StepRecordsEndToEnd, TamperingIsCaughtAtTheRightRecordByTheRightRule) {
  const RunResult& run = ServerLikeRun();
  const std::vector<std::string>& bodies = run.chain_under_test.bodies;
  const auto is_red = [](const AuditRecord& r) { return Str(r, "rj_level") == "red"; };
  const auto is_alarm_event = [](const AuditRecord& r) {
    return Str(r, "kind") == "sau_event" && Num(r, "margin") < 0;
  };
  const std::vector<Tamper> tampers = {
      {"drop a line",
       [](std::vector<std::string>* lines, std::mt19937_64& rng) {
         const size_t at = 1 + rng() % (lines->size() - 2);
         lines->erase(lines->begin() + at);
         return at;
       },
       AuditRule::kIndex},
      {"swap two lines",
       [](std::vector<std::string>* lines, std::mt19937_64& rng) {
         const size_t a = 1 + rng() % (lines->size() - 2);
         const size_t b = a + 1 + rng() % std::min<size_t>(50, lines->size() - a - 1);
         std::swap((*lines)[a], (*lines)[b]);
         return a;
       },
       AuditRule::kIndex},
      {"remove the actions of a red record (chain rewritten, re-signed)",
       [&](std::vector<std::string>* lines, std::mt19937_64& rng) {
         const size_t red = FindBody(bodies, 1 + rng() % (bodies.size() / 2), is_red);
         std::vector<std::string> b = bodies;
         b[red] = WithoutField(b[red], "actions");
         *lines = WriteLines(b);
         return BodyPositions(*lines)[red];
       },
       AuditRule::kRjWindow},
      {"remove the sau_control after an alarm (chain rewritten, re-signed)",
       [&](std::vector<std::string>* lines, std::mt19937_64& rng) {
         const size_t alarm = FindBody(bodies, 1 + rng() % (bodies.size() / 2), is_alarm_event);
         EXPECT_EQ(Str(*ParseAuditJson(bodies[alarm + 1]), "kind"), "sau_control");
         std::vector<std::string> b = bodies;
         b.erase(b.begin() + alarm + 1);
         *lines = WriteLines(b);
         return alarm + 1 < b.size() ? BodyPositions(*lines)[alarm + 1] : lines->size();
       },
       AuditRule::kMargin},
  };
  std::mt19937_64 rng(1234);
  for (const Tamper& t : tampers) {
    for (int trial = 0; trial < 2; ++trial) {
      SCOPED_TRACE(std::string(t.name) + " #" + std::to_string(trial));
      std::vector<std::string> lines = run.chain_under_test.lines;
      const size_t bad = t.apply(&lines, rng);
      AuditVerifier v(VerifierOptions(run.w_digest));
      const absl::Status st = VerifyLines(lines, &v);
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
      EXPECT_EQ(v.failed_rule(), t.rule) << st;
      EXPECT_EQ(v.first_bad_index(), bad) << st;
    }
  }
}

// Whether two envelope lines parse to the same record, reading the envelope's hex digests in
// either case (as the verifier does).
bool SameRecord(const std::string& a, const std::string& b) {
  absl::StatusOr<AuditRecord> ra = ParseAuditJson(a), rb = ParseAuditJson(b);
  if (!ra.ok() || !rb.ok()) return false;
  for (AuditRecord* r : {&*ra, &*rb}) {
    for (const char* key : {"merkle_prev", "merkle_curr"}) {
      AuditValue* v = r->FindMutable(key);
      std::string* hex = v != nullptr ? std::get_if<std::string>(&v->v) : nullptr;
      if (hex != nullptr) {
        for (char& c : *hex) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
    }
  }
  return *ra == *rb;
}

// One byte of one line changed: the record is rejected at its own position, by the parser,
// the envelope check, the index or the chain, unless the change is invisible to a parser
// (e.g. 'e' -> 'E' in an exponent), in which case the record is logically unchanged.
TEST(StepRecordsEndToEnd, AnyFlippedByteIsCaughtAtItsRecord) {
  const RunResult& run = ServerLikeRun();
  const std::vector<std::string>& lines = run.chain_under_test.lines;
  std::mt19937_64 rng(77);
  std::vector<size_t> at(60);
  for (size_t& a : at) a = rng() % lines.size();
  std::sort(at.begin(), at.end());
  // One verifier walks the untampered log; each trial copies it just before its line.
  AuditVerifier walker(VerifierOptions(run.w_digest));
  size_t fed = 0;
  int caught = 0;
  for (const size_t a : at) {
    for (; fed < a; ++fed) ASSERT_TRUE(walker.Feed(lines[fed]).ok());
    std::string line = lines[a];
    const size_t byte = rng() % line.size();
    line[byte] = static_cast<char>(line[byte] ^ (1 + rng() % 255));
    SCOPED_TRACE("line " + std::to_string(a) + " byte " + std::to_string(byte) + ": " + line);
    if (SameRecord(line, lines[a])) continue;
    AuditVerifier v = walker;
    const absl::Status st = v.Feed(line);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(v.first_bad_index(), a) << st;
    const AuditRule r = v.failed_rule();
    EXPECT_TRUE(r == AuditRule::kParse || r == AuditRule::kEnvelope || r == AuditRule::kIndex ||
                r == AuditRule::kChain)
        << st;
    ++caught;
  }
  EXPECT_GT(caught, 50);
}

}  // namespace
}  // namespace streamlearn
