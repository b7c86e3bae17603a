// End to end: the `streamlearn` CLI, the demo and the Python example, each run as a child
// process against an in-process server.

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/command_runner.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

const std::string kCli = STREAMLEARN_BINARY_DIR "/client/streamlearn";
const std::string kDemo = STREAMLEARN_BINARY_DIR "/client/streamlearn-demo";
const std::string kPythonExample = STREAMLEARN_SOURCE_DIR "/client/python/example.py";
const std::string kProtoDir = STREAMLEARN_SOURCE_DIR "/proto";
constexpr size_t kServerMaxBatch = 1000;

using ::streamlearn::test_util::CommandResult;
using ::streamlearn::test_util::Contains;
using ::streamlearn::test_util::Describe;
using ::streamlearn::test_util::ReadFile;
using ::streamlearn::test_util::RunCommand;
using ::streamlearn::test_util::TempPath;

// Deterministic, smooth pseudo-data: no RNG needed for a file format test.
double Value(int i, int j) { return std::sin(0.37 * i + 1.3 * j); }

class ClientCliTest : public test_util::SharedServerSuite<ClientCliTest> {
 public:
  static server::Server::Options SuiteOptions() {
    server::Server::Options options;
    options.metrics = "";
    options.max_batch = kServerMaxBatch;
    return options;
  }

 protected:
  // `streamlearn --server ADDR <args>`
  static CommandResult Cli(const std::string& args) {
    return RunCommand(kCli + " --server " + address_ + " " + args);
  }

  static void CreateModel(const std::string& name, const std::string& extra = "") {
    CommandResult r = Cli("create --name " + name + " --d 4 --dv 2 --r 64 " + extra);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
  }
};

TEST_F(ClientCliTest, CreateThenDescribeShowsTheEffectiveSpec) {
  CommandResult created = Cli("create --name cli_desc --shards 2 --d 4 --dv 2 --r 64 --gamma 0.95");
  ASSERT_EQ(created.exit_code, 0) << Describe(created);
  EXPECT_TRUE(Contains(created.out, "created model cli_desc")) << created.out;

  CommandResult r = Cli("describe cli_desc");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (const char* needle : {"model cli_desc", "d=4  d_v=2  r=64", "gamma=0.95", "tau=2",
                             "clipping", "W digest", "state digest"}) {
    EXPECT_TRUE(Contains(r.out, needle)) << needle << "\n" << r.out;
  }

  CommandResult json = Cli("describe cli_desc --json");
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  const nlohmann::json info = nlohmann::json::parse(json.out);
  EXPECT_EQ(info["spec"]["name"], "cli_desc");
  EXPECT_EQ(info["spec"]["sau"]["d_v"], 2);
  EXPECT_EQ(info["shards"].size(), 2u);
  EXPECT_EQ(info["w_digest"].get<std::string>().size(), 64u);

  EXPECT_EQ(info["spec"]["sau"]["antithetic"], true);  // the default for r % 4 == 0

  CommandResult list = Cli("list");
  ASSERT_EQ(list.exit_code, 0) << Describe(list);
  EXPECT_TRUE(Contains(list.out, "cli_desc")) << list.out;
}

