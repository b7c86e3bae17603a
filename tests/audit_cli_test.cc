// The `streamlearn audit`, `snapshot` and `backup` commands, run as child processes against
// in-process servers with a data_dir: verification against the server and against exported
// files, tampering with exports and with the store, refused appends, replay of the event log
// beside a running server, snapshots and a backup restored into a second server.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "fuse.grpc.pb.h"
#include "core/audit/audit_record.h"
#include "core/audit/checkpoint.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/merkle_chain.h"
#include "core/audit/merkle_tree.h"
#include "core/audit/tree_head.h"
#include "core/workloads/dgp.h"
#include "core/common/routing.h"
#include "gtest/gtest.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"
#include "server/storage/audit_replay.h"
#include "server/server.h"
#include "server/storage/store.h"
#include "tests/command_runner.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

namespace fs = std::filesystem;
using ::streamlearn::test_util::CommandResult;
using ::streamlearn::test_util::Contains;
using ::streamlearn::test_util::Describe;
using ::streamlearn::test_util::ReadFile;
using ::streamlearn::test_util::RunCommand;
using ::streamlearn::test_util::TempPath;

const std::string kCli = STREAMLEARN_BINARY_DIR "/client/streamlearn";
constexpr char kModel[] = "drift";
constexpr uint32_t kShards = 2;
constexpr uint64_t kCheckpointEvery = 8;
constexpr int kEventsPerPhase = 3000;  // per shard; SAU state digests fall every 4096 events
constexpr int kPhases = 3;             // a snapshot after each phase but the last
constexpr int kSauBatch = 50;
constexpr int kLmuBatchesPerPhase = 8;
constexpr int kLmuBatch = 20;

server::Server::Options ServerOptions(const std::string& data_dir) {
  server::Server::Options options;
  options.metrics = "";
  options.data_dir = data_dir;
  options.audit_checkpoint_every = kCheckpointEvery;
  options.snapshot_every_steps = 0;  // snapshots only when a test asks
  options.snapshot_interval = absl::ZeroDuration();
  return options;
}

// A routing key that lands on `shard` of a model with `shards` shards.
std::string KeyForShard(uint32_t shard, uint32_t shards) {
  for (int i = 0;; ++i) {
    const std::string key = "key-" + std::to_string(i);
    if (ShardFor(key, shards) == shard) return key;
  }
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path, std::ios::binary);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const std::string& l : lines) out << l << '\n';
}

// The body of an exported envelope line.
AuditRecord BodyOf(const std::string& line) {
  absl::StatusOr<AuditRecord> env = ParseAuditJson(line);
  EXPECT_TRUE(env.ok()) << env.status();
  if (!env.ok()) return {};
  const AuditRecord* body = env->Find("body")->get_if<AuditRecord>();
  return body == nullptr ? AuditRecord{} : *body;
}

std::string KindOf(const std::string& line) {
  const AuditRecord body = BodyOf(line);
  const AuditValue* kind = body.Find("kind");
  return kind == nullptr || kind->get_if<std::string>() == nullptr ? ""
                                                                    : *kind->get_if<std::string>();
}

// A robust Farkas certificate (docs/AUDIT.md (43), (44'), (45)): from x1 <= 3 and x2 <= 4,
// x1 + 2 x2 <= 12.5. kappa sum alpha_i a_i = (1, 2) = c exactly, d - kappa sum alpha_i b_i =
// 12.5 - 11 = 1.5 >= kappa epsilon + eta_d = 1.01, and kappa epsilon = 1 > 10 (eta_c + eta_d)
// = 0.2 with the default tolerances. eta_c = 0.5 keeps (43) and (44') and breaks (45):
// 1 <= 10 (0.5 + 0.01) = 5.1.
std::string CertificateJson(double eta_c = 0.01) {
  std::ostringstream s;
  s << R"({"claim": "c.x <= d on the feasible set", "certificate": {"c": [1.0, 2.0], "d": 12.5, )"
    << R"("epsilon": 1.0, "eta_c": )" << eta_c << R"(, "eta_d": 0.01, "kappa": 1.0, "rows": [)"
    << R"({"a": [1.0, 0.0], "alpha": 1.0, "b": 3.0}, {"a": [0.0, 1.0], "alpha": 2.0, "b": 4.0}]}})";
  return s.str();
}

// Re-encodes the chain from record `from` on, as a forger holding `signer` would: each body
// (after `edit`) is hashed onto the running head again and every checkpoint is re-signed.
std::vector<std::string> Rechain(std::vector<std::string> lines, size_t from,
                                 const std::function<void(uint64_t, AuditRecord*)>& edit,
                                 const Ed25519PrivateKey& signer) {
  Digest head{};
  if (from > 0) {
    absl::StatusOr<AuditRecord> prev = ParseAuditJson(lines[from - 1]);
    EXPECT_TRUE(ParseHexDigest(*prev->Find("merkle_curr")->get_if<std::string>(), &head));
  }
  for (size_t i = from; i < lines.size(); ++i) {
    AuditRecord body = BodyOf(lines[i]);
    if (KindOf(lines[i]) == "checkpoint") {
      absl::StatusOr<AuditRecord> cp = MakeCheckpointBody(signer, i - 1, head);
      EXPECT_TRUE(cp.ok()) << cp.status();
      body = *cp;
    } else if (edit) {
      edit(i, &body);
    }
    absl::StatusOr<std::string> canon = EncodeCanonical(body);
    EXPECT_TRUE(canon.ok()) << canon.status();
    const Digest curr = MerkleStep(head, *canon);
    lines[i] = EnvelopeLine(*canon, i, head, curr);
    head = curr;
  }
  return lines;
}

// Changes one digit of the number after `"key":` in the line (the JSON stays valid).
bool FlipDigitAfter(std::string* line, const std::string& key) {
  size_t at = line->find("\"" + key + "\":");
  if (at == std::string::npos) return false;
  for (at += key.size() + 3; at < line->size(); ++at) {
    char& c = (*line)[at];
    if (c >= '0' && c <= '9') {
      c = c == '9' ? '8' : static_cast<char>(c + 1);
      return true;
    }
  }
  return false;
}

// One shard's streams: DGP-C drift (a new cluster every 400 events, so the e-process alarms
// and RJ goes red) for the SAU, a sparse linear target for the LMU.
struct ShardFeed {
  explicit ShardFeed(uint32_t shard)
      : key(KeyForShard(shard, kShards)),
        dgp({.kind = sau::Dgp::Kind::kC, .d = 8, .d_v = 4, .phase_length = 400}, 23 + shard),
        rng(7 + shard) {}
  std::string key;
  sau::Dgp dgp;
  std::mt19937_64 rng;
  uint64_t sau_t = 1, lmu_t = 1;
};

void IngestEvents(const std::shared_ptr<grpc::Channel>& channel, ShardFeed* feed, int n) {
  auto stub = v1::SAU::NewStub(channel);
  test_util::LockStepStream<v1::IngestRequest, v1::IngestAck> stream(
      [&](grpc::ClientContext* ctx) { return stub->Ingest(ctx); });
  for (int done = 0; done < n; done += kSauBatch) {
    v1::IngestRequest req;
    req.set_model(kModel);
    req.set_routing_key(feed->key);
    for (int i = 0; i < kSauBatch && done + i < n; ++i) {
      const sau::DgpEvent e = feed->dgp.Next();
      v1::Event* ev = req.add_events();
      ev->set_t(feed->sau_t++);
      ev->mutable_k()->Add(e.k.begin(), e.k.end());
      ev->mutable_v()->Add(e.v.begin(), e.v.end());
    }
    const v1::IngestAck ack = stream.Send(req);
    ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
  }
  ASSERT_TRUE(stream.Finish().ok());
}

void TrainSamples(const std::shared_ptr<grpc::Channel>& channel, ShardFeed* feed, int batches) {
  auto stub = v1::LMU::NewStub(channel);
  test_util::LockStepStream<v1::UpdateRequest, v1::UpdateAck> stream(
      [&](grpc::ClientContext* ctx) { return stub->Update(ctx); });
  std::uniform_int_distribution<uint64_t> id(0, 999);
  std::normal_distribution<double> val(0.0, 1.0);
  for (int b = 0; b < batches; ++b) {
    v1::UpdateRequest req;
    req.set_model(kModel);
    req.set_routing_key(feed->key);
    for (int i = 0; i < kLmuBatch; ++i) {
      v1::Sample* s = req.add_samples();
      s->set_t(feed->lmu_t++);
      double y = 0;
      for (int j = 0; j < 4; ++j) {
        const uint64_t x_id = id(feed->rng);
        const double x = val(feed->rng);
        s->add_ids(x_id);
        s->add_vals(x);
        y += (x_id % 7 == 0 ? 1.0 : 0.1) * x;
      }
      s->add_y(y);
    }
    const v1::UpdateAck ack = stream.Send(req);
    ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
  }
  ASSERT_TRUE(stream.Finish().ok());
}

