// The C++ client's LMU side: Client::Predict, LmuUpdateSession against an in-process server,
// and the libsvm / VW line parsers (no server).

#include <unistd.h>

#include <atomic>
#include <bit>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "client/lib/client.h"
#include "client/lib/lmu_update_session.h"
#include "client/lib/number_parse.h"
#include "client/lib/sample_file.h"
#include "client/lib/sample_parsers.h"
#include "core/common/routing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

using ::testing::HasSubstr;

v1::ModelSpec LmuSpec(const std::string& name, uint32_t shards = 1, uint32_t m = 1) {
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.set_shards(shards);
  spec.mutable_lmu()->set_m(m);
  spec.mutable_lmu()->set_inline_rebuild(true);
  return spec;
}

// n samples with t = first_t, ...; ids 1..5 shifted by t, y = t mod 3.
v1::UpdateRequest Batch(const std::string& key, uint64_t first_t, int n) {
  v1::UpdateRequest r;
  r.set_routing_key(key);
  for (int i = 0; i < n; ++i) {
    v1::Sample* s = r.add_samples();
    const uint64_t t = first_t + i;
    s->set_t(t);
    for (uint64_t j = 1; j <= 5; ++j) {
      s->add_ids(j + t % 50);
      s->add_vals(0.1 * static_cast<double>(j));
    }
    s->add_y(static_cast<double>(t % 3));
  }
  return r;
}

class ClientLmuSessionTest : public test_util::SharedServerSuite<ClientLmuSessionTest> {
 public:
  static server::Server::Options SuiteOptions() {
    server::Server::Options options;
    options.lmu_secret = lmu::HashSecret{1, 2, 3};
    return options;
  }

 protected:

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Client>> client = test_util::ConnectClient(address_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  std::unique_ptr<Client> client_;
};


TEST_F(ClientLmuSessionTest, PipelinedUpdatesAreAcknowledgedInOrderAndPredictReadsThem) {
  ASSERT_TRUE(client_->CreateModel(LmuSpec("sess_lmu", 3)).ok());
  std::vector<uint64_t> batches;
  std::mutex mu;
  uint64_t last_ver_delta = 0;
  LmuUpdateSession::Options options;
  options.window = 4;
  options.on_ack = [&](const UpdateResult& r) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.ack.shard(), r.expected_shard);
    EXPECT_EQ(r.events, 20u);
    batches.push_back(r.batch);
    last_ver_delta = r.ack.ver_delta();
  };
  absl::StatusOr<std::unique_ptr<LmuUpdateSession>> session =
      client_->OpenLmuUpdate("sess_lmu", options);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int b = 0; b < 30; ++b) ASSERT_TRUE((*session)->Send(Batch("u1", 1 + 20 * b, 20)).ok());
  ASSERT_TRUE((*session)->Finish().ok());
  const BatchStats stats = (*session)->stats();
  EXPECT_EQ(stats.batches_acked, 30u);
  EXPECT_EQ(stats.events_applied, 600u);
  EXPECT_EQ(stats.batches_rejected, 0u);
  ASSERT_EQ(batches.size(), 30u);
  for (uint64_t i = 0; i < batches.size(); ++i) EXPECT_EQ(batches[i], i);

  const std::vector<uint64_t> ids = {3, 4, 5};
  const std::vector<double> vals = {1.0, 0.5, -0.25};
  absl::StatusOr<v1::PredictResponse> p = client_->Predict("sess_lmu", "u1", ids, vals);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->shard(), ShardFor("u1", 3));
  EXPECT_EQ(p->ver_delta(), last_ver_delta);
  ASSERT_EQ(p->y_hat_size(), 1);
  EXPECT_NE(p->y_hat(0), 0.0);
}

