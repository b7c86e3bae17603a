// Tests of the server's logic that needs no channel: spec conversion, the config file, the
// server's options; and the streamlearn-server binary's command line (--help, bad flags).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.pb.h"
#include "core/lmu/lmu_spec.h"
#include "core/sau/sau_spec.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "server/config.h"
#include "server/host_port.h"
#include "server/server.h"
#include "server/storage/spec_conversion.h"
#include "tests/command_runner.h"

namespace streamlearn::server {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(SpecConversionTest, ZeroAndUnspecifiedFieldsKeepTheCoreDefaults) {
  v1::ModelSpec wire;
  wire.set_name("m");
  wire.mutable_sau()->set_d(8);
  wire.mutable_sau()->set_d_v(4);
  wire.mutable_sau()->set_r(32);
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(wire);
  ASSERT_TRUE(spec.ok()) << spec.status();

  const sau::SauSpec defaults;
  EXPECT_EQ(spec->name, "m");
  EXPECT_EQ(spec->shards, 1u);
  EXPECT_EQ(spec->sau.d, 8);
  EXPECT_EQ(spec->sau.d_v, 4);
  EXPECT_EQ(spec->sau.r, 32);
  EXPECT_EQ(spec->sau.tau, defaults.tau);
  EXPECT_EQ(spec->sau.gamma, defaults.gamma);
  EXPECT_EQ(spec->sau.features, sau::FeatureKind::kOrthogonal);
  EXPECT_EQ(spec->sau.input_mode, sau::InputMode::kL2Scaled);
  EXPECT_EQ(spec->sau.seed, defaults.seed);
  EXPECT_EQ(spec->sau.input_scale, defaults.input_scale);
  EXPECT_EQ(spec->sau.beta_mu, defaults.beta_mu);
  EXPECT_EQ(spec->sau.beta_sigma, defaults.beta_sigma);
  EXPECT_EQ(spec->sau.alpha, defaults.alpha);
  EXPECT_EQ(spec->sau.kappa, defaults.kappa);
  EXPECT_EQ(spec->sau.c_rj, defaults.c_rj);
  EXPECT_EQ(spec->sau.rj_delta, defaults.rj_delta);
  EXPECT_EQ(spec->sau.beta_floor, defaults.beta_floor);
}

// lmu.max_delta_buckets is proto3 optional: unset, a new spec's delta may grow to 4x its
// buckets (at most 2^24) and a stored one never grows; equal to delta_buckets, or 0, it never
// grows; the effective spec always says, and validation refuses a cap below the delta or not
// a power of two, naming the field.
TEST(SpecConversionTest, UnsetMaxDeltaBucketsLetsANewDeltaGrowFourfoldAndAStoredOneNot) {
  const auto lmu_of = [](uint32_t buckets, std::optional<uint32_t> cap,
                         storage::SpecOrigin origin, bool fused) {
    v1::ModelSpec wire;
    wire.set_name("m");
    v1::LmuSpec* l = fused ? wire.mutable_fuse()->mutable_lmu() : wire.mutable_lmu();
    if (fused) {
      wire.mutable_fuse()->mutable_sau()->set_d(4);
      wire.mutable_fuse()->mutable_sau()->set_r(8);
    }
    l->set_delta_buckets(buckets);
    if (cap.has_value()) l->set_max_delta_buckets(*cap);
    absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(wire, origin);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return fused ? spec->fuse.lmu : spec->lmu;
  };
  using storage::SpecOrigin;
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fuse.lmu" : "lmu");
    EXPECT_EQ(lmu_of(4096, std::nullopt, SpecOrigin::kRequest, fused).max_delta_buckets, 16384u);
    EXPECT_EQ(lmu_of(1u << 23, std::nullopt, SpecOrigin::kRequest, fused).max_delta_buckets,
              1u << 24);
    EXPECT_EQ(lmu_of(4096, std::nullopt, SpecOrigin::kStored, fused).max_delta_buckets, 0u);
    EXPECT_EQ(lmu_of(4096, 4096, SpecOrigin::kRequest, fused).max_delta_buckets, 0u);
    EXPECT_EQ(lmu_of(4096, 0, SpecOrigin::kRequest, fused).max_delta_buckets, 0u);
    EXPECT_EQ(lmu_of(4096, 65536, SpecOrigin::kStored, fused).max_delta_buckets, 65536u);
  }
  // The effective spec carries the cap, "never" included, and reads back the same.
  for (const uint32_t cap : {0u, 8192u}) {
    ModelSpec spec;
    spec.name = "m";
    spec.has_lmu = true;
    spec.lmu.max_delta_buckets = cap;
    const v1::ModelSpec wire = storage::ModelSpecToProto(spec);
    EXPECT_TRUE(wire.lmu().has_max_delta_buckets());
    absl::StatusOr<ModelSpec> stored = storage::ModelSpecFromProto(wire, SpecOrigin::kStored);
    absl::StatusOr<ModelSpec> request = storage::ModelSpecFromProto(wire, SpecOrigin::kRequest);
    ASSERT_TRUE(stored.ok() && request.ok());
    EXPECT_EQ(stored->lmu.max_delta_buckets, cap);
    EXPECT_EQ(request->lmu.max_delta_buckets, cap);
  }
  for (const uint32_t bad : {2048u, 12288u, 1u << 25}) {
    lmu::LmuSpec l;
    l.max_delta_buckets = bad;
    const absl::Status refused = lmu::ValidateLmuSpec(l);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(refused.message()),
                HasSubstr(absl::StrCat("lmu.max_delta_buckets = ", bad, " is out of range")));
  }
}

