// A data directory that held state never starts empty or with keys that are not its own, and
// what the store keeps stays readable and its own (issue: faults found by a probe):
//   - a truncated RocksDB MANIFEST is refused, and no table file is deleted;
//   - a missing db/ beside the marker, a missing audit key or LMU secret, and an audit.pub
//     that is not audit.key's are refused, naming the file;
//   - an audit table with a checksum error is refused at start, naming the file;
//   - a backup is an independent copy: damage to the live table files does not reach it;
//   - Auditor chains are bound to their (model, shard) (tests/audit_cli_test.cc checks the CLI).
// In-process servers on a fresh data_dir per test (tests/durability_fixture.h).
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <chrono>
#include <thread>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "core/audit/ed25519_key.h"
#include "core/common/sanitizer.h"
#include "gmock/gmock.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/heap.h"
#include "server/storage/data_dir.h"
#include "tests/command_runner.h"
#include "tests/durability_fixture.h"
#include "tests/server_process.h"

namespace streamlearn::server {
namespace {

using namespace durability_test;  // NOLINT: the fixture's names
using ::testing::AllOf;
using ::testing::HasSubstr;

// name -> size of every regular file under `dir` (not recursive).
std::map<std::string, uintmax_t> Files(const std::string& dir, const std::string& suffix) {
  std::map<std::string, uintmax_t> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.ends_with(suffix)) out[name] = e.file_size();
  }
  return out;
}

void FlipBytes(const std::string& path, uintmax_t offset, int n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  for (int i = 0; i < n; ++i) {
    f.seekg(static_cast<std::streamoff>(offset + i));
    const int c = f.get();
    f.seekp(static_cast<std::streamoff>(offset + i));
    f.put(static_cast<char>(c ^ 0x5a));
  }
}

class DataDirTest : public DurabilityTest {
 protected:
  // A model with snapshots, and table files on disk: the store flushes its WAL into tables
  // when it is opened again, so the state is started, fed, stopped, and opened once more.
  std::vector<std::string> MakeStateOnDisk() {
    Start();
    CreateModel();
    Feed(3, 16);
    Snapshot();
    Feed(2, 16);
    Snapshot();
    Feed(1, 16);
    const std::vector<std::string> states = States();
    Stop();
    Start();
    Stop();
    return states;
  }
  std::string Db() const { return root_ + "/data/db"; }
  absl::Status TryStart(Server::Options options) {
    auto server = std::make_unique<Server>(std::move(options));
    absl::StatusOr<int> port = server->Start();
    if (!port.ok()) return port.status();
    server_ = std::move(server);
    channel_ = ChannelTo(*server_);
    return absl::OkStatus();
  }
};

// Every cut of the MANIFEST either fails the start with the table files all kept, or starts
// with the whole state. (RocksDB alone took some cuts for a clean end of its log, started from
// an older version, and deleted the table files it no longer knew.)
TEST_F(DataDirTest, TruncatedStoreManifestIsRefusedAndNoTableFileIsDeleted) {
  const std::vector<std::string> states = MakeStateOnDisk();
  const std::string pristine = root_ + "/pristine";
  fs::copy(root_ + "/data", pristine, fs::copy_options::recursive);
  const std::map<std::string, uintmax_t> manifests = Files(Db(), "");
  std::string manifest;
  for (const auto& [name, size] : manifests) {
    if (name.starts_with("MANIFEST-")) manifest = name;
  }
  ASSERT_FALSE(manifest.empty());
  const uintmax_t size = manifests.at(manifest);
  const std::map<std::string, uintmax_t> tables = Files(Db(), ".sst");
  ASSERT_FALSE(tables.empty());
  int refused = 0, started = 0;
  for (uintmax_t cut = 0; cut < size; cut += std::max<uintmax_t>(1, size / 40)) {
    SCOPED_TRACE(absl::StrCat("MANIFEST cut to ", cut, " of ", size, " bytes"));
    fs::remove_all(root_ + "/data");
    fs::copy(pristine, root_ + "/data", fs::copy_options::recursive);
    fs::resize_file(Db() + "/" + manifest, cut);
    const absl::Status st = TryStart(Options());
    if (st.ok()) {
      ++started;
      EXPECT_EQ(States(), states) << "started with a state that is not the store's";
      Stop();
      continue;
    }
    ++refused;
    EXPECT_THAT(std::string(st.message()), HasSubstr(Db())) << st;
    const std::map<std::string, uintmax_t> after = Files(Db(), ".sst");
    for (const auto& [name, bytes] : tables) {
      EXPECT_TRUE(after.contains(name)) << name << " was deleted by a refused start: " << st;
    }
  }
  std::printf("%d cuts refused, %d started with the whole state\n", refused, started);
  EXPECT_GT(refused, 0);
}