// Rows are paired by default when r % 4 == 0; --no-antithetic keeps them unpaired, an r that
// cannot pair gets unpaired rows, and the two flags together are a usage error.
TEST_F(ClientCliTest, AntitheticPairsAreTheDefaultAndNoAntitheticTurnsThemOff) {
  const auto antithetic_of = [&](const std::string& model) {
    CommandResult json = Cli("describe " + model + " --json");
    EXPECT_EQ(json.exit_code, 0) << Describe(json);
    const nlohmann::json info = nlohmann::json::parse(json.out);
    return info["spec"]["sau"].value("antithetic", false);
  };
  ASSERT_EQ(Cli("create --name cli_pairs --d 4 --dv 2 --r 64").exit_code, 0);
  EXPECT_TRUE(antithetic_of("cli_pairs"));
  ASSERT_EQ(Cli("create --name cli_unpaired --d 4 --dv 2 --r 64 --no-antithetic").exit_code, 0);
  EXPECT_FALSE(antithetic_of("cli_unpaired"));
  ASSERT_EQ(Cli("create --name cli_r66 --d 4 --dv 2 --r 66").exit_code, 0);
  EXPECT_FALSE(antithetic_of("cli_r66"));
  CommandResult r66 = Cli("create --name cli_r66_pairs --d 4 --dv 2 --r 66 --antithetic");
  EXPECT_EQ(r66.exit_code, 1) << Describe(r66);
  EXPECT_TRUE(Contains(r66.err, "multiple of 4")) << r66.err;
  CommandResult both = Cli("create --name cli_both --d 4 --dv 2 --r 64 --antithetic --no-antithetic");
  EXPECT_EQ(both.exit_code, 2) << Describe(both);
  EXPECT_TRUE(Contains(both.err, "contradict")) << both.err;
}

// Self-regulation is off unless asked for; a cap implies its switch; describe says which
// actions a model may take and shows each shard's gamma and c_hi (docs/SAU.md).
TEST_F(ClientCliTest, RegulationFlagsSwitchEachActionOnAndDescribeShowsThem) {
  ASSERT_EQ(Cli("create --name cli_fixed --d 4 --dv 2 --r 64").exit_code, 0);
  CommandResult fixed = Cli("describe cli_fixed");
  EXPECT_TRUE(Contains(fixed.out, "off (gamma and c_hi stay as set)")) << fixed.out;
  EXPECT_FALSE(Contains(fixed.out, "widened/stepped")) << fixed.out;

  CommandResult created =
      Cli("create --name cli_regulated --d 4 --dv 2 --r 64 --regulate-gamma --c-hi-max 3");
  ASSERT_EQ(created.exit_code, 0) << Describe(created);
  CommandResult r = Cli("describe cli_regulated");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (const char* needle : {"gamma up to 0.999 while denominators are thin",
                             "c_hi up to 3 while > 1% clipped", "widened/stepped", "0/0"}) {
    EXPECT_TRUE(Contains(r.out, needle)) << needle << "\n" << r.out;
  }
  CommandResult json = Cli("describe cli_regulated --json");
  const nlohmann::json info = nlohmann::json::parse(json.out);
  EXPECT_EQ(info["spec"]["sau"]["regulate_gamma"], true);
  EXPECT_EQ(info["spec"]["sau"]["regulate_clip"], true);  // implied by --c-hi-max
  EXPECT_EQ(info["spec"]["sau"]["gamma_max"], 0.999);
  EXPECT_EQ(info["shards"][0]["gamma"], 0.99);

  // A cap below where the model starts is refused with the field's name.
  CommandResult low = Cli("create --name cli_low_cap --d 4 --dv 2 --r 64 --gamma-max 0.9");
  EXPECT_EQ(low.exit_code, 1) << Describe(low);
  EXPECT_TRUE(Contains(low.err, "gamma_max")) << low.err;
}

TEST_F(ClientCliTest, ShardsShowsEveryShardServedHereInTheEmbeddedMode) {
  CommandResult created = Cli("create --name cli_shards --shards 3 --d 4 --dv 2 --r 16");
  ASSERT_EQ(created.exit_code, 0) << Describe(created);
  CommandResult r = Cli("shards cli_shards");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "embedded mode")) << r.out;
  for (const char* needle : {"* cli_shards      0  (here)", "* cli_shards      2  (here)"}) {
    EXPECT_TRUE(Contains(r.out, needle)) << needle << "\n" << r.out;
  }
  CommandResult json = Cli("shards cli_shards --json");
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  const nlohmann::json map = nlohmann::json::parse(json.out);
  EXPECT_EQ(map["shards"].size(), 3u);
  EXPECT_EQ(map["shards"][2]["shard"], 2);
  EXPECT_EQ(map["shards"][2]["here"], true);

  CommandResult unknown = Cli("shards no_such_model");
  EXPECT_EQ(unknown.exit_code, 1) << Describe(unknown);
  EXPECT_TRUE(Contains(unknown.err, "NOT_FOUND")) << unknown.err;
  EXPECT_TRUE(Contains(unknown.err, "no_such_model")) << unknown.err;
}