v1::HeadResponse HeadOf(const std::shared_ptr<grpc::Channel>& channel, const std::string& model,
                        uint32_t shard) {
  auto stub = v1::Auditor::NewStub(channel);
  grpc::ClientContext ctx;
  test_util::SetDeadline(&ctx);
  v1::HeadRequest req;
  req.set_model(model);
  req.set_shard(shard);
  v1::HeadResponse head;
  const grpc::Status s = stub->Head(&ctx, req, &head);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return head;
}

v1::ModelInfo GetModel(const std::shared_ptr<grpc::Channel>& channel, const std::string& name) {
  auto stub = v1::Admin::NewStub(channel);
  grpc::ClientContext ctx;
  test_util::SetDeadline(&ctx);
  v1::GetModelRequest req;
  req.set_name(name);
  v1::ModelInfo info;
  const grpc::Status s = stub->GetModel(&ctx, req, &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return info;
}

// The digests of every shard part, in one comparable string.
std::string ShardDigests(const v1::ModelInfo& info) {
  std::string out;
  for (const v1::ShardInfo& s : info.shards()) {
    out += "sau " + std::to_string(s.shard()) + " v" + std::to_string(s.ver_sau()) + " " +
           s.state_digest() + "\n";
  }
  for (const v1::LmuShardInfo& s : info.lmu_shards()) {
    out += "lmu " + std::to_string(s.shard()) + " n" + std::to_string(s.samples()) + " " +
           s.state_digest() + "\n";
  }
  return out;
}

absl::Status CreateModel(const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
                         uint32_t shards, bool lmu, v1::Engine engine = v1::ENGINE_PRF) {
  auto stub = v1::Admin::NewStub(channel);
  grpc::ClientContext ctx;
  test_util::SetDeadline(&ctx);
  v1::CreateModelRequest req;
  v1::ModelSpec* spec = req.mutable_spec();
  spec->set_name(name);
  spec->set_shards(shards);
  spec->mutable_sau()->set_d(8);
  spec->mutable_sau()->set_d_v(4);
  spec->mutable_sau()->set_engine(engine);
  if (engine == v1::ENGINE_PRF) {
    spec->mutable_sau()->set_r(64);
    spec->mutable_sau()->set_seed(17);
    spec->mutable_sau()->set_input_scale(8);  // a = 8: the RJ half-split gap is often large
  }
  if (lmu) spec->mutable_lmu()->set_inline_rebuild(true);
  v1::ModelInfo info;
  const grpc::Status s = stub->CreateModel(&ctx, req, &info);
  return s.ok() ? absl::OkStatus() : absl::InternalError(s.error_message());
}

v1::SnapshotResponse SnapshotNow(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::string& name) {
  auto stub = v1::Admin::NewStub(channel);
  grpc::ClientContext ctx;
  test_util::SetDeadline(&ctx);
  v1::SnapshotRequest req;
  req.set_name(name);
  v1::SnapshotResponse r;
  const grpc::Status s = stub->Snapshot(&ctx, req, &r);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return r;
}

// ------------------------------------------------------------------------------------------
// One server for the suite: model "drift" (SAU + LMU, 2 shards) fed in three phases with a
// snapshot after the first two, then a certificate and a plain object appended.

class AuditCliTest : public test_util::SharedServerSuite<AuditCliTest> {
 public:
  static server::Server::Options SuiteOptions() {
    data_dir_ = TempPath("audit_data");
    return ServerOptions(data_dir_);
  }

  static void SetUpTestSuite() {
    SharedServerSuite::SetUpTestSuite();
    Populate();
  }

 protected:
  static void Populate() {
    std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(*server_);
    ASSERT_TRUE(CreateModel(channel, kModel, kShards, /*lmu=*/true).ok());
    std::vector<std::unique_ptr<ShardFeed>> feeds;
    for (uint32_t s = 0; s < kShards; ++s) feeds.push_back(std::make_unique<ShardFeed>(s));
    for (int phase = 0; phase < kPhases; ++phase) {
      for (auto& feed : feeds) {
        IngestEvents(channel, feed.get(), kEventsPerPhase);
        TrainSamples(channel, feed.get(), kLmuBatchesPerPhase);
      }
      if (phase + 1 < kPhases) snapshots_.push_back(SnapshotNow(channel, kModel));
    }
    auto auditor = v1::Auditor::NewStub(channel);
    for (const auto& [shard, json] :
         {std::pair<uint32_t, std::string>{0, CertificateJson()},
          std::pair<uint32_t, std::string>{1, R"({"note": "deployed v2", "ticket": 1234})"}}) {
      grpc::ClientContext ctx;
      test_util::SetDeadline(&ctx);
      v1::AppendRequest req;
      req.set_model(kModel);
      req.set_shard(shard);
      req.set_json(json);
      v1::AppendResponse r;
      const grpc::Status s = auditor->Append(&ctx, req, &r);
      ASSERT_TRUE(s.ok()) << s.error_message();
    }
    public_key_ = data_dir_ + "/audit.pub";
    export0_ = TempPath("shard0.jsonl");
    const CommandResult r = Cli(std::string("audit export ") + kModel + " --out " + export0_);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
  }

  static CommandResult Cli(const std::string& args) {
    return RunCommand(kCli + " --server " + address_ + " " + args);
  }
  static std::string VerifyFileArgs(const std::string& path) {
    return "audit verify --file " + path + " --public-key " + public_key_ +
           " --checkpoint-every " + std::to_string(kCheckpointEvery);
  }
  static Ed25519PrivateKey ServerKey() {
    absl::StatusOr<Ed25519PrivateKey> key =
        Ed25519PrivateKey::FromPem(ReadFile(data_dir_ + "/audit.key"));
    EXPECT_TRUE(key.ok()) << key.status();
    return *key;
  }

  inline static std::string data_dir_, public_key_, export0_;
  inline static std::vector<v1::SnapshotResponse> snapshots_;
};

TEST_F(AuditCliTest, TheStreamMadeAlarmsRjRedAndTrimmedLogs) {
  const std::string text = ReadFile(export0_);
  EXPECT_TRUE(Contains(text, R"({"action":"restart_eprocess","cause":"alarm"})"))
      << "the drift must make the e-process alarm";
  EXPECT_TRUE(Contains(text, R"({"action":"raise_beta_floor","cause":"rj_red"})"))
      << "a = 8 must make RJ go red";
  EXPECT_TRUE(Contains(text, R"("kind":"lmu_update")"));
  EXPECT_TRUE(Contains(text, R"("kind":"snapshot")"));
  ASSERT_EQ(snapshots_.size(), 2u);
  bool trimmed = false;
  for (const v1::ShardSnapshot& s : snapshots_[1].shards()) {
    EXPECT_TRUE(s.taken());
    trimmed = trimmed || s.trimmed_through() > 0;
  }
  EXPECT_TRUE(trimmed) << "the second snapshot trims the log through the first one";
}

TEST_F(AuditCliTest, HeadPrintsNextIndexHeadKeyAndCadence) {
  const v1::HeadResponse head = HeadOf(test_util::ChannelTo(*server_), kModel, 1);
  const CommandResult r = Cli(std::string("audit head ") + kModel + " --shard 1");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  absl::StatusOr<Ed25519PublicKey> pub = Ed25519PublicKey::FromPem(ReadFile(public_key_));
  ASSERT_TRUE(pub.ok()) << pub.status();
  EXPECT_TRUE(Contains(r.out, "next index       " + std::to_string(head.next_index()))) << r.out;
  EXPECT_TRUE(Contains(r.out, head.merkle_curr())) << r.out;
  EXPECT_TRUE(Contains(r.out, pub->fingerprint())) << r.out;
  EXPECT_TRUE(Contains(r.out, "every 8 records")) << r.out;
  EXPECT_TRUE(Contains(r.out, "(shard 1 of 2)")) << r.out;
}

TEST_F(AuditCliTest, VerifyPassesAgainstTheServerForEveryShard) {
  const std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(*server_);
  const CommandResult r =
      Cli(std::string("audit verify ") + kModel + " --all-shards --public-key " + public_key_);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (uint32_t s = 0; s < kShards; ++s) {
    const v1::HeadResponse head = HeadOf(channel, kModel, s);
    EXPECT_TRUE(Contains(r.out, "shard " + std::to_string(s) + ": OK: " +
                                    std::to_string(head.next_index()) + " records, chain head " +
                                    head.merkle_curr()))
        << r.out;
  }
  EXPECT_FALSE(Contains(r.err, "trusts the server")) << r.err;
}

TEST_F(AuditCliTest, VerifyWithoutAKeyFileSaysItTrustsTheServersKey) {
  const CommandResult r = Cli(std::string("audit verify ") + kModel + " --shard 1");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "OK: ")) << r.out;
  EXPECT_TRUE(Contains(r.err, "trusts the server")) << r.err;
  EXPECT_TRUE(Contains(r.err, "--public-key")) << r.err;
}

