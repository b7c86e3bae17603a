#include "server/storage/audit_archive.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "core/audit/merkle_tree.h"
#include "core/audit/tree_head.h"
#include "core/audit/verifier.h"
#include "core/common/digest.h"
#include "core/common/mutex.h"
#include "core/common/name_rule.h"
#include "core/common/status_macros.h"
#include "server/storage/encrypted_storage.h"
#include "server/storage/file_io.h"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[] = "SLAUDSG1";
constexpr char kEndMagic[] = "SLSEGEND";
constexpr size_t kMagicBytes = 8;
constexpr size_t kTailBytes = 8 + 8 + 8 + 4 + 4 + 8 + 32 + 8;
constexpr size_t kBlockHeaderBytes = 4 + 8 + 4 + 4 + 4;
constexpr size_t kBlockRecords = 1024;
constexpr size_t kBlockRawBytes = 1 << 20;
constexpr char kSuffix[] = ".seg";

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint32_t Crc32(std::string_view bytes) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

absl::Status Corrupt(const std::string& path, std::string_view what) {
  return absl::DataLossError(absl::StrCat("audit segment '", path, "': ",
                                          absl::string_view(what.data(), what.size())));
}

// Reads [offset, offset + n) of an open file.
absl::Status ReadAt(std::ifstream& in, const std::string& path, uint64_t offset, size_t n,
                    std::string* out) {
  out->resize(n);
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(out->data(), static_cast<std::streamsize>(n));
  if (!in || static_cast<size_t>(in.gcount()) != n) {
    return Corrupt(path, absl::StrCat("cannot read ", n, " bytes at offset ", offset,
                                      " (truncated?)"));
  }
  return absl::OkStatus();
}

// The tail and the block index of a segment.
struct Layout {
  AuditSegmentInfo info;
  uint64_t index_offset = 0;
  uint32_t blocks = 0;
  std::vector<std::pair<uint64_t, uint64_t>> index;  // (first index, offset) per block
};

absl::StatusOr<Layout> ReadLayout(std::ifstream& in, const std::string& path) {
  if (!in) {
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("audit segment '", path, "': cannot open: ",
                                     std::strerror(errno)));
  }
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (size < kMagicBytes + kTailBytes) return Corrupt(path, "shorter than a segment's tail");
  std::string tail;
  RETURN_IF_ERROR(ReadAt(in, path, size - kTailBytes, kTailBytes, &tail));
  if (tail.compare(kTailBytes - 8, 8, kEndMagic) != 0) {
    return Corrupt(path, "does not end with the segment tail (SLSEGEND)");
  }
  Layout l;
  l.info.path = path;
  l.info.bytes = size;
  l.info.first = GetU64(tail.data());
  l.info.end = GetU64(tail.data() + 8);
  l.index_offset = GetU64(tail.data() + 16);
  l.blocks = GetU32(tail.data() + 24);
  const uint32_t seal_bytes = GetU32(tail.data() + 28);
  const uint64_t seal_offset = GetU64(tail.data() + 32);
  const uint64_t tail_at = size - kTailBytes;
  if (l.info.end <= l.info.first || l.index_offset + 16ull * l.blocks != tail_at ||
      seal_offset + seal_bytes != l.index_offset || seal_offset < kMagicBytes) {
    return Corrupt(path, "its tail is inconsistent with its size");
  }
  RETURN_IF_ERROR(ReadAt(in, path, seal_offset, seal_bytes, &l.info.seal));
  std::string index;
  RETURN_IF_ERROR(ReadAt(in, path, l.index_offset, 16ull * l.blocks, &index));
  l.index.reserve(l.blocks);
  for (uint32_t b = 0; b < l.blocks; ++b) {
    l.index.emplace_back(GetU64(index.data() + 16 * b), GetU64(index.data() + 16 * b + 8));
  }
  if (l.blocks == 0 || l.index.front().first != l.info.first) {
    return Corrupt(path, "its block index does not start at its first record");
  }
  return l;
}

