// End to end: the `streamlearn` CLI's LMU commands (create --lmu, train, predict, describe),
// run as a child process against an in-process server with a fixed LMU secret.

#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/lmu/lmu_learner.h"
#include "fmt/format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/test_server.h"
#include "tests/command_runner.h"

namespace streamlearn {
namespace {

using ::streamlearn::test_util::CommandResult;
using ::streamlearn::test_util::Contains;
using ::streamlearn::test_util::Describe;
using ::streamlearn::test_util::RunCommand;
using ::streamlearn::test_util::TempPath;

const std::string kCli = STREAMLEARN_BINARY_DIR "/client/streamlearn";
constexpr size_t kServerMaxBatch = 1000;

lmu::HashSecret Secret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(3 * i + 1);
  return s;
}

// Line i of the generated libsvm file: ids spread over 0..1999 (so the small delta of the
// test model rebuilds), values and targets smooth functions of i.
struct LibsvmLine {
  double y;
  std::vector<std::pair<uint64_t, double>> x;
};
LibsvmLine Line(int i) {
  LibsvmLine l;
  l.y = std::sin(0.1 * i);
  for (int j = 0; j < 4; ++j) {
    l.x.push_back({static_cast<uint64_t>((i * 7919 + j * 104729) % 2000),
                   std::cos(0.3 * i + j)});
  }
  return l;
}

// Line i's x as LMU features.
std::vector<lmu::Feature> FeaturesOf(const LibsvmLine& l) {
  std::vector<lmu::Feature> x;
  for (const auto& [id, val] : l.x) x.push_back({id, val});
  return x;
}

// Steps an in-process learner through lines 1..lines, as the server trains them.
void TrainOnLines(int lines, lmu::LmuLearner* learner) {
  std::vector<double> y_before(1);
  for (int i = 1; i <= lines; ++i) {
    const LibsvmLine l = Line(i);
    ASSERT_TRUE(learner->Step(FeaturesOf(l), {&l.y, 1}, NAN, NAN, y_before.data()).ok());
  }
}

std::string WriteLibsvm(int lines) {
  const std::string path = TempPath("train.svm");
  std::ofstream f(path);
  f.precision(17);
  for (int i = 1; i <= lines; ++i) {
    const LibsvmLine l = Line(i);
    f << l.y;
    for (const auto& [id, val] : l.x) f << " " << id << ":" << val;
    f << "\n";
  }
  return path;
}

class ClientLmuCliTest : public test_util::SharedServerSuite<ClientLmuCliTest> {
 public:
  static server::Server::Options SuiteOptions() {
    server::Server::Options options;
    options.max_batch = kServerMaxBatch;
    options.lmu_secret = Secret();
    return options;
  }

 protected:

  // `streamlearn --server ADDR <args>`
  static CommandResult Cli(const std::string& args) {
    return RunCommand(kCli + " --server " + address_ + " " + args);
  }

