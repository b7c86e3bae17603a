// The verifier's rules recomputed from the genesis spec (core/audit/spec_rules.h): a real
// estimator's records pass, and records that are self-consistent but do not follow from the
// spec and the logged inputs are each caught and named (a threshold forged so a red flag reads
// green, a margin that does not follow from log E_mix and the epoch, an epoch that starts
// early, a floor that did not decay as the policy says, a probe count above the spec's bound
// beside a matching forged bound).
#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/audit/checkpoint.h"
#include "core/audit/merkle_chain.h"
#include "core/audit/spec_rules.h"
#include "core/audit/step_records.h"
#include "core/audit/verifier.h"
#include "core/lmu/lmu_table.h"
#include "core/sau/sau_estimator.h"
#include "core/sau/counter_rng.h"
#include "core/workloads/dgp.h"
#include "gtest/gtest.h"

namespace streamlearn {
namespace {

constexpr int kEvents = 2400;

struct Stream {
  std::string model_spec;
  std::vector<std::string> bodies;  // record i + 1 (record 0 is the genesis)
  int locate_bound = 0, insert_bound = 0;
};

// A drifting stream (DGP-C, a new cluster every 400 events, input scale 8) through a real
// estimator, written as the server writes it: a sau_event per event, a sau_control after an
// alarm, and an lmu_update every 100 events with the LMU's real bounds.
const Stream& TheStream() {
  static const Stream* stream = [] {
    auto* s = new Stream;
    sau::SauSpec spec;
    spec.d = 8;
    spec.d_v = 4;
    spec.r = 64;
    spec.input_scale = 8;
    spec.seed = 5;
    absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(spec);
    EXPECT_TRUE(est.ok()) << est.status();
    const sau::SauSpec& eff = est->spec();
    lmu::CuckooDelta::Options geometry;  // the LMU spec's defaults: b 4, S 8, L 8, Q 16
    s->locate_bound = lmu::LmuTable::LocateBound(geometry);
    s->insert_bound = lmu::LmuTable::InsertBound(geometry);
    s->model_spec = absl::StrFormat(
        R"({"lmu":{"bucket_size":%d,"max_relocations":%d,"ring":%d,"stash":%d},)"
        R"("sau":{"alpha":%.17g,"beta_floor":%.17g,"c_rj":%.17g,"engine":"ENGINE_PRF",)"
        R"("r":%d,"rj_delta":%.17g}})",
        geometry.bucket_size, geometry.max_relocations, geometry.ring, geometry.stash,
        eff.alpha, eff.beta_floor, eff.c_rj, eff.r, eff.rj_delta);
    sau::Dgp dgp({.kind = sau::Dgp::Kind::kC, .d = 8, .d_v = 4, .phase_length = 400}, 31);
    for (int i = 0; i < kEvents; ++i) {
      const sau::DgpEvent e = dgp.Next();
      const sau::EventDiagnostics d = est->Ingest(e.k, e.v);
      std::string body;
      AppendSauEventBody({.t = 1000 + static_cast<uint64_t>(i),
                          .log_seq = static_cast<uint64_t>(i / 10 + 1),
                          .ver_sau = static_cast<uint64_t>(i + 1),
                          .diag = &d},
                         &body);
      s->bodies.push_back(body);
      if (d.alarm) {
        body.clear();
        AppendSauAlarmBody(1000 + i, i / 10 + 1, d, &body);
        s->bodies.push_back(body);
      }
      if (i % 100 == 99) {
        s->bodies.push_back(absl::StrCat(
            R"({"c_insert_p100":)", 1 + i % 3, R"(,"c_lookup_p100":)", 2 + i % 2,
            R"(,"insert_bound":)", s->insert_bound, R"(,"kind":"lmu_update","locate_bound":)",
            s->locate_bound, "}"));
      }
    }
    return s;
  }();
  return *stream;
}

// A self-regulating model (docs/SAU.md, "Self-regulation"; both switches on) through a real
// estimator: two clusters of keys that leave and come back (their returns thin the
// denominators, and the window widens), then keys along one feature row of norm about 4.5 (that
// row clips above c_hi at every event, 1/64 > 1% of the log-features, and the clip level
// rises at the epochs' ends). Written as TheStream is.
const Stream& TheRegulatedStream() {
  static const Stream* stream = [] {
    auto* s = new Stream;
    sau::SauSpec spec;
    spec.d = 16;
    spec.d_v = 2;
    spec.r = 64;
    spec.input_scale = 8;
    spec.seed = 17;
    spec.regulate_gamma = spec.regulate_clip = true;
    absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(spec);
    EXPECT_TRUE(est.ok()) << est.status();
    const sau::SauSpec& eff = est->spec();
    s->model_spec = absl::StrFormat(
        R"({"sau":{"alpha":%.17g,"beta_floor":%.17g,"c_hi":%.17g,"c_hi_max":%.17g,)"
        R"("c_rj":%.17g,"engine":"ENGINE_PRF","gamma":%.17g,"gamma_max":%.17g,)"
        R"("input_mode":"INPUT_MODE_L2_SCALED","input_scale":%.17g,"r":%d,)"
        R"("regulate_clip":true,"regulate_gamma":true,"rj_delta":%.17g,"tau":%.17g}})",
        eff.alpha, eff.beta_floor, eff.c_hi, eff.c_hi_max, eff.c_rj, eff.gamma, eff.gamma_max,
        eff.input_scale, eff.r, eff.rj_delta, eff.tau);
    std::vector<sau::DgpEvent> events = sau::ReturningClusters(16, 6000, 600, 23);
    const std::vector<double>& w = est->features().w();
    int best = 0;
    double best_gap = HUGE_VAL;
    for (int i = 0; i < eff.r; ++i) {
      double n = 0;
      for (int l = 0; l < eff.d; ++l) n += w[i * eff.d + l] * w[i * eff.d + l];
      if (std::abs(std::sqrt(n) - 4.5) < best_gap) {
        best_gap = std::abs(std::sqrt(n) - 4.5);
        best = i;
      }
    }
    sau::CounterRng rng(29, 7);
    for (int t = 0; t < 3000; ++t) {
      sau::DgpEvent e;
      for (int l = 0; l < eff.d; ++l) e.k.push_back(w[best * eff.d + l] + 0.05 * rng.NextNormal());
      e.v = {rng.NextNormal(), rng.NextNormal()};
      events.push_back(std::move(e));
    }
    for (size_t i = 0; i < events.size(); ++i) {
      const sau::EventDiagnostics d = est->Ingest(events[i].k, events[i].v);
      std::string body;
      AppendSauEventBody({.t = 1 + i, .log_seq = 1 + i, .ver_sau = 1 + i, .diag = &d}, &body);
      s->bodies.push_back(body);
      if (d.alarm) {
        body.clear();
        AppendSauAlarmBody(1 + i, 1 + i, d, &body);
        s->bodies.push_back(body);
      }
    }
    return s;
  }();
  return *stream;
}

AuditRecord Parse(const std::string& body) {
  absl::StatusOr<AuditRecord> r = ParseAuditJson(body);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

double Number(const AuditRecord& r, std::string_view key) {
  double x = NAN;
  EXPECT_TRUE(r.Find(key) != nullptr && r.Find(key)->AsNumber(&x)) << key;
  return x;
}

// Chains the bodies (the forged one as well: the chain itself is always consistent) and
// verifies; the status of the first failure or OK.
absl::Status Verify(const Stream& s, const std::vector<std::string>& bodies,
                    AuditVerifier* out = nullptr) {
  MerkleChain chain;
  const ChainId id{.model = "m", .shard = 0};
  AuditVerifier v({.chain = id});
  absl::StatusOr<ChainEntry> g = chain.Append(GenesisBody(s.model_spec, Sha256Of("W"), &id));
  EXPECT_TRUE(g.ok());
  absl::Status st = v.FeedEnvelope(g->envelope);
  for (const std::string& body : bodies) {
    if (!st.ok()) break;
    st = v.Feed(chain.AppendCanonical(body));
  }
  if (st.ok()) st = v.Finish();
  if (out != nullptr) *out = v;
  return st;
}

// The first record index (1-based, as in the chain) whose body satisfies `pred`.
size_t FirstWhere(const Stream& s, const std::function<bool(const AuditRecord&)>& pred,
                  size_t from = 0) {
  for (size_t i = from; i < s.bodies.size(); ++i) {
    if (pred(Parse(s.bodies[i]))) return i;
  }
  ADD_FAILURE() << "no record matches";
  return 0;
}

bool Kind(const AuditRecord& r, std::string_view kind) {
  const AuditValue* k = r.Find("kind");
  return k != nullptr && k->get_if<std::string>() != nullptr && *k->get_if<std::string>() == kind;
}

std::string Canon(const AuditRecord& r) {
  absl::StatusOr<std::string> c = EncodeCanonical(r);
  EXPECT_TRUE(c.ok());
  return *c;
}

TEST(VerifierSpecRules, SpecRulesComeFromTheGenesisSpec) {
  const Stream& s = TheStream();
  absl::StatusOr<SpecRules> rules = SpecRulesFromModelSpec(s.model_spec);
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_TRUE(rules->sau.has_value());
  EXPECT_EQ(rules->sau->r, 64);
  EXPECT_EQ(rules->lmu->locate_bound, s.locate_bound);
  // A ridge model has no prf rules; a spec without a field a rule needs is refused, naming it.
  EXPECT_EQ(rules->sau_engine, "prf");
  EXPECT_FALSE(rules->fuse_engine.has_value());
  rules = SpecRulesFromModelSpec(R"({"sau":{"engine":"ENGINE_RIDGE","d":4}})");
  ASSERT_TRUE(rules.ok());
  EXPECT_FALSE(rules->sau.has_value());
  EXPECT_EQ(rules->sau_engine, "ridge");
  rules = SpecRulesFromModelSpec(R"({"fuse":{"sau":{"engine":"ENGINE_VLA","d":4}}})");
  ASSERT_TRUE(rules.ok());
  EXPECT_FALSE(rules->fuse_sau.has_value());
  EXPECT_EQ(rules->fuse_engine, "vla");
  rules = SpecRulesFromModelSpec(R"({"sau":{"engine":"ENGINE_WARP","d":4}})");
  EXPECT_EQ(rules.status().message(), "the genesis model_spec's sau.engine is not a known engine");
  rules = SpecRulesFromModelSpec(R"({"sau":{"r":64,"alpha":0.05,"beta_floor":1e-12}})");
  EXPECT_EQ(rules.status().message(), "the genesis model_spec has no numeric sau.c_rj");
  EXPECT_FALSE(SpecRulesFromModelSpec("sau:r=64").ok());
}

// The honest stream passes, and it is a stream that exercises every rule: alarms and epoch
// restarts, RJ red, raised and decaying floors.
TEST(VerifierSpecRules, ARealEstimatorsRecordsPass) {
  const Stream& s = TheStream();
  int alarms = 0, reds = 0, decays = 0, saturated = 0;
  uint64_t max_epoch = 0;
  double prev_floor = 0;
  for (const std::string& b : s.bodies) {
    const AuditRecord r = Parse(b);
    if (Kind(r, "sau_control")) ++alarms;
    if (!Kind(r, "sau_event")) continue;
    if (*r.Find("rj_level")->get_if<std::string>() == "red") ++reds;
    if (r.Find("clipped") != nullptr) ++saturated;
    max_epoch = std::max<uint64_t>(max_epoch, static_cast<uint64_t>(Number(r, "epoch")));
    const double floor = Number(r, "beta_floor");
    if (floor < prev_floor) ++decays;
    prev_floor = floor;
  }
  std::printf("stream: %zu records, %d alarms, %d red events, %d floor decays, %d saturation "
              "events, epochs up to %llu\n",
              s.bodies.size(), alarms, reds, decays, saturated,
              static_cast<unsigned long long>(max_epoch));
  EXPECT_GT(alarms, 0);
  EXPECT_GT(reds, 0);
  EXPECT_GT(decays, 0);
  EXPECT_GT(saturated, 0);
  EXPECT_GT(max_epoch, 1u);
  AuditVerifier v({});
  const absl::Status st = Verify(s, s.bodies, &v);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(v.records(), s.bodies.size() + 1);
}

struct Forgery {
  std::string name;
  AuditRule rule;
  // Picks the record and rewrites it; returns its index in bodies.
  std::function<size_t(const Stream&, std::vector<std::string>*)> forge;
};

std::vector<Forgery> Forgeries() {
  return {
      {"a red flag made green by a raised threshold (flag, gap and threshold agree)",
       AuditRule::kRjThreshold,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstWhere(s, [](const AuditRecord& r) {
           const AuditValue* e = r.Find("rj_exceeded");
           return e != nullptr && *e->get_if<bool>();
         });
         AuditRecord r = Parse((*b)[i]);
         r.Set("rj_threshold", Number(r, "rj_gap") * 1.01).Set("rj_exceeded", false);
         (*b)[i] = Canon(r);
         return i;
       }},
      {"a margin that does not follow from log E_mix and the epoch", AuditRule::kMargin,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstWhere(s, [](const AuditRecord& r) {
           return Kind(r, "sau_event") && Number(r, "epoch") >= 1 && Number(r, "margin") > 1;
         });
         AuditRecord r = Parse((*b)[i]);
         r.Set("margin", Number(r, "margin") + 0.5);
         (*b)[i] = Canon(r);
         return i;
       }},
      {"an epoch that starts without its predecessor having ended, with the margin to match",
       AuditRule::kEpoch,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstWhere(s, [](const AuditRecord& r) {
           return Kind(r, "sau_event") && Number(r, "epoch") == 1;
         }) + 5;
         AuditRecord r = Parse((*b)[i]);
         EXPECT_EQ(Number(r, "epoch"), 1);
         const SauRuleParams p = *SpecRulesFromModelSpec(s.model_spec)->sau;
         r.Set("epoch", uint64_t{2}).Set("margin", MarginOf(p, 2, Number(r, "log_e_mix")));
         (*b)[i] = Canon(r);
         return i;
       }},
      {"a floor kept up where the policy decays it", AuditRule::kBetaFloor,
       [](const Stream& s, std::vector<std::string>* b) {
         size_t i = 1;
         for (; i < s.bodies.size(); ++i) {
           const AuditRecord prev = Parse(s.bodies[i - 1]), r = Parse(s.bodies[i]);
           if (Kind(prev, "sau_event") && Kind(r, "sau_event") &&
               r.Find("median_den") == nullptr &&  // not a trigger: a decay
               Number(r, "beta_floor") < Number(prev, "beta_floor")) {
             break;
           }
         }
         AuditRecord r = Parse((*b)[i]);
         r.Set("beta_floor", Number(Parse((*b)[i - 1]), "beta_floor"));
         (*b)[i] = Canon(r);
         return i;
       }},
      {"a probe count above the spec's bound, beside a matching forged bound",
       AuditRule::kLmuProbe,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstWhere(s, [](const AuditRecord& r) { return Kind(r, "lmu_update"); });
         AuditRecord r = Parse((*b)[i]);
         r.Set("c_lookup_p100", int64_t{s.locate_bound + 5})
             .Set("locate_bound", int64_t{s.locate_bound + 5});
         (*b)[i] = Canon(r);
         return i;
       }},
      {"a saturation event left out of the record (the clip rate still says it happened)",
       AuditRule::kSaturation,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstWhere(s, [](const AuditRecord& r) {
           return r.Find("clipped") != nullptr;
         });
         AuditRecord r = Parse((*b)[i]);
         AuditRecord without;
         for (const AuditField& f : r.fields()) {
           if (f.key != "clipped" && f.key != "clipped_hi") without.Set(f.key, f.value);
         }
         (*b)[i] = Canon(without);
         return i;
       }},
      {"a prf record with a wrong margin that names another engine, so that no prf rule would "
       "check it",
       AuditRule::kEngine,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstWhere(s, [](const AuditRecord& r) {
           return Kind(r, "sau_event") && Number(r, "epoch") >= 1 && Number(r, "margin") > 1;
         });
         AuditRecord r = Parse((*b)[i]);
         r.Set("margin", Number(r, "margin") + 0.5).Set("engine", "ridge");
         (*b)[i] = Canon(r);
         return i;
       }},
      {"a triggered floor raised from a forged median_den (floor and median agree)",
       AuditRule::kBetaFloor,
       [](const Stream& s, std::vector<std::string>* b) {
         const SauRuleParams p = *SpecRulesFromModelSpec(s.model_spec)->sau;
         size_t i = 1;
         double prev_floor = p.beta_floor;
         for (; i < s.bodies.size(); ++i) {
           const AuditRecord r = Parse(s.bodies[i]);
           if (!Kind(r, "sau_event")) continue;
           if (r.Find("median_den") != nullptr && i > 200) break;
           prev_floor = Number(r, "beta_floor");
         }
         AuditRecord r = Parse((*b)[i]);
         const double median = Number(r, "median_den") * 1.5;
         const double floor = std::max(
             std::min(std::max(2 * prev_floor, p.red_floor_frac * median),
                      p.max_floor_frac * median),
             p.beta_floor);
         r.Set("median_den", median).Set("beta_floor", floor);
         (*b)[i] = Canon(r);
         return i;
       }},
      {"an alarm's control record with another floor", AuditRule::kBetaFloor,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstWhere(s, [](const AuditRecord& r) { return Kind(r, "sau_control"); });
         AuditRecord r = Parse((*b)[i]);
         r.Set("beta_floor", Number(r, "beta_floor") * 3);
         (*b)[i] = Canon(r);
         return i;
       }},
  };
}

