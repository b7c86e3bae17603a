// The RocksDB store (server/storage/store.h): round trips, atomic batches, key boundaries,
// read-only and backup opens, errors, and a batch surviving kill -9 of the writer.
#include "server/storage/store.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"

namespace streamlearn::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr uint64_t kMaxSeq = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kMaxShard = std::numeric_limits<uint32_t>::max();

using Entries = std::vector<std::pair<uint64_t, std::string>>;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    root_ = (std::filesystem::temp_directory_path() /
             ("server_store_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    dir_ = root_ + "/db";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::unique_ptr<Store> Open(StoreOptions options) {
    if (options.path.empty()) options.path = dir_;
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
  std::unique_ptr<Store> Open() { return Open(StoreOptions{}); }

  std::string root_;  // removed after the test
  std::string dir_;   // the database, under root_
};

// Everything in the log of one shard part from `from` on.
Entries Log(const Store& store, std::string_view model, uint32_t shard, PartKind part,
            uint64_t from = 0) {
  Entries out;
  absl::Status st = store.ScanLog(model, shard, part, from, [&](uint64_t seq, std::string_view e) {
    out.emplace_back(seq, std::string(e));
    return true;
  });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

Entries Audit(const Store& store, std::string_view model, uint32_t shard, uint64_t from = 0) {
  Entries out;
  absl::Status st = store.ScanAudit(model, shard, from, [&](uint64_t i, std::string_view line) {
    out.emplace_back(i, std::string(line));
    return true;
  });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

// A value that names its own key, so that an entry read from the wrong place shows.
std::string Tag(std::string_view model, uint32_t shard, std::string_view part, uint64_t seq) {
  return std::string(model) + "/" + std::to_string(shard) + "/" + std::string(part) + "/" +
         std::to_string(seq);
}

TEST(DurabilityTest, ParsesItsTwoNamesAndRejectsOthersByName) {
  for (Durability d : {Durability::kProcess, Durability::kMachine}) {
    absl::StatusOr<Durability> parsed = ParseDurability(DurabilityName(d));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(DurabilityName(Durability::kProcess), "process");
  EXPECT_EQ(DurabilityName(Durability::kMachine), "machine");
  for (std::string_view bad : {"", "Process", "fsync", "machine "}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<Durability> parsed = ParseDurability(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    std::string quoted = "'";  // (not "'" + ...: GCC 12 warns falsely, -Wrestrict)
    quoted.append(bad).append("'");
    EXPECT_THAT(parsed.status().message(), HasSubstr(quoted));
  }
  EXPECT_EQ(PartName(PartKind::kSau), "sau");
  EXPECT_EQ(PartName(PartKind::kLmu), "lmu");
}

TEST_F(StoreTest, EveryColumnFamilyRoundTrips) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  StoreBatch batch;
  EXPECT_TRUE(batch.empty());
  batch.PutSpec("zeta", "spec z");
  batch.PutSpec("alpha", "spec a");
  batch.AppendLog("alpha", 3, PartKind::kLmu, 17, "entry 17");
  batch.PutSnapshot("alpha", 3, PartKind::kSau, 16, std::string("blob\0with nul", 13));
  batch.PutManifest("alpha", 3, PartKind::kSau, "manifest");
  batch.AppendAudit("alpha", 3, 0, "line 0");
  EXPECT_FALSE(batch.empty());
  EXPECT_GE(batch.bytes(), 13u + 8u + 6u);
  ASSERT_TRUE(store->Write(batch).ok());

  auto specs = store->ListSpecs();
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT(*specs, ElementsAre(Pair("alpha", "spec a"), Pair("zeta", "spec z")));
  EXPECT_THAT(Log(*store, "alpha", 3, PartKind::kLmu), ElementsAre(Pair(17, "entry 17")));
  EXPECT_THAT(Audit(*store, "alpha", 3), ElementsAre(Pair(0, "line 0")));

  auto snapshot = store->GetSnapshot("alpha", 3, PartKind::kSau, 16);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(*snapshot, std::string("blob\0with nul", 13));
  auto manifest = store->GetManifest("alpha", 3, PartKind::kSau);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(*manifest, "manifest");

  // Absent keys are nullopt, not errors.
  for (auto absent : {store->GetSnapshot("alpha", 3, PartKind::kSau, 15),
                      store->GetSnapshot("alpha", 3, PartKind::kLmu, 16),
                      store->GetManifest("alpha", 3, PartKind::kLmu),
                      store->GetManifest("alpha", 2, PartKind::kSau)}) {
    ASSERT_TRUE(absent.ok()) << absent.status();
    EXPECT_EQ(*absent, std::nullopt);
  }

  ASSERT_TRUE(store->RawPutSnapshot("alpha", 3, PartKind::kSau, 16, "tampered").ok());
  ASSERT_TRUE(store->RawPutAudit("alpha", 3, 0, "tampered line").ok());
  EXPECT_EQ(*store->GetSnapshot("alpha", 3, PartKind::kSau, 16), "tampered");
  EXPECT_THAT(Audit(*store, "alpha", 3), ElementsAre(Pair(0, "tampered line")));
}

TEST_F(StoreTest, OpenCreatesMissingDirectories) {
  const std::string nested = root_ + "/a/b/db";
  std::unique_ptr<Store> store = Open({.path = nested});
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(std::filesystem::exists(nested + "/CURRENT"));
}

TEST_F(StoreTest, BatchIsInvisibleUntilWrittenThenAppliedWholeInOrder) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  StoreBatch batch;
  Entries want_log, want_audit;
  for (uint64_t i = 0; i < 500; ++i) {
    batch.AppendLog("m", 0, PartKind::kSau, i, Tag("m", 0, "sau", i));
    batch.AppendAudit("m", 0, i, "line " + std::to_string(i));
    if (i >= 100) want_log.emplace_back(i, Tag("m", 0, "sau", i));
    want_audit.emplace_back(i, "line " + std::to_string(i));
  }
  // Later ops see earlier ones: the trim removes appends made above, the delete undoes the
  // put, and the second manifest replaces the first.
  batch.TrimLog("m", 0, PartKind::kSau, 99);
  batch.PutSnapshot("m", 0, PartKind::kSau, 7, "old");
  batch.DeleteSnapshot("m", 0, PartKind::kSau, 7);
  batch.PutSnapshot("m", 0, PartKind::kSau, 8, "new");
  batch.PutManifest("m", 0, PartKind::kSau, "v1");
  batch.PutManifest("m", 0, PartKind::kSau, "v2");
  batch.PutSpec("m", "spec");

  EXPECT_THAT(Log(*store, "m", 0, PartKind::kSau), ElementsAre());
  EXPECT_THAT(*store->ListSpecs(), ElementsAre());
  ASSERT_TRUE(store->Write(batch).ok());

  EXPECT_EQ(Log(*store, "m", 0, PartKind::kSau), want_log);
  EXPECT_EQ(Audit(*store, "m", 0), want_audit);
  EXPECT_EQ(*store->GetSnapshot("m", 0, PartKind::kSau, 7), std::nullopt);
  EXPECT_EQ(*store->GetSnapshot("m", 0, PartKind::kSau, 8), "new");
  EXPECT_EQ(*store->GetManifest("m", 0, PartKind::kSau), "v2");
  EXPECT_THAT(*store->ListSpecs(), ElementsAre(Pair("m", "spec")));
  EXPECT_TRUE(store->Write(StoreBatch()).ok());  // an empty batch is a no-op
}

TEST_F(StoreTest, ReopenedStoreSeesEverythingInEitherDurability) {
  for (Durability d : {Durability::kProcess, Durability::kMachine}) {
    SCOPED_TRACE(DurabilityName(d));
    const std::string path = dir_ + "_" + std::string(DurabilityName(d));
    {
      std::unique_ptr<Store> store = Open({.path = path, .durability = d});
      ASSERT_NE(store, nullptr);
      EXPECT_EQ(store->options().durability, d);
      for (uint64_t i = 1; i <= 50; ++i) {
        StoreBatch batch;
        batch.AppendLog("m", 1, PartKind::kLmu, i, Tag("m", 1, "lmu", i));
        batch.AppendAudit("m", 1, i, "line");
        if (i % 10 == 0) batch.PutSnapshot("m", 1, PartKind::kLmu, i, "snap");
        ASSERT_TRUE(store->Write(batch).ok());
      }
      StoreBatch spec;
      spec.PutSpec("m", "spec");
      spec.PutManifest("m", 1, PartKind::kLmu, "manifest");
      ASSERT_TRUE(store->Write(spec).ok());
    }
    std::unique_ptr<Store> store = Open({.path = path});
    ASSERT_NE(store, nullptr);
    Entries log = Log(*store, "m", 1, PartKind::kLmu);
    ASSERT_EQ(log.size(), 50u);
    EXPECT_EQ(log.back(), std::make_pair(uint64_t{50}, Tag("m", 1, "lmu", 50)));
    EXPECT_EQ(Audit(*store, "m", 1).size(), 50u);
    EXPECT_EQ(*store->GetSnapshot("m", 1, PartKind::kLmu, 40), "snap");
    EXPECT_EQ(*store->GetManifest("m", 1, PartKind::kLmu), "manifest");
    EXPECT_THAT(*store->ListSpecs(), ElementsAre(Pair("m", "spec")));
  }
}

// Neighbouring keys: "a" is a byte-prefix of "a.b"; shards 0, 1 and the largest; both parts;
// seqs at both ends of the range.
const std::vector<std::string> kModels = {"a", "a.b", "Z"};
const std::vector<uint32_t> kShards = {0, 1, kMaxShard};
const std::vector<std::pair<PartKind, std::string>> kParts = {{PartKind::kSau, "sau"},
                                                               {PartKind::kLmu, "lmu"}};
const std::vector<uint64_t> kSeqs = {0, 1, 5, uint64_t{1} << 32, kMaxSeq};

void FillNeighbours(Store* store) {
  StoreBatch batch;
  for (const std::string& model : kModels) {
    for (uint32_t shard : kShards) {
      for (const auto& [part, name] : kParts) {
        for (uint64_t seq : kSeqs) {
          batch.AppendLog(model, shard, part, seq, Tag(model, shard, name, seq));
        }
      }
      for (uint64_t seq : kSeqs) {
        batch.AppendAudit(model, shard, seq, Tag(model, shard, "audit", seq));
      }
    }
  }
  ASSERT_TRUE(store->Write(batch).ok());
}

Entries Expected(const std::string& model, uint32_t shard, const std::string& part,
                 const std::vector<uint64_t>& seqs) {
  Entries out;
  for (uint64_t seq : seqs) out.emplace_back(seq, Tag(model, shard, part, seq));
  return out;
}

TEST_F(StoreTest, ScansStayInsideTheirShardPartAndChain) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  FillNeighbours(store.get());
  for (const std::string& model : kModels) {
    for (uint32_t shard : kShards) {
      SCOPED_TRACE(model + "/" + std::to_string(shard));
      for (const auto& [part, name] : kParts) {
        EXPECT_EQ(Log(*store, model, shard, part), Expected(model, shard, name, kSeqs));
        EXPECT_EQ(Log(*store, model, shard, part, 2),
                  Expected(model, shard, name, {5, uint64_t{1} << 32, kMaxSeq}));
        EXPECT_EQ(Log(*store, model, shard, part, kMaxSeq),
                  Expected(model, shard, name, {kMaxSeq}));
      }
      EXPECT_EQ(Audit(*store, model, shard), Expected(model, shard, "audit", kSeqs));
      EXPECT_EQ(Audit(*store, model, shard, 6),
                Expected(model, shard, "audit", {uint64_t{1} << 32, kMaxSeq}));
    }
  }
  // Nothing under a model, shard or part that only neighbours stored keys.
  EXPECT_THAT(Log(*store, "a.", 0, PartKind::kSau), ElementsAre());
  EXPECT_THAT(Log(*store, "a", 2, PartKind::kSau), ElementsAre());
  EXPECT_THAT(Audit(*store, "a.b.c", 0), ElementsAre());

  // fn returning false stops the scan.
  Entries seen;
  ASSERT_TRUE(store->ScanLog("a", 1, PartKind::kLmu, 0, [&](uint64_t seq, std::string_view e) {
                  seen.emplace_back(seq, std::string(e));
                  return seen.size() < 2;
                }).ok());
  EXPECT_EQ(seen, Expected("a", 1, "lmu", {0, 1}));
}

TEST_F(StoreTest, TrimLogDeletesOnlyItsShardPartUpToLast) {
  struct Case {
    uint64_t last;
    std::vector<uint64_t> left;
  };
  for (const Case& c : std::vector<Case>{{0, {1, 5, uint64_t{1} << 32, kMaxSeq}},
                                         {5, {uint64_t{1} << 32, kMaxSeq}},
                                         {kMaxSeq - 1, {kMaxSeq}},
                                         {kMaxSeq, {}}}) {
    SCOPED_TRACE(c.last);
    std::filesystem::remove_all(dir_);
    std::unique_ptr<Store> store = Open();
    ASSERT_NE(store, nullptr);
    FillNeighbours(store.get());
    StoreBatch trim;
    trim.TrimLog("a", 1, PartKind::kSau, c.last);
    ASSERT_TRUE(store->Write(trim).ok());
    for (const std::string& model : kModels) {
      for (uint32_t shard : kShards) {
        for (const auto& [part, name] : kParts) {
          SCOPED_TRACE(Tag(model, shard, name, 0));
          const bool trimmed = model == "a" && shard == 1 && part == PartKind::kSau;
          EXPECT_EQ(Log(*store, model, shard, part),
                    Expected(model, shard, name, trimmed ? c.left : kSeqs));
        }
        EXPECT_EQ(Audit(*store, model, shard), Expected(model, shard, "audit", kSeqs));
      }
    }
  }
}

TEST_F(StoreTest, LastLogSeqAndLastAuditAreNulloptWhenEmptyElseTheLargest) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->LastLogSeq("a", 0, PartKind::kSau), std::nullopt);
  EXPECT_EQ(*store->LastAudit("a", 0), std::nullopt);

  // Keys on both sides of the empty ones must not be taken for theirs.
  StoreBatch batch;
  batch.AppendLog("a", 0, PartKind::kLmu, 9, "after: next part");
  batch.AppendLog("a", 1, PartKind::kSau, 9, "after: next shard");
  batch.AppendLog("a.b", 0, PartKind::kSau, 9, "after: next model");
  batch.AppendLog("Z", kMaxShard, PartKind::kLmu, kMaxSeq, "before");
  batch.AppendAudit("a", 1, 9, "after");
  batch.AppendAudit("Z", kMaxShard, kMaxSeq, "before");
  ASSERT_TRUE(store->Write(batch).ok());
  EXPECT_EQ(*store->LastLogSeq("a", 0, PartKind::kSau), std::nullopt);
  EXPECT_EQ(*store->LastAudit("a", 0), std::nullopt);

  EXPECT_EQ(*store->LastLogSeq("a", 0, PartKind::kLmu), 9u);
  EXPECT_EQ(*store->LastLogSeq("Z", kMaxShard, PartKind::kLmu), kMaxSeq);
  EXPECT_EQ(*store->LastAudit("Z", kMaxShard), std::make_pair(kMaxSeq, std::string("before")));

  FillNeighbours(store.get());
  EXPECT_EQ(*store->LastLogSeq("a", 0, PartKind::kSau), kMaxSeq);
  StoreBatch trim;
  trim.TrimLog("a", 0, PartKind::kSau, kMaxSeq - 1);
  trim.TrimLog("a", 0, PartKind::kLmu, kMaxSeq);
  ASSERT_TRUE(store->Write(trim).ok());
  EXPECT_EQ(*store->LastLogSeq("a", 0, PartKind::kSau), kMaxSeq);
  EXPECT_EQ(*store->LastLogSeq("a", 0, PartKind::kLmu), std::nullopt);
  EXPECT_EQ(*store->LastAudit("a.b", 1), std::make_pair(kMaxSeq, Tag("a.b", 1, "audit", kMaxSeq)));
}

