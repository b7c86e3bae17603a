#include "server/storage/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cstring>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/common/absl_view.h"
#include "core/common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/listener.h"
#include "rocksdb/cache.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "server/storage/file_io.h"
#include "spdlog/spdlog.h"

namespace streamlearn::storage {

// One operation of a StoreBatch. Ops are kept until Store::Write because a
// rocksdb::WriteBatch needs the column family handles, which belong to a Store.
struct StoreBatch::Op {
  enum Kind : uint8_t { kPut, kDelete, kDeleteRange };
  Kind kind;
  uint8_t cf;         // a Cf below
  std::string key;    // the key, or the range's begin
  std::string value;  // the value, or the range's (exclusive) end
};

namespace {

// Column families, in the order of Store::cfs_.
enum Cf : uint8_t { kDefault = 0, kSpecs, kLog, kSnapshots, kAudit, kNumCfs };
constexpr const char* kCfNames[kNumCfs] = {"default", "specs", "log", "snapshots", "audit"};

constexpr std::string_view kManifestSuffix = "M";
constexpr size_t kSeqBytes = 8;

// Debian's abseil has its own string_view, distinct from std::string_view.
// ---- keys (store.h) ----

void AppendBigEndian(uint64_t v, int bytes, std::string* out) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t ReadBigEndian(std::string_view s) {
  uint64_t v = 0;
  for (char c : s) v = (v << 8) | static_cast<uint8_t>(c);
  return v;
}

// name \0 BE32 shard: the audit chain of one (model, shard).
std::string ShardPrefix(std::string_view model, uint32_t shard) {
  // REQUIRES: a valid model name; a NUL would let one model's keys run into another's.
  assert(!model.empty() && model.find('\0') == std::string_view::npos);
  std::string key(model);
  key.push_back('\0');
  AppendBigEndian(shard, 4, &key);
  return key;
}

// name \0 BE32 shard u8 part: the log or the snapshots of one shard part.
std::string PartPrefix(std::string_view model, uint32_t shard, PartKind part) {
  std::string key = ShardPrefix(model, shard);
  key.push_back(static_cast<char>(part));
  return key;
}

std::string SeqKey(std::string prefix, uint64_t seq) {
  AppendBigEndian(seq, kSeqBytes, &prefix);
  return prefix;
}

// The smallest key greater than every key that starts with `prefix`.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<uint8_t>(prefix.back()) == 0xff) prefix.pop_back();
  // A prefix starts with a model name, whose bytes are printable, so it is never all 0xff.
  assert(!prefix.empty());
  prefix.back() = static_cast<char>(static_cast<uint8_t>(prefix.back()) + 1);
  return prefix;
}

// "log demo/0/sau seq 17", "audit demo/0 index 4", ...: a key in words for error messages;
// a key that does not decode is shown hex-escaped.
std::string DescribeKey(Cf cf, std::string_view key) {
  if (cf == kSpecs) return absl::StrCat("spec '", AbslView(key), "'");
  const std::string raw = absl::StrCat(kCfNames[cf], " key \"", absl::CHexEscape(AbslView(key)), "\"");
  const size_t nul = key.find('\0');
  if (nul == std::string_view::npos || key.size() < nul + 5) return raw;
  const std::string shard = absl::StrCat(AbslView(key.substr(0, nul)), "/",
                                         ReadBigEndian(key.substr(nul + 1, 4)));
  std::string_view rest = key.substr(nul + 5);
  if (cf == kAudit) {
    if (rest.size() != kSeqBytes) return raw;
    return absl::StrCat("audit ", shard, " index ", ReadBigEndian(rest));
  }
  if (rest.empty()) return raw;
  const auto part = static_cast<PartKind>(rest[0]);
  if (part != PartKind::kSau && part != PartKind::kLmu && part != PartKind::kFuse) return raw;
  const std::string shard_part = absl::StrCat(shard, "/", AbslView(PartName(part)));
  rest.remove_prefix(1);
  if (cf == kSnapshots && rest == kManifestSuffix) return absl::StrCat("manifest ", shard_part);
  if (rest.size() != kSeqBytes) return raw;
  return absl::StrCat(cf == kLog ? "log " : "snapshot ", shard_part, " seq ", ReadBigEndian(rest));
}

// ---- errors ----

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  absl::StatusCode code = absl::StatusCode::kInternal;
  switch (s.code()) {
    case rocksdb::Status::kIOError: code = absl::StatusCode::kUnavailable; break;
    // A background recovery from an I/O error is running (Resume): try again later.
    case rocksdb::Status::kBusy: code = absl::StatusCode::kUnavailable; break;
    case rocksdb::Status::kTryAgain: code = absl::StatusCode::kUnavailable; break;
    case rocksdb::Status::kCorruption: code = absl::StatusCode::kDataLoss; break;
    case rocksdb::Status::kNotFound: code = absl::StatusCode::kNotFound; break;
    case rocksdb::Status::kInvalidArgument: code = absl::StatusCode::kInvalidArgument; break;
    default: break;
  }
  return absl::Status(code, absl::StrCat("store: ", AbslView(what), ": ", s.ToString()));
}