// Several samples in one Predict (counts): each gets what a Predict of it alone gets, bit for
// bit, m values per sample; a bad request names its problem and predicts nothing.
TEST_F(ClientLmuSessionTest, PredictManyGivesEachSampleItsOwnPredictionAndRefusesBadInput) {
  ASSERT_TRUE(client_->CreateModel(LmuSpec("sess_lmu_many", 2, /*m=*/2)).ok());
  auto session = client_->OpenLmuUpdate("sess_lmu_many", {});
  ASSERT_TRUE(session.ok()) << session.status();
  for (int b = 0; b < 10; ++b) {
    v1::UpdateRequest r = Batch("u", 1 + 20 * b, 20);
    for (v1::Sample& s : *r.mutable_samples()) s.add_y(0.5);  // m = 2
    ASSERT_TRUE((*session)->Send(std::move(r)).ok());
  }
  ASSERT_TRUE((*session)->Finish().ok());

  // 40 samples of 1 to 7 features: known ids (1..55) and unknown ones (1000+).
  std::vector<uint64_t> ids;
  std::vector<double> vals;
  std::vector<uint32_t> counts;
  for (uint32_t s = 0; s < 40; ++s) {
    const uint32_t n = 1 + s % 7;
    for (uint32_t j = 0; j < n; ++j) {
      ids.push_back(j % 3 == 2 ? 1000 + s : 1 + (s * 7 + j) % 55);
      vals.push_back(0.25 * static_cast<double>(j) - 0.5);
    }
    counts.push_back(n);
  }
  absl::StatusOr<v1::PredictResponse> many =
      client_->PredictMany("sess_lmu_many", "u", ids, vals, counts);
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_EQ(many->y_hat_size(), 80);
  EXPECT_EQ(many->shard(), ShardFor("u", 2));
  size_t begin = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    const std::span<const uint64_t> x_ids(ids.data() + begin, counts[s]);
    const std::span<const double> x_vals(vals.data() + begin, counts[s]);
    absl::StatusOr<v1::PredictResponse> one = client_->Predict("sess_lmu_many", "u", x_ids, x_vals);
    ASSERT_TRUE(one.ok()) << one.status();
    ASSERT_EQ(one->y_hat_size(), 2);
    for (int o = 0; o < 2; ++o) {
      EXPECT_EQ(std::bit_cast<uint64_t>(many->y_hat(static_cast<int>(2 * s) + o)),
                std::bit_cast<uint64_t>(one->y_hat(o)))
          << "sample " << s << " output " << o;
    }
    EXPECT_EQ(one->ver_base(), many->ver_base());
    EXPECT_EQ(one->ver_delta(), many->ver_delta());
    begin += counts[s];
  }

  struct Bad {
    std::string scenario;
    std::vector<uint64_t> ids;
    std::vector<double> vals;
    std::vector<uint32_t> counts;
    std::string mention;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Bad> bad = {
      {"counts short of ids", {1, 2, 3}, {1, 1, 1}, {1, 1}, "counts add up to 2 features but ids has 3"},
      {"counts past ids", {1, 2}, {1, 1}, {1, 5}, "counts add up to 6 features but ids has 2"},
      {"an empty sample", {1, 2}, {1, 1}, {1, 0, 1}, "sample 1: x is empty"},
      {"a NaN value", {1, 2, 3}, {1, 1, nan}, {2, 1}, "sample 1: x[0] (id 3) has value NaN"},
      {"vals short", {1, 2}, {1}, {1, 1}, "ids has 2 values but vals has 1"},
  };
  Bad too_many{"more than max_batch samples", {}, {}, {}, "4097 samples; at most 4096"};
  for (uint32_t s = 0; s < 4097; ++s) {
    too_many.ids.push_back(s);
    too_many.vals.push_back(1);
    too_many.counts.push_back(1);
  }
  bad.push_back(too_many);
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.scenario);
    absl::StatusOr<v1::PredictResponse> r =
        client_->PredictMany("sess_lmu_many", "u", b.ids, b.vals, b.counts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(b.mention));
  }
  // Reads only: the model is where the updates left it.
  absl::StatusOr<v1::PredictResponse> again =
      client_->PredictMany("sess_lmu_many", "u", ids, vals, counts);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ver_delta(), many->ver_delta());
  EXPECT_EQ(again->y_hat_size(), 80);
}