// sau.antithetic is proto3 optional: unset, a new spec pairs its rows when r % 4 == 0 (the
// measured default, docs/EXPERIMENTS.md) and a stored one keeps the default it was written
// under (off); a given value is kept; the effective spec always says which, so it survives
// the store.
TEST(SpecConversionTest, UnsetAntitheticPairsRowsWhenTheyCanAndAStoredSpecStaysUnpaired) {
  const auto sau_of = [](uint32_t r, std::optional<bool> antithetic, storage::SpecOrigin origin,
                         bool fused) {
    v1::ModelSpec wire;
    wire.set_name("m");
    v1::SauSpec* s = fused ? wire.mutable_fuse()->mutable_sau() : wire.mutable_sau();
    if (fused) wire.mutable_fuse()->mutable_lmu();
    s->set_d(8);
    s->set_d_v(1);
    s->set_r(r);
    if (antithetic.has_value()) s->set_antithetic(*antithetic);
    absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(wire, origin);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return fused ? spec->fuse.sau : spec->sau;
  };
  using storage::SpecOrigin;
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fuse.sau" : "sau");
    EXPECT_TRUE(sau_of(32, std::nullopt, SpecOrigin::kRequest, fused).antithetic);
    EXPECT_FALSE(sau_of(30, std::nullopt, SpecOrigin::kRequest, fused).antithetic);
    EXPECT_FALSE(sau_of(32, false, SpecOrigin::kRequest, fused).antithetic);
    EXPECT_TRUE(sau_of(32, true, SpecOrigin::kRequest, fused).antithetic);
    EXPECT_FALSE(sau_of(32, std::nullopt, SpecOrigin::kStored, fused).antithetic);
    EXPECT_TRUE(sau_of(32, true, SpecOrigin::kStored, fused).antithetic);
  }
  // The effective spec carries the choice, false included, and reads back the same as stored.
  ModelSpec unpaired;
  unpaired.name = "m";
  unpaired.sau.d = 8;
  unpaired.sau.d_v = 1;
  unpaired.sau.r = 32;
  unpaired.sau = sau::ResolveDefaults(unpaired.sau);
  const v1::ModelSpec wire = storage::ModelSpecToProto(unpaired);
  EXPECT_TRUE(wire.sau().has_antithetic());
  absl::StatusOr<ModelSpec> stored = storage::ModelSpecFromProto(wire, SpecOrigin::kStored);
  absl::StatusOr<ModelSpec> request = storage::ModelSpecFromProto(wire, SpecOrigin::kRequest);
  ASSERT_TRUE(stored.ok() && request.ok());
  EXPECT_FALSE(stored->sau.antithetic);
  EXPECT_FALSE(request->sau.antithetic);
  // true with r % 4 != 0 converts, and validation refuses it by name.
  EXPECT_TRUE(sau_of(30, true, SpecOrigin::kRequest, false).antithetic);
  sau::SauSpec odd = sau_of(30, true, SpecOrigin::kRequest, false);
  absl::Status refused = sau::ValidateSpec(sau::ResolveDefaults(odd));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("multiple of 4"));
}