absl::Status ReadOnlyError(const std::string& path, std::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat("store: ", AbslView(what), ": '", path, "' is open read-only"));
}

absl::Status MalformedKey(Cf cf, std::string_view key) {
  return absl::DataLossError(absl::StrCat("store: malformed ", DescribeKey(cf, key)));
}

std::string_view View(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

// ---- options ----

// A read-only store is a secondary instance, which needs somewhere for its info log; its
// warnings go to the reader's own log rather than into a data directory it does not own.
class SpdlogLogger final : public rocksdb::Logger {
 public:
  SpdlogLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel() || level == rocksdb::InfoLogLevel::HEADER_LEVEL) return;
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), format, ap);
    spdlog::log(level >= rocksdb::InfoLogLevel::ERROR_LEVEL ? spdlog::level::err
                                                            : spdlog::level::warn,
                "rocksdb (read-only): {}", buf);
  }
};

// RocksDB recovers from a full disk by itself, polling the free space from a background thread
// (its SstFileManager); while that runs it refuses a manual Resume (Busy). The store resumes
// on the next write instead (Store::Write), so that whether a write after the cause is gone
// succeeds does not depend on when a poll happened to run.
class ResumeOnNextWrite final : public rocksdb::EventListener {
 public:
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status bg_error,
                            bool* auto_recovery) override {
    if (auto_recovery != nullptr) *auto_recovery = false;
    spdlog::warn("store: {}; writes are refused until the store resumes (on the next write "
                 "once the cause is gone)", bg_error.ToString());
  }
};

// One block cache holds the data blocks and the tables' index and filter blocks (by default
// RocksDB keeps every open table's index in memory, which grows with the data;
// docs/DURABILITY.md, "Memory"). The memtables keep RocksDB's defaults: charging them to the
// cache with a WriteBufferManager (smaller memtables) made the full-disk test hang under load.
constexpr size_t kStoreCacheBytes = size_t{64} << 20;
constexpr size_t kMemtableBytes = size_t{16} << 20;

rocksdb::DBOptions MakeDbOptions(const StoreOptions& options) {
  rocksdb::DBOptions db;
  db.create_if_missing = options.create_if_missing;
  db.create_missing_column_families = true;
  // The MANIFEST records which WAL files exist; an open whose MANIFEST lost its tail (a
  // truncated or damaged file) then finds a WAL it lists missing and fails with Corruption
  // instead of starting from an older version and deleting the table files it no longer
  // knows as obsolete (docs/DURABILITY.md, "Start-up checks").
  db.track_and_verify_wals_in_manifest = true;
  // After an I/O error the store resumes on the next write (Store::Write), not on a timer of
  // RocksDB's own (ResumeOnNextWrite).
  db.max_bgerror_resume_count = 0;
  db.listeners.push_back(std::make_shared<ResumeOnNextWrite>());
  // The small column families (specs, audit) see few writes and would otherwise pin every
  // WAL file until their memtables fill; past this total the oldest ones are flushed.
  db.max_total_wal_size = 64 << 20;
  // The info LOG lives in the data directory: warnings and errors only, a few files.
  db.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db.keep_log_file_num = 3;
  db.max_log_file_size = 4 << 20;
  // Flush memtables on close, so that a clean restart does not replay the WAL.
  db.avoid_flush_during_shutdown = false;
  if (options.read_only) {
    db.info_log = std::make_shared<SpdlogLogger>();
    db.max_open_files = -1;  // required by a secondary: table files stay open if deleted
  }
  return db;
}