  // An LMU-only model whose delta (C = 4 * 64 = 256) rebuilds every ~150 new ids.
  static void CreateLmuModel(const std::string& name, const std::string& extra = "") {
    CommandResult r = Cli("create --name " + name +
                          " --lmu --no-sau --delta-buckets 64 --lambda-max 10 --margin 10 " +
                          extra);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
  }

};


TEST_F(ClientLmuCliTest, CreateTrainPredictDescribeOnAnLmuOnlyModel) {
  CommandResult created = Cli(
      "create --name cli_lmu --lmu --no-sau --shards 2 --m 1 --lr 0.1 --l2 0.01 "
      "--schedule inverse-sqrt --delta-buckets 64 --tau-low 0.5 --tau-high 0.9 --lambda-max 10 "
      "--rebuild-seconds 2 --margin 20 --inline-rebuild --json");
  ASSERT_EQ(created.exit_code, 0) << Describe(created);
  const nlohmann::json info = nlohmann::json::parse(created.out);
  EXPECT_FALSE(info["spec"].contains("sau"));
  EXPECT_EQ(info["spec"]["lmu"]["lr"], 0.1);
  EXPECT_EQ(info["spec"]["lmu"]["schedule"], "LR_SCHEDULE_INVERSE_SQRT");
  EXPECT_EQ(info["spec"]["lmu"]["delta_buckets"], 64);
  EXPECT_EQ(info["spec"]["lmu"]["tau_low"], 0.5);
  EXPECT_EQ(info["spec"]["lmu"]["rebuild_seconds"], 2.0);
  EXPECT_EQ(info["spec"]["lmu"]["inline_rebuild"], true);
  EXPECT_EQ(info["lmu_shards"].size(), 2u);

  const std::string svm = WriteLibsvm(3000);
  CommandResult trained = Cli("train cli_lmu " + svm + " --batch 100 --routing-key u7");
  ASSERT_EQ(trained.exit_code, 0) << Describe(trained);
  EXPECT_TRUE(Contains(trained.out, "3000 samples read, 3000 applied, 0 duplicates, 0 of 30 "
                                    "batches rejected"))
      << trained.out;
  EXPECT_TRUE(Contains(trained.out, "2000 ids inserted")) << trained.out;
  EXPECT_TRUE(Contains(trained.out, "final version: shard")) << trained.out;
  EXPECT_TRUE(Contains(trained.out, "max probes: lookup")) << trained.out;

  // Again: nothing applied twice.
  CommandResult again = Cli("train cli_lmu " + svm + " --batch 100 --routing-key u7");
  ASSERT_EQ(again.exit_code, 0) << Describe(again);
  EXPECT_TRUE(Contains(again.out, "0 applied, 3000 duplicates")) << again.out;

  // The prediction equals an in-process learner's fed the same lines, bit for bit.
  absl::StatusOr<std::shared_ptr<Model>> model = server_->registry().Find("cli_lmu");
  ASSERT_TRUE(model.ok());
  lmu::LmuLearner reference((*model)->spec().lmu, Secret());
  ASSERT_NO_FATAL_FAILURE(TrainOnLines(3000, &reference));
  const std::vector<lmu::Feature> probe = {{7, 0.5}, {1999, -1.25}, {123456, 3}};
  double expected = 0;
  reference.Predict(probe, &expected);
  CommandResult predicted = Cli("predict cli_lmu --x \"7:0.5, 1999:-1.25,123456:3\" "
                                "--routing-key u7 --json");
  ASSERT_EQ(predicted.exit_code, 0) << Describe(predicted);
  const nlohmann::json p = nlohmann::json::parse(predicted.out);
  ASSERT_EQ(p["y_hat"].size(), 1u);
  EXPECT_EQ(p["y_hat"][0].get<double>(), expected);

  CommandResult text = Cli("predict cli_lmu --x 7:0.5 --routing-key u7");
  ASSERT_EQ(text.exit_code, 0) << Describe(text);
  for (const char* needle : {"y_hat", "ver_base", "ver_delta", "probes"}) {
    EXPECT_TRUE(Contains(text.out, needle)) << needle << "\n" << text.out;
  }

  CommandResult described = Cli("describe cli_lmu");
  ASSERT_EQ(described.exit_code, 0) << Describe(described);
  for (const char* needle :
       {"parts         lmu", "lr=0.1 (inverse-sqrt)",
        "C=256 (64 buckets x b=4, grows to 256 buckets under pressure)", "tau_low=0.5",
        "(inline)", "samples 3000", "keys base", "delta load", "ring 0/16", "stash",
        "emergency no", "frozen no", "rebuilds", "T_rb last", "probes locate", "(bound",
        "tripwires 0", "delta growths 0", "state digest"}) {
    EXPECT_TRUE(Contains(described.out, needle)) << needle << "\n" << described.out;
  }
  EXPECT_FALSE(Contains(described.out, "W digest")) << described.out;
  // The trained shard rebuilt; its probe maxima stayed within their bounds.
  CommandResult json = Cli("describe cli_lmu --json");
  ASSERT_EQ(json.exit_code, 0) << Describe(json);
  uint64_t rebuilds = 0;
  const nlohmann::json described_json = nlohmann::json::parse(json.out);
  for (const nlohmann::json& shard : described_json["lmu_shards"]) {
    rebuilds += std::stoull(shard.value("rebuilds", std::string("0")));
    EXPECT_LE(shard.value("max_locate_probes", 0), shard.value("locate_bound", 0));
    EXPECT_LE(shard.value("max_insert_probes", 0), shard.value("insert_bound", 0));
  }
  EXPECT_GT(rebuilds, 0u);

  CommandResult list = Cli("list");
  ASSERT_EQ(list.exit_code, 0) << Describe(list);
  EXPECT_TRUE(Contains(list.out, "cli_lmu")) << list.out;
  EXPECT_TRUE(Contains(list.out, "parts")) << list.out;
}

// predict --file: one line per sample, each the prediction an in-process learner fed the same
// lines gives (bit for bit: printed with 17 digits), in batches that end on a partial one; the
// mean squared error on stderr; more samples per request than the server takes is refused.
TEST_F(ClientLmuCliTest, PredictFilePrintsEverySamplesPredictionAndTheError) {
  CreateLmuModel("cli_lmu_pf");
  const std::string svm = WriteLibsvm(2500);
  CommandResult trained = Cli("train cli_lmu_pf " + svm + " --routing-key k");
  ASSERT_EQ(trained.exit_code, 0) << Describe(trained);
  absl::StatusOr<std::shared_ptr<Model>> model = server_->registry().Find("cli_lmu_pf");
  ASSERT_TRUE(model.ok());
  lmu::LmuLearner reference((*model)->spec().lmu, Secret());
  ASSERT_NO_FATAL_FAILURE(TrainOnLines(2500, &reference));

  CommandResult predicted = Cli("predict cli_lmu_pf --file " + svm + " --batch 700 --routing-key k");
  ASSERT_EQ(predicted.exit_code, 0) << Describe(predicted);
  std::istringstream lines(predicted.out);
  std::string text;
  double squared_error = 0;
  int i = 0;
  while (std::getline(lines, text)) {
    ++i;
    ASSERT_LE(i, 2500);
    const LibsvmLine l = Line(i);
    double expected = 0;
    reference.Predict(FeaturesOf(l), &expected);
    ASSERT_EQ(std::stod(text), expected) << "line " << i << ": " << text;
    squared_error += (expected - l.y) * (expected - l.y);
  }
  EXPECT_EQ(i, 2500);
  EXPECT_TRUE(Contains(predicted.err, "predicted 2500 samples of " + svm)) << predicted.err;
  EXPECT_TRUE(Contains(predicted.err, fmt::format("mean squared error {:.6g}",
                                                  squared_error / 2500)))
      << predicted.err;

  CommandResult too_big = Cli("predict cli_lmu_pf --file " + svm + " --batch 1001");
  EXPECT_EQ(too_big.exit_code, 1) << Describe(too_big);
  EXPECT_TRUE(Contains(too_big.err, "1001 samples; at most 1000 (max_batch)")) << too_big.err;
  EXPECT_TRUE(Contains(too_big.err, "the batch of lines 1-1001")) << too_big.err;
  CommandResult both = Cli("predict cli_lmu_pf --file " + svm + " --x 1:1");
  EXPECT_EQ(both.exit_code, 2) << Describe(both);
  EXPECT_TRUE(Contains(both.err, "--file takes neither --x nor --json")) << both.err;
}

TEST_F(ClientLmuCliTest, TrainVwFileOnAnSauPlusLmuModelAndStopAtABadLine) {
  CommandResult created =
      Cli("create --name cli_vw --d 4 --dv 2 --r 16 --lmu --m 2 --delta-buckets 64 "
          "--max-delta-buckets 64 --lambda-max 10 --margin 10");
  ASSERT_EQ(created.exit_code, 0) << Describe(created);
  EXPECT_TRUE(Contains(created.out, "parts         sau+lmu")) << created.out;
  EXPECT_TRUE(Contains(created.out, "C=256 (64 buckets x b=4, never grows)")) << created.out;
  EXPECT_TRUE(Contains(created.out, "W digest")) << created.out;

  const std::string vw = TempPath("clicks.vw");
  std::ofstream(vw) << "1,0 |user age:0.5 tall |ad id_93\n"
                       "0,1 2 'r2|user age:0.1 |ad id_7\n"
                       "\n"
                       "-1,0.5 |user short\n";
  CommandResult r = Cli("train cli_vw " + vw);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "3 samples read, 3 applied")) << r.out;
  // user^age, user^tall, ad^id_93, ad^id_7, user^short
  EXPECT_TRUE(Contains(r.out, "5 ids inserted")) << r.out;

  const std::string bad = TempPath("bad.vw");
  std::ofstream(bad) << "1,0 |a x\n0,1 |a y\n1 |a z\n";
  CommandResult b = Cli("train cli_vw " + bad + " --t-offset 10");
  EXPECT_EQ(b.exit_code, 2) << Describe(b);
  EXPECT_TRUE(Contains(b.err, "error: INVALID_ARGUMENT: " + bad + ":3:1: y: expected 2")) << b.err;
  EXPECT_TRUE(Contains(b.err, "the samples before it were sent")) << b.err;
  EXPECT_TRUE(Contains(b.out, "2 samples read, 2 applied")) << b.out;
}

