// TLS, mTLS, the plaintext rule, the health port and access-policy reloads (docs/SECURITY.md),
// against in-process servers, with real certificates made by scripts/make-certs.sh.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "client/lib/client.h"
#include "client/lib/credentials.h"
#include "health.grpc.pb.h"
#include "server/auth/access_policy.h"
#include "server/auth/tls.h"
#include "server/server.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

namespace fs = std::filesystem;

// Runs scripts/make-certs.sh into `dir` with `args`.
void MakeCerts(const std::string& dir, const std::string& args) {
  const std::string cmd = absl::StrCat(STREAMLEARN_SOURCE_DIR, "/scripts/make-certs.sh ", dir,
                                       " ", args, " > ", dir, ".log 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/tls_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ASSERT_NO_FATAL_FAILURE(
        MakeCerts(dir_ + "/ca1", "--server localhost --client reader-1 --client stranger"));
    ASSERT_NO_FATAL_FAILURE(MakeCerts(dir_ + "/ca2", "--server localhost --client reader-1"));
    admin_token_ = "admin-token-3f9a";
    std::ofstream(dir_ + "/access.json")
        << "{\"principals\": [{\"id\": \"acme-admin\", \"tenant\": \"acme\", \"roles\": "
           "[\"admin\"], \"token_sha256\": \""
        << server::TokenHash(admin_token_)
        << "\"}, {\"id\": \"acme-reader\", \"tenant\": \"acme\", \"roles\": [\"reader\"], "
           "\"cert_identity\": \"reader-1\"}]}\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  server::TlsFiles Files(const std::string& ca, bool mtls) const {
    return {.cert_file = dir_ + "/" + ca + "/localhost.crt",
            .key_file = dir_ + "/" + ca + "/localhost.key",
            .client_ca_file = mtls ? dir_ + "/" + ca + "/ca.crt" : "",
            .peer_ca_file = ""};
  }

  // A client of the server at `port` with `creds`; its ListModels status.
  static absl::Status ListWith(int port, ClientCredentials creds,
                               std::chrono::milliseconds connect = std::chrono::seconds(20)) {
    Client::Options options;
    options.credentials = std::move(creds);
    options.connect_timeout = connect;
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(absl::StrCat("localhost:", port), options);
    if (!client.ok()) return client.status();
    return (*client)->ListModels().status();
  }

  std::string dir_;
  std::string admin_token_;
};

TEST_F(TlsTest, PlaintextOnAnAddressOtherThanLoopbackIsRefusedUnlessAllowed) {
  server::Server::Options options;
  options.listen = "0.0.0.0:0";
  {
    server::Server s(options);
    absl::StatusOr<int> port = s.Start();
    ASSERT_FALSE(port.ok());
    EXPECT_EQ(port.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(port.status().message().find("--allow_plaintext"), std::string::npos)
        << port.status();
  }
  options.allow_plaintext = true;
  server::Server s(options);
  ASSERT_TRUE(s.Start().ok());
  s.Shutdown(absl::ZeroDuration());
}

TEST_F(TlsTest, BadTlsFilesAreRefusedAtStartNamingTheFile) {
  server::Server::Options options;
  options.listen = "127.0.0.1:0";
  options.tls = Files("ca1", false);
  options.tls.key_file = dir_ + "/ca2/localhost.key";  // another certificate's key
  server::Server s(options);
  absl::StatusOr<int> port = s.Start();
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(port.status().message().find("does not match"), std::string::npos) << port.status();

  options.tls = Files("ca1", false);
  options.tls.cert_file = dir_ + "/missing.crt";
  server::Server s2(options);
  port = s2.Start();
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.status().message().find("missing.crt"), std::string::npos) << port.status();
}