TEST_F(DataDirTest, MissingStoreBesideItsMarkerIsRefusedNotStartedEmpty) {
  MakeStateOnDisk();
  ASSERT_TRUE(fs::exists(root_ + "/data/" + storage::kDataDirMarker));
  fs::remove_all(Db());
  const absl::Status st = TryStart(Options());
  ASSERT_FALSE(st.ok()) << "started empty without its store";
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), AllOf(HasSubstr("db/CURRENT is missing"),
                                               HasSubstr("backup")));
  EXPECT_FALSE(fs::exists(Db() + "/CURRENT")) << "a refused start made a new store";
}

TEST_F(DataDirTest, StoreFilesWithoutCurrentAreRefusedEvenWithoutTheMarker) {
  MakeStateOnDisk();
  fs::remove(root_ + "/data/" + storage::kDataDirMarker);
  fs::remove(Db() + "/CURRENT");
  const absl::Status st = TryStart(Options());
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("db/ holds table files")) << st;
}

TEST_F(DataDirTest, NewDataDirWithKeysFromAnInterruptedFirstStartStarts) {
  // A first start that died after writing its keys and before its store: nothing was lost.
  fs::create_directories(root_ + "/data");
  Start();
  Stop();
  fs::remove_all(Db());
  fs::remove(root_ + "/data/" + storage::kDataDirMarker);
  EXPECT_TRUE(TryStart(Options()).ok());
}

TEST_F(DataDirTest, MissingAuditKeyIsRefusedNotRegenerated) {
  MakeStateOnDisk();
  const std::string key = root_ + "/data/audit.key";
  fs::remove(key);
  const absl::Status st = TryStart(Options());
  ASSERT_FALSE(st.ok()) << "a new signing key was made for an existing chain";
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), AllOf(HasSubstr(key), HasSubstr("audit signing key")));
  EXPECT_FALSE(fs::exists(key));
}

TEST_F(DataDirTest, MissingLmuSecretFileIsRefusedNotRegenerated) {
  Server::Options options = Options();
  options.lmu_secret.reset();  // the default file <data_dir>/lmu.secret
  Start(options);
  CreateModel();
  Feed(1, 8);
  Stop();
  const std::string secret = root_ + "/data/lmu.secret";
  ASSERT_TRUE(fs::exists(secret));
  fs::remove(secret);
  const absl::Status st = TryStart(options);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), AllOf(HasSubstr(secret), HasSubstr("LMU hash secret")));
  EXPECT_FALSE(fs::exists(secret));
}

TEST_F(DataDirTest, AuditPublicKeyThatIsNotTheSigningKeysIsRefused) {
  MakeStateOnDisk();
  absl::StatusOr<Ed25519PrivateKey> other = Ed25519PrivateKey::Generate();
  ASSERT_TRUE(other.ok());
  absl::StatusOr<std::string> pem = other->PublicKey().ToPem();
  ASSERT_TRUE(pem.ok());
  std::ofstream(root_ + "/data/audit.pub", std::ios::trunc) << *pem;
  const absl::Status st = TryStart(Options());
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()),
              AllOf(HasSubstr("audit.pub"), HasSubstr("is not the public key of"),
                    HasSubstr(other->PublicKey().fingerprint())));
}

