// The LMU secret file (server/storage/lmu_secret.h) and how the Server picks its secret.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/lmu_secret.h"
#include "server/server.h"

namespace streamlearn::server {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  static std::atomic<int> counter{0};
  const std::string dir = ::testing::TempDir() + "/server_lmu_secret_" +
                          std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteBytes(const std::string& path, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out << std::string(n, 'x');
}

TEST(LmuSecretTest, MissingFileIsCreatedWith32BytesMode0600AndReadBackUnchanged) {
  const std::string path = TempDir("create") + "/lmu.secret";
  absl::StatusOr<lmu::HashSecret> made = storage::LoadOrCreateLmuSecret(path);
  ASSERT_TRUE(made.ok()) << made.status();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 32);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(*made, lmu::HashSecret{});  // 32 zero bytes from RAND_bytes: never in practice

  absl::StatusOr<lmu::HashSecret> again = storage::LoadOrCreateLmuSecret(path);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *made);
}

TEST(LmuSecretTest, FileOfTheWrongSizeIsAnErrorNamingTheFile) {
  const std::string dir = TempDir("size");
  for (size_t n : {0u, 31u, 33u}) {
    SCOPED_TRACE(n);
    const std::string path = dir + "/s" + std::to_string(n);
    WriteBytes(path, n);
    absl::StatusOr<lmu::HashSecret> secret = storage::LoadOrCreateLmuSecret(path);
    EXPECT_EQ(secret.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(secret.status().message(), HasSubstr(path));
    EXPECT_THAT(secret.status().message(), HasSubstr("exactly 32 bytes"));
  }
}

TEST(LmuSecretTest, MissingDirectoryIsAnErrorNamingTheFile) {
  const std::string path = TempDir("nodir") + "/no/such/dir/lmu.secret";
  absl::StatusOr<lmu::HashSecret> secret = storage::LoadOrCreateLmuSecret(path);
  EXPECT_EQ(secret.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(secret.status().message(), HasSubstr(path));
}

TEST(LmuSecretTest, ServerCreatesTheSecretUnderDataDirAndRefusesABadSecretFile) {
  const std::string dir = TempDir("server");
  {
    Server::Options options;
    options.listen = "127.0.0.1:0";
    options.data_dir = dir + "/data";
    Server server(options);
    ASSERT_TRUE(server.Start().ok());
    server.Shutdown(absl::ZeroDuration());
  }
  EXPECT_EQ(std::filesystem::file_size(dir + "/data/lmu.secret"), 32u);

  WriteBytes(dir + "/bad.secret", 16);
  Server::Options options;
  options.listen = "127.0.0.1:0";
  options.data_dir = dir + "/data";
  options.lmu_secret_file = dir + "/bad.secret";
  Server server(options);
  absl::StatusOr<int> port = server.Start();
  EXPECT_EQ(port.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(port.status().message(), HasSubstr(dir + "/bad.secret"));
}

}  // namespace
}  // namespace streamlearn::server