TEST_F(ClientLmuCliTest, BadLinesAndServerRejectionsAreReportedWithFileAndLine) {
  CreateLmuModel("cli_lmu_bad");
  const std::string svm = TempPath("bad.svm");
  std::ofstream(svm) << "1 1:1 2:0.5\n0.5 3:1 4:x\n";
  CommandResult r = Cli("train cli_lmu_bad " + svm);
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_TRUE(Contains(r.err, svm + ":2:11: value of id 4: expected a finite number, got 'x'"))
      << r.err;

  const std::string ids = TempPath("ids.svm");
  std::ofstream(ids) << "1 user:1\n";
  CommandResult s = Cli("train cli_lmu_bad " + ids + " --t-offset 100");
  EXPECT_EQ(s.exit_code, 2) << Describe(s);
  EXPECT_TRUE(Contains(s.err, ids + ":1:3: id 'user'")) << s.err;
  CommandResult hashed = Cli("train cli_lmu_bad " + ids + " --t-offset 100 --hash-strings");
  EXPECT_EQ(hashed.exit_code, 0) << Describe(hashed);

  // An importance weight that makes the lr override leave (0, 10]: the server rejects the
  // batch, naming the sample; the CLI maps it back to its line.
  const std::string vw = TempPath("weight.vw");
  std::ofstream(vw) << "1 |a x\n1 1000 |a y\n";
  CommandResult rejected = Cli("train cli_lmu_bad " + vw + " --t-offset 200");
  EXPECT_EQ(rejected.exit_code, 1) << Describe(rejected);
  EXPECT_TRUE(Contains(rejected.err, vw + ":2: rejected batch 0 (lines 1-2): INVALID_ARGUMENT: "
                                          "sample 1 (t=202): lr override"))
      << rejected.err;
  EXPECT_TRUE(Contains(rejected.out, "1 of 1 batches rejected")) << rejected.out;
}

