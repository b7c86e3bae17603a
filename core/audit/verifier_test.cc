#include "core/audit/verifier.h"

#include <bit>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/audit/checkpoint.h"
#include "core/audit/merkle_chain.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

constexpr char kSpec[] = "sau:d=64,r=256,tau=8;lmu:bins=4096";

Digest WDigest() { return Sha256Of("W"); }

const Ed25519PrivateKey& KeyA() {
  static const Ed25519PrivateKey* k = new Ed25519PrivateKey(*Ed25519PrivateKey::Generate());
  return *k;
}
const Ed25519PrivateKey& KeyB() {
  static const Ed25519PrivateKey* k = new Ed25519PrivateKey(*Ed25519PrivateKey::Generate());
  return *k;
}

AuditRecord Action(std::string_view action, std::string_view cause) {
  AuditRecord a;
  a.Set("action", action).Set("cause", cause);
  return a;
}

// x1, x2, x3 <= 1 imply x1 + x2 + x3 <= 3.
AuditRecord ValidCertificate() {
  AuditList rows;
  for (int j = 0; j < 3; ++j) {
    AuditList a = {AuditValue(0.0), AuditValue(0.0), AuditValue(0.0)};
    a[j] = AuditValue(1.0);
    AuditRecord row;
    row.Set("alpha", 1.0).Set("a", std::move(a)).Set("b", 1.0);
    rows.push_back(std::move(row));
  }
  AuditRecord c;
  c.Set("c", AuditList{AuditValue(1.0), AuditValue(1.0), AuditValue(1.0)})
      .Set("d", 3.6)
      .Set("kappa", 1.0)
      .Set("epsilon", 0.5)
      .Set("eta_c", 0.01)
      .Set("eta_d", 0.01)
      .Set("rows", std::move(rows));
  return c;
}

struct LogSpec {
  int n = 1000;         // records, genesis included, checkpoints excluded
  uint64_t every = 64;  // checkpoint cadence of the writer
  const Ed25519PrivateKey* signer = &KeyA();
  std::string forged_fingerprint = {};  // when set, written into every checkpoint
  std::function<void(int, AuditRecord*)> mutate_body = {};
};

struct Log {
  std::vector<std::string> lines;
  std::vector<size_t> pos;  // pos[i] = line of record i
};

// A synthetic run: margins mostly positive with a negative one every 97 records (followed by
// the alarm action), RJ flags every 7th record plus a burst at 300..309 (yellow, then red with
// the floor action), probe counts under their bounds, a certificate every 100 records.
Log MakeLog(const LogSpec& spec) {
  Log log;
  MerkleChain chain;
  uint64_t since = 0;
  const auto emit = [&](const AuditRecord& body, bool counts) {
    absl::StatusOr<ChainEntry> e = chain.Append(body);
    EXPECT_TRUE(e.ok()) << e.status();
    log.lines.push_back(*EncodeCanonical(e->envelope));
    if (!counts) return;
    log.pos.push_back(log.lines.size() - 1);
    if (++since < spec.every) return;
    since = 0;
    absl::StatusOr<AuditRecord> cp = MakeCheckpointBody(*spec.signer, e->index, e->merkle_curr);
    EXPECT_TRUE(cp.ok());
    if (!spec.forged_fingerprint.empty()) {
      AuditRecord inner = *cp->Find("checkpoint")->get_if<AuditRecord>();
      inner.Set("key_fingerprint", spec.forged_fingerprint);
      cp->Set("checkpoint", std::move(inner));
    }
    absl::StatusOr<ChainEntry> c = chain.Append(*cp);
    log.lines.push_back(*EncodeCanonical(c->envelope));
  };
  AuditRecord genesis = GenesisBody(kSpec, WDigest());
  if (spec.mutate_body) spec.mutate_body(0, &genesis);
  emit(genesis, true);
  uint32_t window = 0;
  bool prev_negative = false;
  for (int i = 1; i < spec.n; ++i) {
    AuditRecord b;
    const double margin = i % 97 == 50 ? -0.25 : 1.0 + 1e-3 * i;
    AuditList actions;
    if (prev_negative) actions.push_back(Action("restart_eprocess", "alarm"));
    prev_negative = margin < 0;
    const bool exceeded = (i >= 300 && i < 310) || i % 7 == 0;
    window = ((window << 1) | (exceeded ? 1u : 0u)) & 0x3ff;
    const int count = std::popcount(window);
    if (count >= 5) actions.push_back(Action("raise_beta_floor", "rj_red"));
    b.Set("kind", "step")
        .Set("t", i)
        .Set("margin", margin)
        .Set("rj_exceeded", exceeded)
        .Set("rj_gap", exceeded ? 2.0 : 0.5)
        .Set("rj_threshold", 1.0)
        .Set("rj_level", count >= 5 ? "red" : (count >= 3 ? "yellow" : "green"))
        .Set("actions", std::move(actions))
        .Set("c_lookup_p100", i % 4)
        .Set("locate_bound", 4)
        .Set("c_insert_p100", i % 6)
        .Set("insert_bound", 8)
        .Set("state_digest", ToHex(Sha256Of(std::to_string(i))));
    if (i % 100 == 0) b.Set("certificate", ValidCertificate());
    if (spec.mutate_body) spec.mutate_body(i, &b);
    emit(b, true);
  }
  return log;
}

