// Secrets stay secret (docs/SECURITY.md, "Secrets"): a server with a data directory goes
// through models of every kind, writes, reads, appends, snapshots, a backup and refused
// requests; then neither the LMU hash secret nor the audit signing key appears, raw, in hex
// or in base64, in its log, its metrics, its audit records, the error messages it sent, or any
// file it wrote other than the key files themselves (the store's tables, logs and snapshots,
// the backup).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "fuse.grpc.pb.h"
#include "lmu.grpc.pb.h"
#include "prometheus/text_serializer.h"
#include "sau.grpc.pb.h"
#include "server/server.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The forms a secret could leak in: raw bytes, hex either case, base64 (standard and URL).
std::vector<std::pair<std::string, std::string>> Forms(const std::string& what,
                                                       const std::string& raw) {
  const std::string hex = absl::BytesToHexString(raw);
  return {{what + " raw", raw},
          {what + " hex", hex},
          {what + " HEX", absl::AsciiStrToUpper(hex)},
          {what + " base64", absl::Base64Escape(raw)},
          {what + " base64url", absl::WebSafeBase64Escape(raw)}};
}

// The 32-byte Ed25519 seed in a PEM private key file.
std::string Ed25519Seed(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  EXPECT_NE(key, nullptr);
  std::string seed(32, '\0');
  size_t len = seed.size();
  EXPECT_EQ(EVP_PKEY_get_raw_private_key(key, reinterpret_cast<unsigned char*>(seed.data()),
                                         &len),
            1);
  EVP_PKEY_free(key);
  seed.resize(len);
  return seed;
}

