#include "server/storage/lmu_secret.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/storage/file_io.h"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {
namespace {

absl::Status FileError(const std::string& path, absl::string_view action, int err) {
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat("lmu secret file '", path, "': cannot ", action, ": ",
                                   std::strerror(err)));
}

// Closes the descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  const int fd_;
};

absl::Status ReadExactly(int fd, const std::string& path, lmu::HashSecret* out) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return FileError(path, "stat", errno);
  if (!S_ISREG(st.st_mode) || st.st_size != static_cast<off_t>(out->size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "lmu secret file '", path, "' must be a regular file of exactly ", out->size(),
        " bytes; it has ", static_cast<int64_t>(st.st_size),
        " (remove it to have a new secret made, which starts the LMU hashes afresh)"));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    spdlog::warn("lmu secret file '{}' is accessible to group or others (mode {:o}); "
                 "chmod 600 it",
                 path, st.st_mode & 0777);
  }
  size_t done = 0;
  while (done < out->size()) {
    const ssize_t n = read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FileError(path, "read", errno);
    if (n == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("lmu secret file '", path, "' shrank while it was read"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status WriteSecret(int fd, const std::string& path, const lmu::HashSecret& secret) {
  const absl::Status written = WriteAll(
      fd, std::string_view(reinterpret_cast<const char*>(secret.data()), secret.size()), path);
  if (!written.ok()) {
    return absl::Status(written.code(), absl::StrCat("lmu secret file ", written.message()));
  }
  if (fsync(fd) != 0) return FileError(path, "fsync", errno);
  return absl::OkStatus();
}

absl::StatusOr<lmu::HashSecret> Load(const std::string& path) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return FileError(path, "open", errno);
  lmu::HashSecret secret{};
  if (absl::Status s = ReadExactly(fd.get(), path, &secret); !s.ok()) {
    OPENSSL_cleanse(secret.data(), secret.size());
    return s;
  }
  return secret;
}

}  // namespace

absl::StatusOr<lmu::HashSecret> RandomLmuSecret() {
  lmu::HashSecret secret{};
  if (RAND_bytes(secret.data(), static_cast<int>(secret.size())) != 1) {
    return absl::InternalError("RAND_bytes failed to make the lmu secret");
  }
  return secret;
}

absl::StatusOr<lmu::HashSecret> LoadOrCreateLmuSecret(const std::string& path) {
  const int created = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (created < 0) {
    if (errno == EEXIST) return Load(path);
    return FileError(path, "create", errno);
  }
  Fd fd(created);
  absl::StatusOr<lmu::HashSecret> secret = RandomLmuSecret();
  absl::Status written = secret.ok() ? WriteSecret(fd.get(), path, *secret) : secret.status();
  if (!written.ok()) {
    unlink(path.c_str());  // a short file would stop the next start
    return written;
  }
  spdlog::info("created lmu secret file '{}' (32 random bytes, mode 0600)", path);
  return secret;
}

}  // namespace streamlearn::storage