TEST_F(AuditCliTest, ExportWritesOneCanonicalLinePerRecordAndTheFileVerifies) {
  const v1::HeadResponse head = HeadOf(test_util::ChannelTo(*server_), kModel, 0);
  const std::vector<std::string> lines = ReadLines(export0_);
  ASSERT_EQ(lines.size(), head.next_index());
  for (size_t i : {size_t{0}, size_t{1}, lines.size() / 2, lines.size() - 1}) {
    absl::StatusOr<AuditRecord> env =
        ParseAuditJson(lines[i], {.max_bytes = 1 << 20, .require_canonical = true});
    ASSERT_TRUE(env.ok()) << "line " << i << ": " << env.status();
    uint64_t index = 0;
    ASSERT_TRUE(env->Find("index")->AsUint64(&index));
    EXPECT_EQ(index, i);
  }
  EXPECT_EQ(KindOf(lines[0]), "genesis");

  const CommandResult ok = Cli(VerifyFileArgs(export0_));
  ASSERT_EQ(ok.exit_code, 0) << Describe(ok);
  EXPECT_TRUE(Contains(ok.out, "OK: " + std::to_string(lines.size()) + " records, chain head " +
                                   head.merkle_curr()))
      << ok.out;

  // --from and stdout.
  const CommandResult tail = Cli(std::string("audit export ") + kModel + " --from 5 --out -");
  ASSERT_EQ(tail.exit_code, 0) << Describe(tail);
  EXPECT_EQ(tail.out.substr(0, tail.out.find('\n')), lines[5]);
  EXPECT_TRUE(Contains(tail.err, "index 5.." + std::to_string(lines.size() - 1))) << tail.err;
}

struct TamperCase {
  std::string scenario;
  // Alters the exported lines; returns the index of the record that must be named.
  std::function<uint64_t(std::vector<std::string>&)> tamper;
  std::string rule;
};

TEST_F(AuditCliTest, AnExportedChainVerifiesAsItsOwnShardOnly) {
  const std::string export1 = TempPath("shard1.jsonl");
  const CommandResult ex =
      Cli(std::string("audit export ") + kModel + " --shard 1 --out " + export1);
  ASSERT_EQ(ex.exit_code, 0) << Describe(ex);
  // Every shard of a model starts from the same spec and W; the geneses still differ.
  EXPECT_NE(ReadLines(export0_)[0], ReadLines(export1)[0]);

  const CommandResult own = Cli(VerifyFileArgs(export1) + " --model " + kModel + " --shard 1");
  ASSERT_EQ(own.exit_code, 0) << Describe(own);
  EXPECT_TRUE(Contains(own.out, std::string("(the chain of model '") + kModel + "' shard 1)"))
      << own.out;

  const CommandResult other = Cli(VerifyFileArgs(export1) + " --model " + kModel + " --shard 0");
  EXPECT_EQ(other.exit_code, 1) << Describe(other);
  EXPECT_TRUE(Contains(other.out, "FAILED: audit record 0 breaks rule genesis")) << other.out;
  EXPECT_TRUE(Contains(other.out, std::string("belongs to model \"") + kModel + "\" shard 1"))
      << other.out;

  const CommandResult half = Cli(VerifyFileArgs(export1) + " --shard 1");
  EXPECT_EQ(half.exit_code, 2) << Describe(half);
}

// Auditor.Read is bounded by the head as of its start and says which: a record appended after
// the client asked Head (a background snapshot's, or another client's) does not make the read
// disagree with what it reports.
TEST_F(AuditCliTest, ReadReportsTheHeadItIsBoundedBy) {
  const std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(*server_);
  auto auditor = v1::Auditor::NewStub(channel);
  const v1::HeadResponse before = HeadOf(channel, kModel, 1);
  {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::AppendRequest req;
    req.set_model(kModel);
    req.set_shard(1);
    req.set_json(R"({"note":"after Head"})");
    v1::AppendResponse r;
    ASSERT_TRUE(auditor->Append(&ctx, req, &r).ok());
  }
  const v1::HeadResponse now = HeadOf(channel, kModel, 1);
  ASSERT_GT(now.next_index(), before.next_index());
  for (const uint64_t from : {uint64_t{0}, now.next_index() - 1, now.next_index() + 5}) {
    SCOPED_TRACE(absl::StrCat("from ", from));
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::ReadRequest req;
    req.set_model(kModel);
    req.set_shard(1);
    req.set_from_index(from);
    auto reader = auditor->Read(&ctx, req);
    v1::ReadResponse chunk;
    uint64_t n = 0, chunks = 0;
    std::string last;
    while (reader->Read(&chunk)) {
      ++chunks;
      EXPECT_EQ(chunk.head_next_index(), now.next_index());
      EXPECT_EQ(chunk.head_merkle_curr(), now.merkle_curr());
      for (const v1::AuditLine& line : chunk.records()) {
        ++n;
        last = line.line();
      }
    }
    ASSERT_TRUE(reader->Finish().ok());
    EXPECT_GE(chunks, 1u) << "even an empty read names its head";
    EXPECT_EQ(n, from < now.next_index() ? now.next_index() - from : 0);
    if (n > 0) {
      EXPECT_TRUE(Contains(last, "\"merkle_curr\":\"" + now.merkle_curr() + "\"")) << last;
    }
  }
}

TEST_F(AuditCliTest, TamperedExportsAreCaughtNamingTheRecordAndTheRule) {
  const std::vector<std::string> lines = ReadLines(export0_);
  ASSERT_GT(lines.size(), 100u);
  const auto first_of_kind = [&](const std::string& kind, size_t from) {
    for (size_t i = from; i < lines.size(); ++i) {
      if (KindOf(lines[i]) == kind) return i;
    }
    ADD_FAILURE() << "no record of kind " << kind;
    return size_t{0};
  };
  const auto certificate_index = [&] {
    for (size_t i = lines.size(); i-- > 0;) {
      if (Contains(lines[i], "\"certificate\"")) return i;
    }
    ADD_FAILURE() << "no certificate record";
    return size_t{0};
  };
  absl::StatusOr<Ed25519PrivateKey> other_key = Ed25519PrivateKey::Generate();
  ASSERT_TRUE(other_key.ok());
  const Ed25519PrivateKey server_key = ServerKey();

  const std::vector<TamperCase> cases = {
      {"flip one digit of a record's den",
       [&](std::vector<std::string>& l) {
         const size_t i = first_of_kind("sau_event", 40);
         EXPECT_TRUE(FlipDigitAfter(&l[i], "den"));
         return i;
       },
       "chain"},
      {"drop a record",
       [&](std::vector<std::string>& l) {
         const size_t i = first_of_kind("sau_event", 60);
         l.erase(l.begin() + static_cast<long>(i));
         return i;
       },
       "index"},
      {"swap two records",
       [&](std::vector<std::string>& l) {
         const size_t i = first_of_kind("sau_event", 80);
         std::swap(l[i], l[i + 1]);
         return i;
       },
       "index"},
      {"forge the certificate's eta_c and re-hash and re-sign the chain with the server's key",
       [&](std::vector<std::string>& l) {
         const size_t i = certificate_index();
         l = Rechain(l, i,
                     [&](uint64_t index, AuditRecord* body) {
                       if (index != i) return;
                       AuditValue* payload = body->FindMutable("payload");
                       AuditValue* cert =
                           std::get_if<AuditRecord>(&payload->v)->FindMutable("certificate");
                       std::get_if<AuditRecord>(&cert->v)->Set("eta_c", 0.5);
                     },
                     server_key);
         return i;
       },
       "certificate"},
      {"re-sign every checkpoint with another key (chain re-hashed)",
       [&](std::vector<std::string>& l) {
         const size_t i = first_of_kind("checkpoint", 1);
         l = Rechain(l, i, {}, *other_key);
         return i;
       },
       "signature"},
  };
  for (const TamperCase& c : cases) {
    SCOPED_TRACE(c.scenario);
    std::vector<std::string> tampered = lines;
    const uint64_t index = c.tamper(tampered);
    const std::string path = TempPath("tampered.jsonl");
    WriteLines(path, tampered);
    const CommandResult r = Cli(VerifyFileArgs(path));
    EXPECT_EQ(r.exit_code, 1) << Describe(r);
    EXPECT_TRUE(Contains(r.out, "FAILED: audit record " + std::to_string(index) +
                                    " breaks rule " + c.rule + ":"))
        << r.out;
    std::remove(path.c_str());
  }

  // The forger's tool itself is faithful: re-hashing and re-signing with the server's key
  // and no edit gives a chain that verifies.
  const std::string control = TempPath("rechained.jsonl");
  WriteLines(control, Rechain(lines, 1, {}, server_key));
  const CommandResult r = Cli(VerifyFileArgs(control));
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
}

struct BadAppendCase {
  std::string scenario;
  std::string args;  // after `audit append`
  std::string code;
  std::vector<std::string> mentions;
};