TEST(VerifierSpecRules, SelfConsistentButWrongRecordsAreCaughtAndNamed) {
  const Stream& s = TheStream();
  for (const Forgery& f : Forgeries()) {
    SCOPED_TRACE(f.name);
    std::vector<std::string> bodies = s.bodies;
    const size_t i = f.forge(s, &bodies);
    ASSERT_NE(bodies[i], s.bodies[i]);
    AuditVerifier v({});
    const absl::Status st = Verify(s, bodies, &v);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_EQ(v.failed_rule(), f.rule) << st;
    EXPECT_EQ(v.first_bad_index(), i + 1) << st;  // record 0 is the genesis
    std::printf("%s:\n  %s\n", f.name.c_str(), std::string(st.message()).c_str());
  }
}

// A chain a server wrote (its genesis names model and shard) must carry a spec the rules can
// be recomputed from.
// A body without the named keys (what a format-1 server wrote).
std::string Without(const std::string& body, std::initializer_list<std::string_view> keys) {
  const AuditRecord r = Parse(body);
  AuditRecord out;
  for (const AuditField& f : r.fields()) {
    if (std::find(keys.begin(), keys.end(), f.key) == keys.end()) out.Set(f.key, f.value);
  }
  return Canon(out);
}

// Chains `bodies` under a genesis that names `format` as its record_format (none: a format-1
// genesis, as servers wrote before the field existed).
absl::Status VerifyFormat(const Stream& s, const std::vector<std::string>& bodies,
                          std::optional<uint64_t> format) {
  const ChainId id{.model = "m", .shard = 0};
  const AuditRecord current = GenesisBody(s.model_spec, Sha256Of("W"), &id);
  AuditRecord genesis;
  for (const AuditField& f : current.fields()) {
    if (f.key != "record_format") genesis.Set(f.key, f.value);
  }
  if (format.has_value()) genesis.Set("record_format", *format);
  MerkleChain chain;
  AuditVerifier v({.chain = id});
  absl::StatusOr<ChainEntry> g = chain.Append(genesis);
  EXPECT_TRUE(g.ok());
  absl::Status st = v.FeedEnvelope(g->envelope);
  for (const std::string& body : bodies) {
    if (!st.ok()) break;
    st = v.Feed(chain.AppendCanonical(body));
  }
  return st.ok() ? v.Finish() : st;
}

