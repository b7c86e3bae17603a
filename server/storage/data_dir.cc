#include "server/storage/data_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>
#include <string_view>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/storage/file_io.h"
#include "server/storage/manifest.h"

namespace streamlearn::storage {
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
        why, ". Give the server the original file (--audit_key_file, --lmu_secret_file) or copy "
        "it here; backups do not hold secrets, and the server does not make a new one for an "
        "existing store"));
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

constexpr std::string_view kFloorHeader =
    "# A streamlearn data directory: its store (db/) and keys belong together. While this file\n"
    "# is here the server refuses to start without them, or with a store that holds less than\n"
    "# the lines below (audit chain lengths, newest snapshots) say it held. Written by the\n"
    "# server; remove it only to start on purpose from an older copy of db/.\n";

std::string EncodeStoreFloor(const StoreFloor& floor) {
  std::string out(kFloorHeader);
  for (const auto& [key, next] : floor.chains) {
    absl::StrAppend(&out, "chain ", key.first, " ", key.second, " ", next, "\n");
  }
  for (const auto& [key, log_seq] : floor.snapshots) {
    absl::StrAppend(&out, "snapshot ", std::get<0>(key), " ", std::get<1>(key), " ",
                    static_cast<int>(std::get<2>(key)), " ", log_seq, "\n");
  }
  return out;
}

absl::StatusOr<StoreFloor> ParseStoreFloor(std::string_view text) {
  StoreFloor floor;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    uint64_t a = 0, b = 0, c = 0;
    const bool chain = f.size() == 4 && f[0] == "chain" && absl::SimpleAtoi(f[2], &a) &&
                       absl::SimpleAtoi(f[3], &b) && a <= UINT32_MAX;
    const bool snapshot = f.size() == 5 && f[0] == "snapshot" && absl::SimpleAtoi(f[2], &a) &&
                          absl::SimpleAtoi(f[3], &c) && absl::SimpleAtoi(f[4], &b) &&
                          a <= UINT32_MAX && c >= 1 && c <= 3;
    if (chain) {
      floor.chains[{std::string(f[1]), static_cast<uint32_t>(a)}] = b;
    } else if (snapshot) {
      floor.snapshots[{std::string(f[1]), static_cast<uint32_t>(a), static_cast<PartKind>(c)}] =
          b;
    } else {
      return absl::DataLossError(absl::StrCat(kDataDirMarker, " line ", line_no,
                                              " is not a floor line: '", line, "'"));
    }
  }
  return floor;
}

absl::StatusOr<std::optional<StoreFloor>> ReadStoreFloor(const std::string& dir) {
  const fs::path marker = fs::path(dir) / kDataDirMarker;
  if (!Exists(marker)) return std::nullopt;
  std::ifstream in(marker, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return LastErrnoError("read", marker.string());
  absl::StatusOr<StoreFloor> floor = ParseStoreFloor(ss.str());
  if (!floor.ok()) {
    return absl::DataLossError(absl::StrCat("'", marker.string(), "': ", floor.status().message()));
  }
  return *std::move(floor);
}

absl::Status CheckStoreFloor(StorageBackend& backend, const std::string& where,
                             const StoreFloor& floor) {
  const auto lost = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(
        "the store '", where, "' holds less than it did: ", what, " (",
        kDataDirMarker, " records what it held). Its files are damaged (a cut MANIFEST, lost "
        "table files); the server will not start from it, which could delete more. Restore "
        "the data directory from a backup (docs/DURABILITY.md)"));
  };
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs = backend.ListSpecs();
  if (!specs.ok()) return specs.status();
  for (const auto& [key, next] : floor.chains) {
    // Named variables, not a structured binding: the lambda below captures `model`, which
    // clang before 16 refuses for a binding.
    const std::string& model = key.first;
    const uint32_t shard = key.second;
    const bool known = std::any_of(specs->begin(), specs->end(),
                                   [&](const auto& s) { return s.first == model; });
    if (!known) return lost(absl::StrCat("model '", model, "' is gone"));
    absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> last =
        backend.OpenShard(model, shard)->LastAudit();
    if (!last.ok()) return last.status();
    const uint64_t have = last->has_value() ? (*last)->first + 1 : 0;
    if (have < next) {
      return lost(absl::StrCat("the audit chain of model '", model, "' shard ", shard, " has ",
                               have, " records, it had ", next));
    }
  }
  for (const auto& [key, log_seq] : floor.snapshots) {
    const auto& [model, shard, part] = key;
    absl::StatusOr<std::optional<std::string>> bytes =
        backend.OpenShard(model, shard)->GetManifest(part);
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<std::vector<ManifestEntry>> manifest =
        bytes->has_value() ? DecodeManifest(**bytes) : std::vector<ManifestEntry>{};
    const uint64_t have = manifest.ok() && !manifest->empty() ? manifest->front().log_seq : 0;
    if (manifest.ok() && have < log_seq) {
      return lost(absl::StrCat("the newest snapshot of model '", model, "' shard ", shard, " ",
                               std::string(PartName(part)), " covers log entry ", have,
                               ", one covered ", log_seq));
    }
  }
  return absl::OkStatus();
}

absl::Status MarkDataDir(const std::string& dir, const StoreFloor& floor) {
  return WriteFileAtomically((fs::path(dir) / kDataDirMarker).string(), EncodeStoreFloor(floor),
                             0600);
}

}  // namespace streamlearn::storage