TEST_F(AuditCliTest, BadAppendsAreRefusedWithTheServersMessageAndLeaveTheChainUnchanged) {
  const std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(*server_);
  const auto file_with = [](const std::string& text) {
    const std::string path = TempPath("append.json");
    WriteFile(path, text);
    return path;
  };
  std::string deep;  // 17 nested objects
  for (int i = 0; i < 17; ++i) deep += R"({"a":)";
  deep += "1" + std::string(17, '}');
  const std::string oversize = R"({"blob": ")" + std::string(70000, 'x') + R"("})";
  const std::string m = kModel;
  const std::vector<BadAppendCase> cases = {
      {"malformed JSON", m + " --shard 0 --json-file " + file_with(R"({"a": })"),
       "INVALID_ARGUMENT", {"json:", "byte offset"}},
      {"not an object", m + " --shard 0 --json '[1, 2]'", "INVALID_ARGUMENT", {"json:"}},
      {"oversize", m + " --shard 0 --json-file " + file_with(oversize), "INVALID_ARGUMENT",
       {"bytes; the limit is 65536"}},
      {"too deep", m + " --shard 0 --json-file " + file_with(deep), "INVALID_ARGUMENT",
       {"json:", "nesting"}},
      {"a certificate violating (45)",
       m + " --shard 0 --json-file " + file_with(CertificateJson(/*eta_c=*/0.5)),
       "INVALID_ARGUMENT", {"certificate refused", "(45)"}},
      {"unknown model", "nope --shard 0 --json '{}'", "NOT_FOUND", {"nope"}},
      {"shard out of range", m + " --shard 5 --json '{}'", "INVALID_ARGUMENT",
       {"shard 5 is out of range", "2 shard(s)"}},
  };
  for (const BadAppendCase& c : cases) {
    SCOPED_TRACE(c.scenario);
    const v1::HeadResponse before0 = HeadOf(channel, kModel, 0);
    const v1::HeadResponse before1 = HeadOf(channel, kModel, 1);
    const CommandResult r = Cli("audit append " + c.args);
    EXPECT_EQ(r.exit_code, 1) << Describe(r);
    EXPECT_TRUE(Contains(r.err, "error: " + c.code + ": ")) << r.err;
    for (const std::string& mention : c.mentions) {
      EXPECT_TRUE(Contains(r.err, mention)) << "'" << mention << "' not in: " << r.err;
    }
    for (const auto& [shard, before] : {std::pair{0u, before0}, std::pair{1u, before1}}) {
      const v1::HeadResponse after = HeadOf(channel, kModel, shard);
      EXPECT_EQ(after.next_index(), before.next_index()) << "shard " << shard;
      EXPECT_EQ(after.merkle_curr(), before.merkle_curr()) << "shard " << shard;
    }
  }
}

TEST_F(AuditCliTest, AppendPrintsTheIndexAndMerkleCurrAndTheChainStillVerifies) {
  const std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(*server_);
  const std::string path = TempPath("ok.json");
  WriteFile(path, R"({"release": {"version": "2.4.1", "approved_by": ["a", "b"]}})");
  for (const std::string& args : {std::string(" --shard 1 --json '{\"release\": \"2.4.0\"}'"),
                                  " --shard 1 --json-file " + path}) {
    SCOPED_TRACE(args);
    const v1::HeadResponse before = HeadOf(channel, kModel, 1);
    const CommandResult r = Cli(std::string("audit append ") + kModel + args);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_TRUE(Contains(r.out, "index        " + std::to_string(before.next_index()))) << r.out;
    const v1::HeadResponse after = HeadOf(channel, kModel, 1);
    EXPECT_GT(after.next_index(), before.next_index());
    // The record's merkle_curr is the new head unless a checkpoint followed it.
    if (after.next_index() == before.next_index() + 1) {
      EXPECT_TRUE(Contains(r.out, "merkle_curr  " + after.merkle_curr())) << r.out;
    } else {
      EXPECT_TRUE(Contains(r.out, "checkpoint followed")) << r.out;
    }
  }
  const CommandResult v =
      Cli(std::string("audit verify ") + kModel + " --shard 1 --public-key " + public_key_);
  EXPECT_EQ(v.exit_code, 0) << Describe(v);
}

// audit.proto: "at most 64 KiB and 16 levels of nesting" (17 are refused above).
TEST_F(AuditCliTest, AppendAcceptsSixteenLevelsOfNesting) {
  std::string sixteen;
  for (int i = 0; i < 16; ++i) sixteen += R"({"a":)";
  sixteen += "1" + std::string(16, '}');
  const std::string path = TempPath("sixteen.json");
  WriteFile(path, sixteen);
  const CommandResult r =
      Cli(std::string("audit append ") + kModel + " --shard 1 --json-file " + path);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
}

TEST_F(AuditCliTest, ReplayPassesOnTheLiveDataDirStartingFromTheOldestSnapshot) {
  const CommandResult r =
      Cli("audit replay --data-dir " + data_dir_ + " --model " + std::string(kModel));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (const std::string part : {"sau", "lmu"}) {
    for (uint32_t s = 0; s < kShards; ++s) {
      EXPECT_TRUE(Contains(r.out, "model 'drift' shard " + std::to_string(s) + " " + part +
                                      ": from snapshot 1 (log_seq "))
          << r.out;
    }
  }
  EXPECT_FALSE(Contains(r.out, "MISMATCH")) << r.out;

  for (uint32_t s = 0; s < kShards; ++s) {
    SCOPED_TRACE("shard " + std::to_string(s));
    absl::StatusOr<storage::ReplayReport> report = storage::ReplayAndCheck(data_dir_, kModel, s);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_TRUE(report->ok()) << storage::FormatReplayReport(*report);
    ASSERT_EQ(report->parts.size(), 2u);
    const storage::ReplayPartReport& sau = report->parts[0];
    const storage::ReplayPartReport& lmu = report->parts[1];
    // The first phase is trimmed away; phases 2 and 3 are replayed.
    const uint64_t phase_batches = kEventsPerPhase / kSauBatch;
    EXPECT_EQ(sau.start_log_seq, phase_batches);
    EXPECT_EQ(sau.batches_logged, kPhases * phase_batches);
    EXPECT_EQ(sau.batches_replayed, (kPhases - 1) * phase_batches);
    EXPECT_EQ(sau.batch_digests_checked, sau.batches_replayed);
    // The start, snapshot 2 and the digests at events 4096 and 8192.
    EXPECT_EQ(sau.state_digests_checked, 4u);
    EXPECT_EQ(lmu.start_log_seq, static_cast<uint64_t>(kLmuBatchesPerPhase));
    EXPECT_EQ(lmu.batches_replayed, (kPhases - 1) * kLmuBatchesPerPhase);
    EXPECT_EQ(lmu.batch_digests_checked, lmu.batches_replayed);
    EXPECT_EQ(lmu.state_digests_checked, 2u);  // the start and snapshot 2
    // Every id of the final base is at its own hash position (seed 002 sec. 8). This small
    // stream never fills the delta, so the base may be empty; LmuLearner's test
    // EveryRebuiltBaseHoldsEachIdAtItsOwnHashPosition covers full bases.
    EXPECT_TRUE(Contains(r.out, absl::StrCat("the MPHF membership of ", lmu.base_ids_checked,
                                             " base ids: OK")))
        << r.out;
  }
}

TEST_F(AuditCliTest, ReplayUsageAndMissingModelErrors) {
  CommandResult r = Cli("audit replay --model drift");
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  r = Cli("audit replay --data-dir " + data_dir_ + " --model nope");
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "error: NOT_FOUND: model 'nope'")) << r.err;
  r = Cli("audit replay --data-dir " + data_dir_ + " --model drift --shard 7");
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "shard 7 is out of range")) << r.err;
}

TEST_F(AuditCliTest, VerifyUsageErrors) {
  for (const std::string& args :
       {std::string("audit verify"), "audit verify --file " + export0_,
        std::string("audit verify drift --shard 0 --all-shards"),
        "audit verify drift --file " + export0_ + " --public-key " + public_key_,
        std::string("audit frobnicate")}) {
    SCOPED_TRACE(args);
    const CommandResult r = Cli(args);
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_TRUE(Contains(r.err, "error: INVALID_ARGUMENT: ")) << r.err;
  }
  const CommandResult help = Cli("audit --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* sub : {"head", "export", "verify", "append", "replay"}) {
    EXPECT_TRUE(Contains(help.out, std::string("  ") + sub + " ")) << help.out;
  }
}

TEST_F(AuditCliTest, SnapshotPrintsEveryShardPart) {
  const CommandResult r = Cli(std::string("snapshot ") + kModel);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "log_seq")) << r.out;
  for (const char* row : {"    0  sau ", "    0  lmu ", "    1  sau ", "    1  lmu "}) {
    EXPECT_TRUE(Contains(r.out, row)) << "'" << row << "' not in:\n" << r.out;
  }
  const CommandResult missing = Cli("snapshot nope");
  EXPECT_EQ(missing.exit_code, 1) << Describe(missing);
  EXPECT_TRUE(Contains(missing.err, "error: NOT_FOUND: ")) << missing.err;
}