// Checks that a database opened read-only is a complete store (a read-only open cannot
// create the missing column families).
absl::Status CheckColumnFamilies(const rocksdb::DBOptions& db, const std::string& path) {
  std::vector<std::string> present;
  absl::Status st = FromRocks(rocksdb::DB::ListColumnFamilies(db, path, &present),
                              absl::StrCat("list column families of '", path, "'"));
  if (!st.ok()) return st;
  std::vector<std::string> missing;
  for (const char* name : kCfNames) {
    if (std::find(present.begin(), present.end(), name) == present.end()) missing.push_back(name);
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("store: open '", path, "' read-only: no column famil",
                   missing.size() == 1 ? "y " : "ies ", absl::StrJoin(missing, ", "),
                   " (not a streamlearn store?)"));
}

// ---- files ----

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return LastErrnoError("open directory", dir);
  const bool ok = fsync(fd) == 0;
  absl::Status st = ok ? absl::OkStatus() : LastErrnoError("fsync directory", dir);
  close(fd);
  return st;
}

// Replaces `path` (a hard link) by a copy of its bytes with the same mode: written to a
// temporary file, fsync'ed, renamed over it.
absl::Status CopyFileReplacing(const std::string& path) {
  const int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return LastErrnoError("open", path);
  struct stat st;
  if (fstat(in, &st) != 0) {
    absl::Status e = LastErrnoError("stat", path);
    close(in);
    return e;
  }
  const std::string tmp = path + ".copy";
  const int out = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode & 07777);
  if (out < 0) {
    absl::Status e = LastErrnoError("create", tmp);
    close(in);
    return e;
  }
  absl::Status result;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(in, buf, sizeof(buf));
    if (n < 0) {
      result = LastErrnoError("read", path);
      break;
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      const ssize_t w = write(out, buf + off, static_cast<size_t>(n - off));
      if (w < 0) {
        result = LastErrnoError("write", tmp);
        break;
      }
      off += w;
    }
    if (!result.ok()) break;
  }
  if (result.ok() && fsync(out) != 0) result = LastErrnoError("fsync", tmp);
  close(out);
  close(in);
  if (result.ok() && rename(tmp.c_str(), path.c_str()) != 0) result = LastErrnoError("rename", tmp);
  if (!result.ok()) unlink(tmp.c_str());
  return result;
}

// ---- reads shared by the log and the audit chain: keys prefix + BE64 ----

using SeqFn = std::function<bool(uint64_t, std::string_view)>;

absl::Status ScanSeqs(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* h, Cf cf,
                      const std::string& prefix, uint64_t from, const SeqFn& fn) {
  const std::string begin = SeqKey(prefix, from);
  // The bound keeps the scan inside the prefix: it stops at the prefix's end instead of
  // reading (and then discarding) the next shard's or the next model's keys.
  const std::string end = PrefixEnd(prefix);
  const rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, h));
  for (it->Seek(begin); it->Valid(); it->Next()) {
    const std::string_view key = View(it->key());
    if (key.size() != prefix.size() + kSeqBytes) return MalformedKey(cf, key);
    if (!fn(ReadBigEndian(key.substr(prefix.size())), View(it->value()))) return absl::OkStatus();
  }
  return FromRocks(it->status(), absl::StrCat("scan from ", DescribeKey(cf, begin)));
}

absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> LastSeq(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* h, Cf cf, const std::string& prefix) {
  // The largest key the prefix can have; SeekForPrev lands on it or the last key before it,
  // and the lower bound stops it from stepping back into the previous prefix.
  const std::string last = SeqKey(prefix, std::numeric_limits<uint64_t>::max());
  const rocksdb::Slice lower(prefix);
  rocksdb::ReadOptions ro;
  ro.iterate_lower_bound = &lower;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro, h));
  it->SeekForPrev(last);
  if (!it->Valid()) {
    absl::Status st = FromRocks(it->status(), absl::StrCat("seek to ", DescribeKey(cf, last)));
    if (!st.ok()) return st;
    return std::nullopt;
  }
  const std::string_view key = View(it->key());
  if (key.size() != prefix.size() + kSeqBytes) return MalformedKey(cf, key);
  return std::make_pair(ReadBigEndian(key.substr(prefix.size())), it->value().ToString());
}

}  // namespace

