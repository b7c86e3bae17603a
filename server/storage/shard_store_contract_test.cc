// The ShardStore contract (shard_store.h), checked the same way against every backend: the
// embedded RocksStorage (also under per-tenant encryption, encrypted_storage.h), the in-memory
// FakeStorage of the unit tests, and JetStreamStorage over a real nats-server (Debian's) with
// JetStream. Then what only the replicated store does: its fence against a second writer, the
// journal's compaction, a 3-node NATS cluster with R = 3 losing a node, and two writers (and
// two creators of one model) publishing at the same moment to an R = 3 stream, which
// JetStream's own check does not serialise (nats-server issue 4320): exactly one of them is
// acknowledged, and every reader sees that one alone.
// STREAMLEARN_TEST_SEED is not used: the races are as the scheduler makes them; the
// assertions hold whichever way each one goes.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <latch>
#include <thread>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/common/status_macros.h"
#include "fake_storage.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nats_cluster.h"
#include "server/storage/audit_archive.h"
#include "server/storage/encrypted_storage.h"
#include "server/storage/jetstream_storage.h"
#include "journal.pb.h"
#include "server/storage/rocks_storage.h"

namespace streamlearn::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test_util::NatsTestCluster;

// One nats-server for the whole file; each test uses streams of its own (a fresh prefix).
NatsTestCluster* SharedNats() {
  static NatsTestCluster* nats = [] {
    absl::StatusOr<std::unique_ptr<NatsTestCluster>> c = NatsTestCluster::Start(1);
    if (!c.ok()) {
      ADD_FAILURE() << c.status();
      return static_cast<NatsTestCluster*>(nullptr);
    }
    return c->release();
  }();
  return nats;
}

std::string FreshPrefix() {
  static int n = 0;
  return absl::StrCat("T", getpid() % 100000, "_", n++);
}

absl::StatusOr<std::unique_ptr<JetStreamStorage>> OpenJetStream(
    const std::string& urls, JetStreamOptions options,
    absl::Duration timeout = absl::Seconds(5)) {
  ASSIGN_OR_RETURN(std::unique_ptr<NatsClient> nats,
                   NatsClient::Connect({.servers = urls, .timeout = timeout}));
  return JetStreamStorage::Open(std::shared_ptr<NatsClient>(std::move(nats)), options);
}

// A backend under test and a way to open it again over the same data (a restart).
struct Backend {
  std::function<std::unique_ptr<StorageBackend>()> open;
};

Backend MakeBackend(const std::string& kind) {
  if (kind == "fake") {
    auto fake = std::make_shared<FakeStorage>();
    return {[fake] { return std::unique_ptr<StorageBackend>(fake->Share()); }};
  }
  if (kind == "rocks" || kind == "encrypted_rocks") {
    const bool encrypted = kind == "encrypted_rocks";
    const std::string dir = absl::StrCat(::testing::TempDir(), "/contract_", getpid(), "_",
                                         FreshPrefix());
    std::filesystem::remove_all(dir);
    return {[dir, encrypted]() -> std::unique_ptr<StorageBackend> {
      absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({.path = dir});
      EXPECT_TRUE(store.ok()) << store.status();
      if (!store.ok()) return nullptr;
      std::unique_ptr<StorageBackend> rocks = std::make_unique<RocksStorage>(*std::move(store));
      if (!encrypted) return rocks;
      // The tests' models are unscoped: the tenant "default" has the key.
      TenantKeys keys;
      keys.Add("default", std::array<uint8_t, TenantKey::kBytes>{1, 2, 3});
      return EncryptAtRest(std::move(rocks), std::move(keys));
    }};
  }
  const std::string prefix = FreshPrefix();
  return {[prefix]() -> std::unique_ptr<StorageBackend> {
    NatsTestCluster* nats = SharedNats();
    if (nats == nullptr) return nullptr;
    auto s = OpenJetStream(nats->urls(), {.prefix = prefix, .snapshot_chunk = 1000});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::unique_ptr<StorageBackend>(*std::move(s)) : nullptr;
  }};
}