// Record formats (merkle_chain.h kAuditRecordFormat): a chain written before events carried
// "clipped" and "median_den" (its genesis names no record_format) still verifies, with the
// clip rate and a triggered floor checked by their bounds only; the same records under a
// format-2 genesis fail the rules that need those fields; a format this verifier does not know
// fails the genesis; and a format-1 chain is still refused a clip rate or floor out of bounds.
TEST(VerifierSpecRules, AFormatOneChainIsCheckedByWhatItLogged) {
  const Stream& s = TheStream();
  EXPECT_TRUE(VerifyFormat(s, s.bodies, kAuditRecordFormat).ok());
  std::vector<std::string> old;
  for (const std::string& b : s.bodies) old.push_back(Without(b, {"clipped", "median_den"}));
  ASSERT_NE(old, s.bodies);
  const absl::Status format1 = VerifyFormat(s, old, std::nullopt);
  EXPECT_TRUE(format1.ok()) << format1;
  const absl::Status format2 = VerifyFormat(s, old, 2);
  EXPECT_FALSE(format2.ok());
  EXPECT_TRUE(absl::StrContains(format2.message(), "saturation") ||
              absl::StrContains(format2.message(), "beta_floor"))
      << format2;
  const absl::Status format4 = VerifyFormat(s, s.bodies, 4);
  EXPECT_TRUE(absl::StrContains(format4.message(), "record_format must be an integer in 2..3"))
      << format4;

  const size_t event = FirstWhere(s, [](const AuditRecord& r) { return Kind(r, "sau_event"); });
  std::vector<std::string> bad_rate = old;
  AuditRecord r = Parse(bad_rate[event]);
  r.Set("clip_rate", 1.5);
  bad_rate[event] = Canon(r);
  const absl::Status rate = VerifyFormat(s, bad_rate, std::nullopt);
  EXPECT_TRUE(absl::StrContains(rate.message(), "not a fraction")) << rate;

  const size_t red = FirstWhere(s, [](const AuditRecord& r) {
    return Kind(r, "sau_event") && r.Find("median_den") != nullptr;
  });
  std::vector<std::string> bad_floor = old;
  r = Parse(bad_floor[red]);
  r.Set("beta_floor", 0.0);
  bad_floor[red] = Canon(r);
  const absl::Status floor = VerifyFormat(s, bad_floor, std::nullopt);
  EXPECT_TRUE(absl::StrContains(floor.message(), "beta_floor")) << floor;
}