// Decodes block `b` (its header at `offset`) into (index, line) pairs, checking its CRC-32.
absl::Status ReadBlock(std::ifstream& in, const std::string& path, uint64_t offset,
                       uint64_t expect_first, std::string* raw,
                       std::vector<std::pair<uint64_t, std::string_view>>* records) {
  std::string header;
  RETURN_IF_ERROR(ReadAt(in, path, offset, kBlockHeaderBytes, &header));
  const uint32_t count = GetU32(header.data());
  const uint64_t first = GetU64(header.data() + 4);
  const uint32_t raw_bytes = GetU32(header.data() + 12);
  const uint32_t zip_bytes = GetU32(header.data() + 16);
  const uint32_t crc = GetU32(header.data() + 20);
  const std::string where = absl::StrCat("the block at offset ", offset);
  if (first != expect_first || count == 0) {
    return Corrupt(path, absl::StrCat(where, " does not hold the records the index says"));
  }
  std::string zip;
  RETURN_IF_ERROR(ReadAt(in, path, offset + kBlockHeaderBytes, zip_bytes, &zip));
  if (Crc32(zip) != crc) return Corrupt(path, absl::StrCat(where, " fails its CRC-32"));
  raw->resize(raw_bytes);
  uLongf got = raw_bytes;
  if (uncompress(reinterpret_cast<Bytef*>(raw->data()), &got,
                 reinterpret_cast<const Bytef*>(zip.data()), zip_bytes) != Z_OK ||
      got != raw_bytes) {
    return Corrupt(path, absl::StrCat(where, " does not inflate to its ", raw_bytes, " bytes"));
  }
  records->clear();
  size_t at = 0;
  for (uint32_t i = 0; i < count; ++i) {
    if (at + 4 > raw->size()) break;
    const uint32_t n = GetU32(raw->data() + at);
    at += 4;
    if (at + n > raw->size()) break;
    records->emplace_back(first + i, std::string_view(*raw).substr(at, n));
    at += n;
  }
  if (records->size() != count || at != raw->size()) {
    return Corrupt(path, absl::StrCat(where, " does not hold its ", count, " records"));
  }
  return absl::OkStatus();
}

// A segment being written: its bytes go to `tmp` as they come and are hashed on the way, so
// writing a segment holds one block in memory, not the file (large transient buffers made
// glibc's heap grow in the hour soak). Removed unless Close renamed it.
class SegmentSink {
 public:
  explicit SegmentSink(std::string tmp) : tmp_(std::move(tmp)) {}
  ~SegmentSink() {
    if (fd_ >= 0) {
      close(fd_);
      unlink(tmp_.c_str());
    }
  }
  SegmentSink(const SegmentSink&) = delete;
  SegmentSink& operator=(const SegmentSink&) = delete;

  absl::Status Open() {
    fd_ = open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    return fd_ < 0 ? ErrnoError(errno, "create", tmp_) : absl::OkStatus();
  }
  absl::Status Append(std::string_view bytes, bool hashed = true) {
    if (hashed) sum_.Update(bytes);
    RETURN_IF_ERROR(WriteAll(fd_, bytes, tmp_));
    size_ += bytes.size();
    return absl::OkStatus();
  }
  uint64_t size() const { return size_; }
  Digest Sum() { return sum_.Finish(); }
  // fsync, close, rename over `path`, fsync the directory.
  absl::Status Close(const std::string& path) {
    if (fsync(fd_) != 0) return ErrnoError(errno, "fsync", tmp_);
    close(fd_);
    fd_ = -1;
    return RenameDurably(tmp_, path);
  }

 private:
  const std::string tmp_;
  int fd_ = -1;
  Sha256 sum_;
  uint64_t size_ = 0;
};

// ---- the archive as a StorageBackend decorator ----

// One chain's segments, shared by every ShardStore opened for it.
struct ChainSegments {
  std::string dir;
  Mutex archive_mu;  // one ArchiveAudit at a time
  mutable Mutex mu;
  absl::Status loaded ABSL_GUARDED_BY(mu);
  std::vector<AuditSegmentInfo> segments ABSL_GUARDED_BY(mu);  // contiguous from index 0

  uint64_t archived_below() const ABSL_LOCKS_EXCLUDED(mu) {
    MutexLock lock(&mu);
    return segments.empty() ? 0 : segments.back().end;
  }
};