std::vector<std::pair<uint64_t, std::string>> Log(const ShardStore& s, PartKind part,
                                                  uint64_t from) {
  std::vector<std::pair<uint64_t, std::string>> out;
  absl::Status st = s.ScanLog(part, from, [&](uint64_t seq, std::string_view e) {
    out.emplace_back(seq, std::string(e));
    return true;
  });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

std::vector<uint64_t> AuditIndices(const ShardStore& s, uint64_t from) {
  std::vector<uint64_t> out;
  absl::Status st = s.ScanAudit(from, [&](uint64_t i, std::string_view line) {
    EXPECT_EQ(line, absl::StrCat("line ", i));
    out.push_back(i);
    return true;
  });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

// Commits log entry `seq` of `part` with audit record `*audit` (and advances it).
absl::Status CommitBatch(ShardStore& s, PartKind part, uint64_t seq, uint64_t* audit) {
  const std::string entry = absl::StrCat("entry ", std::string(PartName(part)), " ", seq);
  const std::string line = absl::StrCat("line ", *audit);
  ShardWrite w;
  w.log = LogAppend{.part = part, .seq = seq, .entry = entry};
  w.audit.push_back({.index = *audit, .line = line});
  absl::Status st = s.Commit(w);
  if (st.ok()) ++*audit;
  return st;
}

// Commits a snapshot of the SAU part at log entry `seq` that trims the log through it, with
// audit record `*audit` (and advances it): the write after which a JetStream store compacts.
absl::Status CommitTrimmingSnapshot(ShardStore& s, uint64_t seq, uint64_t* audit) {
  const std::string line = absl::StrCat("line ", *audit), blob = absl::StrCat("snap ", seq);
  ShardWrite w;
  w.audit.push_back({.index = *audit, .line = line});
  w.snapshot = SnapshotPut{.part = PartKind::kSau, .seq = seq, .blob = blob,
                           .manifest = absl::StrCat("manifest ", seq), .dropped = {},
                           .trim_log_through = seq};
  absl::Status st = s.Commit(w);
  if (st.ok()) ++*audit;
  return st;
}

const std::vector<std::string> kGenesis = {"line 0", "line 0", "line 0"};

class ContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = MakeBackend(GetParam());
    storage_ = backend_.open();
    ASSERT_NE(storage_, nullptr);
  }
  Backend backend_;
  std::unique_ptr<StorageBackend> storage_;
};

TEST_P(ContractTest, ModelsAreListedWithTheirSpecsAndGenesis) {
  ASSERT_TRUE(storage_->CreateModel("b.x..y", "spec-b", kGenesis).ok());
  ASSERT_TRUE(storage_->CreateModel("a", "spec-a", std::vector<std::string>{"g0", "g1"}).ok());
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs = storage_->ListSpecs();
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_THAT(*specs, ElementsAre(std::make_pair(std::string("a"), std::string("spec-a")),
                                  std::make_pair(std::string("b.x..y"), std::string("spec-b"))));
  auto shard1 = storage_->OpenShard("a", 1);
  absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> head = shard1->LastAudit();
  ASSERT_TRUE(head.ok()) << head.status();
  ASSERT_TRUE(head->has_value());
  EXPECT_EQ((*head)->first, 0u);
  EXPECT_EQ((*head)->second, "g1");
}

TEST_P(ContractTest, LogAndAuditComeBackInOrderAfterARestart) {
  ASSERT_TRUE(storage_->CreateModel("m", "spec", kGenesis).ok());
  auto s = storage_->OpenShard("m", 2);
  uint64_t audit = 1;
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    ASSERT_TRUE(CommitBatch(*s, PartKind::kSau, seq, &audit).ok());
    if (seq <= 2) ASSERT_TRUE(CommitBatch(*s, PartKind::kLmu, seq, &audit).ok());
  }
  // A write of several audit records and no log entry.
  ShardWrite w;
  const std::string l1 = absl::StrCat("line ", audit), l2 = absl::StrCat("line ", audit + 1);
  w.audit = {{.index = audit, .line = l1}, {.index = audit + 1, .line = l2}};
  ASSERT_TRUE(s->Commit(w).ok());
  audit += 2;

  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "as written" : "after a restart");
    EXPECT_THAT(Log(*s, PartKind::kSau, 4),
                ElementsAre(std::make_pair(uint64_t{4}, std::string("entry sau 4")),
                            std::make_pair(uint64_t{5}, std::string("entry sau 5"))));
    EXPECT_EQ(Log(*s, PartKind::kLmu, 0).size(), 2u);
    EXPECT_TRUE(Log(*s, PartKind::kFuse, 0).empty());
    EXPECT_EQ(s->LastLogSeq(PartKind::kSau)->value_or(0), 5u);
    EXPECT_FALSE(s->LastLogSeq(PartKind::kFuse)->has_value());
    std::vector<uint64_t> all = AuditIndices(*s, 0);
    ASSERT_EQ(all.size(), audit);
    for (uint64_t i = 0; i < audit; ++i) EXPECT_EQ(all[i], i);
    EXPECT_THAT(AuditIndices(*s, audit - 2), ElementsAre(audit - 2, audit - 1));
    auto head = s->LastAudit();
    ASSERT_TRUE(head.ok() && head->has_value());
    EXPECT_EQ((*head)->first, audit - 1);
    // A visitor that stops.
    int seen = 0;
    ASSERT_TRUE(s->ScanLog(PartKind::kSau, 1, [&](uint64_t, std::string_view) {
                   return ++seen < 2;
                 }).ok());
    EXPECT_EQ(seen, 2);
    s.reset();
    storage_.reset();
    storage_ = backend_.open();
    ASSERT_NE(storage_, nullptr);
    s = storage_->OpenShard("m", 2);
  }
}