TEST(VerifierSpecRules, AServerChainWithoutAUsableSpecFailsItsGenesis) {
  MerkleChain chain;
  const ChainId id{.model = "m", .shard = 0};
  absl::StatusOr<ChainEntry> g =
      chain.Append(GenesisBody(R"({"sau":{"r":64}})", Sha256Of("W"), &id));
  ASSERT_TRUE(g.ok());
  AuditVerifier v({});
  const absl::Status st = v.FeedEnvelope(g->envelope);
  EXPECT_EQ(v.failed_rule(), AuditRule::kGenesis) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "sau.c_rj")) << st;
}

TEST(VerifierSpecRules, AnEmptyChainIsNotAVerifiedChain) {
  AuditVerifier v({});
  const absl::Status st = v.Finish();
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(v.failed_rule(), AuditRule::kGenesis);
  EXPECT_EQ(st.message(), "audit record 0 breaks rule genesis: the chain is empty: there is no "
                          "genesis record");
}

}  // namespace
}  // namespace streamlearn

namespace streamlearn {
namespace {

// The regulation actions of a body: "raise_gamma" etc. -> value.
std::vector<std::pair<std::string, double>> Regulations(const AuditRecord& r) {
  std::vector<std::pair<std::string, double>> out;
  const AuditValue* v = r.Find("actions");
  if (v == nullptr) return out;
  for (const AuditValue& e : *v->get_if<AuditList>()) {
    const AuditRecord& a = *e.get_if<AuditRecord>();
    const std::string& name = *a.Find("action")->get_if<std::string>();
    if (name == "raise_gamma" || name == "lower_gamma" || name == "raise_c_hi") {
      out.emplace_back(name, Number(a, "value"));
    }
  }
  return out;
}

// A body with its "actions" replaced (none: the field removed).
std::string WithActions(const std::string& body, const std::vector<AuditRecord>& actions) {
  const AuditRecord r = Parse(body);
  AuditRecord out;
  for (const AuditField& f : r.fields()) {
    if (f.key != "actions") out.Set(f.key, f.value);
  }
  if (!actions.empty()) {
    AuditList list;
    for (const AuditRecord& a : actions) list.emplace_back(a);
    out.Set("actions", std::move(list));
  }
  return Canon(out);
}

std::vector<AuditRecord> ActionsOf(const std::string& body) {
  std::vector<AuditRecord> out;
  const AuditRecord r = Parse(body);
  if (const AuditValue* v = r.Find("actions")) {
    for (const AuditValue& e : *v->get_if<AuditList>()) out.push_back(*e.get_if<AuditRecord>());
  }
  return out;
}

// The body without its action `name`.
std::string WithoutAction(const std::string& body, std::string_view name) {
  std::vector<AuditRecord> kept;
  for (const AuditRecord& a : ActionsOf(body)) {
    if (*a.Find("action")->get_if<std::string>() != name) kept.push_back(a);
  }
  return WithActions(body, kept);
}

// The body with one more action.
std::string WithAction(const std::string& body, std::string_view action, std::string_view cause,
                       double value) {
  std::vector<AuditRecord> actions = ActionsOf(body);
  AuditRecord a;
  a.Set("action", std::string(action)).Set("cause", std::string(cause)).Set("value", value);
  actions.push_back(a);
  return WithActions(body, actions);
}

size_t FirstRegulation(const Stream& s, std::string_view action) {
  return FirstWhere(s, [action](const AuditRecord& r) {
    for (const auto& [name, value] : Regulations(r)) {
      if (name == action) return true;
    }
    return false;
  });
}

// The regulated stream exercises both switches, and its records pass: the verifier's own
// median of the logged denominators, blocks, levels, cooldown and epoch clip counts give the
// same actions and values as the estimator's regulator.
TEST(VerifierSpecRules, ARegulatedModelsRecordsPass) {
  const Stream& s = TheRegulatedStream();
  int raise = 0, lower = 0, clip = 0, upper = 0;
  for (const std::string& b : s.bodies) {
    const AuditRecord r = Parse(b);
    if (r.Find("clipped_hi") != nullptr) ++upper;
    for (const auto& [name, value] : Regulations(r)) {
      raise += name == "raise_gamma";
      lower += name == "lower_gamma";
      clip += name == "raise_c_hi";
    }
  }
  std::printf("regulated stream: %zu records, %d raise_gamma, %d lower_gamma, %d raise_c_hi, %d "
              "events clipped above c_hi\n",
              s.bodies.size(), raise, lower, clip, upper);
  EXPECT_GT(raise, 0);
  EXPECT_GT(clip, 0);
  EXPECT_GT(upper, 0);
  AuditVerifier v({});
  const absl::Status st = Verify(s, s.bodies, &v);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(v.records(), s.bodies.size() + 1);
}

TEST(VerifierSpecRules, ForgedSelfRegulationIsCaughtAndNamed) {
  const Stream& s = TheRegulatedStream();
  const std::vector<Forgery> forgeries = {
      {"a widening of the window left out of the record", AuditRule::kRegulation,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstRegulation(s, "raise_gamma");
         (*b)[i] = WithoutAction((*b)[i], "raise_gamma");
         return i;
       }},
      {"a widening to another gamma than the next level's", AuditRule::kRegulation,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstRegulation(s, "raise_gamma");
         std::vector<AuditRecord> actions = ActionsOf((*b)[i]);
         for (AuditRecord& a : actions) {
           if (*a.Find("action")->get_if<std::string>() == "raise_gamma") {
             a.Set("value", 0.9999);
           }
         }
         (*b)[i] = WithActions((*b)[i], actions);
         return i;
       }},
      {"a widening where the block had too few thin events", AuditRule::kRegulation,
       [](const Stream& s, std::vector<std::string>* b) {
         // The 3rd block's last event (n = 300): the warm-up's, no thin event yet.
         size_t i = 0;
         for (int n = 0; i < s.bodies.size(); ++i) {
           if (Kind(Parse(s.bodies[i]), "sau_event") && ++n == 300) break;
         }
         EXPECT_TRUE(Regulations(Parse((*b)[i])).empty());
         (*b)[i] = WithAction((*b)[i], "raise_gamma", "thin_denominators", 0.995);
         return i;
       }},
      {"a raise of the clip level left out of the record", AuditRule::kRegulation,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i = FirstRegulation(s, "raise_c_hi");
         (*b)[i] = WithoutAction((*b)[i], "raise_c_hi");
         return i;
       }},
      {"a raise of the clip level where no epoch ends", AuditRule::kRegulation,
       [](const Stream& s, std::vector<std::string>* b) {
         // An event after the first raise, inside an epoch (the next event's epoch is the
         // same), that took no action.
         size_t i = FirstRegulation(s, "raise_c_hi") + 1;
         for (; i + 1 < s.bodies.size(); ++i) {
           const AuditRecord r = Parse(s.bodies[i]), next = Parse(s.bodies[i + 1]);
           if (Kind(r, "sau_event") && Kind(next, "sau_event") && r.Find("actions") == nullptr &&
               Number(r, "epoch") == Number(next, "epoch")) {
             break;
           }
         }
         (*b)[i] = WithAction((*b)[i], "raise_c_hi", "clip_rate", 100.0);
         return i;
       }},
      {"more upper clips than clips", AuditRule::kSaturation,
       [](const Stream& s, std::vector<std::string>* b) {
         const size_t i =
             FirstWhere(s, [](const AuditRecord& r) { return r.Find("clipped_hi") != nullptr; });
         AuditRecord r = Parse((*b)[i]);
         r.Set("clipped_hi", static_cast<uint64_t>(Number(r, "clipped")) + 1);
         (*b)[i] = Canon(r);
         return i;
       }},
  };
  for (const Forgery& f : forgeries) {
    SCOPED_TRACE(f.name);
    std::vector<std::string> bodies = s.bodies;
    const size_t i = f.forge(s, &bodies);
    ASSERT_NE(bodies[i], s.bodies[i]);
    AuditVerifier v({});
    const absl::Status st = Verify(s, bodies, &v);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_EQ(v.failed_rule(), f.rule) << st;
    EXPECT_EQ(v.first_bad_index(), i + 1) << st;
    std::printf("%s:\n  %s\n", f.name.c_str(), std::string(st.message()).c_str());
  }
}