AuditVerifierOptions Options() {
  AuditVerifierOptions o;
  o.public_key = &KeyA().PublicKey();
  o.checkpoint_every = 64;
  o.model_spec = kSpec;
  o.w_digest = WDigest();
  return o;
}

struct TamperCase {
  const char* name;
  LogSpec spec;
  std::function<void(Log*)> mutate_lines;  // after writing
  std::function<void(AuditVerifierOptions*)> mutate_options;
  AuditRule rule;                            // kNone: verifies
  std::function<size_t(const Log&)> bad_at;  // expected position of the first bad record
  const char* message_part;
};

TEST(VerifierTest, SyntheticChainVerifiesAndEveryTamperIsNamed) {
  const auto at_record = [](int i) { return [i](const Log& l) { return l.pos[i]; }; };
  const auto set_body = [](int target, std::function<void(AuditRecord*)> f) {
    return [target, f](int i, AuditRecord* b) {
      if (i == target) f(b);
    };
  };
  const std::vector<TamperCase> cases = {
      {"untampered", {}, nullptr, nullptr, AuditRule::kNone, nullptr, ""},
      {"flip_one_byte_of_a_body",
       {},
       [](Log* l) {
         std::string& line = l->lines[l->pos[500]];
         const size_t at = line.find("\"t\":500");
         ASSERT_NE(at, std::string::npos);
         line[at + 4] = '6';
       },
       nullptr, AuditRule::kChain, at_record(500), "the body was altered"},
      {"drop_a_record",
       {},
       [](Log* l) { l->lines.erase(l->lines.begin() + l->pos[400]); },
       nullptr, AuditRule::kIndex, at_record(400), "(a record was dropped"},
      {"swap_two_records",
       {},
       [](Log* l) { std::swap(l->lines[l->pos[400]], l->lines[l->pos[401]]); },
       nullptr, AuditRule::kIndex, at_record(400), "(a record was dropped"},
      {"truncated_line",
       {},
       [](Log* l) { l->lines[l->pos[10]].resize(20); },
       nullptr, AuditRule::kParse, at_record(10), "byte offset"},
      {"forged_certificate_violates_45",
       {.mutate_body = set_body(300,
                                [](AuditRecord* b) {
                                  AuditRecord c = ValidCertificate();
                                  c.Set("epsilon", 0.01);
                                  b->Set("certificate", std::move(c));
                                })},
       nullptr, nullptr, AuditRule::kCertificate,
       [](const Log& l) { return l.pos[300]; }, "(45) fails: kappa epsilon = 0.01"},
      {"checkpoint_signed_with_another_key",
       {.signer = &KeyB()},
       nullptr, nullptr, AuditRule::kSignature, [](const Log&) { return size_t{64}; },
       "signed by key"},
      {"checkpoint_signed_with_another_key_claiming_ours",
       {.signer = &KeyB(), .forged_fingerprint = KeyA().PublicKey().fingerprint()},
       nullptr, nullptr, AuditRule::kSignature, [](const Log&) { return size_t{64}; },
       "does not verify"},
      {"missing_checkpoint",
       {.every = 128},
       nullptr, nullptr, AuditRule::kCheckpoint, [](const Log&) { return size_t{64}; },
       "no checkpoint after 64 records"},
      {"rj_flag_that_contradicts_its_gap",
       {.mutate_body = set_body(205, [](AuditRecord* b) { b->Set("rj_gap", 3.0); })},
       nullptr, nullptr, AuditRule::kRjWindow, at_record(205),
       "rj_exceeded is false but rj_gap 3 > rj_threshold 1"},
      {"negative_margin_without_alarm_action",
       {.mutate_body = set_body(51, [](AuditRecord* b) { b->Set("actions", AuditList{}); })},
       nullptr, nullptr, AuditRule::kMargin, at_record(51), "record 50 had margin -0.25 < 0"},
      {"alarm_action_with_wrong_cause",
       {.mutate_body = set_body(51,
                                [](AuditRecord* b) {
                                  b->Set("actions",
                                         AuditList{Action("restart_eprocess", "manual")});
                                })},
       nullptr, nullptr, AuditRule::kMargin, at_record(51), "cause \"alarm\""},
      {"stream_ends_after_negative_margin",
       {.n = 148},
       nullptr, nullptr, AuditRule::kMargin, [](const Log& l) { return l.lines.size(); },
       "the stream ends after record"},
      {"red_rj_window_without_floor_action",
       {.mutate_body = set_body(305, [](AuditRecord* b) { b->Set("actions", AuditList{}); })},
       nullptr, nullptr, AuditRule::kRjWindow, at_record(305),
       "6 of the last 10 RJ gaps exceeded"},
      {"rj_level_misreported",
       {.mutate_body = set_body(10, [](AuditRecord* b) { b->Set("rj_level", "yellow"); })},
       nullptr, nullptr, AuditRule::kRjWindow, at_record(10), "give \"green\""},
      {"lookup_probes_above_bound",
       {.mutate_body = set_body(700, [](AuditRecord* b) { b->Set("c_lookup_p100", 5); })},
       nullptr, nullptr, AuditRule::kLmuProbe, at_record(700),
       "c_lookup_p100 = 5 exceeds locate_bound = 4"},
      {"insert_probes_above_bound",
       {.mutate_body = set_body(701, [](AuditRecord* b) { b->Set("c_insert_p100", 9); })},
       nullptr, nullptr, AuditRule::kLmuProbe, at_record(701),
       "c_insert_p100 = 9 exceeds insert_bound = 8"},
      {"probe_count_without_bound",
       {.mutate_body = set_body(702, [](AuditRecord* b) { b->Set("insert_bound", "x"); })},
       nullptr, nullptr, AuditRule::kLmuProbe, at_record(702), "needs a numeric"},
      {"wrong_model_spec",
       {},
       nullptr, [](AuditVerifierOptions* o) { o->model_spec = "other"; }, AuditRule::kGenesis,
       at_record(0), "is not the expected \"other\""},
      {"wrong_w_digest",
       {},
       nullptr, [](AuditVerifierOptions* o) { o->w_digest = Sha256Of("V"); },
       AuditRule::kGenesis, at_record(0), "w_digest"},
      {"second_genesis",
       {.mutate_body = set_body(20, [](AuditRecord* b) { b->Set("kind", "genesis"); })},
       nullptr, nullptr, AuditRule::kGenesis, at_record(20), "after record 0"},
  };
  for (const TamperCase& c : cases) {
    SCOPED_TRACE(c.name);
    Log log = MakeLog(c.spec);
    if (c.mutate_lines) c.mutate_lines(&log);
    AuditVerifierOptions opt = Options();
    if (c.mutate_options) c.mutate_options(&opt);
    AuditVerifier v(opt);
    absl::Status st;
    for (const std::string& line : log.lines) {
      st = v.Feed(line);
      if (!st.ok()) break;
    }
    if (st.ok()) st = v.Finish();
    if (c.rule == AuditRule::kNone) {
      EXPECT_TRUE(st.ok()) << st;
      EXPECT_EQ(v.records(), log.lines.size());
      EXPECT_GT(log.lines.size(), 1000u);  // 1000 records and their checkpoints
      continue;
    }
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(v.failed_rule(), c.rule) << st;
    EXPECT_EQ(v.first_bad_index(), c.bad_at(log)) << st;
    const std::string prefix = "audit record " + std::to_string(c.bad_at(log)) + " breaks rule " +
                               std::string(AuditRuleName(c.rule)) + ": ";
    EXPECT_EQ(st.message().substr(0, prefix.size()), prefix) << st;
    EXPECT_NE(st.message().find(c.message_part), absl::string_view::npos) << st;
    // Sticky: later calls report the same failure.
    EXPECT_EQ(v.Feed(log.lines[0]), st);
  }
}