TEST_F(DataDirTest, AuditTableWithAChecksumErrorIsRefusedAtStartNamingTheFile) {
  MakeStateOnDisk();
  std::vector<std::string> audit_files;
  {
    std::unique_ptr<storage::Store> store = OpenStore();
    ASSERT_NE(store, nullptr);
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> files = store->TableFiles();
    ASSERT_TRUE(files.ok()) << files.status();
    for (const auto& [cf, path] : *files) {
      if (cf == "audit") audit_files.push_back(path);
    }
  }
  ASSERT_FALSE(audit_files.empty());
  const std::string victim = audit_files.front();
  FlipBytes(victim, fs::file_size(victim) / 4, 8);  // inside the data blocks
  const absl::Status st = TryStart(Options());
  ASSERT_FALSE(st.ok()) << "served an audit chain it cannot read";
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(std::string(st.message()),
              AllOf(HasSubstr(fs::path(victim).filename().string()), HasSubstr("audit")));
}

TEST_F(DataDirTest, BackupIsAnIndependentCopyThatSurvivesDamageToTheLiveFiles) {
  Start();
  CreateModel();
  Feed(3, 16);
  Snapshot();
  Feed(2, 16);
  const std::vector<std::string> states = States();
  const std::string backup = root_ + "/backup";
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::BackupRequest req;
    req.set_name("b1");
    v1::BackupResponse resp;
    // The default backup_dir is <data_dir>/backups.
    ASSERT_TRUE(v1::Admin::NewStub(channel_)->Backup(&ctx, req, &resp).ok());
  }
  Stop();
  fs::rename(root_ + "/data/backups/b1", backup);
  for (const fs::directory_entry& e : fs::directory_iterator(backup + "/db")) {
    struct stat st;
    ASSERT_EQ(lstat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_nlink, 1u) << e.path() << " shares its inode with another file";
  }
  const std::map<std::string, uintmax_t> live = Files(Db(), ".sst");
  ASSERT_FALSE(live.empty());
  for (const auto& [name, size] : live) FlipBytes(Db() + "/" + name, size / 4, 64);
  Server::Options options = Options();
  options.data_dir = backup;
  options.audit_key_file = root_ + "/data/audit.key";  // a backup holds no secret
  ASSERT_TRUE(TryStart(options).ok());
  EXPECT_EQ(States(), states);
}