// Lists and checks a chain's segment files: each readable, together contiguous from 0. The
// files of `known` (by path) are taken from it instead of being read again.
absl::StatusOr<std::vector<AuditSegmentInfo>> LoadSegments(
    const std::string& dir, const std::map<std::string, AuditSegmentInfo>* known = nullptr) {
  std::vector<AuditSegmentInfo> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || e.path().extension() != kSuffix) continue;
    const std::string path = e.path().string();
    if (known != nullptr) {
      if (auto it = known->find(path); it != known->end()) {
        out.push_back(it->second);
        continue;
      }
    }
    ASSIGN_OR_RETURN(AuditSegmentInfo info, ReadAuditSegmentInfo(path));
    out.push_back(std::move(info));
  }
  if (ec) {
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat("audit archive '", dir, "': ", ec.message()));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  uint64_t next = 0;
  for (const AuditSegmentInfo& s : out) {
    if (s.first != next) {
      return absl::DataLossError(absl::StrCat(
          "audit archive '", dir, "': ", next == 0 ? "no segment starts at record 0" :
          absl::StrCat("the segments end at record ", next - 1, " and the next one, '",
                       s.path, "', starts at ", s.first)));
    }
    next = s.end;
  }
  return out;
}

// Reads a chain's segment list from its directory again: a server sharing the archive
// directory with others (the cluster mode) sees the segments another one sealed since. Files
// already listed are not read again. The list only grows. On an error (a gap, an unreadable
// file, a directory the file system cannot list now) the list stays as it was and the error
// is returned; a success clears an earlier load's error.
absl::Status ReloadSegments(ChainSegments* chain) ABSL_LOCKS_EXCLUDED(chain->mu) {
  std::map<std::string, AuditSegmentInfo> known;
  {
    MutexLock lock(&chain->mu);
    for (const AuditSegmentInfo& s : chain->segments) known.emplace(s.path, s);
  }
  absl::StatusOr<std::vector<AuditSegmentInfo>> loaded = LoadSegments(chain->dir, &known);
  if (!loaded.ok()) return loaded.status();
  MutexLock lock(&chain->mu);
  chain->loaded = absl::OkStatus();
  if (loaded->size() >= chain->segments.size()) chain->segments = *std::move(loaded);
  return absl::OkStatus();
}

class ArchivedShardStore final : public ShardStore {
 public:
  ArchivedShardStore(std::unique_ptr<ShardStore> inner, std::shared_ptr<ChainSegments> chain,
                     int zlib_level)
      : ShardStore(inner->model(), inner->shard()), inner_(std::move(inner)),
        chain_(std::move(chain)), zlib_level_(zlib_level) {}

  absl::Status Commit(const ShardWrite& write) override { return inner_->Commit(write); }
  absl::Status ResumeWrites() override { return inner_->ResumeWrites(); }
  absl::Status ScanLog(PartKind part, uint64_t from, const LogVisitor& fn) const override {
    return inner_->ScanLog(part, from, fn);
  }
  absl::StatusOr<std::optional<uint64_t>> LastLogSeq(PartKind part) const override {
    return inner_->LastLogSeq(part);
  }
  absl::StatusOr<std::optional<std::string>> GetSnapshot(PartKind part,
                                                         uint64_t seq) const override {
    return inner_->GetSnapshot(part, seq);
  }
  absl::StatusOr<std::optional<std::string>> GetManifest(PartKind part) const override {
    return inner_->GetManifest(part);
  }

  absl::Status ScanAudit(uint64_t from, const AuditVisitor& fn) const override {
    uint64_t next = from;
    // A second round only when a segment was archived (and its records trimmed from the live
    // store) between reading the segment list and reading the live store.
    for (;;) {
      absl::StatusOr<std::vector<AuditSegmentInfo>> listed = Segments();
      if (!listed.ok() && Refresh().ok()) listed = Segments();  // an earlier error may be gone
      if (!listed.ok()) return listed.status();
      const std::vector<AuditSegmentInfo> segments = *std::move(listed);
      for (const AuditSegmentInfo& s : segments) {
        if (s.end <= next) continue;
        bool stopped = false;
        RETURN_IF_ERROR(ScanAuditSegment(
            s, next,
            [&](uint64_t index, std::string_view line) {
              next = index + 1;
              return fn(index, line);
            },
            &stopped));
        if (stopped) return absl::OkStatus();
      }
      const uint64_t archived = segments.empty() ? 0 : segments.back().end;
      // Archived meanwhile, here or (with an archive directory shared by several servers)
      // by another server: then the records the live store no longer has are in a segment.
      const auto archived_since = [&] {
        if (chain_->archived_below() > archived) return true;
        (void)Refresh();  // an error leaves the list as it was: the gap below is reported
        return chain_->archived_below() > archived;
      };
      bool first = true, gap = false;
      uint64_t found = 0;
      const absl::Status st = inner_->ScanAudit(next, [&](uint64_t index, std::string_view line) {
        if (first && archived > 0 && index != next) {
          gap = true;
          found = index;
          return false;
        }
        first = false;
        next = index + 1;
        return fn(index, line);
      });
      if (!st.ok()) {
        if (absl::IsDataLoss(st) && archived_since()) continue;
        return st;
      }
      if (!gap) return absl::OkStatus();
      if (archived_since()) continue;
      return absl::DataLossError(absl::StrFormat(
          "audit chain of model '%s' shard %d: the archive ends at record %d, but the live "
          "store's first record after it is %d", model(), shard(), archived - 1, found));
    }
  }

  absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> LastAudit() const override {
    ASSIGN_OR_RETURN(auto last, inner_->LastAudit());
    if (last.has_value()) return last;
    ASSIGN_OR_RETURN(std::vector<AuditSegmentInfo> segments, Segments());
    if (segments.empty()) return last;
    bool stopped = false;
    RETURN_IF_ERROR(ScanAuditSegment(
        segments.back(), segments.back().end - 1,
        [&](uint64_t index, std::string_view line) {
          last = std::make_pair(index, std::string(line));
          return true;
        },
        &stopped));
    return last;
  }

  absl::Status ArchiveAudit(uint64_t below, std::string_view seal) override {
    MutexLock serial(&chain_->archive_mu);
    // What the directory holds now: with a directory shared by several servers, a segment
    // another one sealed is not written again (its records may be gone from the live store).
    RETURN_IF_ERROR(Refresh());
    ASSIGN_OR_RETURN(std::vector<AuditSegmentInfo> segments, Segments());
    const uint64_t first = segments.empty() ? 0 : segments.back().end;
    if (below <= first) return absl::OkStatus();
    std::error_code ec;
    fs::create_directories(chain_->dir, ec);
    if (ec) {
      return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                          absl::StrCat("audit archive '", chain_->dir, "': ", ec.message()));
    }
    const std::string path = (fs::path(chain_->dir) /
                              absl::StrFormat("%020d-%020d%s", first, below, kSuffix))
                                 .string();
    ASSIGN_OR_RETURN(AuditSegmentInfo info,
                     WriteAuditSegment(path, first, below, seal,
                                       [&](uint64_t from, const AuditVisitor& fn) {
                                         return inner_->ScanAudit(from, fn);
                                       },
                                       zlib_level_));
    {
      MutexLock lock(&chain_->mu);
      // A reload by a reader since the rename may have listed it already.
      const uint64_t listed_end = chain_->segments.empty() ? 0 : chain_->segments.back().end;
      if (listed_end == info.first) chain_->segments.push_back(std::move(info));
    }
    inner_->NoteArchivedBelow(below);
    // Only now the live copies go; a crash before this leaves them in both places (readers
    // take them from the segment) and the next archive's trim removes them.
    ShardWrite trim;
    trim.trim_audit_below = below;
    return inner_->Commit(trim);
  }

  uint64_t ArchivedBelow() const override { return chain_->archived_below(); }

  // Reads the directory again and tells the wrapped store how far the segments reach.
  absl::Status Refresh() const {
    absl::Status s = ReloadSegments(chain_.get());
    inner_->NoteArchivedBelow(chain_->archived_below());
    return s;
  }

 private:
  absl::StatusOr<std::vector<AuditSegmentInfo>> Segments() const {
    MutexLock lock(&chain_->mu);
    if (!chain_->loaded.ok()) return chain_->loaded;
    return chain_->segments;
  }

  std::unique_ptr<ShardStore> inner_;
  std::shared_ptr<ChainSegments> chain_;
  const int zlib_level_;
};

class ArchivedStorage final : public StorageBackend {
 public:
  ArchivedStorage(std::unique_ptr<StorageBackend> inner, AuditArchiveOptions options)
      : inner_(std::move(inner)), options_(std::move(options)) {}

  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListSpecs() const override {
    return inner_->ListSpecs();
  }