TEST(VerifierTest, WriterOutputVerifiesWithPemLoadedKey) {
  AuditLogWriter w(KeyA(), /*every=*/16);
  std::vector<std::string> lines;
  ASSERT_TRUE(w.AppendGenesis(kSpec, WDigest(), &lines).ok());
  for (int t = 1; t < 100; ++t) {
    AuditRecord b;
    b.Set("t", t).Set("margin", 0.5);
    ASSERT_TRUE(w.Append(b, &lines).ok());
  }
  absl::StatusOr<Ed25519PublicKey> pub =
      Ed25519PublicKey::FromPem(*KeyA().PublicKey().ToPem());
  ASSERT_TRUE(pub.ok());
  AuditVerifier v({.public_key = &*pub, .checkpoint_every = 16});
  for (const std::string& line : lines) ASSERT_TRUE(v.Feed(line).ok()) << v.Feed(line);
  EXPECT_TRUE(v.Finish().ok());

  // Without a key, the first checkpoint cannot be checked.
  AuditVerifier no_key({});
  absl::Status st;
  for (const std::string& line : lines) {
    st = no_key.Feed(line);
    if (!st.ok()) break;
  }
  EXPECT_EQ(no_key.failed_rule(), AuditRule::kSignature);
  EXPECT_EQ(no_key.first_bad_index(), 16u);
}

}  // namespace
}  // namespace streamlearn