// A format-2 chain did not log upper clips: its clip level's raises are checked by their step
// and cap at an epoch's end only; the same records under a format-3 genesis fail (the raises
// then follow from no logged clip), and a raise by more than a step fails either way.
TEST(VerifierSpecRules, AFormatTwoChainChecksTheClipLevelByItsStep) {
  const Stream& s = TheRegulatedStream();
  std::vector<std::string> old;
  for (const std::string& b : s.bodies) old.push_back(Without(b, {"clipped_hi"}));
  const absl::Status format2 = VerifyFormat(s, old, 2);
  EXPECT_TRUE(format2.ok()) << format2;
  const absl::Status format3 = VerifyFormat(s, old, 3);
  EXPECT_TRUE(absl::StrContains(format3.message(), "rule regulation")) << format3;
  const size_t i = FirstRegulation(s, "raise_c_hi");
  std::vector<AuditRecord> actions = ActionsOf(old[i]);
  for (AuditRecord& a : actions) {
    if (*a.Find("action")->get_if<std::string>() == "raise_c_hi") {
      a.Set("value", Number(a, "value") + 1);
    }
  }
  old[i] = WithActions(old[i], actions);
  const absl::Status step = VerifyFormat(s, old, 2);
  EXPECT_TRUE(absl::StrContains(step.message(), "rule regulation")) << step;
}

}  // namespace
}  // namespace streamlearn