absl::StatusOr<Durability> ParseDurability(std::string_view name) {
  if (name == "process") return Durability::kProcess;
  if (name == "machine") return Durability::kMachine;
  return absl::InvalidArgumentError(
      absl::StrCat("durability '", AbslView(name), "': expected 'process' or 'machine'"));
}

std::string_view DurabilityName(Durability d) {
  return d == Durability::kMachine ? "machine" : "process";
}

// ---- StoreBatch ----

StoreBatch::StoreBatch() = default;
StoreBatch::~StoreBatch() = default;

void StoreBatch::Add(uint8_t kind, uint8_t cf, std::string key, std::string_view value) {
  bytes_ += key.size() + value.size();
  ops_.push_back(Op{static_cast<Op::Kind>(kind), cf, std::move(key), std::string(value)});
}

void StoreBatch::PutSpec(std::string_view model, std::string_view spec_bytes) {
  Add(Op::kPut, kSpecs, std::string(model), spec_bytes);
}

void StoreBatch::AppendLog(std::string_view model, uint32_t shard, PartKind part, uint64_t seq,
                           std::string_view entry) {
  Add(Op::kPut, kLog, SeqKey(PartPrefix(model, shard, part), seq), entry);
}

void StoreBatch::TrimLog(std::string_view model, uint32_t shard, PartKind part, uint64_t last) {
  const std::string prefix = PartPrefix(model, shard, part);
  // [seq 0, seq last+1); with last = max the end is the prefix's end.
  std::string end = last == std::numeric_limits<uint64_t>::max() ? PrefixEnd(prefix)
                                                                  : SeqKey(prefix, last + 1);
  Add(Op::kDeleteRange, kLog, SeqKey(prefix, 0), end);
}

void StoreBatch::TrimAudit(std::string_view model, uint32_t shard, uint64_t below) {
  const std::string prefix = ShardPrefix(model, shard);
  Add(Op::kDeleteRange, kAudit, SeqKey(prefix, 0), SeqKey(prefix, below));
}

void StoreBatch::AppendAudit(std::string_view model, uint32_t shard, uint64_t index,
                             std::string_view line) {
  Add(Op::kPut, kAudit, SeqKey(ShardPrefix(model, shard), index), line);
}

void StoreBatch::PutSnapshot(std::string_view model, uint32_t shard, PartKind part, uint64_t seq,
                             std::string_view blob) {
  Add(Op::kPut, kSnapshots, SeqKey(PartPrefix(model, shard, part), seq), blob);
}

void StoreBatch::DeleteSnapshot(std::string_view model, uint32_t shard, PartKind part,
                                uint64_t seq) {
  Add(Op::kDelete, kSnapshots, SeqKey(PartPrefix(model, shard, part), seq), {});
}

void StoreBatch::PutManifest(std::string_view model, uint32_t shard, PartKind part,
                             std::string_view manifest) {
  Add(Op::kPut, kSnapshots, absl::StrCat(PartPrefix(model, shard, part), AbslView(kManifestSuffix)),
      manifest);
}

size_t StoreBatch::bytes() const { return bytes_; }
bool StoreBatch::empty() const { return ops_.empty(); }