// An unset lmu.delta_buckets is sized by the server: the default when the scheduling
// inequality (L3) holds with it, else the smallest power of two that satisfies it for the
// declared novelty rate; a given size is kept, and validation refuses it if too small.
TEST(SpecConversionTest, AnUnsetDeltaIsSizedForTheDeclaredNoveltyRate) {
  const auto lmu_of = [](double lambda_max, uint32_t delta_buckets, bool fused) {
    v1::ModelSpec wire;
    wire.set_name("m");
    v1::LmuSpec* l = fused ? wire.mutable_fuse()->mutable_lmu() : wire.mutable_lmu();
    if (fused) wire.mutable_fuse()->mutable_sau()->set_d(4);
    l->set_lambda_max(lambda_max);
    l->set_delta_buckets(delta_buckets);
    absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(wire);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return fused ? spec->fuse.lmu : spec->lmu;
  };
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fuse.lmu" : "lmu");
    EXPECT_EQ(lmu_of(1000, 0, fused).delta_buckets, 4096u);  // the default suffices
    // 100000 ids/s over T_rb = 1 s plus a margin of 512: 4 B (0.8 - 0.6) >= 100512.
    const lmu::LmuSpec solved = lmu_of(100000, 0, fused);
    EXPECT_EQ(solved.delta_buckets, 131072u);
    EXPECT_TRUE(lmu::ValidateLmuSpec(solved).ok());
    const lmu::LmuSpec given = lmu_of(100000, 4096, fused);
    EXPECT_EQ(given.delta_buckets, 4096u);
    EXPECT_THAT(std::string(lmu::ValidateLmuSpec(given).message()),
                HasSubstr("raise delta_buckets to at least 125640"));
  }
  // Beyond 2^24 buckets nothing suffices: the default is kept and validation says why.
  const lmu::LmuSpec hopeless = lmu_of(1e12, 0, false);
  EXPECT_EQ(hopeless.delta_buckets, 4096u);
  EXPECT_THAT(std::string(lmu::ValidateLmuSpec(hopeless).message()),
              HasSubstr("no delta_buckets up to 2^24"));
}

TEST(SpecConversionTest, GivenFieldsAreCopied) {
  v1::ModelSpec wire;
  wire.set_name("m");
  wire.set_shards(3);
  v1::SauSpec* s = wire.mutable_sau();
  s->set_d(8);
  s->set_d_v(4);
  s->set_r(32);
  s->set_tau(2.5);
  s->set_gamma(0.9);
  s->set_features(v1::FEATURE_KIND_IID);
  s->set_antithetic(true);
  s->set_seed(77);
  s->set_input_mode(v1::INPUT_MODE_RAW);
  s->set_input_scale(2.0);
  s->set_c_lo(-7);
  s->set_c_hi(9);
  s->set_r_v(2);
  s->set_beta_mu(0.02);
  s->set_beta_sigma(0.03);
  s->set_alpha(0.01);
  s->set_kappa(0.5);
  s->set_c_rj(0.7);
  s->set_rj_delta(0.1);
  s->set_beta_floor(1e-9);
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(wire);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->shards, 3u);
  EXPECT_EQ(spec->sau.features, sau::FeatureKind::kIid);
  EXPECT_EQ(spec->sau.input_mode, sau::InputMode::kRaw);
  EXPECT_TRUE(spec->sau.antithetic);
  EXPECT_EQ(spec->sau.seed, 77u);
  EXPECT_EQ(spec->sau.r_v, 2);
  // Every field given comes back unchanged.
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(storage::ModelSpecToProto(*spec), wire))
      << storage::ModelSpecToProto(*spec).DebugString();
}