TEST_F(ClientCliTest, CreateFromSpecJsonAndFlagsOverride) {
  const std::string spec = TempPath("spec.json");
  std::ofstream(spec) << R"({"name": "cli_json", "shards": 3, "sau": {"d": 5, "d_v": 1, "r": 32}})";
  CommandResult r = Cli("create --spec-json " + spec + " --r 128 --json");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const nlohmann::json info = nlohmann::json::parse(r.out);
  EXPECT_EQ(info["spec"]["shards"], 3);
  EXPECT_EQ(info["spec"]["sau"]["d"], 5);
  EXPECT_EQ(info["spec"]["sau"]["r"], 128);
}

TEST_F(ClientCliTest, CreateErrorsAreClear) {
  struct Case {
    std::string args;
    int exit_code;
    std::string needle;
  };
  const std::string malformed = TempPath("bad.json");
  std::ofstream(malformed) << "{\"name\": \"x\",\n \"sau\": {d: 3}}";
  const std::string huge = TempPath("huge.json");
  std::ofstream(huge) << "{\"name\": \"x\",\n"
                      << R"( "sau": {"d": 4, "d_v": 2, "r": 64, "gamma": 1e400}})";
  const std::string twice = TempPath("twice.json");
  std::ofstream(twice) << R"({"name": "x", "name": "y", "sau": {"d": 4, "d_v": 2, "r": 64}})";
  const Case cases[] = {
      {"create --spec-json " + malformed, 2,
       "error: INVALID_ARGUMENT: " + malformed +
           ": malformed JSON: line 2, column 10: syntax error while parsing object key"},
      {"create --spec-json " + huge, 2,
       "error: INVALID_ARGUMENT: " + huge +
           ": malformed JSON: line 2, column 50: number 1e400 is out of the range of a double"},
      {"create --spec-json " + twice, 2,
       "error: INVALID_ARGUMENT: " + twice +
           ": malformed JSON: line 1, column 15: duplicate key \"name\""},
      {"create --name \"$(printf 'cli\\377')\" --d 4 --dv 2 --r 64", 2,
       "error: INVALID_ARGUMENT: --name is not valid UTF-8 (byte 4 is 0xff)"},
      {"create --name cli_bad --d 0 --dv 2 --r 64", 1, "error: INVALID_ARGUMENT: sau.d"},
      {"create --d 4", 2, "needs a name"},
      {"create --name x --d four", 2, "--d: expected an unsigned integer"},
      {"create --name x --bogus 1", 2, "unknown flag --bogus"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    CommandResult r = Cli(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << Describe(r);
    EXPECT_TRUE(Contains(r.err, c.needle)) << Describe(r);
  }
  CreateModel("cli_twice");
  CommandResult again = Cli("create --name cli_twice --d 4 --dv 2 --r 64");
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(Contains(again.err, "error: ALREADY_EXISTS")) << Describe(again);
}

TEST_F(ClientCliTest, IngestCsvThenQueryPrintsYHat) {
  CreateModel("cli_csv");
  const std::string csv = TempPath("events.csv");
  {
    std::ofstream f(csv);
    f << "t,k0,k1,k2,k3,v0,v1\n";
    for (int i = 1; i <= 1000; ++i) {
      f << i;
      for (int j = 0; j < 6; ++j) f << "," << Value(i, j);
      f << "\n";
    }
  }
  CommandResult r = Cli("ingest cli_csv " + csv + " --batch 128");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "1000 events read, 1000 applied, 0 duplicates, 0 of 8 batches rejected"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "final version: shard 0 -> v8")) << r.out;
  EXPECT_TRUE(Contains(r.out, "margin")) << r.out;

  // The same file again: every t is old, so nothing is applied twice.
  CommandResult again = Cli("ingest cli_csv " + csv);
  ASSERT_EQ(again.exit_code, 0) << Describe(again);
  EXPECT_TRUE(Contains(again.out, "0 applied, 1000 duplicates")) << again.out;

  for (const std::string path : {"stabilized", "correctness"}) {
    SCOPED_TRACE(path);
    CommandResult q = Cli("query cli_csv --q 0.1,0.2,-0.3,0.4 --path " + path);
    ASSERT_EQ(q.exit_code, 0) << Describe(q);
    EXPECT_TRUE(Contains(q.out, "y_hat    [")) << q.out;
    EXPECT_TRUE(Contains(q.out, "path     " + path)) << q.out;
    EXPECT_TRUE(Contains(q.out, "1000 events")) << q.out;
    for (const char* field : {"den ", "rj_gap ", "margin ", "shr ", "version "}) {
      EXPECT_TRUE(Contains(q.out, field)) << field;
    }
  }
  CommandResult json = Cli("query cli_csv --q-json '[0.1, 0.2, -0.3, 0.4]' --json");
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  EXPECT_EQ(nlohmann::json::parse(json.out)["y_hat"].size(), 2u);
}

