#include "server/storage/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace streamlearn::storage {
namespace {

absl::Status Errno(int err, std::string_view what, const std::string& path) {
  return absl::Status(
      absl::ErrnoToStatusCode(err),
      absl::StrCat("'", path, "': cannot ", absl::string_view(what.data(), what.size()), ": ",
                   std::strerror(err)));
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Errno(errno, "create", tmp);
  if (absl::Status s = WriteAll(fd, text, tmp); !s.ok()) {
    close(fd);
    return s;
  }
  if (fsync(fd) != 0) {
    const int err = errno;
    close(fd);
    return Errno(err, "fsync", tmp);
  }
  close(fd);
  return RenameDurably(tmp, path);
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(errno, "write", path);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ErrnoError(int err, std::string_view what, const std::string& path) {
  return Errno(err, what, path);
}

absl::Status LastErrnoError(std::string_view what, const std::string& path) {
  const int err = errno;
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(absl::string_view(what.data(), what.size()), " '", path,
                                   "': ", std::strerror(err)));
}

absl::Status RenameDurably(const std::string& tmp, const std::string& path) {
  if (rename(tmp.c_str(), path.c_str()) != 0) return Errno(errno, "rename onto", path);
  // The rename is durable only once the directory is.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Errno(errno, "open", dir);
  const bool synced = fsync(dfd) == 0;
  const int err = errno;
  close(dfd);
  return synced ? absl::OkStatus() : Errno(err, "fsync", dir);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Errno(errno, "read", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Errno(errno, "read", path);
  return ss.str();
}

absl::Status WithContext(const absl::Status& s, std::string_view context) {
  return absl::Status(
      s.code(),
      absl::StrCat(absl::string_view(context.data(), context.size()), ": ", s.message()));
}

}  // namespace streamlearn::storage