TEST(SecretsTest, NeitherSecretAppearsInLogsMetricsRecordsErrorsOrFiles) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/secrets_", getpid());
  fs::remove_all(dir);
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  spdlog::default_logger()->sinks().push_back(sink);

  server::Server::Options options;
  options.data_dir = dir + "/data";
  options.metrics = "";
  options.snapshot_every_steps = 0;
  options.snapshot_interval = absl::ZeroDuration();
  options.audit_checkpoint_every = 4;
  std::unique_ptr<server::Server> server = test_util::StartLoopbackServer(options);
  ASSERT_NE(server->port(), 0);
  auto channel = test_util::ChannelTo(*server);
  std::string errors;  // every error message the server sent
  const auto note = [&](const grpc::Status& s) {
    if (!s.ok()) absl::StrAppend(&errors, s.error_message(), "\n");
  };

  // Models of every kind, writes to each, reads, appends, a snapshot and a backup.
  v1::ModelSpec sau_lmu;
  sau_lmu.set_name("both");
  sau_lmu.set_shards(2);
  sau_lmu.mutable_sau()->set_d(4);
  sau_lmu.mutable_sau()->set_d_v(2);
  sau_lmu.mutable_sau()->set_r(8);
  sau_lmu.mutable_lmu()->set_m(2);
  sau_lmu.mutable_lmu()->set_delta_buckets(16);
  sau_lmu.mutable_lmu()->set_lambda_max(1);
  sau_lmu.mutable_lmu()->set_margin(4);
  sau_lmu.mutable_lmu()->set_inline_rebuild(true);
  v1::ModelSpec fused;
  fused.set_name("fused");
  fused.mutable_fuse()->mutable_sau()->set_d(4);
  fused.mutable_fuse()->mutable_sau()->set_r(8);
  fused.mutable_fuse()->mutable_lmu()->set_delta_buckets(256);
  fused.mutable_fuse()->mutable_lmu()->set_lambda_max(1);
  fused.mutable_fuse()->mutable_lmu()->set_margin(16);
  fused.mutable_fuse()->mutable_lmu()->set_inline_rebuild(true);
  for (const v1::ModelSpec& spec : {sau_lmu, fused}) {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::CreateModelRequest r;
    *r.mutable_spec() = spec;
    v1::ModelInfo info;
    const grpc::Status s = v1::Admin::NewStub(channel)->CreateModel(&ctx, r, &info);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  test_util::Inputs in(11);
  {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    auto ingest = v1::SAU::NewStub(channel)->Ingest(&ctx);
    grpc::ClientContext uctx;
    test_util::SetDeadline(&uctx);
    auto update = v1::LMU::NewStub(channel)->Update(&uctx);
    grpc::ClientContext lctx;
    test_util::SetDeadline(&lctx);
    auto learn = v1::Fuse::NewStub(channel)->Learn(&lctx);
    for (uint64_t t = 1; t <= 40; ++t) {
      v1::IngestRequest ir;
      ir.set_model("both");
      ir.set_routing_key(absl::StrCat("k", t % 3));
      v1::Event* e = ir.add_events();
      e->set_t(t);
      for (double x : in.Vector(4)) e->add_k(x);
      for (double x : in.Vector(2)) e->add_v(x);
      v1::IngestAck ia;
      ASSERT_TRUE(ingest->Write(ir) && ingest->Read(&ia));
      note(grpc::Status(static_cast<grpc::StatusCode>(ia.status().code()), ia.status().message()));
      v1::UpdateRequest ur;
      ur.set_model("both");
      ur.set_routing_key(absl::StrCat("k", t % 3));
      v1::Sample* s = ur.add_samples();
      s->set_t(t);
      for (uint64_t id = 0; id < 8; ++id) {  // 320 ids: rebuilds
        s->add_ids(t * 1000 + id);
        s->add_vals(in.Next());
      }
      s->add_y(in.Next());
      s->add_y(in.Next());
      v1::UpdateAck ua;
      ASSERT_TRUE(update->Write(ur) && update->Read(&ua));
      note(grpc::Status(static_cast<grpc::StatusCode>(ua.status().code()), ua.status().message()));
      v1::LearnRequest lr;
      lr.set_model("fused");
      v1::FuseSample* f = lr.add_samples();
      f->set_t(t);
      f->add_ids(t);
      f->add_vals(1.0);
      for (double x : in.Vector(4)) f->add_q(x);
      f->add_y(in.Next());
      v1::LearnAck la;
      ASSERT_TRUE(learn->Write(lr) && learn->Read(&la));
      note(grpc::Status(static_cast<grpc::StatusCode>(la.status().code()), la.status().message()));
    }
    // Refused batches: their errors are collected too.
    v1::IngestRequest bad;
    bad.set_model("both");
    bad.add_events()->set_t(1);
    v1::IngestAck ack;
    ASSERT_TRUE(ingest->Write(bad) && ingest->Read(&ack));
    EXPECT_NE(ack.status().code(), 0);
    note(grpc::Status(static_cast<grpc::StatusCode>(ack.status().code()), ack.status().message()));
    ingest->WritesDone();
    update->WritesDone();
    learn->WritesDone();
    note(ingest->Finish());
    note(update->Finish());
    note(learn->Finish());
  }
  for (const char* name : {"both", "fused", "missing", "..", "a/b/c"}) {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::SnapshotRequest r;
    r.set_name(name);
    v1::SnapshotResponse out;
    note(v1::Admin::NewStub(channel)->Snapshot(&ctx, r, &out));
  }
  {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::AppendRequest r;
    r.set_model("both");
    r.set_json("{\"note\": \"hello\"}");
    v1::AppendResponse out;
    note(v1::Auditor::NewStub(channel)->Append(&ctx, r, &out));
    grpc::ClientContext bad_ctx;
    test_util::SetDeadline(&bad_ctx);
    r.set_json("{\"certificate\": 1}");
    note(v1::Auditor::NewStub(channel)->Append(&bad_ctx, r, &out));
  }
  {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    v1::BackupRequest r;
    r.set_name("b1");
    v1::BackupResponse out;
    const grpc::Status s = v1::Admin::NewStub(channel)->Backup(&ctx, r, &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::string records;
  for (const char* model : {"both", "fused"}) {
    for (uint32_t shard = 0; shard < 2; ++shard) {
      grpc::ClientContext ctx;
      test_util::SetDeadline(&ctx);
      v1::ReadRequest r;
      r.set_model(model);
      r.set_shard(shard);
      auto reader = v1::Auditor::NewStub(channel)->Read(&ctx, r);
      v1::ReadResponse chunk;
      while (reader->Read(&chunk)) {
        for (const v1::AuditLine& l : chunk.records()) absl::StrAppend(&records, l.line(), "\n");
      }
      note(reader->Finish());
    }
  }
  ASSERT_NE(records.find("\"checkpoint\""), std::string::npos) << "no checkpoint was read";
  const std::string metrics =
      prometheus::TextSerializer().Serialize(server->metrics().registry()->Collect());
  server->Shutdown(absl::Seconds(5));
  server.reset();
  spdlog::default_logger()->sinks().pop_back();

  const std::string lmu_secret = ReadAll(options.data_dir + "/lmu.secret");
  ASSERT_EQ(lmu_secret.size(), 32u);
  const std::string audit_pem = ReadAll(options.data_dir + "/audit.key");
  const std::string audit_seed = Ed25519Seed(audit_pem);
  ASSERT_EQ(audit_seed.size(), 32u);
  std::vector<std::pair<std::string, std::string>> secrets = Forms("lmu.secret", lmu_secret);
  for (auto& f : Forms("audit key", audit_seed)) secrets.push_back(f);
  // The PEM's base64 body line.
  const size_t body = audit_pem.find('\n') + 1;
  secrets.push_back({"audit.key PEM body", audit_pem.substr(body, audit_pem.find('\n', body) - body)});

  std::vector<std::pair<std::string, std::string>> places = {
      {"the log", log.str()}, {"the metrics", metrics}, {"the audit records", records},
      {"the error messages", errors}};
  size_t files = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (e.path().parent_path() == fs::path(options.data_dir) &&
        (name == "lmu.secret" || name == "audit.key")) {
      continue;  // the key files themselves
    }
    places.push_back({e.path().string(), ReadAll(e.path().string())});
    ++files;
  }
  ASSERT_GT(files, 10u);
  ASSERT_GT(log.str().size(), 1000u);
  ASSERT_NE(errors.find("not found"), std::string::npos) << errors;
  for (const auto& [where, text] : places) {
    for (const auto& [what, secret] : secrets) {
      EXPECT_EQ(text.find(secret), std::string::npos) << what << " appears in " << where;
    }
  }
  // The backup has no secret file.
  EXPECT_FALSE(fs::exists(options.data_dir + "/backups/b1/lmu.secret"));
  EXPECT_FALSE(fs::exists(options.data_dir + "/backups/b1/audit.key"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace streamlearn