TEST_F(AuditCliTest, BackupRestoresIntoASecondServerWithTheSameState) {
  const std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(*server_);
  const std::string digests = ShardDigests(GetModel(channel, kModel));
  const CommandResult r = Cli("backup b1");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::string dir = data_dir_ + "/backups/b1";
  EXPECT_TRUE(Contains(r.out, "backup written to " + dir)) << r.out;
  EXPECT_TRUE(Contains(r.out, "--data_dir=" + dir)) << r.out;
  for (const char* file : {"db/CURRENT", "audit.pub"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + file)) << file;
  }
  // No secret leaves the data directory with a backup.
  for (const char* file : {"lmu.secret", "audit.key"}) {
    EXPECT_FALSE(fs::exists(dir + "/" + file)) << file;
  }
  const CommandResult again = Cli("backup b1");
  EXPECT_EQ(again.exit_code, 1) << Describe(again);
  EXPECT_TRUE(Contains(again.err, "error: ALREADY_EXISTS: ")) << again.err;
  const CommandResult bad = Cli("backup ../x");
  EXPECT_EQ(bad.exit_code, 1) << Describe(bad);
  EXPECT_TRUE(Contains(bad.err, "error: INVALID_ARGUMENT: ")) << bad.err;

  // Without the key files a restore is refused, naming the one missing.
  {
    server::Server::Options bare = ServerOptions(dir);
    bare.listen = "127.0.0.1:0";
    server::Server s(bare);
    const absl::StatusOr<int> port = s.Start();
    ASSERT_FALSE(port.ok());
    EXPECT_TRUE(Contains(std::string(port.status().message()), "audit signing key"))
        << port.status();
  }
  server::Server::Options with_keys = ServerOptions(dir);
  with_keys.audit_key_file = data_dir_ + "/audit.key";
  with_keys.lmu_secret_file = data_dir_ + "/lmu.secret";
  std::unique_ptr<server::Server> restored = test_util::StartLoopbackServer(with_keys);
  ASSERT_NE(restored->port(), 0);
  const std::shared_ptr<grpc::Channel> restored_channel = test_util::ChannelTo(*restored);
  EXPECT_EQ(ShardDigests(GetModel(restored_channel, kModel)), digests);
  for (uint32_t s = 0; s < kShards; ++s) {
    EXPECT_EQ(HeadOf(restored_channel, kModel, s).merkle_curr(),
              HeadOf(channel, kModel, s).merkle_curr());
  }
  const CommandResult v =
      RunCommand(kCli + " --server " + test_util::AddressOf(*restored) + " audit verify " +
                 kModel + " --all-shards --public-key " + dir + "/audit.pub");
  EXPECT_EQ(v.exit_code, 0) << Describe(v);
  restored->Shutdown(absl::Seconds(5));
}

// ------------------------------------------------------------------------------------------
// ---- The RFC 6962 tree (docs/AUDIT.md, "Merkle tree, signed tree heads and proofs") ----

std::vector<std::string> LinesOf(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The tree head the CLI wrote: its leaves are the exported lines, and every kind of record in
// it (genesis, SAU events, LMU updates, checkpoints, snapshots, appends) is proven in it, from
// the server and then offline from the saved proof.
TEST_F(AuditCliTest, TreeHeadsCoverTheExportedLinesAndProveEveryKindOfRecord) {
  // An export of shard 0 as it is now (other tests of the suite append to it), and the head
  // of exactly that many records.
  const std::string exported_path = TempPath("tree_export.jsonl");
  CommandResult r = Cli(std::string("audit export ") + kModel + " --out " + exported_path);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const std::vector<std::string> lines = LinesOf(exported_path);
  const std::string head_all = TempPath("head_all.txt"), head_5 = TempPath("head_5.txt");
  r = Cli(absl::StrCat("audit tree-head ", kModel, " --size ", lines.size(), " --out ",
                       head_all));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  r = Cli(std::string("audit tree-head ") + kModel + " --size 5 --out " + head_5);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  absl::StatusOr<Ed25519PublicKey> pub = Ed25519PublicKey::FromPem(ReadFile(public_key_));
  ASSERT_TRUE(pub.ok()) << pub.status();
  absl::StatusOr<TreeHead> all = OpenTreeHead(ReadFile(head_all), *pub);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->origin, std::string("streamlearn.audit/") + kModel + "/0");

  ASSERT_EQ(all->size, lines.size());
  MerkleTreeCache exported([&](uint64_t begin, uint64_t end,
                               const std::function<void(uint64_t, std::string_view)>& visit) {
    for (uint64_t i = begin; i < end && i < lines.size(); ++i) visit(i, lines[i]);
    return absl::OkStatus();
  });
  EXPECT_EQ(*exported.Root(lines.size()), all->root);

  std::set<std::string> kinds;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string kind = KindOf(lines[i]);
    if (!kinds.insert(kind).second && i + 1 != lines.size()) continue;
    SCOPED_TRACE(absl::StrCat("record ", i, " (", kind, ")"));
    const std::string proof = TempPath(absl::StrCat("proof_", i, ".json"));
    const std::string args = absl::StrCat(" ", kModel, " --index ", i, " --tree-head ",
                                          head_all, " --public-key ", public_key_);
    r = Cli("audit prove" + args + " --save " + proof);
    ASSERT_EQ(r.exit_code, 0) << Describe(r);
    EXPECT_TRUE(Contains(r.out, absl::StrCat("OK: record ", i, " is in the tree of ",
                                             lines.size(), " records")))
        << r.out;
    EXPECT_TRUE(Contains(r.out, lines[i])) << r.out;
    // Offline: no server at that address.
    r = RunCommand(kCli + " --server 127.0.0.1:1 audit prove" + args + " --proof " + proof);
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
  }
  EXPECT_GE(kinds.size(), 5u);

  // The small head is consistent with the whole one (and offline from the saved proof).
  const std::string cproof = TempPath("consistency.json");
  const std::string cargs = absl::StrCat(" ", kModel, " --old ", head_5, " --new ", head_all,
                                         " --public-key ", public_key_);
  r = Cli("audit consistency" + cargs + " --save " + cproof);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, absl::StrCat("OK: the tree of ", lines.size(),
                                           " records (root ", ToHex(all->root),
                                           ") extends the tree of 5 records")))
      << r.out;
  r = RunCommand(kCli + " --server 127.0.0.1:1 audit consistency" + cargs + " --proof " +
                 cproof);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  r = Cli(absl::StrCat("audit prove ", kModel, " --index 3 --tree-head ", head_5,
                       " --public-key ", public_key_));
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
}

// Altered proofs, heads and keys fail; a head of another chain is refused; requests beyond
// the chain name the problem.
TEST_F(AuditCliTest, AlteredProofsAndTreeHeadsFail) {
  const std::string head = TempPath("head.txt"), head_9 = TempPath("head_9.txt"),
                    head_shard1 = TempPath("head_shard1.txt"), proof = TempPath("proof.json"),
                    cproof = TempPath("cproof.json");
  ASSERT_EQ(Cli(std::string("audit tree-head ") + kModel + " --out " + head).exit_code, 0);
  ASSERT_EQ(Cli(std::string("audit tree-head ") + kModel + " --size 9 --out " + head_9).exit_code,
            0);
  ASSERT_EQ(
      Cli(std::string("audit tree-head ") + kModel + " --shard 1 --out " + head_shard1).exit_code,
      0);
  const std::string prove = absl::StrCat("audit prove ", kModel, " --index 7 --tree-head ",
                                         head, " --public-key ", public_key_);
  ASSERT_EQ(Cli(prove + " --save " + proof).exit_code, 0);
  const std::string consistency = absl::StrCat("audit consistency ", kModel, " --old ", head_9,
                                               " --new ", head, " --public-key ", public_key_);
  ASSERT_EQ(Cli(consistency + " --save " + cproof).exit_code, 0);

  // One hex digit of a proof hash, the record's line, or the claimed index.
  const auto altered = [](std::string text, const std::string& after, int skip) {
    size_t at = text.find(after);
    EXPECT_NE(at, std::string::npos) << after;
    at += after.size() + skip;
    text[at] = text[at] == '0' ? '1' : '0';
    return text;
  };
  const std::string original = ReadFile(proof);
  for (const auto& [what, text] :
       {std::pair<std::string, std::string>{"a hash", altered(original, "\"hashes\": [", 8)},
        {"the line", altered(original, "\"merkle_curr\\\":\\\"", 0)},
        {"the index", altered(original, "\"index\": ", 0)}}) {
    SCOPED_TRACE(what);
    ASSERT_NE(text, original);
    const std::string bad = TempPath("bad_proof.json");
    WriteFile(bad, text);
    const CommandResult r = Cli(prove + " --proof " + bad);
    EXPECT_EQ(r.exit_code, 1) << Describe(r);
    EXPECT_TRUE(Contains(r.out, "FAILED: record 7 is not proven")) << r.out;
  }
  const std::string bad_c = TempPath("bad_cproof.json");
  WriteFile(bad_c, altered(ReadFile(cproof), "\"hashes\": [", 20));
  CommandResult r = Cli(consistency + " --proof " + bad_c);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "FAILED: the tree of")) << r.out;

  // A tree head whose root was changed: its signature fails, before any proof.
  std::string note = ReadFile(head);
  const size_t root_at = note.find('\n', note.find('\n') + 1) + 1;
  note[root_at] = note[root_at] == 'A' ? 'B' : 'A';
  const std::string bad_head = TempPath("bad_head.txt");
  WriteFile(bad_head, note);
  r = Cli(absl::StrCat("audit prove ", kModel, " --index 7 --tree-head ", bad_head,
                       " --public-key ", public_key_));
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "PERMISSION_DENIED")) << r.err;
  EXPECT_TRUE(Contains(r.err, "signature does not verify")) << r.err;

  // Another key.
  absl::StatusOr<Ed25519PrivateKey> other = Ed25519PrivateKey::Generate();
  const std::string other_pub = TempPath("other.pub");
  WriteFile(other_pub, *other->PublicKey().ToPem());
  r = Cli(absl::StrCat("audit prove ", kModel, " --index 7 --tree-head ", head,
                       " --public-key ", other_pub));
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "no signature by the audit key")) << r.err;

  // Shard 1's head used for shard 0, and old and new swapped.
  r = Cli(absl::StrCat("audit prove ", kModel, " --index 7 --tree-head ", head_shard1,
                       " --public-key ", public_key_));
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "/1', not model 'drift' shard 0")) << r.err;
  r = Cli(absl::StrCat("audit consistency ", kModel, " --old ", head, " --new ", head_9,
                       " --public-key ", public_key_));
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "pass the older one as --old")) << r.err;

  // Beyond the chain: a size and an index.
  r = Cli(std::string("audit tree-head ") + kModel + " --size 1000000000");
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "OUT_OF_RANGE: tree size 1000000000 is beyond the chain")) << r.err;
  r = Cli(absl::StrCat("audit prove ", kModel, " --index 9 --tree-head ", head_9,
                       " --public-key ", public_key_));
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "OUT_OF_RANGE: index 9 is not in the tree of 9 record(s)")) << r.err;
}