TEST(SpecConversionTest, ResolvedSpecSurvivesARoundTripUnchanged) {
  ModelSpec spec;
  spec.name = "round";
  spec.shards = 4;
  spec.sau.d = 16;
  spec.sau.d_v = 8;
  spec.sau.r = 64;
  spec.sau = sau::ResolveDefaults(spec.sau);
  absl::StatusOr<ModelSpec> back = storage::ModelSpecFromProto(storage::ModelSpecToProto(spec));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(storage::ModelSpecToProto(*back),
                                                                 storage::ModelSpecToProto(spec)));
  EXPECT_EQ(back->sau.tau, spec.sau.tau);
  EXPECT_EQ(back->sau.c_lo, spec.sau.c_lo);
  EXPECT_EQ(back->sau.c_hi, spec.sau.c_hi);
}

TEST(SpecConversionTest, UnknownEnumValuesAreInvalidArgumentsNamingTheField) {
  v1::ModelSpec wire;
  wire.mutable_sau()->set_features(static_cast<v1::FeatureKind>(9));
  absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(wire);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("sau.features"));

  wire.mutable_sau()->set_features(v1::FEATURE_KIND_IID);
  wire.mutable_sau()->set_input_mode(static_cast<v1::InputMode>(9));
  spec = storage::ModelSpecFromProto(wire);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("sau.input_mode"));
}

TEST(ServerConfigTest, FullConfigIsParsedWithProtoFieldNamesAndEnumNames) {
  absl::StatusOr<ServerConfig> config = ParseServerConfig(R"({
    "listen": "127.0.0.1:7000", "metrics": "", "data_dir": "/tmp/x",
    "max_batch": 100, "max_features": 512, "max_t_step": 1000000, "max_message_bytes": 65536,
    "models": [
      {"name": "a", "shards": 2, "sau": {"d": 8, "d_v": 4, "r": 32,
                                         "features": "FEATURE_KIND_IID", "gamma": 0.95}},
      {"name": "b", "sau": {"d": 4, "dV": 2, "r": 16, "inputMode": "INPUT_MODE_RAW"}}
    ]})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->listen, "127.0.0.1:7000");
  EXPECT_EQ(config->metrics, "");
  EXPECT_EQ(config->data_dir, "/tmp/x");
  EXPECT_EQ(config->max_batch, 100u);
  EXPECT_EQ(config->max_features, 512u);
  EXPECT_EQ(config->max_t_step, 1000000u);
  EXPECT_EQ(config->max_message_bytes, 65536u);
  ASSERT_EQ(config->models.size(), 2u);
  EXPECT_EQ(config->models[0].name, "a");
  EXPECT_EQ(config->models[0].shards, 2u);
  EXPECT_EQ(config->models[0].sau.features, sau::FeatureKind::kIid);
  EXPECT_EQ(config->models[0].sau.gamma, 0.95);
  EXPECT_EQ(config->models[1].shards, 1u);
  EXPECT_EQ(config->models[1].sau.d_v, 2);
  EXPECT_EQ(config->models[1].sau.input_mode, sau::InputMode::kRaw);
}

TEST(ServerConfigTest, ClusterObjectGivesTheClusterSettings) {
  absl::StatusOr<ServerConfig> config = ParseServerConfig(R"({
    "audit_key_file": "/keys/audit.key", "lmu_secret_file": "/keys/lmu.secret",
    "cluster": {"nats": "nats://n1:4222,nats://n2:4222", "server_id": "s1",
                "advertise": "s1.sl:50051", "replicas": 3, "lease_ttl": "4s", "prefix": "PROD"}
  })");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->audit_key_file, "/keys/audit.key");
  ASSERT_TRUE(config->cluster.has_value());
  EXPECT_EQ(config->cluster->nats, "nats://n1:4222,nats://n2:4222");
  EXPECT_EQ(config->cluster->server_id, "s1");
  EXPECT_EQ(config->cluster->advertise, "s1.sl:50051");
  EXPECT_EQ(config->cluster->replicas, 3);
  EXPECT_EQ(config->cluster->lease_ttl, absl::Seconds(4));
  EXPECT_EQ(config->cluster->prefix, "PROD");

  absl::StatusOr<ServerConfig> minimal =
      ParseServerConfig(R"({"cluster": {"nats": "nats://n1:4222"}})");
  ASSERT_TRUE(minimal.ok()) << minimal.status();
  EXPECT_FALSE(minimal->cluster->server_id.has_value());
  EXPECT_FALSE(minimal->cluster->lease_ttl.has_value());
}