TEST_F(ClientLmuSessionTest, RejectedBatchComesBackInItsAckAndTheSessionGoesOn) {
  ASSERT_TRUE(client_->CreateModel(LmuSpec("sess_lmu_bad")).ok());
  std::vector<absl::Status> statuses;
  LmuUpdateSession::Options options;
  options.on_ack = [&](const UpdateResult& r) { statuses.push_back(r.status); };
  auto session = client_->OpenLmuUpdate("sess_lmu_bad", options);
  ASSERT_TRUE(session.ok()) << session.status();
  v1::UpdateRequest bad = Batch("k", 1, 5);
  bad.mutable_samples(2)->add_vals(1.0);
  ASSERT_TRUE((*session)->Send(bad).ok());
  ASSERT_TRUE((*session)->Send(Batch("k", 1, 5)).ok());
  EXPECT_EQ((*session)->Send(v1::UpdateRequest()).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*session)->Finish().ok());
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(statuses[0].message(), HasSubstr("sample 2 (t=3): ids has 5 values but vals has 6"));
  EXPECT_TRUE(statuses[1].ok()) << statuses[1];
  EXPECT_EQ((*session)->stats().batches_rejected, 1u);
}

TEST_F(ClientLmuSessionTest, LmuCallsOnAModelWithoutAnLmuPartFailWithFailedPrecondition) {
  v1::ModelSpec spec;
  spec.set_name("sess_sau_only");
  spec.mutable_sau()->set_d(2);
  spec.mutable_sau()->set_d_v(1);
  spec.mutable_sau()->set_r(8);
  ASSERT_TRUE(client_->CreateModel(spec).ok());
  const std::vector<uint64_t> ids = {1};
  const std::vector<double> vals = {1.0};
  absl::Status s = client_->Predict("sess_sau_only", "k", ids, vals).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("has no lmu part"));
  EXPECT_EQ(client_->Predict("nope", "k", ids, vals).status().code(), absl::StatusCode::kNotFound);
}

// --- Line parsers (no server) ---

struct ParseCase {
  std::string scenario;
  SampleFormat format;
  int m;
  bool hash_strings;
  std::string line;
  std::vector<uint64_t> ids;  // expected, when the line is good
  std::vector<double> vals;
  std::vector<double> y;
  double weight;
};

TEST(SampleLineParserTest, GoodLinesGiveTheirIdsValuesTargetsAndWeight) {
  const std::vector<ParseCase> cases = {
      {"libsvm", SampleFormat::kLibsvm, 1, false, "1.5 3:1 17:0.25 18446744073709551615:-2",
       {3, 17, 18446744073709551615ull}, {1, 0.25, -2}, {1.5}, 1},
      {"libsvm tabs and comment", SampleFormat::kLibsvm, 1, false, "-1\t4:2   # note",
       {4}, {2}, {-1}, 1},
      {"libsvm m = 2", SampleFormat::kLibsvm, 2, false, "0.5,-1 9:1", {9}, {1}, {0.5, -1}, 1},
      {"libsvm leading zeros, a signed value, 19 and 20 digits", SampleFormat::kLibsvm, 1, false,
       "1 007:+2 9999999999999999999:1e-3 10000000000000000000:-0.5", {7, 9999999999999999999ull,
       10000000000000000000ull}, {2, 1e-3, -0.5}, {1}, 1},
      {"libsvm hashed", SampleFormat::kLibsvm, 1, true, "1 user_7:1 7:2",
       {FeatureHash("", "user_7"), FeatureHash("", "7")}, {1, 2}, {1}, 1},
      {"vw", SampleFormat::kVw, 1, false, "1 |user age:0.5 tall |ad id_93",
       {FeatureHash("user", "age"), FeatureHash("user", "tall"), FeatureHash("ad", "id_93")},
       {0.5, 1, 1}, {1}, 1},
      {"vw weight and tag", SampleFormat::kVw, 1, false, "-2 3 'row7| a b:2",
       {FeatureHash("", "a"), FeatureHash("", "b")}, {1, 2}, {-2}, 3},
      {"vw namespace scale", SampleFormat::kVw, 1, false, "0 |n:0.5 x:4",
       {FeatureHash("n", "x")}, {2}, {0}, 1},
      {"vw m = 2", SampleFormat::kVw, 2, false, "1,2 |a x", {FeatureHash("a", "x")}, {1},
       {1, 2}, 1},
  };
  for (const ParseCase& c : cases) {
    SCOPED_TRACE(c.scenario);
    SampleLineParser parser(c.format, c.m, c.hash_strings);
    SampleRecord s;
    LineError error;
    ASSERT_TRUE(parser.Parse(c.line, &s, &error)) << error.column << ": " << error.message;
    EXPECT_EQ(s.ids, c.ids);
    EXPECT_EQ(s.vals, c.vals);
    EXPECT_EQ(s.y, c.y);
    EXPECT_EQ(s.weight, c.weight);
  }
}