// Tampering with the store of a stopped server: each test starts and stops its own servers.

// A one-shard model kModel whose SAU reads the returning-clusters stream (core/workloads/
// dgp.h: d = 16, d_v = 2), r = 256, with `configure` applied; its ModelInfo.
v1::ModelInfo CreateClusterModel(const std::shared_ptr<grpc::Channel>& channel,
                                 const std::function<void(v1::SauSpec*)>& configure) {
  auto stub = v1::Admin::NewStub(channel);
  grpc::ClientContext ctx;
  test_util::SetDeadline(&ctx);
  v1::CreateModelRequest req;
  req.mutable_spec()->set_name(kModel);
  req.mutable_spec()->set_shards(1);
  v1::SauSpec* sau = req.mutable_spec()->mutable_sau();
  sau->set_d(16);
  sau->set_d_v(2);
  sau->set_r(256);
  configure(sau);
  v1::ModelInfo info;
  const grpc::Status st = stub->CreateModel(&ctx, req, &info);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return info;
}

// Ingests `events` into kModel in batches of `batch` (event i has t = i + 1), with a snapshot
// after the batch that starts at `snapshot_at`; each ack goes to `check`.
void IngestClusterEvents(const std::shared_ptr<grpc::Channel>& channel,
                         const std::vector<sau::DgpEvent>& events, size_t batch,
                         size_t snapshot_at,
                         const std::function<void(const v1::IngestAck&)>& check = {}) {
  auto stub = v1::SAU::NewStub(channel);
  test_util::LockStepStream<v1::IngestRequest, v1::IngestAck> stream(
      [&](grpc::ClientContext* ctx) { return stub->Ingest(ctx); });
  for (size_t done = 0; done < events.size(); done += batch) {
    v1::IngestRequest req;
    req.set_model(kModel);
    req.set_routing_key("k");
    for (size_t i = done; i < std::min(done + batch, events.size()); ++i) {
      v1::Event* ev = req.add_events();
      ev->set_t(i + 1);
      ev->mutable_k()->Add(events[i].k.begin(), events[i].k.end());
      ev->mutable_v()->Add(events[i].v.begin(), events[i].v.end());
    }
    const v1::IngestAck ack = stream.Send(req);
    ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
    if (check) check(ack);
    if (done == snapshot_at) SnapshotNow(channel, kModel);
  }
  ASSERT_TRUE(stream.Finish().ok());
}

class AuditStoreTamperTest : public ::testing::Test {
 protected:
  void SetUp() override { data_dir_ = TempPath("tamper_data"); }

  std::unique_ptr<server::Server> Start() {
    auto s = test_util::StartLoopbackServer(ServerOptions(data_dir_));
    EXPECT_NE(s->port(), 0);
    return s;
  }
  static void Stop(std::unique_ptr<server::Server>& s) {
    s->Shutdown(absl::Seconds(5));
    s.reset();  // closes the store
  }
  std::unique_ptr<storage::Store> OpenStore() {
    absl::StatusOr<std::unique_ptr<storage::Store>> store =
        storage::Store::Open({.path = data_dir_ + "/db"});
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  // Fills shard 0 of a one-shard model: `batches` SAU batches (a snapshot after the first
  // half) and a few LMU batches.
  void Populate(server::Server& s, int batches, v1::Engine engine = v1::ENGINE_PRF) {
    std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(s);
    ASSERT_TRUE(CreateModel(channel, kModel, /*shards=*/1, /*lmu=*/true, engine).ok());
    ShardFeed feed(0);
    feed.key = "k";
    IngestEvents(channel, &feed, batches / 2 * kSauBatch);
    TrainSamples(channel, &feed, 3);
    SnapshotNow(channel, kModel);
    IngestEvents(channel, &feed, (batches - batches / 2) * kSauBatch);
    TrainSamples(channel, &feed, 3);
  }

  // Flips the last byte of SAU log entry `seq` of shard 0 in `store` (the low mantissa byte
  // of a v value, so the entry still decodes).
  static void AlterSauLogEntry(storage::Store& store, uint64_t seq) {
    std::string entry;
    ASSERT_TRUE(store
                    .ScanLog(kModel, 0, PartKind::kSau, seq,
                             [&](uint64_t at, std::string_view e) {
                               EXPECT_EQ(at, seq);
                               entry = std::string(e);
                               return false;
                             })
                    .ok());
    ASSERT_FALSE(entry.empty());
    entry.back() ^= 0x01;
    storage::StoreBatch batch;
    batch.AppendLog(kModel, 0, PartKind::kSau, seq, entry);
    ASSERT_TRUE(store.Write(batch).ok());
  }

  std::string data_dir_;
};

TEST_F(AuditStoreTamperTest, AnAlteredStoredRecordIsCaughtThroughARestartedServer) {
  std::unique_ptr<server::Server> s = Start();
  Populate(*s, 6);
  Stop(s);

  // Change one digit of the den of the first SAU event record from index 100 on, in the
  // store, keeping its envelope hashes.
  uint64_t index = 0;
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    std::string line;
    ASSERT_TRUE(store
                    ->ScanAudit(kModel, 0, 100,
                                [&](uint64_t i, std::string_view l) {
                                  index = i;
                                  line = std::string(l);
                                  return KindOf(line) != "sau_event";
                                })
                    .ok());
    ASSERT_EQ(KindOf(line), "sau_event") << line;
    ASSERT_TRUE(FlipDigitAfter(&line, "den"));
    ASSERT_TRUE(store->RawPutAudit(kModel, 0, index, line).ok());
  }

  s = Start();
  const std::string cli = kCli + " --server " + test_util::AddressOf(*s) + " audit verify " +
                          kModel + " --public-key " + data_dir_ + "/audit.pub";
  const CommandResult r = RunCommand(cli);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "FAILED: audit record " + std::to_string(index) +
                                  " breaks rule chain:"))
      << r.out;
  Stop(s);
}

// A record altered in the store after a tree head was taken: the head's inclusion proof of it
// and the consistency of a later head with it both fail.
TEST_F(AuditStoreTamperTest, AnAlteredStoredRecordFailsItsTreeHeadsProofs) {
  std::unique_ptr<server::Server> s = Start();
  Populate(*s, 6);
  const std::string cli = kCli + " --server " + test_util::AddressOf(*s) + " audit ";
  const std::string pub = " --public-key " + data_dir_ + "/audit.pub";
  const std::string old_head = TempPath("old_head.txt"), new_head = TempPath("new_head.txt");
  ASSERT_EQ(RunCommand(cli + "tree-head " + kModel + " --out " + old_head).exit_code, 0);
  const std::string prove =
      std::string("prove ") + kModel + " --index 100 --tree-head " + old_head + pub;
  CommandResult r = RunCommand(cli + prove);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  Stop(s);
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    std::string line;
    ASSERT_TRUE(store
                    ->ScanAudit(kModel, 0, 100,
                                [&](uint64_t, std::string_view l) {
                                  line = std::string(l);
                                  return false;
                                })
                    .ok());
    ASSERT_TRUE(FlipDigitAfter(&line, "merkle_curr")) << line;
    ASSERT_TRUE(store->RawPutAudit(kModel, 0, 100, line).ok());
  }
  s = Start();
  const std::string cli2 = kCli + " --server " + test_util::AddressOf(*s) + " audit ";
  r = RunCommand(cli2 + prove);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "FAILED: record 100 is not proven")) << r.out;
  r = RunCommand(cli2 + "append " + kModel + " --shard 0 --json '{\"after\": 1}'");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  ASSERT_EQ(RunCommand(cli2 + "tree-head " + kModel + " --out " + new_head).exit_code, 0);
  r = RunCommand(cli2 + "consistency " + kModel + " --old " + old_head + " --new " + new_head +
                 pub);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "FAILED: the tree of")) << r.out;
  Stop(s);
}