// ---- Store ----

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  namespace fs = std::filesystem;
  const std::string& path = options.path;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::exists(st) && !fs::is_directory(st)) {
    return absl::FailedPreconditionError(
        absl::StrCat("store: open '", path, "': exists and is not a directory"));
  }
  std::shared_ptr<rocksdb::Cache> cache = rocksdb::NewLRUCache(kStoreCacheBytes);
  const rocksdb::DBOptions db_options = MakeDbOptions(options);
  if (!options.read_only && !options.create_if_missing &&
      !fs::exists(fs::path(path) / "CURRENT", ec)) {
    return absl::NotFoundError(absl::StrCat("store: open '", path, "': no database there"));
  }
  if (!options.read_only) {
    // RocksDB creates the last directory only; a data directory's parents are ours to make.
    if (fs::create_directories(path, ec); ec) {
      return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                          absl::StrCat("store: open '", path, "': cannot create: ", ec.message()));
    }
  } else {
    if (!fs::exists(fs::path(path) / "CURRENT", ec)) {
      return absl::NotFoundError(
          absl::StrCat("store: open '", path, "' read-only: no database there"));
    }
    RETURN_IF_ERROR(CheckColumnFamilies(db_options, path));
  }

  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  // XXH3 block checksums (RocksDB >= 6.27 reads and writes them; files written with CRC32c
  // keep theirs): Debian's portable RocksDB computes CRC32c without SSE4.2, and under
  // `streamlearn train` with a data directory those checksums were 7.6% of the server's CPU
  // by perf (bench/RESULTS.md, "Training on the VW-style stream").
  table.checksum = rocksdb::kXXH3;
  rocksdb::ColumnFamilyOptions cf_options;
  cf_options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // 16 MiB memtables (RocksDB's default is 64 MiB): a flush every few seconds under load, so
  // the store's memory swings by a quarter as much between flushes (docs/DURABILITY.md,
  // "Memory").
  cf_options.write_buffer_size = kMemtableBytes;
  for (const char* name : kCfNames) {
    descriptors.emplace_back(name, cf_options);
  }
  // With an archive the audit table is a staging area: each chain's records stay only until
  // the archive (audit_archive.h) takes them, compressed there once. Under the soak's load
  // snappy (in flushes and compactions) took about a fifth of the server's CPU by perf, audit
  // records being most of the bytes written, and archiving ran 3-4 times faster without it.
  if (!options.compress_audit) descriptors[kAudit].options.compression = rocksdb::kNoCompression;
  // The log's entries are numbers written as raw 64-bit words (ids, values, targets), which do
  // not compress, and the log is cut at every snapshot. Under `streamlearn train` with a data
  // directory, snappy spent a fifth of the server's CPU on the log's flushes and compactions
  // (perf), and LZ4 as much, for a data directory of the same size (bench/RESULTS.md,
  // "Training on the VW-style stream").
  descriptors[kLog].options.compression = rocksdb::kNoCompression;
  auto store = std::unique_ptr<Store>(new Store());
  store->options_ = options;
  store->cache_ = cache;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s;
  if (options.read_only) {
    // Not DB::OpenForReadOnly: RocksDB documents that instance as undefined while another
    // process has the database open read-write (the writer may delete the files it is
    // reading). A secondary instance is made for exactly that; it sees the database as of
    // the open. Its second path is only for its info log, which SpdlogLogger replaces.
    s = rocksdb::DB::OpenAsSecondary(db_options, path, path, descriptors, &store->cfs_, &db);
  } else {
    s = rocksdb::DB::Open(db_options, path, descriptors, &store->cfs_, &db);
  }
  if (!s.ok()) {
    absl::Status st =
        FromRocks(s, absl::StrCat("open '", path, "'", options.read_only ? " read-only" : ""));
    if (s.IsCorruption()) {
      st = absl::DataLossError(absl::StrCat(
          st.message(), "; the store is damaged and the server will not start from it (it "
          "could lose acknowledged data). Restore the data directory from a backup "
          "(docs/DURABILITY.md)"));
    }
    return st;
  }
  store->db_.reset(db);
  assert(store->cfs_.size() == kNumCfs);
  return store;
}

Store::~Store() {
  if (db_ == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* h : cfs_) {
    rocksdb::Status s = db_->DestroyColumnFamilyHandle(h);
    if (!s.ok()) spdlog::warn("store '{}': {}", options_.path, s.ToString());
  }
  // Close reports what a destructor would swallow (a failed final flush, say).
  rocksdb::Status s = db_->Close();
  if (!s.ok()) spdlog::warn("store '{}': close: {}", options_.path, s.ToString());
}