  absl::Status CreateModel(std::string_view name, std::string_view spec_bytes,
                           std::span<const std::string> genesis_lines) override {
    // Segments left under a new model's name (a data directory's store replaced, its archive
    // kept) would be read as the new chains' start: refuse rather than mix two chains.
    for (uint32_t shard = 0; shard < genesis_lines.size(); ++shard) {
      const std::string dir = AuditSegmentDir(options_.dir, name, shard);
      std::error_code ec;
      if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the audit archive already holds segments under '", dir, "', from an earlier model "
            "named '", absl::string_view(name.data(), name.size()),
            "' whose store is gone: move them away before creating the model again"));
      }
    }
    return inner_->CreateModel(name, spec_bytes, genesis_lines);
  }

  std::unique_ptr<ShardStore> OpenShard(std::string_view model, uint32_t shard) override {
    std::unique_ptr<ShardStore> store = inner_->OpenShard(model, shard);
    if (store == nullptr) return store;
    std::shared_ptr<ChainSegments> chain;
    bool known = true;
    {
      MutexLock lock(&mu_);
      std::shared_ptr<ChainSegments>& slot = chains_[{std::string(model), shard}];
      if (slot == nullptr) {
        known = false;
        slot = std::make_shared<ChainSegments>();
        slot->dir = AuditSegmentDir(options_.dir, model, shard);
        absl::StatusOr<std::vector<AuditSegmentInfo>> loaded = LoadSegments(slot->dir);
        MutexLock chain_lock(&slot->mu);
        if (loaded.ok()) {
          slot->segments = *std::move(loaded);
        } else {
          slot->loaded = loaded.status();
        }
      }
      chain = slot;
    }
    // A shard opened again (the cluster mode: a lease taken back) reads the directory again.
    if (known) {
      if (absl::Status s = ReloadSegments(chain.get()); !s.ok()) {
        spdlog::warn("audit archive of model '{}' shard {}: {} (kept the earlier list)",
                     std::string(model), shard, std::string(s.message()));
      }
    }
    store->NoteArchivedBelow(chain->archived_below());
    return std::make_unique<ArchivedShardStore>(std::move(store), std::move(chain),
                                                options_.zlib_level);
  }

  std::string Describe() const override {
    return absl::StrCat(inner_->Describe(), ", audit archive at ", options_.dir);
  }

 private:
  std::unique_ptr<StorageBackend> inner_;
  const AuditArchiveOptions options_;
  Mutex mu_;
  std::map<std::pair<std::string, uint32_t>, std::shared_ptr<ChainSegments>> chains_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string AuditArchiveDir(const std::string& data_dir) {
  return (fs::path(data_dir) / "audit-archive").string();
}

std::string AuditSegmentDir(const std::string& archive_dir, std::string_view model,
                            uint32_t shard) {
  // "tenant/model" for every tenant, the default one included: no two models share a path.
  const std::string_view tenant = TenantOfScoped(model);
  const size_t slash = model.find('/');
  const std::string_view name = slash == std::string_view::npos ? model : model.substr(slash + 1);
  return (fs::path(archive_dir) / std::string(tenant) / std::string(name) /
          std::to_string(shard))
      .string();
}