TEST(ServerConfigTest, EmptyObjectLeavesEverySettingUnset) {
  absl::StatusOr<ServerConfig> config = ParseServerConfig("{}");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->listen.has_value());
  EXPECT_FALSE(config->metrics.has_value());
  EXPECT_FALSE(config->data_dir.has_value());
  EXPECT_FALSE(config->max_batch.has_value());
  EXPECT_FALSE(config->max_message_bytes.has_value());
  EXPECT_TRUE(config->models.empty());
}

TEST(ServerConfigTest, AddressesThatAreHostPortAreAcceptedAndAnEmptyMetricsDisablesIt) {
  absl::StatusOr<ServerConfig> config =
      ParseServerConfig(R"({"listen": "[::1]:0", "metrics": ""})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config->listen, "[::1]:0");
  EXPECT_EQ(*config->metrics, "");
}

TEST(ServerConfigTest, BadConfigIsAnInvalidArgumentNamingThePlaceAndProblem) {
  struct Case {
    std::string scenario;
    std::string json;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {"malformed JSON", R"({"models": [)", {"malformed JSON", "line 1"}},
      {"not an object", "[1, 2]", {"top level", "object"}},
      {"unknown key", R"({"modles": []})", {"unknown key", "modles"}},
      {"listen not a string", R"({"listen": 5})", {"listen", "string"}},
      {"max_batch zero", R"({"max_batch": 0})", {"max_batch", "1.."}},
      {"max_batch negative", R"({"max_batch": -3})", {"max_batch"}},
      {"max_features zero", R"({"max_features": 0})", {"max_features", "1.."}},
      {"max_t_step zero", R"({"max_t_step": 0})", {"max_t_step", "1.."}},
      {"max_t_step above 2^62", R"({"max_t_step": 4611686018427387905})", {"max_t_step"}},
      {"models not an array", R"({"models": {}})", {"models", "array"}},
      {"model not an object", R"({"models": [3]})", {"models[0]", "ModelSpec"}},
      {"unknown model field",
       R"({"models": [{"name": "a", "sau": {"d": 4, "gama": 1}}]})",
       {"models[0] (\"a\")", "gama"}},
      {"invalid model",
       R"({"models": [{"name": "a", "sau": {"d": 0, "d_v": 4, "r": 8}}]})",
       {"models[0] (\"a\")", "sau.d"}},
      {"bad name",
       R"({"models": [{"name": "a b", "sau": {"d": 4, "d_v": 4, "r": 8}}]})",
       {"models[0]", "name"}},
      {"duplicate name",
       R"({"models": [{"name": "a", "sau": {"d": 4, "d_v": 4, "r": 8}},
                      {"name": "a", "sau": {"d": 4, "d_v": 4, "r": 8}}]})",
       {"models[1] (\"a\")", "duplicate", "models[0]"}},
      {"number beyond a double", "{\"data_dir\": \"d\",\n \"max_batch\": 1e400}",
       {"malformed JSON", "line 2, column 19", "number 1e400 is out of the range of a double"}},
      {"number beyond a double in a model",
       R"({"models": [{"name": "a", "sau": {"d": 4, "d_v": 4, "r": 8, "gamma": -1e999}}]})",
       {"line 1, column 75", "out of the range of a double"}},
      {"duplicate key", R"({"max_batch": 8, "max_batch": 9})",
       {"malformed JSON", "line 1, column 18", "duplicate key \"max_batch\""}},
      {"duplicate key in a model",
       R"({"models": [{"name": "a", "sau": {"d": 4, "d_v": 4, "r": 8}, "name": "b"}]})",
       {"line 1, column 62", "duplicate key \"name\""}},
      {"listen port above 65535", R"({"listen": "127.0.0.1:99999"})",
       {"\"listen\"", "port in 0..65535", "127.0.0.1:99999"}},
      {"listen without a port", R"({"listen": "localhost"})", {"\"listen\"", "host:port"}},
      {"listen empty", R"({"listen": ""})", {"\"listen\"", "host:port"}},
      {"metrics port with junk", R"({"metrics": "0.0.0.0:9464x"})",
       {"\"metrics\"", "decimal digits"}},
      {"cluster not an object", R"({"cluster": "nats://a:4222"})", {"\"cluster\"", "object"}},
      {"cluster without nats", R"({"cluster": {"server_id": "s1"}})",
       {"cluster", "\"nats\"", "required"}},
      {"cluster unknown key", R"({"cluster": {"nats": "nats://a:4222", "ttl": "6s"}})",
       {"cluster: unknown key \"ttl\"", "lease_ttl"}},
      {"cluster lease_ttl too short", R"({"cluster": {"nats": "nats://a:4222", "lease_ttl": "500ms"}})",
       {"cluster", "lease_ttl", ">= 1s", "500ms"}},
      {"cluster replicas above 5", R"({"cluster": {"nats": "nats://a:4222", "replicas": 7}})",
       {"cluster", "replicas", "1..5"}},
      {"cluster advertise without a port", R"({"cluster": {"nats": "nats://a", "advertise": "s1"}})",
       {"cluster", "advertise", "host:port"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    absl::StatusOr<ServerConfig> config = ParseServerConfig(c.json);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& m : c.mentions) {
      EXPECT_THAT(config.status().message(), HasSubstr(m));
    }
  }
}