// The ridge and vla engines from the CLI: create, describe, ingest and query show each
// engine's own figures, not the prf ones. Two bindings with orthogonal keys are recalled.
TEST_F(ClientCliTest, RidgeAndVlaModelsFromCreateToQuery) {
  const std::string csv = TempPath("bindings.csv");
  {
    std::ofstream f(csv);
    f << "t,k0,k1,k2,k3,v0,v1\n1,1,0,0,0,3,0\n2,0,1,0,0,0,-2\n";
  }
  for (const std::string engine : {"ridge", "vla"}) {
    SCOPED_TRACE(engine);
    const std::string model = "cli_" + engine;
    CommandResult created = Cli("create --name " + model + " --engine " + engine + " --d 4 --dv 2");
    ASSERT_EQ(created.exit_code, 0) << Describe(created);
    EXPECT_TRUE(Contains(created.out, "sau:" + engine)) << created.out;
    EXPECT_FALSE(Contains(created.out, "W digest")) << created.out;

    CommandResult in = Cli("ingest " + model + " " + csv);
    ASSERT_EQ(in.exit_code, 0) << Describe(in);
    EXPECT_TRUE(Contains(in.out, engine == "ridge" ? "scale (max |k|^2) 1" : "|S|_F"))
        << in.out;
    EXPECT_FALSE(Contains(in.out, "margin")) << in.out;

    CommandResult q = Cli("query " + model + " --q 0,1,0,0");
    ASSERT_EQ(q.exit_code, 0) << Describe(q);
    EXPECT_TRUE(Contains(q.out, "engine   " + engine)) << q.out;
    EXPECT_TRUE(Contains(q.out, engine == "ridge" ? "condition" : "|S|_F")) << q.out;
    CommandResult json = Cli("query " + model + " --q 0,1,0,0 --json");
    ASSERT_EQ(json.exit_code, 0) << Describe(json);
    const nlohmann::json y = nlohmann::json::parse(json.out)["y_hat"];
    ASSERT_EQ(y.size(), 2u);
    EXPECT_NEAR(y[0].get<double>(), 0.0, 0.01) << json.out;
    EXPECT_NEAR(y[1].get<double>(), -2.0, 0.01) << json.out;
  }
  CommandResult bad = Cli("create --name cli_bad_engine --engine softmax --d 4 --dv 2");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(Contains(bad.err, "--engine: expected prf, ridge or vla, got 'softmax'"))
      << Describe(bad);
}