TEST(SampleLineParserTest, BadLinesNameTheColumnAndTheProblem) {
  struct Case {
    std::string scenario;
    SampleFormat format;
    int m;
    std::string line;
    size_t column;
    std::string mention;
  };
  const std::vector<Case> cases = {
      {"libsvm bad y", SampleFormat::kLibsvm, 1, "x 1:1", 1, "y: expected a finite number"},
      {"libsvm y count", SampleFormat::kLibsvm, 2, "1 1:1", 1, "expected 2 comma-separated"},
      {"libsvm no colon", SampleFormat::kLibsvm, 1, "1 1:1 7", 7, "expected id:value"},
      {"libsvm string id", SampleFormat::kLibsvm, 1, "1 ab:1", 3, "--hash-strings"},
      {"libsvm negative id", SampleFormat::kLibsvm, 1, "1 -3:1", 3, "unsigned"},
      {"libsvm bad value", SampleFormat::kLibsvm, 1, "1 12:nan", 6, "value of id 12"},
      {"libsvm id past 2^64", SampleFormat::kLibsvm, 1, "1 18446744073709551616:1", 3, "unsigned"},
      {"libsvm 21 digits", SampleFormat::kLibsvm, 1, "1 2:1 100000000000000000000:1", 7,
       "unsigned"},
      {"libsvm signed id", SampleFormat::kLibsvm, 1, "1 +5:1", 3, "unsigned"},
      {"libsvm no id", SampleFormat::kLibsvm, 1, "1 :1", 3, "expected id:value"},
      {"libsvm empty value", SampleFormat::kLibsvm, 1, "1 4:", 5, "value of id 4"},
      {"libsvm no features", SampleFormat::kLibsvm, 1, "1", 2, "no features"},
      {"vw no bar", SampleFormat::kVw, 1, "1 a b", 6, "expected '|'"},
      {"vw no label", SampleFormat::kVw, 1, " |a x", 1, "missing y"},
      {"vw bad weight", SampleFormat::kVw, 1, "1 -2 |a x", 3, "importance weight"},
      {"vw bad value", SampleFormat::kVw, 1, "1 |a x:y", 8, "feature 'x'"},
      {"vw no features", SampleFormat::kVw, 1, "1 |a", 5, "no features"},
      {"vw value times scale overflows", SampleFormat::kVw, 1, "1 |a:1e300 x:1e300", 12,
       "feature 'x': its value times the namespace scale is not a finite number"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scenario);
    SampleLineParser parser(c.format, c.m, false);
    SampleRecord s;
    LineError error;
    ASSERT_FALSE(parser.Parse(c.line, &s, &error));
    EXPECT_EQ(error.column, c.column) << error.message;
    EXPECT_THAT(error.message, HasSubstr(c.mention));
  }
}