// A path named after `name` and this process in the temporary directory (other test
// processes may run at the same time).
std::string TempFilePath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/server_config_test_", getpid(), "_", name);
}

std::string WriteTempFile(const std::string& name, const std::string& content) {
  const std::string path = TempFilePath(name);
  std::ofstream(path) << content;
  return path;
}

TEST(ServerConfigTest, LoadErrorsNameTheFile) {
  const std::string missing = TempFilePath("no-such-config.json");
  absl::StatusOr<ServerConfig> config = LoadServerConfig(missing);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), AllOf(HasSubstr(missing), HasSubstr("cannot read")));

  const std::string bad = WriteTempFile("bad-config.json", R"({"max_batch": "many"})");
  config = LoadServerConfig(bad);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), AllOf(HasSubstr(bad), HasSubstr("max_batch")));

  const std::string huge = WriteTempFile("huge-config.json", "{\n  \"max_batch\": 1e400\n}\n");
  config = LoadServerConfig(huge);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(),
              AllOf(HasSubstr("config file '" + huge + "'"), HasSubstr("line 2, column 20"),
                    HasSubstr("out of the range of a double")));
}

TEST(HostPortTest, OnlyHostColonPortWithAPortIn0To65535) {
  struct Case {
    std::string address;
    std::string problem;  // empty: accepted
  };
  const Case cases[] = {
      {"0.0.0.0:50051", ""},
      {"127.0.0.1:0", ""},
      {"localhost:65535", ""},
      {"[::]:9464", ""},
      {"[::1]:0", ""},
      {"127.0.0.1:99999", "above 65535"},
      {"127.0.0.1:65536", "above 65535"},
      {"127.0.0.1:123456", "1 to 5 digits"},
      {"127.0.0.1:", "1 to 5 digits"},
      {"127.0.0.1", "no port"},
      {"", "no port"},
      {":50051", "no host"},
      {"127.0.0.1:+80", "decimal digits"},
      {"127.0.0.1:-1", "decimal digits"},
      {"127.0.0.1:80 ", "decimal digits"},
      {"127.0.0.1:0x50", "decimal digits"},
      {"::1:50051", "in brackets"},
      {"[::1:50051", "bracket"},
      {"[]:50051", "bracket"},
      {"local host:80", "blank"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.address);
    const absl::Status s = CheckHostPort(c.address);
    if (c.problem.empty()) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(s.message(), AllOf(HasSubstr(c.problem), HasSubstr("'" + c.address + "'")));
    }
  }
}

TEST(ServerConfigTest, ServerCreatesTheModelsOfItsConfigFileAtStart) {
  Server::Options options;
  options.listen = "127.0.0.1:0";
  options.config_path = WriteTempFile(
      "good-config.json",
      R"({"models": [{"name": "cfg-a", "shards": 3, "sau": {"d": 8, "d_v": 4, "r": 32}},
                     {"name": "cfg-b", "sau": {"d": 4, "d_v": 2, "r": 16}}]})");
  Server server(options);
  absl::StatusOr<int> port = server.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  const auto models = server.registry().List();
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0]->spec().name, "cfg-a");
  EXPECT_EQ(models[0]->num_shards(), 3u);
  EXPECT_EQ(models[1]->spec().name, "cfg-b");
  EXPECT_EQ(models[1]->spec().sau.tau, 2.0);  // resolved: sqrt(d)
  server.Shutdown(absl::Seconds(1));
}