absl::Status Store::Write(const StoreBatch& batch) {
  if (batch.empty()) return absl::OkStatus();
  // The batch in words for errors: "write 2 ops (first: put log demo/0/sau seq 17)".
  const auto describe = [&] {
    const StoreBatch::Op& first = batch.ops_.front();
    constexpr const char* kVerbs[] = {"put ", "delete ", "trim from "};
    return absl::StrCat("write ", batch.ops_.size(), " ops (first: ", kVerbs[first.kind],
                        DescribeKey(static_cast<Cf>(first.cf), first.key), ")");
  };
  if (options_.read_only) return ReadOnlyError(options_.path, describe());
  rocksdb::WriteBatch wb(batch.bytes() + 32 * batch.ops_.size());
  for (const StoreBatch::Op& op : batch.ops_) {
    rocksdb::ColumnFamilyHandle* h = cfs_[op.cf];
    rocksdb::Status s;
    switch (op.kind) {
      case StoreBatch::Op::kPut: s = wb.Put(h, op.key, op.value); break;
      case StoreBatch::Op::kDelete: s = wb.Delete(h, op.key); break;
      case StoreBatch::Op::kDeleteRange: s = wb.DeleteRange(h, op.key, op.value); break;
    }
    if (!s.ok()) return FromRocks(s, describe());
  }
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kMachine;
  wo.disableWAL = false;  // never: the WAL is what makes an acknowledged batch survive
  if (absl::Status r = ResumeWrites(); !r.ok()) {
    return absl::Status(r.code(), absl::StrCat(describe(), ": ", r.message()));
  }
  const rocksdb::Status s = db_->Write(wo, &wb);
  if (s.IsIOError() || s.IsNoSpace() || s.IsCorruption()) {
    resume_needed_.store(true, std::memory_order_release);
  }
  return FromRocks(s, describe());
}

absl::Status Store::SyncWal() {
  if (options_.read_only) return ReadOnlyError(options_.path, "sync the WAL");
  return FromRocks(db_->SyncWAL(), "sync the WAL");
}

absl::Status Store::ResumeWrites() {
  if (!resume_needed_.load(std::memory_order_acquire)) return absl::OkStatus();
  if (options_.read_only) return ReadOnlyError(options_.path, "resume writes");
  // RocksDB keeps refusing writes after an I/O error until it is told to resume (it retries
  // the failed flush and starts a new WAL). Failing here means the cause is still there: the
  // write is refused with the current reason, not a stale one.
  MutexLock lock(&resume_mu_);
  if (!resume_needed_.load(std::memory_order_acquire)) return absl::OkStatus();  // resumed
  const rocksdb::Status r = db_->Resume();
  if (!r.ok()) return FromRocks(r, "resume after an I/O error");
  resume_needed_.store(false, std::memory_order_release);
  spdlog::info("store '{}': writes resumed after an I/O error", options_.path);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Store::ListSpecs() const {
  std::vector<std::pair<std::string, std::string>> specs;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cfs_[kSpecs]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    specs.emplace_back(it->key().ToString(), it->value().ToString());
  }
  absl::Status st = FromRocks(it->status(), "list specs");
  if (!st.ok()) return st;
  return specs;
}

absl::Status Store::ScanLog(std::string_view model, uint32_t shard, PartKind part,
                            uint64_t from, const SeqFn& fn) const {
  return ScanSeqs(db_.get(), cfs_[kLog], kLog, PartPrefix(model, shard, part), from, fn);
}

absl::StatusOr<std::optional<uint64_t>> Store::LastLogSeq(std::string_view model, uint32_t shard,
                                                          PartKind part) const {
  auto last = LastSeq(db_.get(), cfs_[kLog], kLog, PartPrefix(model, shard, part));
  if (!last.ok()) return last.status();
  if (!last->has_value()) return std::nullopt;
  return (*last)->first;
}

absl::StatusOr<std::optional<std::string>> Store::Get(uint8_t cf, const std::string& key) const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), cfs_[cf], key, &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) return FromRocks(s, absl::StrCat("read ", DescribeKey(static_cast<Cf>(cf), key)));
  return value;
}

absl::StatusOr<std::optional<std::string>> Store::GetSnapshot(std::string_view model,
                                                              uint32_t shard, PartKind part,
                                                              uint64_t seq) const {
  return Get(kSnapshots, SeqKey(PartPrefix(model, shard, part), seq));
}

absl::StatusOr<std::optional<std::string>> Store::GetManifest(std::string_view model,
                                                              uint32_t shard,
                                                              PartKind part) const {
  return Get(kSnapshots, absl::StrCat(PartPrefix(model, shard, part), AbslView(kManifestSuffix)));
}

absl::Status Store::CompactAudit(std::string_view model, uint32_t shard, uint64_t below) {
  const std::string prefix = ShardPrefix(model, shard);
  const std::string begin = SeqKey(prefix, 0), end = SeqKey(prefix, below);
  const rocksdb::Slice b(begin), e(end);
  rocksdb::CompactRangeOptions o;
  o.exclusive_manual_compaction = false;  // the automatic compactions go on beside it
  return FromRocks(db_->CompactRange(o, cfs_[kAudit], &b, &e),
                   "compact the archived audit records");
}