TEST_F(TlsTest, AClientTrustingTheServersCaConnectsAndOneTrustingAnotherDoesNot) {
  server::Server::Options options;
  options.listen = "0.0.0.0:0";  // TLS makes a non-loopback address fine
  options.tls = Files("ca1", false);
  server::Server s(options);
  absl::StatusOr<int> port = s.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_TRUE(ListWith(*port, {.tls_ca_file = dir_ + "/ca1/ca.crt"}).ok());
  const absl::Status wrong =
      ListWith(*port, {.tls_ca_file = dir_ + "/ca2/ca.crt"}, std::chrono::seconds(2));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnavailable) << wrong;
  const absl::Status plain = ListWith(*port, {}, std::chrono::seconds(2));
  EXPECT_EQ(plain.code(), absl::StatusCode::kUnavailable) << plain;
  s.Shutdown(absl::ZeroDuration());
}

TEST_F(TlsTest, MutualTlsAdmitsACertificateThePolicyNamesAndNoOther) {
  server::Server::Options options;
  options.listen = "127.0.0.1:0";
  options.tls = Files("ca1", true);
  options.access_file = dir_ + "/access.json";
  server::Server s(options);
  absl::StatusOr<int> port = s.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string ca = dir_ + "/ca1/ca.crt";
  // reader-1's certificate: the policy's acme-reader; ListModels is every role's.
  EXPECT_TRUE(ListWith(*port, {.tls_ca_file = ca,
                               .tls_cert_file = dir_ + "/ca1/reader-1.crt",
                               .tls_key_file = dir_ + "/ca1/reader-1.key"})
                  .ok());
  // A certificate of the same CA that the policy does not name.
  EXPECT_EQ(ListWith(*port, {.tls_ca_file = ca,
                             .tls_cert_file = dir_ + "/ca1/stranger.crt",
                             .tls_key_file = dir_ + "/ca1/stranger.key"})
                .code(),
            absl::StatusCode::kUnauthenticated);
  // Same name, another CA: the handshake fails.
  EXPECT_EQ(ListWith(*port,
                     {.tls_ca_file = ca,
                      .tls_cert_file = dir_ + "/ca2/reader-1.crt",
                      .tls_key_file = dir_ + "/ca2/reader-1.key"},
                     std::chrono::seconds(2))
                .code(),
            absl::StatusCode::kUnavailable);
  // No client certificate at all: the handshake fails too.
  EXPECT_EQ(ListWith(*port, {.tls_ca_file = ca}, std::chrono::seconds(2)).code(),
            absl::StatusCode::kUnavailable);
  // A token over mTLS: the admin.
  EXPECT_TRUE(ListWith(*port, {.token = admin_token_,
                               .tls_ca_file = ca,
                               .tls_cert_file = dir_ + "/ca1/stranger.crt",
                               .tls_key_file = dir_ + "/ca1/stranger.key"})
                  .ok());
  s.Shutdown(absl::ZeroDuration());
}

// The certificate files are watched: after they are replaced (renamed into place), new
// connections get the new certificate, without a restart.
TEST_F(TlsTest, ReplacedCertificateFilesAreServedWithoutARestart) {
  fs::create_directories(dir_ + "/live");
  fs::copy_file(dir_ + "/ca1/localhost.crt", dir_ + "/live/tls.crt");
  fs::copy_file(dir_ + "/ca1/localhost.key", dir_ + "/live/tls.key");
  server::Server::Options options;
  options.listen = "127.0.0.1:0";
  options.tls = {.cert_file = dir_ + "/live/tls.crt", .key_file = dir_ + "/live/tls.key"};
  options.tls_reload_interval = absl::Seconds(1);
  server::Server s(options);
  absl::StatusOr<int> port = s.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_TRUE(ListWith(*port, {.tls_ca_file = dir_ + "/ca1/ca.crt"}).ok());

  fs::copy_file(dir_ + "/ca2/localhost.key", dir_ + "/live/tls.key.new");
  fs::copy_file(dir_ + "/ca2/localhost.crt", dir_ + "/live/tls.crt.new");
  fs::rename(dir_ + "/live/tls.key.new", dir_ + "/live/tls.key");
  fs::rename(dir_ + "/live/tls.crt.new", dir_ + "/live/tls.crt");
  // Waits for the watcher to pick it up (each try is a new connection); the deadline only
  // stops a hung test.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  absl::Status with_new;
  do {
    with_new = ListWith(*port, {.tls_ca_file = dir_ + "/ca2/ca.crt"}, std::chrono::seconds(2));
  } while (!with_new.ok() && std::chrono::steady_clock::now() < give_up);
  EXPECT_TRUE(with_new.ok()) << with_new;
  EXPECT_EQ(ListWith(*port, {.tls_ca_file = dir_ + "/ca1/ca.crt"}, std::chrono::seconds(2)).code(),
            absl::StatusCode::kUnavailable);
  s.Shutdown(absl::ZeroDuration());
}