TEST_F(ClientLmuCliTest, UsageAndPartErrorsAreClear) {
  struct Case {
    std::string args;
    int exit_code;
    std::string needle;
  };
  CommandResult sau = Cli("create --name cli_sau_only --d 4 --dv 2 --r 16");
  ASSERT_EQ(sau.exit_code, 0) << Describe(sau);
  CreateLmuModel("cli_lmu_only");
  const Case cases[] = {
      {"create --name x --lmu", 2, "--no-sau for an LMU-only model"},
      {"create --name x --no-sau", 2, "--no-sau needs --lmu"},
      {"create --name x --no-sau --lmu --d 4", 2, "--no-sau contradicts"},
      {"create --name x --lmu --no-sau --schedule weekly", 2, "--schedule: expected constant"},
      {"create --name x --lmu --no-sau --delta-buckets 100", 1, "lmu.delta_buckets"},
      {"train cli_sau_only /dev/null", 1, "FAILED_PRECONDITION: model 'cli_sau_only' has no lmu"},
      {"train cli_lmu_only /no/such/file.svm", 2, "does not exist"},
      {"train cli_lmu_only", 2, "train takes a model name and a file"},
      {"train cli_lmu_only /dev/null --format csv", 2, "unknown sample format 'csv'"},
      {"predict cli_sau_only --x 1:1", 1, "FAILED_PRECONDITION: model 'cli_sau_only' has no lmu"},
      {"predict cli_lmu_only", 2, "pass --x"},
      {"predict cli_lmu_only --x 1:nan", 2, "not a finite number"},
      {"predict cli_lmu_only --x abc", 2, "expected id:value"},
      {"ingest cli_lmu_only /dev/null --format csv", 1, "has no sau part"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    CommandResult r = Cli(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << Describe(r);
    EXPECT_TRUE(Contains(r.err, c.needle)) << Describe(r);
  }
}

}  // namespace
}  // namespace streamlearn