TEST_P(ContractTest, SnapshotsReplaceDroppedOnesAndTrimTheLog) {
  ASSERT_TRUE(storage_->CreateModel("m", "spec", kGenesis).ok());
  auto s = storage_->OpenShard("m", 0);
  uint64_t audit = 1;
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    ASSERT_TRUE(CommitBatch(*s, PartKind::kFuse, seq, &audit).ok());
  }
  std::string big(5555, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + 3);
  {
    ShardWrite w;
    const std::string line = absl::StrCat("line ", audit);
    w.audit.push_back({.index = audit, .line = line});
    w.snapshot = SnapshotPut{.part = PartKind::kFuse, .seq = 3, .blob = big, .manifest = "m3"};
    ASSERT_TRUE(s->Commit(w).ok());
    ++audit;
  }
  {
    ShardWrite w;
    const std::string line = absl::StrCat("line ", audit);
    w.audit.push_back({.index = audit, .line = line});
    w.snapshot = SnapshotPut{.part = PartKind::kFuse, .seq = 5, .blob = "five",
                             .manifest = "m5", .dropped = {}, .trim_log_through = 3};
    ASSERT_TRUE(s->Commit(w).ok());
    ++audit;
  }
  EXPECT_EQ(s->GetSnapshot(PartKind::kFuse, 3)->value_or(""), big);
  EXPECT_EQ(s->GetSnapshot(PartKind::kFuse, 5)->value_or(""), "five");
  EXPECT_EQ(s->GetManifest(PartKind::kFuse)->value_or(""), "m5");
  EXPECT_FALSE(s->GetManifest(PartKind::kSau)->has_value());
  EXPECT_THAT(Log(*s, PartKind::kFuse, 0),
              ElementsAre(std::make_pair(uint64_t{4}, std::string("entry fuse 4")),
                          std::make_pair(uint64_t{5}, std::string("entry fuse 5")),
                          std::make_pair(uint64_t{6}, std::string("entry fuse 6"))));
  {
    ShardWrite w;
    w.snapshot = SnapshotPut{.part = PartKind::kFuse, .seq = 6, .blob = "six",
                             .manifest = "m6", .dropped = {3}, .trim_log_through = 5};
    ASSERT_TRUE(s->Commit(w).ok());
  }
  s.reset();
  storage_.reset();  // a restart: the embedded store is one process's at a time
  storage_ = backend_.open();
  ASSERT_NE(storage_, nullptr);
  s = storage_->OpenShard("m", 0);
  EXPECT_FALSE(s->GetSnapshot(PartKind::kFuse, 3)->has_value());
  EXPECT_EQ(s->GetSnapshot(PartKind::kFuse, 6)->value_or(""), "six");
  EXPECT_EQ(s->GetManifest(PartKind::kFuse)->value_or(""), "m6");
  EXPECT_THAT(Log(*s, PartKind::kFuse, 0),
              ElementsAre(std::make_pair(uint64_t{6}, std::string("entry fuse 6"))));
  EXPECT_EQ(AuditIndices(*s, 0).size(), audit);
  // Appends go on after the trim.
  ASSERT_TRUE(CommitBatch(*s, PartKind::kFuse, 7, &audit).ok());
  EXPECT_EQ(s->LastLogSeq(PartKind::kFuse)->value_or(0), 7u);
}

INSTANTIATE_TEST_SUITE_P(Backends, ContractTest,
                         ::testing::Values("fake", "rocks", "encrypted_rocks", "jetstream"),
                         [](const auto& info) { return info.param; });

// ---- What only the replicated store does ----

class JetStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nats_ = SharedNats();
    ASSERT_NE(nats_, nullptr);
    prefix_ = FreshPrefix();
  }
  std::unique_ptr<JetStreamStorage> Open(JetStreamOptions o = {}) {
    o.prefix = prefix_;
    auto s = OpenJetStream(nats_->urls(), o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  NatsTestCluster* nats_ = nullptr;
  std::string prefix_;
};

TEST_F(JetStreamTest, ASecondModelOfTheSameNameIsRefused) {
  auto a = Open();
  auto b = Open();
  ASSERT_TRUE(a->CreateModel("m", "one", kGenesis).ok());
  absl::Status again = b->CreateModel("m", "two", kGenesis);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_EQ(b->ListSpecs()->at(0).second, "one");
}

TEST_F(JetStreamTest, AStaleWriterIsFencedAndCannotForkTheShard) {
  auto storage = Open();
  ASSERT_TRUE(storage->CreateModel("m", "spec", kGenesis).ok());
  auto old_owner = storage->OpenShard("m", 1);
  uint64_t audit_old = 1;
  ASSERT_TRUE(CommitBatch(*old_owner, PartKind::kSau, 1, &audit_old).ok());
  // A new owner loads the shard (a takeover) and writes; the old one does not know yet.
  auto other = Open();
  auto new_owner = other->OpenShard("m", 1);
  uint64_t audit_new = audit_old;
  ASSERT_TRUE(CommitBatch(*new_owner, PartKind::kSau, 2, &audit_new).ok());

  absl::Status stale = CommitBatch(*old_owner, PartKind::kSau, 2, &audit_old);
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << stale;
  EXPECT_THAT(stale.message(), HasSubstr("fenced"));
  EXPECT_EQ(old_owner->ResumeWrites().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(CommitBatch(*old_owner, PartKind::kLmu, 1, &audit_old).code(),
            absl::StatusCode::kAborted);
  // The shard holds the new owner's history alone.
  auto reader = Open()->OpenShard("m", 1);
  EXPECT_THAT(Log(*reader, PartKind::kSau, 0),
              ElementsAre(std::make_pair(uint64_t{1}, std::string("entry sau 1")),
                          std::make_pair(uint64_t{2}, std::string("entry sau 2"))));
  EXPECT_TRUE(Log(*reader, PartKind::kLmu, 0).empty());
  EXPECT_EQ(AuditIndices(*reader, 0).size(), 3u);
  // The new owner goes on.
  EXPECT_TRUE(CommitBatch(*new_owner, PartKind::kSau, 3, &audit_new).ok());
}

TEST_F(JetStreamTest, CompactionPurgesTheJournalAndKeepsTheWholeChain) {
  auto storage = Open({.snapshot_chunk = 300, .compact_after = 8});
  ASSERT_TRUE(storage->CreateModel("m", "spec", kGenesis).ok());
  auto s = storage->OpenShard("m", 0);
  uint64_t audit = 1, sau = 0, lmu = 0;
  auto snapshot = [&](PartKind part, uint64_t seq, std::vector<uint64_t> dropped,
                      uint64_t trim) {
    ShardWrite w;
    const std::string line = absl::StrCat("line ", audit);
    const std::string blob = absl::StrCat("snap ", seq);  // SnapshotPut::blob is a view of it
    w.audit.push_back({.index = audit, .line = line});
    w.snapshot = SnapshotPut{.part = part, .seq = seq, .blob = blob,
                             .manifest = absl::StrCat("manifest ", seq),
                             .dropped = std::move(dropped), .trim_log_through = trim};
    absl::Status st = s->Commit(w);
    if (st.ok()) ++audit;
    return st;
  };
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(CommitBatch(*s, PartKind::kSau, ++sau, &audit).ok());
      if (i % 4 == 0) ASSERT_TRUE(CommitBatch(*s, PartKind::kLmu, ++lmu, &audit).ok());
    }
    ASSERT_TRUE(snapshot(PartKind::kLmu, lmu, {}, lmu).ok());
    ASSERT_TRUE(snapshot(PartKind::kSau, sau - 2, {}, sau - 2).ok());
  }
  const uint64_t snap = sau - 2;
  // The journal holds far fewer messages than were committed (3 x 27), ...
  NatsClient& nats = storage->nats();
  absl::StatusOr<std::vector<std::string>> subjects =
      nats.Subjects(storage->archive_stream(), absl::AsciiStrToLower(prefix_) + ".a.>");
  ASSERT_TRUE(subjects.ok()) << subjects.status();
  EXPECT_EQ(subjects->size(), 1u) << "the audit archive holds the purged prefix's records";
  // ... and a fresh reader sees everything a reader must.
  for (int pass = 0; pass < 2; ++pass) {
    auto r = Open()->OpenShard("m", 0);
    std::vector<uint64_t> chain = AuditIndices(*r, 0);
    ASSERT_EQ(chain.size(), audit);
    for (uint64_t i = 0; i < audit; ++i) ASSERT_EQ(chain[i], i);
    EXPECT_THAT(AuditIndices(*r, audit - 1), ElementsAre(audit - 1));
    std::vector<std::pair<uint64_t, std::string>> log = Log(*r, PartKind::kSau, 0);
    ASSERT_EQ(log.size(), sau - snap);
    for (uint64_t i = 0; i < log.size(); ++i) {
      EXPECT_EQ(log[i], std::make_pair(snap + 1 + i, absl::StrCat("entry sau ", snap + 1 + i)));
    }
    EXPECT_TRUE(Log(*r, PartKind::kLmu, 0).empty());
    EXPECT_EQ(r->GetManifest(PartKind::kLmu)->value_or(""), absl::StrCat("manifest ", lmu));
    EXPECT_EQ(r->GetSnapshot(PartKind::kSau, snap)->value_or(""), absl::StrCat("snap ", snap));
    EXPECT_EQ(r->LastAudit()->value().first, audit - 1);
    // The store's own view goes on writing after the compactions.
    ASSERT_TRUE(CommitBatch(*s, PartKind::kSau, ++sau, &audit).ok());
  }
}