absl::Status Store::ScanAudit(std::string_view model, uint32_t shard, uint64_t from,
                              const SeqFn& fn) const {
  return ScanSeqs(db_.get(), cfs_[kAudit], kAudit, ShardPrefix(model, shard), from, fn);
}

absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> Store::LastAudit(
    std::string_view model, uint32_t shard) const {
  return LastSeq(db_.get(), cfs_[kAudit], kAudit, ShardPrefix(model, shard));
}

absl::Status Store::Backup(const std::string& dir) const {
  namespace fs = std::filesystem;
  // A checkpoint flushes the memtables first, which a secondary instance cannot do.
  if (options_.read_only) {
    return ReadOnlyError(options_.path, absl::StrCat("back up to '", dir, "'"));
  }
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    return absl::AlreadyExistsError(absl::StrCat("store: backup to '", dir, "': already exists"));
  }
  const fs::path target = fs::absolute(dir, ec);  // RocksDB asks for an absolute path
  const fs::path parent = target.parent_path();
  if (!fs::is_directory(parent, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("store: backup to '", dir, "': parent '",
                                                      parent.string(), "' is not a directory"));
  }
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &raw);
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  if (s.ok()) s = checkpoint->CreateCheckpoint(target.string());
  if (!s.ok()) return FromRocks(s, absl::StrCat("backup to '", dir, "'"));
  // The checkpoint hard-links the live table files; make each one a copy of its own.
  for (const fs::directory_entry& e : fs::directory_iterator(target, ec)) {
    struct stat st;
    if (lstat(e.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink < 2) continue;
    if (absl::Status c = CopyFileReplacing(e.path().string()); !c.ok()) {
      return absl::Status(c.code(), absl::StrCat("store: backup to '", dir, "': ", c.message()));
    }
  }
  if (ec) {
    return absl::Status(absl::ErrnoToStatusCode(ec.value()),
                        absl::StrCat("store: backup to '", dir, "': ", ec.message()));
  }
  return SyncDirectory(target.string());
}

absl::Status Store::VerifyAuditChecksums() const {
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;
  ro.readahead_size = 2 << 20;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, cfs_[kAudit]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
  }
  return FromRocks(it->status(), "read the audit table");
}

Store::MemoryUsage Store::Memory() const {
  MemoryUsage m;
  if (cache_ != nullptr) m.block_cache = cache_->GetUsage();
  for (rocksdb::ColumnFamilyHandle* cf : cfs_) {
    uint64_t v = 0;
    if (db_->GetIntProperty(cf, rocksdb::DB::Properties::kCurSizeAllMemTables, &v)) {
      m.memtables += v;
    }
    if (db_->GetIntProperty(cf, rocksdb::DB::Properties::kEstimateTableReadersMem, &v)) {
      m.table_readers += v;
    }
  }
  return m;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> Store::TableFiles() const {
  std::vector<rocksdb::LiveFileMetaData> files;
  db_->GetLiveFilesMetaData(&files);
  std::vector<std::pair<std::string, std::string>> out;
  for (const rocksdb::LiveFileMetaData& f : files) {
    out.emplace_back(f.column_family_name, f.directory + "/" + f.relative_filename);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status Store::RawPut(uint8_t cf, const std::string& key, std::string_view value) {
  if (options_.read_only) {
    return ReadOnlyError(options_.path,
                         absl::StrCat("overwrite ", DescribeKey(static_cast<Cf>(cf), key)));
  }
  rocksdb::WriteOptions wo;
  wo.sync = options_.durability == Durability::kMachine;
  return FromRocks(db_->Put(wo, cfs_[cf], key, value),
                   absl::StrCat("overwrite ", DescribeKey(static_cast<Cf>(cf), key)));
}

absl::Status Store::RawPutSnapshot(std::string_view model, uint32_t shard, PartKind part,
                                   uint64_t seq, std::string_view blob) {
  return RawPut(kSnapshots, SeqKey(PartPrefix(model, shard, part), seq), blob);
}

absl::Status Store::RawPutAudit(std::string_view model, uint32_t shard, uint64_t index,
                                std::string_view line) {
  return RawPut(kAudit, SeqKey(ShardPrefix(model, shard), index), line);
}

}  // namespace streamlearn::storage