// STREAMLEARN_TEST_SEED sets the seed of the random lines below (printed).
uint64_t Seed() {
  const char* env = std::getenv("STREAMLEARN_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20261202;
  std::cout << "STREAMLEARN_TEST_SEED=" << seed << std::endl;
  return seed;
}

// The libsvm parser reads ids and values where they stand, eight digits at a time; it must
// give what reading the line token by token gives (ParseUint64 for the id, ParseFiniteDouble
// for the value; the bits of each value), and fail where that fails, at the same column. The
// lines mix ids of 1 to 22 digits (leading zeros, 2^64 - 1 and 2^64, ending at every distance
// from the end of the line), plain and other values, and bad tokens.
TEST(SampleLineParserTest, LibsvmFastReadingEqualsTheTokenReading) {
  std::mt19937_64 rng(Seed());
  const std::vector<std::string> special_ids = {"18446744073709551615", "18446744073709551616",
                                                "99999999999999999999", "0",
                                                "000000000000000000000000001", "+5", "a1", "-3",
                                                ""};
  const std::vector<std::string> values = {"1",    "0.25",  "-2",   "1e-3",   "1.",  ".5",
                                           "+2",   "nan",   "",     "1:2",    "-",   "0",
                                           "-0",   "12345678901234567", "3.141592653589793",
                                           "1x",   "1.2.3", "inf",  "0.000001"};
  auto digits = [&](int n) {
    std::string d;
    for (int i = 0; i < n; ++i) d += static_cast<char>('0' + rng() % 10);
    return d;
  };
  auto blanks = [&](int least) {
    std::string b(least + static_cast<int>(rng() % 3), ' ');
    for (char& c : b) c = (rng() % 4 == 0) ? '\t' : ' ';
    return b;
  };
  SampleLineParser parser(SampleFormat::kLibsvm, 1, /*hash_strings=*/false);
  int parsed = 0, failed = 0;
  for (int n = 0; n < 40000; ++n) {
    std::string line = "1";
    std::vector<uint64_t> ids;
    std::vector<double> vals;
    size_t bad_column = 0;  // of the first bad token, as the token reading reports it
    const int features = 1 + static_cast<int>(rng() % 6);
    const bool clean = rng() % 2 == 0;  // only good tokens
    for (int f = 0; f < features; ++f) {
      line += blanks(1);
      std::string id = rng() % 8 == 0 ? special_ids[rng() % special_ids.size()]
                                      : digits(1 + static_cast<int>(rng() % 20));
      std::string val = rng() % 2 == 0 ? "1" : values[rng() % values.size()];
      if (clean) {
        id = digits(1 + static_cast<int>(rng() % 19));
        val = rng() % 2 == 0 ? "1" : "0.25";
      }
      const size_t column = line.size() + 1;
      line += id + ":" + val;
      if (bad_column != 0) continue;
      uint64_t x = 0;
      double v = 0;
      if (id.empty() || id.front() == '+' || !ParseUint64(id, &x)) {
        bad_column = column;
      } else if (!ParseFiniteDouble(val, &v)) {
        bad_column = column + id.size() + 1;
      } else {
        ids.push_back(x);
        vals.push_back(v);
      }
    }
    if (rng() % 2 == 0) line += blanks(0);
    SCOPED_TRACE(line);
    SampleRecord s;
    LineError error;
    const bool ok = parser.Parse(line, &s, &error);
    ASSERT_EQ(ok, bad_column == 0) << error.column << ": " << error.message;
    if (ok) {
      ++parsed;
      ASSERT_EQ(s.ids, ids);
      ASSERT_EQ(s.vals.size(), vals.size());
      for (size_t i = 0; i < vals.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint64_t>(s.vals[i]), std::bit_cast<uint64_t>(vals[i])) << i;
      }
    } else {
      ++failed;
      ASSERT_EQ(error.column, bad_column) << error.message;
    }
  }
  // Both kinds of line were seen, many times.
  EXPECT_GT(parsed, 10000);
  EXPECT_GT(failed, 5000);
}