// The records of the archive stream's messages (journal.AuditArchive), in order.
std::vector<uint64_t> ArchiveStreamRecords(JetStreamStorage& storage, const std::string& prefix,
                                           uint32_t shard) {
  std::vector<uint64_t> out;
  NatsClient& nats = storage.nats();
  absl::StatusOr<std::vector<std::string>> subjects = nats.Subjects(
      storage.archive_stream(), absl::StrCat(absl::AsciiStrToLower(prefix), ".a.*.", shard));
  EXPECT_TRUE(subjects.ok()) << subjects.status();
  if (!subjects.ok() || subjects->empty()) return out;
  EXPECT_EQ(subjects->size(), 1u);
  absl::StatusOr<uint64_t> last = nats.LastSeq(storage.archive_stream());
  EXPECT_TRUE(last.ok()) << last.status();
  absl::Status st = nats.ScanSubject(storage.archive_stream(), subjects->front(), 1, *last,
                                     [&](const StoredMsg& m) {
                                       journal::AuditArchive batch;
                                       EXPECT_TRUE(batch.ParseFromString(m.data));
                                       for (const auto& a : batch.records()) {
                                         out.push_back(a.index());
                                       }
                                       return true;
                                     });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

// The cluster mode's archive (docs/CLUSTER.md, "Audit archive"): segments sealed in a
// directory the servers share take the place of the archive stream's records, which the
// stream then drops. A shard's owner changes hands (a store is a shard's one writer and
// reader, as a lease makes it): every owner reads the chain whole across the segments,
// including one that listed the directory before another owner sealed a segment, and seals
// the next segment after the last one sealed; a server without the directory reads the live
// tail and is told where the rest went.
TEST_F(JetStreamTest, ArchiveSegmentsInASharedDirectoryBoundTheArchiveStream) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/shared_archive_", getpid(), "_",
                                       prefix_);
  std::filesystem::remove_all(dir);
  auto open_archived = [&] {
    absl::StatusOr<std::unique_ptr<StorageBackend>> b =
        ArchiveAuditTo(Open({.snapshot_chunk = 300, .compact_after = 8}), {.dir = dir});
    EXPECT_TRUE(b.ok()) << b.status();
    return *std::move(b);
  };
  auto plain = Open({.snapshot_chunk = 300, .compact_after = 8});
  std::unique_ptr<StorageBackend> a = open_archived(), b = open_archived();
  ASSERT_TRUE(a->CreateModel("m", "spec", kGenesis).ok());
  uint64_t audit = 1, sau = 0;
  // 30 batches and a snapshot that trims the log: the journal's prefix is compacted, its audit
  // records copied to the archive stream.
  auto round = [&](ShardStore& s) {
    for (int i = 0; i < 30; ++i) {
      ASSERT_TRUE(CommitBatch(s, PartKind::kSau, ++sau, &audit).ok());
    }
    ASSERT_TRUE(CommitTrimmingSnapshot(s, sau, &audit).ok());
  };
  auto whole_chain = [&](const ShardStore& s) {
    std::vector<uint64_t> chain = AuditIndices(s, 0);
    ASSERT_EQ(chain.size(), audit);
    for (uint64_t i = 0; i < audit; ++i) ASSERT_EQ(chain[i], i);
  };

  // Server b owns the shard first, then server a.
  round(*b->OpenShard("m", 0));
  auto owner_a = a->OpenShard("m", 0);
  round(*owner_a);
  std::vector<uint64_t> in_stream = ArchiveStreamRecords(*plain, prefix_, 0);
  ASSERT_FALSE(in_stream.empty());
  EXPECT_EQ(in_stream.front(), 1u) << "before archiving, the stream holds the chain's start";
  whole_chain(*owner_a);

  // a seals records [0, 40); the stream keeps only messages with a record from 40 on.
  ASSERT_TRUE(owner_a->ArchiveAudit(40, "seal 40").ok());
  EXPECT_EQ(owner_a->ArchivedBelow(), 40u);
  in_stream = ArchiveStreamRecords(*plain, prefix_, 0);
  ASSERT_FALSE(in_stream.empty());
  EXPECT_GT(in_stream.front(), 1u);
  EXPECT_GE(in_stream.back(), 40u);
  const uint64_t first_kept = in_stream.front();
  whole_chain(*owner_a);
  owner_a.reset();

  // b owns the shard again: its list of the directory (empty when it last had the shard) is
  // read again. Later compactions copy no sealed record into the stream again.
  auto owner_b = b->OpenShard("m", 0);
  EXPECT_EQ(owner_b->ArchivedBelow(), 40u);
  whole_chain(*owner_b);
  round(*owner_b);
  round(*owner_b);
  in_stream = ArchiveStreamRecords(*plain, prefix_, 0);
  EXPECT_EQ(in_stream.front(), first_kept);
  // A server that opens the shard now lists one segment; b seals the next before it reads.
  auto next_owner = open_archived();
  auto owner_c = next_owner->OpenShard("m", 0);
  ASSERT_TRUE(owner_b->ArchiveAudit(80, "seal 80").ok());
  EXPECT_EQ(owner_b->ArchivedBelow(), 80u);
  in_stream = ArchiveStreamRecords(*plain, prefix_, 0);
  ASSERT_FALSE(in_stream.empty());
  EXPECT_GT(in_stream.front(), 40u);
  owner_b.reset();
  whole_chain(*owner_c);
  EXPECT_EQ(owner_c->ArchivedBelow(), 80u);

  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_THAT(files, ElementsAre(absl::StrFormat("%020d-%020d.seg", 0, 40),
                                 absl::StrFormat("%020d-%020d.seg", 40, 80)));

  // A server without the directory reads the live tail, and is told where the rest went.
  auto bare = plain->OpenShard("m", 0);
  EXPECT_EQ(AuditIndices(*bare, 80).front(), 80u);
  absl::Status st = bare->ScanAudit(0, [](uint64_t, std::string_view) { return true; });
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr("archive segment files"));
  std::filesystem::remove_all(dir);
}