// A small tmpfs fills up under the stream: writes fail with UNAVAILABLE (nothing acknowledged
// that is not stored), and once space is freed the next SAU and LMU batches are acknowledged
// without a restart; the LMU shards a failed write fenced are rebuilt from the store. The
// state then equals a memory-only server fed exactly the acknowledged batches, and a restart
// recovers it.
TEST_F(DataDirTest, FullDiskRefusesWritesThenResumesWithoutARestart) {
  const std::string mnt = root_ + "/tmpfs";
  fs::create_directories(mnt);
  if (std::system(("mount -t tmpfs -o size=64m tmpfs " + mnt + " 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "mounting a tmpfs needs root (CI runs as root)";
  }
  struct Unmount {
    std::string dir;
    ~Unmount() { (void)std::system(("umount -l " + dir).c_str()); }
  } unmount{mnt};
  {
    std::ofstream filler(mnt + "/filler", std::ios::binary);
    const std::string mb(1 << 20, 'x');
    for (int i = 0; i < 28; ++i) filler << mb;
  }
  Server::Options options = Options();
  options.data_dir = mnt + "/data";
  Start(options);
  CreateModel();

  auto sau = v1::SAU::NewStub(channel_);
  auto lmu = v1::LMU::NewStub(channel_);
  using IngestStream = LockStepStream<v1::IngestRequest, v1::IngestAck>;
  using UpdateStream = LockStepStream<v1::UpdateRequest, v1::UpdateAck>;
  auto open_ingest = [&] {
    return std::make_unique<IngestStream>([&](grpc::ClientContext* c) { return sau->Ingest(c); });
  };
  auto open_update = [&] {
    return std::make_unique<UpdateStream>([&](grpc::ClientContext* c) { return lmu->Update(c); });
  };
  std::unique_ptr<IngestStream> ingest = open_ingest();
  std::unique_ptr<UpdateStream> update = open_update();
  std::vector<v1::IngestRequest> acked_sau;
  std::vector<v1::UpdateRequest> acked_lmu;
  int failed_sau = 0, failed_lmu = 0;
  // (part, shard) of every failed batch; and of the batches refused as held back (an earlier
  // batch of the stream for the shard failed).
  std::set<std::pair<std::string, uint32_t>> failed, held_back;
  // One round: a batch of each part to every key; returns whether every batch was acked.
  const auto round = [&](int n) {
    bool all = true;
    for (const char* key : {"a", "b", "c", "d"}) {
      v1::IngestRequest req = SauBatch(kModel, key, n);
      const v1::IngestAck ack = ingest->Send(req);
      if (ack.status().code() == 0) {
        acked_sau.push_back(req);
      } else {
        EXPECT_EQ(ack.status().code(), grpc::StatusCode::UNAVAILABLE) << ack.status().message();
        ++failed_sau;
        failed.emplace("sau", ack.shard());
        if (absl::StartsWith(ack.status().message(), "an earlier batch")) {
          held_back.emplace("sau", ack.shard());
        }
        std::printf("sau refused: %s\n", ack.status().message().c_str());
        all = false;
      }
      v1::UpdateRequest ureq = LmuBatch(kModel, key, n);
      const v1::UpdateAck uack = update->Send(ureq);
      if (uack.status().code() == 0) {
        acked_lmu.push_back(ureq);
      } else {
        EXPECT_EQ(uack.status().code(), grpc::StatusCode::UNAVAILABLE)
            << uack.status().message();
        ++failed_lmu;
        failed.emplace("lmu", uack.shard());
        if (absl::StartsWith(uack.status().message(), "an earlier batch")) {
          held_back.emplace("lmu", uack.shard());
        }
        std::printf("lmu refused: %s\n", uack.status().message().c_str());
        all = false;
      }
    }
    return all;
  };
  // Fill the disk: at most ~1 GB of batches into 36 MB.
  int rounds = 0;
  while (round(256) && rounds < 1500) ++rounds;
  ASSERT_GT(failed_sau + failed_lmu, 0) << "the disk never filled";
  // Still full: still refused, with the cause.
  round(16);
  ASSERT_GT(failed_lmu, 0);
  std::printf("disk full after %d rounds; %d SAU and %d LMU batches refused\n", rounds,
              failed_sau, failed_lmu);

  fs::remove(mnt + "/filler");
  const size_t sau_before = acked_sau.size(), lmu_before = acked_lmu.size();
  // On the same streams, a shard whose batch failed takes nothing more (a batch applied after
  // the failed one would make its resend a duplicate): its batches are refused as held back,
  // and nothing of them is applied; the other shards' batches are applied.
  const std::set<std::pair<std::string, uint32_t>> failed_before = failed;
  held_back.clear();
  round(16);
  EXPECT_EQ(held_back, failed_before)
      << "a failed shard took batches on the stream of its failure, or a good one refused";
  size_t failed_sau_shards = 0;
  for (const auto& [part, shard] : failed_before) failed_sau_shards += part == "sau" ? 1 : 0;
  EXPECT_LE(acked_sau.size() + failed_sau_shards, sau_before + 4);
  EXPECT_LE(acked_lmu.size() + (failed_before.size() - failed_sau_shards), lmu_before + 4);
  const size_t sau_mid = acked_sau.size(), lmu_mid = acked_lmu.size();
  EXPECT_TRUE(ingest->Finish().ok());
  EXPECT_TRUE(update->Finish().ok());
  // New streams: writes resume without a restart.
  ingest = open_ingest();
  update = open_update();
  EXPECT_TRUE(round(16)) << "writes did not resume once the disk had space";
  EXPECT_EQ(acked_sau.size(), sau_mid + 4);
  EXPECT_EQ(acked_lmu.size(), lmu_mid + 4);
  EXPECT_TRUE(ingest->Finish().ok());
  EXPECT_TRUE(update->Finish().ok());
  const std::vector<std::string> states = States();

  {  // The same acknowledged batches into a server without a store.
    Server::Options mem = Options();
    mem.data_dir = "";
    std::unique_ptr<Server> reference = test_util::StartLoopbackServer(mem);
    std::swap(server_, reference);
    channel_ = ChannelTo(*server_);
    CreateModel();
    auto rsau = v1::SAU::NewStub(channel_);
    auto rlmu = v1::LMU::NewStub(channel_);
    LockStepStream<v1::IngestRequest, v1::IngestAck> ri(
        [&](grpc::ClientContext* c) { return rsau->Ingest(c); });
    LockStepStream<v1::UpdateRequest, v1::UpdateAck> ru(
        [&](grpc::ClientContext* c) { return rlmu->Update(c); });
    for (const v1::IngestRequest& r : acked_sau) ASSERT_EQ(ri.Send(r).status().code(), 0);
    for (const v1::UpdateRequest& r : acked_lmu) ASSERT_EQ(ru.Send(r).status().code(), 0);
    EXPECT_TRUE(ri.Finish().ok());
    EXPECT_TRUE(ru.Finish().ok());
    EXPECT_EQ(States(), states) << "the state is not that of the acknowledged batches";
    Stop();
    std::swap(server_, reference);
    channel_ = ChannelTo(*server_);
  }
  Stop();
  Start(options);
  EXPECT_EQ(States(), states) << "a restart recovers another state";
}

// The real binary (its umask): the data directory, the store's files, keys and backups are
// readable by their owner only; the event log and the audit chain are no other user's.
// streamlearn_store_memory_bytes (server/metrics.h): RocksDB's own accounting of its memory,
// read at each scrape, by kind; the memtables hold what was just written. A server without a
// data directory exports none. streamlearn_process_heap_bytes: malloc's statistics, always.
TEST_F(DataDirTest, TheStoresMemoryIsExportedByKind) {
  const auto by_kind = [](const std::vector<prometheus::MetricFamily>& families,
                          const std::string& name) {
    std::map<std::string, double> kinds;
    for (const prometheus::MetricFamily& f : families) {
      if (f.name != name) continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        EXPECT_EQ(m.label.size(), 1u);
        if (m.label.size() == 1) kinds[m.label[0].value] = m.gauge.value;
      }
    }
    return kinds;
  };
  Start();
  CreateModel();
  Feed(2, 16);
  std::vector<prometheus::MetricFamily> families = server_->metrics().CollectMemory();
  ASSERT_EQ(families.size(), 2u);
  std::map<std::string, double> store = by_kind(families, "streamlearn_store_memory_bytes");
  EXPECT_EQ(store.size(), 3u);
  EXPECT_GT(store["memtables"], 0);
  EXPECT_TRUE(store.contains("block_cache") && store.contains("table_readers"));
  std::map<std::string, double> heap = by_kind(families, "streamlearn_process_heap_bytes");
  EXPECT_EQ(heap.size(), 3u);
  EXPECT_GE(heap["allocated"], heap["mmapped"]);  // (a sanitizer's allocator reports zeros)
  Stop();

  Server::Options memory = Options();
  memory.data_dir.clear();
  Start(memory);
  families = server_->metrics().CollectMemory();
  EXPECT_TRUE(by_kind(families, "streamlearn_store_memory_bytes").empty());
  EXPECT_EQ(by_kind(families, "streamlearn_process_heap_bytes").size(), 3u);
  Stop();
}

// The server binary's heap trimmer (server/heap.h): a zero interval starts nothing;
// otherwise it trims again and again until it is destroyed, and its destructor wakes it.
TEST(HeapTrimmer, TrimsUntilDestroyed) {
  {
    HeapTrimmer off(absl::ZeroDuration());
    EXPECT_EQ(off.trims(), 0u);
  }
  HeapTrimmer trimmer(absl::Milliseconds(1));
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (trimmer.trims() < 3 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(trimmer.trims(), 3u);
  HeapTrimmer::TrimNow();  // and on the caller's thread, beside it
  HeapTrimmer idle(absl::Hours(1));  // its destructor must not wait out the hour
}

// The release server binary links jemalloc; the sanitizer builds and every test binary run on
// glibc's malloc (server/heap.h, CMake's STREAMLEARN_SERVER_ALLOCATOR). The binary names the
// allocator it got at start, and the heap statistics come from that allocator.
TEST_F(DataDirTest, TheServerBinaryRunsOnTheAllocatorItWasBuiltWith) {
  ServerProcess server({"--data_dir="}, root_ + "/allocator.log");
  ASSERT_GT(server.WaitForPort(std::chrono::seconds(60)), 0) << server.Log();
  EXPECT_THAT(server.Log(), testing::HasSubstr(absl::StrCat(
                                "allocator ", STREAMLEARN_SERVER_ALLOCATOR, "\n")));
  server.Kill();

  EXPECT_EQ(CurrentAllocator(), Allocator::kGlibc);  // this test binary
  EXPECT_STREQ(AllocatorName(Allocator::kJemalloc), "jemalloc");
  // glibc's statistics see a block the program holds (a sanitizer's allocator they do not).
  const HeapStats before = ReadHeapStats();
  std::vector<char> block(64 << 20, 1);
  const HeapStats during = ReadHeapStats();
  if (!kSanitizedBuild) {
    EXPECT_GE(during.allocated, before.allocated + block.size() / 2) << block[12345];
  }
}

TEST_F(DataDirTest, ServerBinaryCreatesEveryFileAndDirectoryPrivate) {
  const std::string dir = root_ + "/bin-data";
  const std::string script = root_ + "/run.sh";
  std::ofstream(script) << "S=" << STREAMLEARN_BINARY_DIR << "/server/streamlearn-server\n"
                        << "C=" << STREAMLEARN_BINARY_DIR << "/client/streamlearn\n"
                        << "D=" << dir << "\nL=" << root_ << "/bin.log\n"
                        << R"(
$S --listen=127.0.0.1:0 --metrics= --data_dir=$D > $L 2>&1 &
p=$!
for i in $(seq 1200); do grep -q '(port ' $L && break; sleep 0.1; done
port=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' $L | head -1)
$C --server 127.0.0.1:$port create --name m --d 4 --dv 2 --r 16 --lmu &&
  $C --server 127.0.0.1:$port snapshot m && $C --server 127.0.0.1:$port backup b1
r=$?
kill -TERM $p
wait $p
cat $L >&2
exit $r
)";
  const test_util::CommandResult r = test_util::RunCommand("bash " + script);
  ASSERT_EQ(r.exit_code, 0) << test_util::Describe(r);
  int checked = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    struct stat st;
    ASSERT_EQ(lstat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u) << e.path() << " mode " << std::oct << (st.st_mode & 0777);
    ++checked;
  }
  struct stat top;
  ASSERT_EQ(stat(dir.c_str(), &top), 0);
  EXPECT_EQ(top.st_mode & 077, 0u) << "the data directory itself";
  EXPECT_GT(checked, 10);
}

}  // namespace
}  // namespace streamlearn::server