// The VW parser splits sections eight bytes at a time and hashes a line's names together
// (four side by side); it must give each feature FeatureHash(namespace, name) and its value, in
// order, on lines of 1 to 3 sections, 0 to 30 features, names of 1 to 60 bytes (past one
// SHA-256 block with the namespace) and blanks of spaces and tabs anywhere between tokens.
TEST(SampleLineParserTest, VwLinesGiveEachNamesHashInOrder) {
  std::mt19937_64 rng(Seed());
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_-.^ABC";
  auto word = [&](size_t n) {
    std::string w;
    for (size_t i = 0; i < n; ++i) w += alphabet[rng() % alphabet.size()];
    return w;
  };
  auto blanks = [&](int least) {
    std::string b(least + static_cast<int>(rng() % 3), ' ');
    for (char& c : b) c = (rng() % 4 == 0) ? '\t' : ' ';
    return b;
  };
  SampleLineParser parser(SampleFormat::kVw, 1, /*hash_strings=*/false);
  for (int n = 0; n < 5000; ++n) {
    std::string line = "0.5" + blanks(0);
    std::vector<uint64_t> ids;
    std::vector<double> vals;
    const int sections = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < sections; ++k) {
      const std::string ns = rng() % 3 == 0 ? "" : word(1 + rng() % 12);
      line += "|" + ns;
      const int features = static_cast<int>(rng() % 31);
      for (int f = 0; f < features; ++f) {
        const std::string name = word(1 + rng() % 60);
        line += blanks(1) + name;
        double v = 1;
        if (rng() % 3 == 0) {
          v = static_cast<double>(rng() % 1000) / 8;
          line += ":" + std::to_string(v);
        }
        ids.push_back(FeatureHash(ns, name));
        vals.push_back(v);
      }
      line += blanks(1);
    }
    SCOPED_TRACE(line);
    SampleRecord s;
    LineError error;
    const bool ok = parser.Parse(line, &s, &error);
    if (ids.empty()) {
      ASSERT_FALSE(ok);
      EXPECT_THAT(error.message, HasSubstr("no features"));
      continue;
    }
    ASSERT_TRUE(ok) << error.column << ": " << error.message;
    ASSERT_EQ(s.ids, ids);
    ASSERT_EQ(s.vals, vals);
    ASSERT_EQ(s.y, std::vector<double>{0.5});
  }
}

TEST(SampleFileReaderTest, TIsTheLineNumberAndErrorsNameFileLineColumn) {
  // A name of this process's own: other test processes may run at the same time.
  const std::string path =
      ::testing::TempDir() + "/client_lmu_reader_" + std::to_string(getpid()) + ".svm";
  std::ofstream(path) << "1 1:1\n\n# only a comment\n2 2:1\r\n3 3:x\n";
  absl::StatusOr<std::unique_ptr<SampleFileReader>> reader =
      SampleFileReader::Open(path, SampleFormat::kLibsvm, 1, false);
  ASSERT_TRUE(reader.ok()) << reader.status();
  SampleRecord s;
  ASSERT_TRUE(*(*reader)->Next(&s));
  EXPECT_EQ(s.t, 1u);
  ASSERT_TRUE(*(*reader)->Next(&s));
  EXPECT_EQ(s.t, 4u);
  EXPECT_EQ(s.y, std::vector<double>{2});
  absl::StatusOr<bool> bad = (*reader)->Next(&s);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr(path + ":5:5: value of id 3"));
  EXPECT_EQ(SampleFormatFromPath("a/b.vw"), SampleFormat::kVw);
  EXPECT_EQ(SampleFormatFromPath("a.vw/b"), SampleFormat::kLibsvm);
  EXPECT_EQ(SampleFileReader::Open("/no/such.svm", SampleFormat::kLibsvm, 1, false)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(FeatureHashTest, IsTheRoutingHashOfNamespaceCaretFeature) {
  EXPECT_EQ(FeatureHash("user", "age"), RoutingHash("user^age"));
  EXPECT_NE(FeatureHash("user", "age"), FeatureHash("use", "rage"));
  // Fixed values, so that other implementations can check themselves against them:
  // the first 8 bytes of SHA-256("user^age") are 3b7efdf91e5b1c1b, read big-endian.
  EXPECT_EQ(FeatureHash("user", "age"), 0x3b7efdf91e5b1c1bULL);
  EXPECT_EQ(FeatureHash("", "a"), 0x5cd67a1734052155ULL);
}

}  // namespace
}  // namespace streamlearn