// A segment sealed before the journal's prefix is compacted: the compaction copies only the
// records after it to the archive stream, and the chain still reads whole.
TEST_F(JetStreamTest, ASegmentSealedBeforeACompactionLeavesTheChainWhole) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/early_archive_", getpid(), "_",
                                       prefix_);
  std::filesystem::remove_all(dir);
  absl::StatusOr<std::unique_ptr<StorageBackend>> backend =
      ArchiveAuditTo(Open({.snapshot_chunk = 300, .compact_after = 8}), {.dir = dir});
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->CreateModel("m", "spec", kGenesis).ok());
  auto s = (*backend)->OpenShard("m", 0);
  uint64_t audit = 1, sau = 0;
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(CommitBatch(*s, PartKind::kSau, ++sau, &audit).ok());
  ASSERT_TRUE(s->ArchiveAudit(20, "seal 20").ok());
  ASSERT_TRUE(CommitTrimmingSnapshot(*s, sau, &audit).ok());
  auto whole_from = [&](uint64_t from) {
    std::vector<uint64_t> chain = AuditIndices(*s, from);
    ASSERT_EQ(chain.size(), audit - from);
    for (uint64_t i = from; i < audit; ++i) ASSERT_EQ(chain[i - from], i);
  };
  for (uint64_t from : {0, 20, 25}) whole_from(from);
  // A segment that ends inside the stream's message: the message stays.
  ASSERT_TRUE(s->ArchiveAudit(25, "seal 25").ok());
  for (uint64_t from : {0, 20, 25, 27}) whole_from(from);
  // A server without the directory is told that the records below 20 are elsewhere (the
  // stream held none of them), and reads the rest.
  {
    auto bare = Open({.snapshot_chunk = 300, .compact_after = 8})->OpenShard("m", 0);
    const absl::Status st = bare->ScanAudit(0, [](uint64_t, std::string_view) { return true; });
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_THAT(st.message(), HasSubstr("archive segment files"));
    EXPECT_EQ(AuditIndices(*bare, 20).size(), audit - 20);
  }
  // Every record the stream holds sealed: the stream keeps its last message (the next
  // compaction's publish expects it), and the store goes on writing, compacting and reading.
  ASSERT_TRUE(s->ArchiveAudit(audit, "seal all").ok());
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(CommitBatch(*s, PartKind::kSau, ++sau, &audit).ok());
  ASSERT_TRUE(CommitTrimmingSnapshot(*s, sau, &audit).ok())
      << "a compaction after the stream was emptied";
  ASSERT_TRUE(CommitBatch(*s, PartKind::kSau, ++sau, &audit).ok());
  for (uint64_t from : {0, 30, 35}) whole_from(from);
  std::filesystem::remove_all(dir);
}

// Every record of the first compacted prefix sealed before the compaction: it copies none to
// the archive stream, which stays empty. The chain reads whole through the archive; a server without the
// directory is told where the records went instead of reading past them.
TEST_F(JetStreamTest, APrefixSealedBeforeItsCompactionReadsWhole) {
  const std::string dir = absl::StrCat(::testing::TempDir(), "/sealed_archive_", getpid(), "_",
                                       prefix_);
  std::filesystem::remove_all(dir);
  absl::StatusOr<std::unique_ptr<StorageBackend>> backend =
      ArchiveAuditTo(Open({.snapshot_chunk = 300, .compact_after = 8}), {.dir = dir});
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->CreateModel("m", "spec", kGenesis).ok());
  auto s = (*backend)->OpenShard("m", 0);
  uint64_t audit = 1, sau = 0;
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(CommitBatch(*s, PartKind::kSau, ++sau, &audit).ok());
  // An LMU batch whose log entry the compaction must keep: the compacted prefix is then the
  // 30 SAU batches, whose records are all sealed below.
  ASSERT_TRUE(CommitBatch(*s, PartKind::kLmu, 1, &audit).ok());
  const uint64_t sealed = audit - 1;
  ASSERT_TRUE(s->ArchiveAudit(sealed, "seal").ok());
  ASSERT_TRUE(CommitTrimmingSnapshot(*s, sau, &audit).ok());
  ASSERT_TRUE(CommitBatch(*s, PartKind::kSau, ++sau, &audit).ok());
  EXPECT_TRUE(ArchiveStreamRecords(*Open(), prefix_, 0).empty())
      << "the compacted prefix held only sealed records";
  const std::unique_ptr<ShardStore> reopened = (*backend)->OpenShard("m", 0);
  for (const ShardStore* r : {s.get(), reopened.get()}) {
    std::vector<uint64_t> chain = AuditIndices(*r, 0);
    ASSERT_EQ(chain.size(), audit);
    for (uint64_t i = 0; i < audit; ++i) ASSERT_EQ(chain[i], i);
  }
  auto bare = Open({.snapshot_chunk = 300, .compact_after = 8})->OpenShard("m", 0);
  const absl::Status st = bare->ScanAudit(0, [](uint64_t, std::string_view) { return true; });
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(st.message(), HasSubstr("archive segment files"));
  EXPECT_EQ(AuditIndices(*bare, sealed).size(), audit - sealed);
  std::filesystem::remove_all(dir);
}