TEST_F(ClientCliTest, IngestJsonlGroupsRoutingKeysAcrossShards) {
  CreateModel("cli_jsonl", "--shards 4");
  const std::string jsonl = TempPath("events.jsonl");
  {
    std::ofstream f(jsonl);
    for (int i = 1; i <= 400; ++i) {
      nlohmann::json line = {{"t", i},
                             {"k", {Value(i, 0), Value(i, 1), Value(i, 2), Value(i, 3)}},
                             {"v", {Value(i, 4), Value(i, 5)}},
                             {"key", "user-" + std::to_string(i / 50)}};
      f << line.dump() << "\n";
    }
  }
  CommandResult r = Cli("ingest cli_jsonl " + jsonl);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // 9 runs of consecutive equal keys (i / 50 = 0..8) -> 9 batches.
  EXPECT_TRUE(Contains(r.out, "400 events read, 400 applied, 0 duplicates, 0 of 9 batches rejected"))
      << r.out;
  CommandResult d = Cli("describe cli_jsonl --json");
  ASSERT_EQ(d.exit_code, 0);
  uint64_t events = 0;
  const nlohmann::json info = nlohmann::json::parse(d.out);
  for (const auto& shard : info["shards"]) {
    events += std::stoull(shard["events"].get<std::string>());
  }
  EXPECT_EQ(events, 400u);
}

TEST_F(ClientCliTest, IngestBadJsonlLineNamesFileLineAndColumn) {
  CreateModel("cli_badline");
  const std::string jsonl = TempPath("bad.jsonl");
  {
    std::ofstream f(jsonl);
    f << R"({"k": [1, 2, 3, 4], "v": [1, 2]})" << "\n";
    f << R"({"k": [1, 2, 3, 4], "v": [1, 2]})" << "\n";
    f << "\n";
    f << R"({"k": [1, 2, 3], "v": [1, 2]})" << "\n";
    f << R"({"k": [1, 2, 3, 4], "v": [1, 2]})" << "\n";
  }
  CommandResult r = Cli("ingest cli_badline " + jsonl);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "error: INVALID_ARGUMENT: " + jsonl +
                                  ":4:2: field \"k\": expected an array of 4 numbers, got an array of 3"))
      << Describe(r);
  EXPECT_TRUE(Contains(r.out, "2 events read, 2 applied")) << r.out;
}

TEST_F(ClientCliTest, IngestBadCsvFieldNamesTheColumn) {
  CreateModel("cli_badcsv");
  const std::string csv = TempPath("bad.csv");
  std::ofstream(csv) << "k0,k1,k2,k3,v0,v1\n1,2,3,4,5,6\n1,2,x3,4,5,6\n";
  CommandResult r = Cli("ingest cli_badcsv " + csv);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_TRUE(Contains(r.err, csv + ":3:5: column 'k2': expected a finite number, got 'x3'"))
      << Describe(r);
}

TEST_F(ClientCliTest, IngestRefusesANumberBeyondADoubleAndADuplicateKeyNamingTheLine) {
  CreateModel("cli_strict");
  struct Case {
    std::string scenario;
    std::string second_line;
    std::string needle;  // after "path:"
  };
  const Case cases[] = {
      {"number beyond a double", R"({"k": [1, 2, 3, 1e400], "v": [1, 2]})",
       "2:21: invalid JSON: number 1e400 is out of the range of a double"},
      {"duplicate key", R"({"t": 5, "k": [1, 2, 3, 4], "v": [1, 2], "t": 6})",
       "2:42: invalid JSON: duplicate key \"t\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    const std::string jsonl = TempPath("strict.jsonl");
    std::ofstream(jsonl) << R"({"k": [1, 2, 3, 4], "v": [1, 2]})" << "\n" << c.second_line << "\n";
    CommandResult r = Cli("ingest cli_strict " + jsonl);
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_TRUE(Contains(r.err, "error: INVALID_ARGUMENT: " + jsonl + ":" + c.needle))
        << Describe(r);
  }
}

TEST_F(ClientCliTest, FilesWithAUtf8ByteOrderMarkAreRead) {
  CreateModel("cli_bom");
  const std::string csv = TempPath("bom.csv");
  std::ofstream(csv) << "\xEF\xBB\xBFt,k0,k1,k2,k3,v0,v1\n1,1,0,0,0,1,1\n2,0,1,0,0,1,1\n";
  CommandResult r = Cli("ingest cli_bom " + csv);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "2 events read, 2 applied")) << r.out;

  const std::string spec = TempPath("bom.json");
  std::ofstream(spec) << "\xEF\xBB\xBF"
                      << R"({"name": "cli_bom_spec", "sau": {"d": 4, "d_v": 2, "r": 64}})";
  r = Cli("create --spec-json " + spec);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "created model cli_bom_spec")) << r.out;
}