absl::StatusOr<AuditSegmentInfo> WriteAuditSegment(
    const std::string& path, uint64_t first, uint64_t end, std::string_view seal,
    const std::function<absl::Status(uint64_t from, const AuditVisitor& fn)>& scan,
    int zlib_level) {
  if (end <= first) {
    return absl::InvalidArgumentError(
        absl::StrCat("audit segment '", path, "': empty range [", first, ", ", end, ")"));
  }
  // A temporary name of this writer's own: two servers sealing the same segment into a shared
  // directory (an owner and a fenced former owner) never write into one file; each renames a
  // whole file, and the two are the same bytes (a segment is a function of the chain's prefix).
  static std::atomic<uint64_t> writes{0};
  SegmentSink out(absl::StrCat(path, ".tmp.", getpid(), ".", writes.fetch_add(1)));
  RETURN_IF_ERROR(out.Open());
  RETURN_IF_ERROR(out.Append(std::string_view(kMagic, kMagicBytes)));
  std::vector<std::pair<uint64_t, uint64_t>> index;
  std::string raw, zip, header;
  uint64_t next = first, block_first = first;
  uint32_t count = 0;
  absl::Status failed;
  auto flush = [&]() -> absl::Status {
    if (count == 0) return absl::OkStatus();
    uLongf zip_bytes = compressBound(static_cast<uLong>(raw.size()));
    zip.resize(zip_bytes);
    if (compress2(reinterpret_cast<Bytef*>(zip.data()), &zip_bytes,
                  reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()),
                  zlib_level) != Z_OK) {
      return absl::InternalError(absl::StrCat("audit segment '", path, "': zlib failed"));
    }
    zip.resize(zip_bytes);
    index.emplace_back(block_first, out.size());
    header.clear();
    PutU32(&header, count);
    PutU64(&header, block_first);
    PutU32(&header, static_cast<uint32_t>(raw.size()));
    PutU32(&header, static_cast<uint32_t>(zip.size()));
    PutU32(&header, Crc32(zip));
    RETURN_IF_ERROR(out.Append(header));
    RETURN_IF_ERROR(out.Append(zip));
    raw.clear();
    count = 0;
    block_first = next;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(scan(first, [&](uint64_t at, std::string_view line) {
    if (at >= end) return false;
    if (at != next) {
      failed = absl::DataLossError(absl::StrCat("audit segment '", path, "': the chain jumps from ",
                                                next, " to ", at, " while archiving it"));
      return false;
    }
    PutU32(&raw, static_cast<uint32_t>(line.size()));
    raw.append(line.data(), line.size());
    ++count;
    ++next;
    if (count == kBlockRecords || raw.size() >= kBlockRawBytes) failed = flush();
    return failed.ok();
  }));
  RETURN_IF_ERROR(failed);
  if (next != end) {
    return absl::DataLossError(absl::StrCat("audit segment '", path, "': records ", next,
                                            " to ", end - 1, " are not in the live store"));
  }
  RETURN_IF_ERROR(flush());
  const uint64_t seal_offset = out.size();
  RETURN_IF_ERROR(out.Append(seal));
  const uint64_t index_offset = out.size();
  std::string tail;
  for (const auto& [block, offset] : index) {
    PutU64(&tail, block);
    PutU64(&tail, offset);
  }
  PutU64(&tail, first);
  PutU64(&tail, end);
  PutU64(&tail, index_offset);
  PutU32(&tail, static_cast<uint32_t>(index.size()));
  PutU32(&tail, static_cast<uint32_t>(seal.size()));
  PutU64(&tail, seal_offset);
  RETURN_IF_ERROR(out.Append(tail));
  const Digest sum = out.Sum();
  RETURN_IF_ERROR(
      out.Append(std::string_view(reinterpret_cast<const char*>(sum.data()), sum.size()),
                 /*hashed=*/false));
  RETURN_IF_ERROR(out.Append(std::string_view(kEndMagic, 8), /*hashed=*/false));
  AuditSegmentInfo info;
  info.path = path;
  info.first = first;
  info.end = end;
  info.seal = std::string(seal);
  info.bytes = out.size();
  RETURN_IF_ERROR(out.Close(path));
  return info;
}

absl::StatusOr<AuditSegmentInfo> ReadAuditSegmentInfo(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ASSIGN_OR_RETURN(Layout l, ReadLayout(in, path));
  return l.info;
}

absl::Status ScanAuditSegment(const AuditSegmentInfo& segment, uint64_t from,
                              const AuditVisitor& fn, bool* stopped) {
  *stopped = false;
  if (from >= segment.end) return absl::OkStatus();
  std::ifstream in(segment.path, std::ios::binary);
  ASSIGN_OR_RETURN(Layout l, ReadLayout(in, segment.path));
  if (l.info.first != segment.first || l.info.end != segment.end) {
    return Corrupt(segment.path, "changed since it was listed");
  }
  // The last block starting at or before `from`.
  size_t b = std::upper_bound(l.index.begin(), l.index.end(), from,
                              [](uint64_t v, const auto& e) { return v < e.first; }) -
             l.index.begin();
  b = b == 0 ? 0 : b - 1;
  std::string raw;
  std::vector<std::pair<uint64_t, std::string_view>> records;
  uint64_t next = l.index[b].first;
  for (; b < l.index.size(); ++b) {
    RETURN_IF_ERROR(ReadBlock(in, segment.path, l.index[b].second, next, &raw, &records));
    for (const auto& [index, line] : records) {
      if (index < from) continue;
      if (!fn(index, line)) {
        *stopped = true;
        return absl::OkStatus();
      }
    }
    next = records.back().first + 1;
  }
  if (next != segment.end) {
    return Corrupt(segment.path, absl::StrCat("its blocks end at record ", next,
                                              ", not at ", segment.end));
  }
  return absl::OkStatus();
}