TEST(ServerConfigTest, ServerWithABadConfigFileDoesNotStart) {
  Server::Options options;
  options.listen = "127.0.0.1:0";
  options.config_path =
      WriteTempFile("bad-model-config.json", R"({"models": [{"name": "x", "sau": {"gamma": 2}}]})");
  Server server(options);
  absl::StatusOr<int> port = server.Start();
  EXPECT_EQ(port.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(port.status().message(),
              AllOf(HasSubstr(options.config_path), HasSubstr("models[0]")));
}

TEST(ServerOptionsTest, InvalidOptionsAreRejectedByStart) {
  Server::Options options;
  options.listen = "127.0.0.1:0";
  options.max_batch = 0;
  EXPECT_EQ(Server(options).Start().status().code(), absl::StatusCode::kInvalidArgument);
  options.max_batch = 10;
  options.max_message_bytes = 0;
  EXPECT_EQ(Server(options).Start().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServerOptionsTest, ClusterModeRefusesABadServerIdAndMissingSharedKeys) {
  Server::Options options;
  options.listen = "127.0.0.1:0";
  options.metrics = "";
  options.data_dir = "";
  options.cluster = "nats://127.0.0.1:1";  // never reached: the checks come first
  options.server_id = "pod.7";
  absl::Status bad_id = Server(options).Start().status();
  EXPECT_EQ(bad_id.code(), absl::StatusCode::kInvalidArgument) << bad_id;
  EXPECT_THAT(bad_id.message(), HasSubstr("server_id 'pod.7'"));
  options.server_id = "s1";
  absl::Status no_key = Server(options).Start().status();
  EXPECT_EQ(no_key.code(), absl::StatusCode::kInvalidArgument) << no_key;
  EXPECT_THAT(no_key.message(), HasSubstr("--audit_key_file"));
}

TEST(ServerOptionsTest, BadAddressesAndANegativeSnapshotIntervalAreRejectedByStart) {
  struct Case {
    std::string scenario;
    std::function<void(Server::Options*)> change;
    std::string needle;
  };
  const Case cases[] = {
      {"listen port above 65535", [](Server::Options* o) { o->listen = "127.0.0.1:99999"; },
       "listen: expected host:port"},
      {"listen port with junk", [](Server::Options* o) { o->listen = "127.0.0.1:80abc"; },
       "listen: expected host:port"},
      {"metrics port above 65535", [](Server::Options* o) { o->metrics = "127.0.0.1:70000"; },
       "metrics: expected host:port"},
      {"negative snapshot interval",
       [](Server::Options* o) { o->snapshot_interval = absl::Seconds(-5); },
       "snapshot_interval must be >= 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    Server::Options options;
    options.listen = "127.0.0.1:0";
    options.metrics = "";
    c.change(&options);
    absl::StatusOr<int> port = Server(options).Start();
    EXPECT_EQ(port.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(port.status().message(), HasSubstr(c.needle));
  }
}

TEST(ServerOptionsTest, AddressInUseIsUnavailable) {
  Server::Options options;
  options.listen = "127.0.0.1:0";
  Server first(options);
  absl::StatusOr<int> port = first.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  options.listen = absl::StrCat("127.0.0.1:", *port);
  Server second(options);
  EXPECT_EQ(second.Start().status().code(), absl::StatusCode::kUnavailable);
  first.Shutdown(absl::Seconds(1));
}

// The streamlearn-server binary, run as a child process.
const std::string kServer = STREAMLEARN_BINARY_DIR "/server/streamlearn-server";

TEST(ServerBinaryTest, HelpListsTheFlagsWithTheirDefaultsAndExitsZero) {
  for (const char* flag : {"--help", "-h", "--helpshort"}) {
    SCOPED_TRACE(flag);
    const test_util::CommandResult r = test_util::RunCommand(kServer + " " + flag);
    EXPECT_EQ(r.exit_code, 0) << test_util::Describe(r);
    EXPECT_THAT(r.out, Not(HasSubstr("No flags matched")));
    for (const char* needle :
         {"usage: streamlearn-server", "--listen  (default: 127.0.0.1:50051)",
          "gRPC listen address, host:port", "--metrics  (default: 127.0.0.1:9464)",
          "--snapshot_interval  (default: 5m)", "--keep_snapshots  (default: 2)",
          "--audit_checkpoint_every  (default: 1024)", "--config  (default: \"\")",
          "--durability", "--lmu_secret_file", "exit codes"}) {
      EXPECT_THAT(r.out, HasSubstr(needle));
    }
  }
}

// Each bad flag or config file must stop the server at once with exit code 2. It runs under
// `timeout` so that a server which starts anyway (the bugs these cases pin down) fails the
// test instead of hanging it. The data directory is empty (memory only) and the ports are the
// kernel's choice, so nothing is written and nothing collides.
test_util::CommandResult RunServer(const std::string& args) {
  return test_util::RunCommand("timeout 20 " + kServer +
                               " --data_dir= --listen=127.0.0.1:0 --metrics= " + args);
}

TEST(ServerBinaryTest, BadFlagsExitTwoNamingTheFlagAndWhatItAllows) {
  struct Case {
    std::string flags;
    std::string needle;
  };
  const Case cases[] = {
      {"--listen=127.0.0.1:99999",
       "--listen: expected host:port with a port in 0..65535, got '127.0.0.1:99999'"},
      {"--listen=127.0.0.1:50x51", "--listen: expected host:port"},
      {"--listen=localhost", "--listen: expected host:port"},
      {"--metrics=127.0.0.1:99999", "--metrics: expected host:port with a port in 0..65535"},
      {"--snapshot_interval=-5s", "--snapshot_interval: must be >= 0 (0 = off), got -5s"},
      {"--snapshot_interval=soon", "--snapshot_interval: expected a duration"},
      {"--keep_snapshots=0", "--keep_snapshots: must be >= 1, got 0"},
      {"--keep_snapshots=-1", "--keep_snapshots: expected an unsigned integer, got '-1'"},
      {"--keep_snapshots -1", "--keep_snapshots: expected an unsigned integer, got '-1'"},
      {"--audit_checkpoint_every=0", "--audit_checkpoint_every: must be >= 2, got 0"},
      {"--audit_checkpoint_every=1", "--audit_checkpoint_every: must be >= 2, got 1"},
      {"--max_batch=0", "--max_batch: must be in 1..2147483647, got 0"},
      {"--max_message_bytes=4294967296", "--max_message_bytes: must be in 1..2147483647"},
      {"--durability=sometimes", "--durability"},
      {"--no_such_flag=1", "unknown flag --no_such_flag"},
      {"--keep_snapshots", "--keep_snapshots needs a value"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flags);
    const test_util::CommandResult r = RunServer(c.flags);
    EXPECT_EQ(r.exit_code, 2) << test_util::Describe(r);
    EXPECT_THAT(r.out + r.err, HasSubstr(c.needle)) << test_util::Describe(r);
  }
}

TEST(ServerBinaryTest, BadConfigFileExitsTwoNamingTheFileLineAndColumn) {
  struct Case {
    std::string scenario;
    std::string json;
    std::string needle;
  };
  const Case cases[] = {
      {"number beyond a double", "{\n  \"max_batch\": 1e400\n}\n",
       "malformed JSON: line 2, column 20: number 1e400 is out of the range of a double"},
      {"duplicate key", "{\"models\": [\n  {\"name\": \"a\", \"name\": \"b\"}]}\n",
       "malformed JSON: line 2, column 17: duplicate key \"name\""},
      // Checked though RunServer's --listen would win over it.
      {"listen port above 65535", R"({"listen": "127.0.0.1:99999"})",
       "\"listen\": expected host:port"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    const std::string path = WriteTempFile(absl::StrCat("binary-config-", n++, ".json"), c.json);
    const test_util::CommandResult r = RunServer("--config=" + path);
    EXPECT_EQ(r.exit_code, 2) << test_util::Describe(r);
    EXPECT_THAT(r.out + r.err, AllOf(HasSubstr("config file '" + path + "'"),
                                     HasSubstr(c.needle)))
        << test_util::Describe(r);
  }
}

}  // namespace
}  // namespace streamlearn::server