TEST_F(StoreTest, KeysAreEncodedAsDocumented) {
  {
    std::unique_ptr<Store> store = Open();
    ASSERT_NE(store, nullptr);
    StoreBatch batch;
    batch.PutSpec("m", "s");
    batch.AppendLog("m", 0x01020304, PartKind::kLmu, 0x1122334455667788, "l");
    batch.PutSnapshot("m", 2, PartKind::kSau, 3, "b");
    batch.PutManifest("m", 2, PartKind::kSau, "f");
    batch.AppendAudit("m", 5, 6, "a");
    ASSERT_TRUE(store->Write(batch).ok());
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
  for (const char* name : {"default", "specs", "log", "snapshots", "audit"}) {
    cfs.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir_, cfs, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  auto keys = [&](int cf) {
    std::vector<std::string> out;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[cf]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) out.push_back(it->key().ToString());
    return out;
  };
  using namespace std::string_literals;
  EXPECT_THAT(keys(0), ElementsAre());
  EXPECT_THAT(keys(1), ElementsAre("m"s));
  EXPECT_THAT(keys(2), ElementsAre("m\0\x01\x02\x03\x04\x02\x11\x22\x33\x44\x55\x66\x77\x88"s));
  EXPECT_THAT(keys(3), ElementsAre("m\0\0\0\0\x02\x01\0\0\0\0\0\0\0\x03"s,
                                   "m\0\0\0\0\x02\x01M"s));
  EXPECT_THAT(keys(4), ElementsAre("m\0\0\0\0\x05\0\0\0\0\0\0\0\x06"s));
  for (rocksdb::ColumnFamilyHandle* h : handles) ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
}

TEST_F(StoreTest, BackupOpensAsAStoreHoldingTheDataOfItsTime) {
  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  StoreBatch before;
  before.PutSpec("m", "spec");
  before.AppendLog("m", 0, PartKind::kSau, 1, "before");
  before.AppendAudit("m", 0, 0, "line");
  ASSERT_TRUE(store->Write(before).ok());
  const std::string backup = root_ + "/backup";
  ASSERT_TRUE(store->Backup(backup).ok());
  StoreBatch after;
  after.AppendLog("m", 0, PartKind::kSau, 2, "after");
  ASSERT_TRUE(store->Write(after).ok());

  absl::Status again = store->Backup(backup);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr(backup));
  const absl::Status orphan = store->Backup(root_ + "/no/such/parent");
  EXPECT_EQ(orphan.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(orphan.message(), HasSubstr(root_ + "/no/such"));

  for (bool read_only : {true, false}) {
    SCOPED_TRACE(read_only);
    std::unique_ptr<Store> copy = Open({.path = backup, .read_only = read_only});
    ASSERT_NE(copy, nullptr);
    EXPECT_THAT(Log(*copy, "m", 0, PartKind::kSau), ElementsAre(Pair(1, "before")));
    EXPECT_THAT(Audit(*copy, "m", 0), ElementsAre(Pair(0, "line")));
    EXPECT_THAT(*copy->ListSpecs(), ElementsAre(Pair("m", "spec")));
  }
  EXPECT_THAT(Log(*store, "m", 0, PartKind::kSau),
              ElementsAre(Pair(1, "before"), Pair(2, "after")));
}

TEST_F(StoreTest, ReadOnlyStoreOpensBesideTheWriterAndRejectsWrites) {
  std::unique_ptr<Store> writer = Open();
  ASSERT_NE(writer, nullptr);
  StoreBatch first;
  first.AppendLog("m", 0, PartKind::kSau, 1, "first");  // in the WAL and memtable only
  first.PutSpec("m", "spec");
  ASSERT_TRUE(writer->Write(first).ok());

  std::unique_ptr<Store> reader = Open({.path = dir_, .read_only = true});
  ASSERT_NE(reader, nullptr);
  EXPECT_THAT(Log(*reader, "m", 0, PartKind::kSau), ElementsAre(Pair(1, "first")));
  EXPECT_EQ(*reader->LastLogSeq("m", 0, PartKind::kSau), 1u);
  EXPECT_THAT(*reader->ListSpecs(), ElementsAre(Pair("m", "spec")));

  StoreBatch write;
  write.AppendLog("m", 0, PartKind::kSau, 2, "second");
  const absl::Status rejected = reader->Write(write);
  EXPECT_EQ(rejected.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(rejected.message(), HasSubstr("read-only"));
  EXPECT_THAT(rejected.message(), HasSubstr("put log m/0/sau seq 2"));
  EXPECT_EQ(reader->RawPutAudit("m", 0, 0, "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->RawPutSnapshot("m", 0, PartKind::kSau, 0, "x").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->Backup(root_ + "/backup").code(), absl::StatusCode::kFailedPrecondition);

  // The writer is unaffected; the reader keeps the view of its open.
  ASSERT_TRUE(writer->Write(write).ok());
  EXPECT_THAT(Log(*writer, "m", 0, PartKind::kSau),
              ElementsAre(Pair(1, "first"), Pair(2, "second")));
  EXPECT_THAT(Log(*reader, "m", 0, PartKind::kSau), ElementsAre(Pair(1, "first")));
  writer.reset();  // flushes and deletes the WAL the reader recovered from
  EXPECT_THAT(Log(*reader, "m", 0, PartKind::kSau), ElementsAre(Pair(1, "first")));
}

TEST_F(StoreTest, OpenErrorsNameThePath) {
  const std::string file = root_ + "/regular_file";
  std::ofstream(file) << "not a database";
  for (bool read_only : {false, true}) {
    SCOPED_TRACE(read_only);
    auto store = Store::Open({.path = file, .read_only = read_only});
    EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(store.status().message(), HasSubstr(file));
    EXPECT_THAT(store.status().message(), HasSubstr("not a directory"));
  }
  auto under_file = Store::Open({.path = file + "/db"});
  EXPECT_EQ(under_file.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(under_file.status().message(), HasSubstr(file + "/db"));

  auto missing = Store::Open({.path = root_ + "/missing", .read_only = true});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(root_ + "/missing"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/missing"));

  // A RocksDB database that is not a store: the read-only open cannot add column families.
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, root_ + "/plain", &raw).ok());
    delete raw;
  }
  auto plain = Store::Open({.path = root_ + "/plain", .read_only = true});
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plain.status().message(), HasSubstr("specs, log, snapshots, audit"));

  // A second writer: RocksDB's lock file refuses it.
  std::unique_ptr<Store> first = Open();
  ASSERT_NE(first, nullptr);
  auto second = Store::Open({.path = dir_});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr(dir_));
}

// kProcess durability: the WAL record is in the kernel before Write returns, so a batch
// survives kill -9 of the process. The child writes and kills itself without closing.
TEST_F(StoreTest, BatchesWrittenWithProcessDurabilitySurviveKill9) {
  constexpr uint64_t kBatches = 300;
  const pid_t pid = fork();
  ASSERT_NE(pid, -1);
  if (pid == 0) {
    // The child runs no gtest assertions: it reports failures by exit code. (Forking a
    // process that has RocksDB's thread pools is safe enough here: those threads are idle,
    // and the child needs no background work: no flush, no compaction.)
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({.path = dir_});
    if (!store.ok()) _exit(2);
    for (uint64_t i = 0; i < kBatches; ++i) {
      StoreBatch batch;
      batch.AppendLog("m", 0, PartKind::kSau, i, Tag("m", 0, "sau", i));
      batch.AppendAudit("m", 0, i, "line " + std::to_string(i));
      if (!(*store)->Write(batch).ok()) _exit(3);
    }
    raise(SIGKILL);
    _exit(4);
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "the writer child did not finish in 60 s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child status " << status << " (exit code " << WEXITSTATUS(status) << ")";

  std::unique_ptr<Store> store = Open();
  ASSERT_NE(store, nullptr);
  Entries log = Log(*store, "m", 0, PartKind::kSau);
  ASSERT_EQ(log.size(), kBatches);
  for (uint64_t i = 0; i < kBatches; ++i) {
    EXPECT_EQ(log[i], std::make_pair(i, Tag("m", 0, "sau", i)));
  }
  EXPECT_EQ(*store->LastAudit("m", 0),
            std::make_pair(kBatches - 1, "line " + std::to_string(kBatches - 1)));
}

}  // namespace
}  // namespace streamlearn::storage