absl::Status VerifyAuditSegment(const std::string& path) {
  ASSIGN_OR_RETURN(std::string file, ReadFile(path));
  if (file.size() < kMagicBytes + kTailBytes || file.compare(0, kMagicBytes, kMagic) != 0) {
    return Corrupt(path, "does not start with SLAUDSG1");
  }
  const size_t sum_at = file.size() - 40;
  const Digest sum = Sha256Of(std::string_view(file).substr(0, sum_at));
  if (std::memcmp(sum.data(), file.data() + sum_at, sum.size()) != 0) {
    return Corrupt(path, "its SHA-256 does not match its content");
  }
  ASSIGN_OR_RETURN(AuditSegmentInfo info, ReadAuditSegmentInfo(path));
  bool stopped = false;
  return ScanAuditSegment(info, info.first, [](uint64_t, std::string_view) { return true; },
                          &stopped);
}

absl::StatusOr<ArchiveCheck> VerifyArchivedChain(
    const std::string& chain_dir, const Ed25519PublicKey& key,
    const std::function<void(const AuditSegmentInfo&, const ArchiveCheck&)>& on_segment) {
  ASSIGN_OR_RETURN(std::vector<AuditSegmentInfo> segments, LoadSegments(chain_dir));
  if (segments.empty()) {
    return absl::NotFoundError(absl::StrCat("no audit segment (*.seg) in '", chain_dir, "'"));
  }
  AuditVerifier verifier({.public_key = &key});
  // The perfect subtrees the leaves so far make (sizes strictly decreasing): the RFC 6962 root
  // of any prefix is their fold from the right.
  std::vector<std::pair<uint64_t, Digest>> frontier;
  ArchiveCheck out;
  for (const AuditSegmentInfo& s : segments) {
    RETURN_IF_ERROR(VerifyAuditSegment(s.path));
    absl::StatusOr<TreeHead> head = OpenTreeHead(s.seal, key);
    if (!head.ok()) return WithContext(head.status(), absl::StrCat("the seal of '", s.path, "'"));
    if (out.origin.empty()) out.origin = head->origin;
    if (head->origin != out.origin || head->size != s.end) {
      return Corrupt(s.path, absl::StrCat("its seal is the tree head of '", head->origin,
                                          "' at size ", head->size, ", not of '", out.origin,
                                          "' at the segment's end ", s.end));
    }
    absl::Status failed;
    bool stopped = false;
    RETURN_IF_ERROR(ScanAuditSegment(
        s, s.first,
        [&](uint64_t index, std::string_view line) {
          if (LooksSealed(line)) {
            failed = absl::FailedPreconditionError(absl::StrCat(
                "'", s.path, "' holds records encrypted at rest: verify them through the "
                "server (streamlearn audit verify), which holds the tenant's key"));
            return false;
          }
          if (absl::Status v = verifier.Feed(line); !v.ok()) {
            failed = WithContext(v, absl::StrCat("record ", index, " in '", s.path, "'"));
            return false;
          }
          Digest h = LeafHash(line);
          uint64_t size = 1;
          while (!frontier.empty() && frontier.back().first == size) {
            h = NodeHash(frontier.back().second, h);
            size *= 2;
            frontier.pop_back();
          }
          frontier.emplace_back(size, h);
          return true;
        },
        &stopped));
    RETURN_IF_ERROR(failed);
    Digest root = frontier.back().second;
    for (size_t i = frontier.size() - 1; i-- > 0;) root = NodeHash(frontier[i].second, root);
    if (root != head->root) {
      return Corrupt(s.path, absl::StrCat("the records 0..", s.end - 1, " hash to the root ",
                                          ToHex(root), ", but its seal says ",
                                          ToHex(head->root)));
    }
    ++out.segments;
    out.records = s.end;
    out.root = root;
    if (on_segment) on_segment(s, out);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<StorageBackend>> ArchiveAuditTo(
    std::unique_ptr<StorageBackend> inner, AuditArchiveOptions options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("audit archive: no directory");
  if (options.zlib_level < 1 || options.zlib_level > 9) {
    return absl::InvalidArgumentError(absl::StrCat("audit archive: zlib level ",
                                                   options.zlib_level, " is not in 1..9"));
  }
  return std::unique_ptr<StorageBackend>(
      std::make_unique<ArchivedStorage>(std::move(inner), std::move(options)));
}

}  // namespace streamlearn::storage