// A 3-node NATS cluster, every stream with 3 replicas: the store keeps writing and reading
// with one node down, and nothing acknowledged is lost.
TEST(JetStreamClusterTest, AReplicatedShardSurvivesTheLossOfANatsNode) {
  absl::StatusOr<std::unique_ptr<NatsTestCluster>> nats = NatsTestCluster::Start(3);
  ASSERT_TRUE(nats.ok()) << nats.status();
  // Opening reads the streams' state, which needs each stream's leader: right after a node's
  // loss it may be in an election, so the server (and this test) tries again.
  auto open = [&]() -> std::unique_ptr<JetStreamStorage> {
    absl::StatusOr<std::unique_ptr<JetStreamStorage>> s;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    for (;;) {
      s = OpenJetStream((*nats)->urls(), {.prefix = "R3", .replicas = 3}, absl::Seconds(2));
      if (s.ok() || !absl::IsUnavailable(s.status()) ||
          std::chrono::steady_clock::now() > deadline) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    EXPECT_TRUE(s.ok()) << s.status() << (*nats)->Logs();
    return s.ok() ? *std::move(s) : nullptr;
  };
  auto storage = open();
  ASSERT_NE(storage, nullptr);
  ASSERT_TRUE(storage->CreateModel("m", "spec", kGenesis).ok());
  auto s = storage->OpenShard("m", 0);
  uint64_t audit = 1, seq = 0;
  // Commits until `n` more are acknowledged; a commit NATS does not confirm (a leader
  // election) is retried after ResumeWrites, as the server does.
  auto commit_n = [&](int n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (int done = 0; done < n;) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << (*nats)->Logs();
      absl::Status st = CommitBatch(*s, PartKind::kSau, seq + 1, &audit);
      if (st.ok()) {
        ++seq;
        ++done;
        continue;
      }
      ASSERT_EQ(st.code(), absl::StatusCode::kUnavailable) << st << (*nats)->Logs();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      absl::Status resume = s->ResumeWrites();
      if (resume.ok()) continue;
      ASSERT_NE(resume.code(), absl::StatusCode::kAborted) << resume;
      // Whether the commit landed is unknown: read the shard again, as the server does.
      s = storage->OpenShard("m", 0);
      absl::StatusOr<std::optional<uint64_t>> last = s->LastLogSeq(PartKind::kSau);
      absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> head = s->LastAudit();
      if (!last.ok() || !head.ok()) continue;  // still electing
      if (last->value_or(0) == seq + 1) {     // it landed
        ++seq;
        ++done;
      }
      audit = head->has_value() ? (*head)->first + 1 : 1;
    }
  };
  commit_n(10);
  (*nats)->Kill(0);
  commit_n(10);
  ASSERT_TRUE((*nats)->Restart(0).ok());
  // The second loss only once node 0 is a complete copy again (nats_cluster.h says why).
  absl::Status agree = (*nats)->WaitUntilReplicasAgree(
      {storage->models_stream(), storage->journal_stream(), storage->snapshot_stream(),
       storage->archive_stream()},
      absl::Seconds(120));
  ASSERT_TRUE(agree.ok()) << agree;
  (*nats)->Kill(2);
  commit_n(10);
  auto reader = open();
  ASSERT_NE(reader, nullptr);
  auto r = reader->OpenShard("m", 0);
  std::vector<std::pair<uint64_t, std::string>> log;
  // The same: the first read may meet an election (until a deadline, not a count: an
  // election can refuse at once, "no responders").
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  for (;;) {
    log.clear();
    absl::Status st = r->ScanLog(PartKind::kSau, 0, [&](uint64_t seq, std::string_view e) {
      log.emplace_back(seq, std::string(e));
      return true;
    });
    if (st.ok()) break;
    ASSERT_TRUE(absl::IsUnavailable(st)) << st;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << st << (*nats)->Logs();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r = reader->OpenShard("m", 0);
  }
  ASSERT_EQ(log.size(), seq);
  for (uint64_t i = 0; i < seq; ++i) EXPECT_EQ(log[i].first, i + 1);
  EXPECT_EQ(AuditIndices(*r, 0).size(), audit);
}

const std::vector<std::string> kOneGenesis = {"line 0"};