// Bounded audit storage through a real server (docs/AUDIT.md, "Bounded storage"): with a
// small live tail the chain's old records move to segments at each snapshot; verify, the
// proofs and replay read across them, the archive checks offline from its files and the key,
// and a damaged segment is named by both paths.
TEST_F(AuditStoreTamperTest, ArchivedChainsVerifyProveReplayOfflineAndADamagedSegmentIsNamed) {
  server::Server::Options options = ServerOptions(data_dir_);
  options.audit_live_records = 64;
  options.audit_segment_records = 64;
  std::unique_ptr<server::Server> s = test_util::StartLoopbackServer(options);
  ASSERT_NE(s->port(), 0);
  Populate(*s, 6);
  SnapshotNow(test_util::ChannelTo(*s), kModel);
  const std::string chain_dir = data_dir_ + "/audit-archive/default/" + kModel + "/0";
  std::vector<std::string> segments;
  for (const auto& e : std::filesystem::directory_iterator(chain_dir)) {
    segments.push_back(e.path().string());
  }
  std::sort(segments.begin(), segments.end());
  ASSERT_GE(segments.size(), 3u);
  const std::string cli = kCli + " --server " + test_util::AddressOf(*s) + " audit ";
  const std::string pub = " --public-key " + data_dir_ + "/audit.pub";
  CommandResult r = RunCommand(cli + "verify " + kModel + pub + " --checkpoint-every " +
                               std::to_string(kCheckpointEvery));
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  r = RunCommand(kCli + " audit archive " + chain_dir + pub);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, absl::StrCat(segments.size(), " segment(s), records 0..",
                                           segments.size() * 64 - 1, " verified")))
      << r.out;
  const std::string head = TempPath("archived_head.txt");
  ASSERT_EQ(RunCommand(cli + "tree-head " + kModel + " --out " + head).exit_code, 0);
  r = RunCommand(cli + "prove " + kModel + " --index 3 --tree-head " + head + pub);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  r = RunCommand(kCli + " audit replay --data-dir " + data_dir_ + " --model " + kModel);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  // One byte of the first segment's first block.
  {
    std::string bytes = ReadFile(segments[0]);
    bytes[100] ^= 0x01;
    WriteFile(segments[0], bytes);
  }
  r = RunCommand(kCli + " audit archive " + chain_dir + pub);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, segments[0]) && Contains(r.err, "SHA-256")) << Describe(r);
  r = RunCommand(cli + "verify " + kModel + pub);
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.err + r.out, "CRC-32")) << Describe(r);
  Stop(s);
}

// The ridge and vla engines (docs/ENGINES.md): their chains replay from snapshot and log to
// the digests their records carry, and an altered log entry is caught at its record.
TEST_F(AuditStoreTamperTest, RidgeAndVlaChainsReplayAndAnAlteredLogEntryIsCaught) {
  for (v1::Engine engine : {v1::ENGINE_RIDGE, v1::ENGINE_VLA}) {
    SCOPED_TRACE(v1::Engine_Name(engine));
    std::filesystem::remove_all(data_dir_);
    std::unique_ptr<server::Server> s = Start();
    Populate(*s, 8, engine);
    Stop(s);
    absl::StatusOr<storage::ReplayReport> clean = storage::ReplayAndCheck(data_dir_, kModel, 0);
    ASSERT_TRUE(clean.ok()) << clean.status();
    ASSERT_TRUE(clean->ok()) << storage::FormatReplayReport(*clean);
    EXPECT_EQ(clean->parts[0].batches_replayed, 8u);
    EXPECT_GE(clean->parts[0].state_digests_checked, 1u);

    {
      std::unique_ptr<storage::Store> store = OpenStore();
      ASSERT_NE(store, nullptr);
      AlterSauLogEntry(*store, 6);
      if (::testing::Test::HasFatalFailure()) return;
    }
    absl::StatusOr<storage::ReplayReport> r = storage::ReplayAndCheck(data_dir_, kModel, 0);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->ok()) << storage::FormatReplayReport(*r);
  }
}

// A self-regulated model (docs/SAU.md, "Self-regulation"): every action it takes is in the
// audit record of the event that took it, with the value it set; the chain verifies; a replay
// of the data directory reproduces every state digest; a restart keeps the regulated gamma.
TEST_F(AuditStoreTamperTest, ASelfRegulatedModelRecordsItsActionsVerifiesReplaysAndRestarts) {
  std::unique_ptr<server::Server> s = Start();
  std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(*s);
  const v1::ModelInfo created = CreateClusterModel(channel, [](v1::SauSpec* sau) {
    sau->set_seed(12);  // a draw of W whose returns are thin (core/sau/regulator_test.cc)
    sau->set_input_scale(8);
    sau->set_regulate_gamma(true);
    sau->set_regulate_clip(true);
  });
  EXPECT_EQ(created.spec().sau().gamma_max(), 0.999);  // resolved
  EXPECT_GT(created.spec().sau().c_hi_max(), created.spec().sau().c_hi());
  const std::vector<sau::DgpEvent> events = sau::ReturningClusters(16, 8000, 600, 13);
  IngestClusterEvents(channel, events, /*batch=*/100, /*snapshot_at=*/4000,
                      [](const v1::IngestAck& ack) { EXPECT_GE(ack.last().gamma(), 0.99); });
  const v1::ModelInfo before = GetModel(channel, kModel);
  ASSERT_EQ(before.shards_size(), 1);
  const v1::ShardInfo& shard = before.shards(0);
  std::printf("gamma %.6g after %llu widenings and %llu steps back; c_hi %g after %llu raises\n",
              shard.gamma(), static_cast<unsigned long long>(shard.gamma_raises()),
              static_cast<unsigned long long>(shard.gamma_lowers()), shard.c_hi(),
              static_cast<unsigned long long>(shard.c_hi_raises()));
  ASSERT_GE(shard.gamma_raises(), 1u);
  EXPECT_GT(shard.gamma(), 0.99);
  EXPECT_EQ(shard.c_hi(), before.spec().sau().c_hi());  // no row sits above c_hi here
  const std::string cli = kCli + " --server " + test_util::AddressOf(*s);
  {
    const CommandResult d = RunCommand(cli + " describe " + kModel);
    EXPECT_EQ(d.exit_code, 0) << Describe(d);
    EXPECT_TRUE(Contains(d.out, "gamma up to 0.999 while denominators are thin")) << d.out;
  }
  Stop(s);

  // The records: one raise_gamma action per widening, with the gamma it set, ending at the
  // shard's gamma.
  uint64_t widenings = 0, steps_back = 0;
  std::string last_to;
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store
                    ->ScanAudit(kModel, 0, 0,
                                [&](uint64_t, std::string_view l) {
                                  const std::string line(l);
                                  for (const auto& [what, count] :
                                       {std::pair<std::string, uint64_t*>{"raise_gamma",
                                                                          &widenings},
                                        {"lower_gamma", &steps_back}}) {
                                    const size_t at = line.find("\"action\":\"" + what + "\"");
                                    if (at == std::string::npos) continue;
                                    ++*count;
                                    const size_t to = line.find("\"value\":", at);
                                    last_to = line.substr(to + 8, line.find('}', to) - to - 8);
                                  }
                                  return true;
                                })
                    .ok());
  }
  EXPECT_EQ(widenings, shard.gamma_raises());
  EXPECT_EQ(steps_back, shard.gamma_lowers());
  EXPECT_EQ(std::stod(last_to), shard.gamma()) << last_to;

  absl::StatusOr<storage::ReplayReport> replay = storage::ReplayAndCheck(data_dir_, kModel, 0);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_TRUE(replay->ok()) << storage::FormatReplayReport(*replay);
  EXPECT_GE(replay->parts[0].state_digests_checked, 1u);

  s = Start();
  channel = test_util::ChannelTo(*s);
  const v1::ModelInfo after = GetModel(channel, kModel);
  EXPECT_EQ(ShardDigests(after), ShardDigests(before));
  EXPECT_EQ(after.shards(0).gamma(), shard.gamma());
  EXPECT_EQ(after.shards(0).gamma_raises(), shard.gamma_raises());
  const CommandResult v = RunCommand(kCli + " --server " + test_util::AddressOf(*s) +
                                     " audit verify " + kModel + " --public-key " + data_dir_ +
                                     "/audit.pub");
  EXPECT_EQ(v.exit_code, 0) << Describe(v);
  Stop(s);
}