TEST_F(TlsTest, AReloadedPolicyAdmitsNewTokensAndABrokenOneChangesNothing) {
  server::Server::Options options;
  options.listen = "127.0.0.1:0";
  options.access_file = dir_ + "/access.json";
  server::Server s(options);
  absl::StatusOr<int> port = s.Start();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string added = "added-later-token-51c2";
  EXPECT_EQ(ListWith(*port, {.token = added}).code(), absl::StatusCode::kUnauthenticated);
  std::ofstream(options.access_file)
      << "{\"principals\": [{\"id\": \"later\", \"tenant\": \"acme\", \"roles\": "
         "[\"reader\"], \"token_sha256\": \""
      << server::TokenHash(added) << "\"}]}\n";
  ASSERT_TRUE(s.ReloadAccessPolicy().ok());
  EXPECT_TRUE(ListWith(*port, {.token = added}).ok());
  EXPECT_EQ(ListWith(*port, {.token = admin_token_}).code(), absl::StatusCode::kUnauthenticated);
  std::ofstream(options.access_file) << "{\"principals\": [{\"id\": \"x\"}";  // cut short
  const absl::Status broken = s.ReloadAccessPolicy();
  EXPECT_EQ(broken.code(), absl::StatusCode::kInvalidArgument) << broken;
  EXPECT_TRUE(ListWith(*port, {.token = added}).ok());
  s.Shutdown(absl::ZeroDuration());
}

TEST_F(TlsTest, TheHealthPortAnswersInPlaintextBesideATlsPort) {
  server::Server::Options options;
  options.listen = "127.0.0.1:0";
  options.tls = Files("ca1", true);
  options.health_listen = "127.0.0.1:0";
  server::Server s(options);
  ASSERT_TRUE(s.Start().ok());
  ASSERT_GT(s.health_port(), 0);
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", s.health_port()), grpc::InsecureChannelCredentials()));
  for (const auto& [service, code] :
       {std::pair<std::string, grpc::StatusCode>{"", grpc::StatusCode::OK},
        {server::kReadyService, grpc::StatusCode::OK},
        {"streamlearn.v1.SAU", grpc::StatusCode::NOT_FOUND}}) {
    grpc::ClientContext ctx;
    test_util::SetDeadline(&ctx);
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status st = stub->Check(&ctx, request, &response);
    EXPECT_EQ(st.error_code(), code) << service;
    if (st.ok()) EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }
  s.Shutdown(absl::ZeroDuration());
}

TEST(ClientCredentialsTest, ATokenIsNotSentInClearToAHostOtherThanLoopback) {
  for (const char* address : {"10.1.2.3:50051", "streamlearn.example:50051"}) {
    absl::StatusOr<std::unique_ptr<Client>> c =
        Client::Connect(address, {.credentials = {.token = "t"}});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  }
  EXPECT_TRUE(CheckTokenTransport({.token = "t"}, "127.0.0.1:1").ok());
  EXPECT_TRUE(CheckTokenTransport({.token = "t"}, "localhost:1").ok());
  EXPECT_TRUE(CheckTokenTransport({.token = "t", .tls = true}, "10.1.2.3:1").ok());
}

}  // namespace
}  // namespace streamlearn