// Two connections to an R = 3 cluster, for the races below.
class JetStreamRaceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<NatsTestCluster>> c = NatsTestCluster::Start(3);
    ASSERT_TRUE(c.ok()) << c.status();
    nats_ = c->release();
  }
  static void TearDownTestSuite() {
    delete nats_;
    nats_ = nullptr;
  }
  std::unique_ptr<JetStreamStorage> Open(const std::string& prefix) {
    absl::StatusOr<std::unique_ptr<JetStreamStorage>> s;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    for (;;) {  // a fresh cluster may still elect its stream leaders
      s = OpenJetStream(nats_->urls(), {.prefix = prefix, .replicas = 3});
      if (s.ok() || !absl::IsUnavailable(s.status()) ||
          std::chrono::steady_clock::now() > deadline) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  static NatsTestCluster* nats_;
};
NatsTestCluster* JetStreamRaceTest::nats_ = nullptr;

// Both writers loaded the same shard; both commit the next batch at once.
TEST_F(JetStreamRaceTest, OfTwoWritersCommittingAtOnceExactlyOneIsAcknowledged) {
  auto a = Open("RACE");
  auto b = Open("RACE");
  ASSERT_TRUE(a != nullptr && b != nullptr);
  constexpr int kRounds = 40;
  int a_won = 0, b_won = 0, void_records = 0;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const std::string model = absl::StrCat("m", round);
    ASSERT_TRUE(a->CreateModel(model, "spec", kOneGenesis).ok());
    auto sa = a->OpenShard(model, 0);
    auto sb = b->OpenShard(model, 0);
    // One committed batch each has seen, so both expect the same last record.
    uint64_t audit = 1;
    ASSERT_TRUE(CommitBatch(*sa, PartKind::kSau, 1, &audit).ok());
    ASSERT_TRUE(sb->LastAudit().ok());
    absl::Status sta, stb;
    std::latch go(3);
    auto commit = [&](ShardStore* store, const char* who, absl::Status* out) {
      ShardWrite w;
      const std::string entry = absl::StrCat("entry by ", who);
      const std::string line = absl::StrCat("line 2 by ", who);
      w.log = LogAppend{.part = PartKind::kSau, .seq = 2, .entry = entry};
      w.audit.push_back({.index = 2, .line = line});
      go.arrive_and_wait();
      *out = store->Commit(w);
    };
    std::thread ta(commit, sa.get(), "a", &sta);
    std::thread tb(commit, sb.get(), "b", &stb);
    go.arrive_and_wait();
    ta.join();
    tb.join();
    ASSERT_NE(sta.ok(), stb.ok()) << "a: " << sta << "\nb: " << stb;
    const absl::Status& lost = sta.ok() ? stb : sta;
    EXPECT_EQ(lost.code(), absl::StatusCode::kAborted) << lost;
    if (absl::StrContains(lost.message(), "came first")) ++void_records;
    const std::string winner = sta.ok() ? "a" : "b";
    (sta.ok() ? a_won : b_won)++;
    // The loser is fenced for good; a reader sees the winner's batch alone.
    ShardStore& loser = sta.ok() ? *sb : *sa;
    uint64_t again = 3;
    EXPECT_EQ(CommitBatch(loser, PartKind::kSau, 3, &again).code(), absl::StatusCode::kAborted);
    auto reader = Open("RACE")->OpenShard(model, 0);
    EXPECT_THAT(Log(*reader, PartKind::kSau, 0),
                ElementsAre(std::make_pair(uint64_t{1}, std::string("entry sau 1")),
                            std::make_pair(uint64_t{2}, "entry by " + winner)));
    std::vector<std::string> lines;
    ASSERT_TRUE(reader->ScanAudit(0, [&](uint64_t, std::string_view l) {
      lines.emplace_back(l);
      return true;
    }).ok());
    EXPECT_THAT(lines, ElementsAre("line 0", "line 1", "line 2 by " + winner));
    // The winner goes on.
    ShardStore& won = sta.ok() ? *sa : *sb;
    uint64_t next = 3;
    EXPECT_TRUE(CommitBatch(won, PartKind::kSau, 3, &next).ok());
  }
  // How the races went (not asserted: it is the scheduler's).
  std::cout << "a won " << a_won << ", b won " << b_won << "; the loser's record was stored "
            << "and voided in " << void_records << " of " << kRounds << " rounds" << std::endl;
}

TEST_F(JetStreamRaceTest, OfTwoCreatesOfOneModelAtOnceExactlyOneSucceeds) {
  auto a = Open("CREATE");
  auto b = Open("CREATE");
  ASSERT_TRUE(a != nullptr && b != nullptr);
  for (int round = 0; round < 40; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const std::string model = absl::StrCat("m", round);
    absl::Status sta, stb;
    std::latch go(3);
    std::thread ta([&] {
      go.arrive_and_wait();
      sta = a->CreateModel(model, "spec a", kOneGenesis);
    });
    std::thread tb([&] {
      go.arrive_and_wait();
      stb = b->CreateModel(model, "spec b", kOneGenesis);
    });
    go.arrive_and_wait();
    ta.join();
    tb.join();
    ASSERT_NE(sta.ok(), stb.ok()) << "a: " << sta << "\nb: " << stb;
    EXPECT_EQ((sta.ok() ? stb : sta).code(), absl::StatusCode::kAlreadyExists);
    const std::string want = sta.ok() ? "spec a" : "spec b";
    for (JetStreamStorage* s : {a.get(), b.get()}) {
      absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs = s->ListSpecs();
      ASSERT_TRUE(specs.ok()) << specs.status();
      bool seen = false;
      for (const auto& [name, spec] : *specs) {
        if (name != model) continue;
        seen = true;
        EXPECT_EQ(spec, want);
      }
      EXPECT_TRUE(seen);
    }
  }
}

}  // namespace
}  // namespace streamlearn::storage