// The exact window through the service (docs/SAU.md, "The exact window"). Raw inputs: a query
// of norm 100 has every log-feature far below c_lo, so its denominator is e^-30 of the
// stream's and certainly thin; it is answered by exact softmax over the last 64 events, all
// of cluster 1 (first value coordinate -1). A query at cluster 1's own key is the features'
// estimate. After a restart the window is back, and the same query gets the same bits.
TEST_F(AuditStoreTamperTest, TheExactWindowAnswersAThinQueryAndComesBackAfterARestart) {
  std::unique_ptr<server::Server> s = Start();
  std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(*s);
  const v1::ModelInfo created = CreateClusterModel(channel, [](v1::SauSpec* sau) {
    sau->set_seed(13);
    sau->set_input_mode(v1::INPUT_MODE_RAW);
    sau->set_exact_window(64);
  });
  EXPECT_EQ(created.spec().sau().exact_window(), 64u);
  const std::vector<sau::DgpEvent> events = sau::ReturningClusters(16, 8400, 600, 14);
  IngestClusterEvents(channel, events, /*batch=*/200, /*snapshot_at=*/4000);
  const auto query = [&](const std::vector<double>& q) {
    auto stub = v1::SAU::NewStub(channel);
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::QueryRequest req;
    req.set_model(kModel);
    req.set_routing_key("k");
    req.mutable_q()->Add(q.begin(), q.end());
    v1::QueryResponse r;
    const grpc::Status st = stub->Query(&ctx, req, &r);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return r;
  };
  std::vector<double> far(16, 0.0);
  far[5] = 100;
  const v1::QueryResponse thin = query(far);
  EXPECT_TRUE(thin.exact_window()) << thin.DebugString();
  ASSERT_EQ(thin.y_hat_size(), 2);
  EXPECT_NEAR(thin.y_hat(0), -1.0, 1e-12);
  EXPECT_FALSE(query(events[8399].k).exact_window());  // cluster 1, warm
  const std::string cli = kCli + " --server " + test_util::AddressOf(*s);
  const CommandResult d = RunCommand(cli + " describe " + kModel);
  EXPECT_TRUE(Contains(d.out, "the last 64 events answer a query whose denominator is thin"))
      << d.out;
  Stop(s);

  s = Start();
  channel = test_util::ChannelTo(*s);
  const v1::QueryResponse again = query(far);
  EXPECT_TRUE(again.exact_window());
  EXPECT_EQ(std::vector<double>(again.y_hat().begin(), again.y_hat().end()),
            std::vector<double>(thin.y_hat().begin(), thin.y_hat().end()));
  Stop(s);
}

TEST_F(AuditStoreTamperTest, AnAlteredLogEntryOrSnapshotIsCaughtByReplay) {
  constexpr int kBatches = 10;  // SAU log seqs 1..10, snapshot at 5
  std::unique_ptr<server::Server> s = Start();
  Populate(*s, kBatches);
  Stop(s);
  absl::StatusOr<storage::ReplayReport> clean = storage::ReplayAndCheck(data_dir_, kModel, 0);
  ASSERT_TRUE(clean.ok()) << clean.status();
  ASSERT_TRUE(clean->ok()) << storage::FormatReplayReport(*clean);
  // One snapshot per part: the log is not trimmed yet, so replay checks the snapshot and
  // then starts from the empty state.
  EXPECT_EQ(clean->parts[0].checked_snapshot_seq, 1u);
  EXPECT_EQ(clean->parts[0].start_snapshot_seq, 0u);
  EXPECT_EQ(clean->parts[0].batches_replayed, static_cast<uint64_t>(kBatches));
  EXPECT_EQ(clean->parts[0].state_digests_checked, 2u);  // snapshot 1: restored and replayed

  // Alter one number of SAU log entry 8 (its last byte: the low mantissa byte of a v value,
  // so the entry still decodes) and find the record that carries its batch_digest.
  constexpr uint64_t kSeq = 8;
  uint64_t record = UINT64_MAX;
  std::string blob;
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    AlterSauLogEntry(*store, kSeq);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_TRUE(store
                    ->ScanAudit(kModel, 0, 0,
                                [&](uint64_t index, std::string_view line) {
                                  const std::string l(line);
                                  if (Contains(l, "\"log_seq\":" + std::to_string(kSeq) + ",") &&
                                      Contains(l, "\"batch_digest\"") &&
                                      KindOf(l) == "sau_event") {
                                    record = index;
                                    return false;
                                  }
                                  return true;
                                })
                    .ok());
    ASSERT_NE(record, UINT64_MAX);
  }
  absl::StatusOr<storage::ReplayReport> r = storage::ReplayAndCheck(data_dir_, kModel, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->mismatch->record_index, record);
  EXPECT_EQ(r->mismatch->log_seq, kSeq);
  EXPECT_EQ(r->mismatch->what, "batch_digest");
  EXPECT_EQ(r->mismatch->part, PartKind::kSau);

  const CommandResult cli =
      RunCommand(kCli + " audit replay --data-dir " + data_dir_ + " --model " + kModel);
  EXPECT_EQ(cli.exit_code, 1) << Describe(cli);
  EXPECT_TRUE(Contains(cli.out, "MISMATCH in model 'drift' shard 0 sau at audit record " +
                                    std::to_string(record) + ", log_seq 8: batch_digest"))
      << cli.out;

  // A snapshot blob altered in place: caught against the manifest before anything replays.
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    absl::StatusOr<std::optional<std::string>> b =
        store->GetSnapshot(kModel, 0, PartKind::kLmu, 1);
    ASSERT_TRUE(b.ok() && b->has_value());
    std::string bad = **b;
    bad[bad.size() / 2] ^= 0x01;
    ASSERT_TRUE(store->RawPutSnapshot(kModel, 0, PartKind::kLmu, 1, bad).ok());
  }
  r = storage::ReplayAndCheck(data_dir_, kModel, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->ok());
  EXPECT_EQ(r->mismatch->part, PartKind::kLmu);
  EXPECT_EQ(r->mismatch->what, "snapshot 1 blob SHA-256 (manifest)");
}

TEST_F(AuditStoreTamperTest, AFusedModelReplaysFromItsSnapshotAndItsChainVerifies) {
  std::unique_ptr<server::Server> s = Start();
  std::shared_ptr<grpc::Channel> channel = test_util::ChannelTo(*s);
  {
    auto admin = v1::Admin::NewStub(channel);
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::CreateModelRequest req;
    v1::ModelSpec* spec = req.mutable_spec();
    spec->set_name("fused");
    v1::FuseSpec* f = spec->mutable_fuse();
    f->set_pattern(v1::FUSE_PATTERN_LINEAR_AS_GATE);
    f->mutable_sau()->set_d(4);
    f->mutable_sau()->set_r(64);
    f->mutable_lmu()->set_inline_rebuild(true);
    v1::ModelInfo info;
    const grpc::Status st = admin->CreateModel(&ctx, req, &info);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  auto fuse = v1::Fuse::NewStub(channel);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  uint64_t t = 1;
  const auto learn = [&](int batches) {
    test_util::LockStepStream<v1::LearnRequest, v1::LearnAck> stream(
        [&](grpc::ClientContext* ctx) { return fuse->Learn(ctx); });
    for (int b = 0; b < batches; ++b) {
      v1::LearnRequest req;
      req.set_model("fused");
      req.set_routing_key("k");
      for (int i = 0; i < 20; ++i) {
        v1::FuseSample* sample = req.add_samples();
        sample->set_t(t++);
        double y = 0;
        for (int j = 0; j < 4; ++j) {
          const double q = normal(rng);
          sample->add_q(q);
          y += 0.5 * q;
        }
        sample->add_ids(rng() % 100);
        sample->add_vals(1.0);
        sample->add_y(y);
      }
      const v1::LearnAck ack = stream.Send(req);
      ASSERT_EQ(ack.status().code(), 0) << ack.status().message();
    }
    ASSERT_TRUE(stream.Finish().ok());
  };
  learn(5);
  SnapshotNow(channel, "fused");
  learn(5);
  SnapshotNow(channel, "fused");  // the manifest is full: the log is trimmed through 5
  learn(5);

  absl::StatusOr<storage::ReplayReport> r = storage::ReplayAndCheck(data_dir_, "fused", 0);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->ok()) << storage::FormatReplayReport(*r);
  ASSERT_EQ(r->parts.size(), 1u);
  EXPECT_EQ(r->parts[0].part, PartKind::kFuse);
  EXPECT_EQ(r->parts[0].start_snapshot_seq, 1u);
  EXPECT_EQ(r->parts[0].start_log_seq, 5u);
  EXPECT_EQ(r->parts[0].batches_replayed, 10u);
  EXPECT_EQ(r->parts[0].batch_digests_checked, 10u);
  EXPECT_GE(r->parts[0].state_digests_checked, 2u);  // the start and snapshot 2

  const CommandResult v = RunCommand(kCli + " --server " + test_util::AddressOf(*s) +
                                     " audit verify fused --public-key " + data_dir_ +
                                     "/audit.pub");
  EXPECT_EQ(v.exit_code, 0) << Describe(v);
  Stop(s);
}

}  // namespace
}  // namespace streamlearn