TEST_F(ClientCliTest, NamesAndRoutingKeysThatAreNotUtf8AreRefusedBeforeReachingTheServer) {
  CreateModel("cli_utf8");
  const std::string csv = TempPath("events.csv");
  std::ofstream(csv) << "k0,k1,k2,k3,v0,v1\n1,0,0,0,1,1\n";
  const std::string bad_key_csv = TempPath("bad_key.csv");
  std::ofstream(bad_key_csv) << "k0,k1,k2,k3,v0,v1,key\n1,0,0,0,1,1,good\n1,0,0,0,1,1,b\xff"
                             << "d\n";
  const std::string svm = TempPath("samples.svm");
  std::ofstream(svm) << "1 3:1\n";
  // sh's printf writes the bytes: \377 = 0xff, \300\257 = an overlong '/'.
  const std::string bad_name = "\"$(printf 'cli\\377')\"";
  const std::string bad_key = "\"$(printf 'user\\300\\257')\"";
  const std::string name_error =
      "error: INVALID_ARGUMENT: model name is not valid UTF-8 (byte 4 is 0xff)";
  const std::string key_error =
      "error: INVALID_ARGUMENT: --routing-key is not valid UTF-8 (byte 5 is 0xc0)";
  struct Case {
    std::string args;
    std::string needle;
  };
  const Case cases[] = {
      {"describe " + bad_name, name_error},
      {"query " + bad_name + " --q 1,2,3,4", name_error},
      {"query cli_utf8 --q 1,2,3,4 --routing-key " + bad_key, key_error},
      {"ingest " + bad_name + " " + csv, name_error},
      {"ingest cli_utf8 " + csv + " --routing-key " + bad_key, key_error},
      {"ingest cli_utf8 " + bad_key_csv,
       bad_key_csv + ":3:13: column 'key' is not valid UTF-8 (byte 2 is 0xff)"},
      {"train " + bad_name + " " + svm, name_error},
      {"train cli_utf8 " + svm + " --routing-key " + bad_key, key_error},
      {"predict " + bad_name + " --x 1:1", name_error},
      {"predict cli_utf8 --x 1:1 --routing-key " + bad_key, key_error},
      {"fuse-predict cli_utf8 --x 1:1 --q 1,2,3,4 --routing-key " + bad_key, key_error},
      {"snapshot " + bad_name, name_error},
      {"audit head " + bad_name, name_error},
      {"audit export " + bad_name, name_error},
      {"audit verify " + bad_name, name_error},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    CommandResult r = Cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_TRUE(Contains(r.err, c.needle)) << Describe(r);
  }
  // The good line before the bad key was sent; nothing else reached the model.
  CommandResult d = Cli("describe cli_utf8 --json");
  ASSERT_EQ(d.exit_code, 0) << Describe(d);
  EXPECT_EQ(nlohmann::json::parse(d.out)["shards"][0]["events"], "1") << d.out;
}

TEST_F(ClientCliTest, BatchesRejectedByTheServerAreListedAndFailTheRun) {
  CreateModel("cli_reject");
  const std::string csv = TempPath("big.csv");
  {
    std::ofstream f(csv);
    f << "k0,k1,k2,k3,v0,v1\n";
    for (int i = 1; i <= 1500; ++i) f << "1,0,0,0,1,1\n";
  }
  // The test server takes at most kServerMaxBatch events per request.
  CommandResult r = Cli("ingest cli_reject " + csv + " --batch 1200");
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "rejected batch 0 (lines 2-1201, routing key 'default'): INVALID_ARGUMENT"))
      << Describe(r);
  EXPECT_TRUE(Contains(r.out, "300 applied")) << r.out;
  EXPECT_TRUE(Contains(r.out, "1 of 2 batches rejected")) << r.out;
}

