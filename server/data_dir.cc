#include "server/data_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace streamlearn::server {
namespace {

namespace fs = std::filesystem;

bool Exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

// True if db/ holds table files or a MANIFEST (a store that lost its CURRENT file).
bool HasStoreFiles(const fs::path& db) {
  std::error_code ec;
  if (!fs::is_directory(db, ec)) return false;
  for (const fs::directory_entry& e : fs::directory_iterator(db, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".sst") || name.starts_with("MANIFEST-")) return true;
  }
  return false;
}

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int err = errno;
  return absl::Status(absl::ErrnoToStatusCode(err),
                      absl::StrCat(what, " '", path, "': ", std::strerror(err)));
}

}  // namespace

absl::Status CheckDataDir(const DataDirFiles& files) {
  const fs::path dir(files.dir);
  const fs::path db = dir / "db";
  const bool marked = Exists(dir / kDataDirMarker);
  const bool store = Exists(db / "CURRENT");
  if (!store && (marked || HasStoreFiles(db))) {
    return absl::FailedPreconditionError(absl::StrCat(
        "data_dir '", files.dir, "' held a store (",
        marked ? absl::StrCat(kDataDirMarker, " is there") : "db/ holds table files",
        ") but '", db.string(),
        "' has none (db/CURRENT is missing): starting would begin empty and lose its state. "
        "Restore the data directory from a backup (docs/DURABILITY.md), or start with a new "
        "--data_dir"));
  }
  if (!store) return absl::OkStatus();
  const auto missing = [&](const std::string& path, absl::string_view what,
                           absl::string_view why) -> absl::Status {
    if (path.empty() || Exists(path)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "data_dir '", files.dir, "' has a store but its ", what, " '", path, "' is missing: ",
        why, ". Restore the file from a backup of this data directory (every backup holds "
        "it); the server does not make a new one for an existing store"));
  };
  if (absl::Status s = missing(files.audit_key, "audit signing key",
                               "the store's audit chains are signed with it, and a new key "
                               "would sign checkpoints no published key verifies");
      !s.ok()) {
    return s;
  }
  return missing(files.lmu_secret, "LMU hash secret",
                 "the stored LMU state is addressed by it, and a new secret would make that "
                 "state unreadable");
}

absl::Status MarkDataDir(const std::string& dir) {
  const fs::path marker = fs::path(dir) / kDataDirMarker;
  if (Exists(marker)) return absl::OkStatus();
  const std::string tmp = marker.string() + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("create", tmp);
  static constexpr std::string_view kText =
      "A streamlearn data directory: its store (db/) and keys belong together.\n"
      "While this file is here, the server refuses to start without db/ or a key.\n";
  const bool ok = write(fd, kText.data(), kText.size()) == static_cast<ssize_t>(kText.size()) &&
                  fsync(fd) == 0;
  absl::Status st = ok ? absl::OkStatus() : Errno("write", tmp);
  close(fd);
  if (st.ok() && rename(tmp.c_str(), marker.c_str()) != 0) st = Errno("rename", tmp);
  if (!st.ok()) return st;
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Errno("open", dir);
  const bool synced = fsync(dfd) == 0;
  close(dfd);
  return synced ? absl::OkStatus() : Errno("fsync", dir);
}

}  // namespace streamlearn::server