TEST_F(ClientCliTest, QueryAndUsageErrors) {
  CreateModel("cli_qerr");
  struct Case {
    std::string args;
    int exit_code;
    std::string needle;
  };
  const Case cases[] = {
      {"query cli_qerr --q 0.1,0.2", 1, "error: INVALID_ARGUMENT"},
      {"query no_such_model --q 0.1,0.2,0.3,0.4", 1, "error: NOT_FOUND"},
      {"query cli_qerr --q 0.1,abc", 2, "--q: item 2 'abc'"},
      {"query cli_qerr --q-json '[1, 2'", 2, "--q-json"},
      {"query cli_qerr", 2, "exactly one of --q and --q-json"},
      {"query cli_qerr --q 1,2,3,4 --path fast", 2, "--path"},
      {"describe no_such_model", 1, "error: NOT_FOUND"},
      {"ingest cli_qerr /nonexistent/events.csv", 2, "error: NOT_FOUND"},
      {"ingest cli_qerr events.txt", 2, "--format"},
      {"frobnicate", 2, "unknown command 'frobnicate'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    CommandResult r = Cli(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << Describe(r);
    EXPECT_TRUE(Contains(r.err, c.needle)) << Describe(r);
  }
  const test_util::ClosedPort closed;  // refuses connections until the test ends
  CommandResult down = RunCommand(kCli + " --server " + closed.address() + " list");
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_TRUE(Contains(down.err, "error: UNAVAILABLE")) << Describe(down);
}

TEST_F(ClientCliTest, PythonExampleRunsGreen) {
  ASSERT_EQ(access("/usr/bin/python3", X_OK), 0) << "/usr/bin/python3 is required";
  CommandResult r = RunCommand("/usr/bin/python3 " + kPythonExample + " --server " + address_ +
                        " --proto-dir " + kProtoDir + " --model cli_python");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "created model 'cli_python'")) << r.out;
  EXPECT_TRUE(Contains(r.out, "ingested 100 events: 100 applied")) << r.out;
  EXPECT_TRUE(Contains(r.out, "y_hat [")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\nok\n")) << r.out;

  CommandResult bad = RunCommand("/usr/bin/python3 " + kPythonExample + " --server " + address_ +
                          " --proto-dir /nonexistent");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(Contains(bad.err, "error: no .proto files")) << Describe(bad);
}

TEST_F(ClientCliTest, DemoPrintsItsTableAndExitsZero) {
  CommandResult r = RunCommand(kDemo + " --server " + address_ +
                        " --model cli_demo --events 3000 --every 500");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (const char* needle : {"created model 'cli_demo'", "SAU correctness", "SAU stabilized",
                             "exact", "margin", "lambda*", "summary: 3000 events",
                             "phase A (DGP-A)", "phase C (DGP-C drift)", "C:0 *"}) {
    EXPECT_TRUE(Contains(r.out, needle)) << needle << "\n" << r.out;
  }
  // Reusing the model continues after its last t: nothing is a duplicate.
  CommandResult again = RunCommand(kDemo + " --server " + address_ +
                            " --model cli_demo --events 640 --quiet");
  ASSERT_EQ(again.exit_code, 0) << Describe(again);
  EXPECT_TRUE(Contains(again.out, "reusing model 'cli_demo'")) << again.out;
  EXPECT_TRUE(Contains(again.out, "640 applied, 0 duplicates")) << again.out;
  EXPECT_FALSE(Contains(again.out, "SAU correctness")) << again.out;  // --quiet
}

}  // namespace
}  // namespace streamlearn
