// The cluster mode's bounded audit storage (docs/CLUSTER.md, "Audit archive"): two
// streamlearn-server processes over a NATS JetStream server (Debian's nats-server) share an
// archive directory. The first owner of a model's shard archives its chain's old records into
// sealed segment files there, and they leave JetStream's archive stream; it is killed with -9,
// the second server takes the shard over, goes on from the segments the first one sealed, and
// seals the next ones. At the end the whole chain verifies through the new owner (`audit
// verify` with the published key), a record sealed by the dead owner is proved against a
// signed tree head, the directory checks offline (`audit archive`), and the archive stream
// holds no message whose records are all in segments.
//
// Archiving is made to happen by Admin.Snapshot at the owner (its archive pass runs before it
// answers); every wait is for a condition with a generous deadline, never for a duration.
// STREAMLEARN_TEST_SEED sets the events' seed (printed).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/sau/counter_rng.h"
#include "gtest/gtest.h"
#include "journal.pb.h"
#include "server/storage/nats_client.h"
#include "tests/cluster_processes.h"
#include "tests/command_runner.h"

namespace streamlearn::server {
namespace {

using Clock = std::chrono::steady_clock;
using test_util::CommandResult;
using test_util::RunCommand;

constexpr char kCli[] = STREAMLEARN_BINARY_DIR "/client/streamlearn";
constexpr char kModel[] = "archived";
constexpr uint64_t kSegment = 32;  // --audit_segment_records
constexpr uint64_t kLive = 64;     // --audit_live_records

uint64_t Seed() {
  const char* env = std::getenv("STREAMLEARN_TEST_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 20261129;
}

class ClusterArchiveTest : public test_util::ClusterProcessTest {
 protected:
  ClusterArchiveTest()
      : ClusterProcessTest("cluster_archive", /*nats_nodes=*/1,
                           {"--cluster_replicas=1", "--snapshot_every_steps=0",
                            "--snapshot_interval=0s", "--keep_snapshots=1",
                            "--audit_checkpoint_every=16",
                            absl::StrCat("--audit_live_records=", kLive),
                            absl::StrCat("--audit_segment_records=", kSegment)}) {}

  std::string Archive() const { return dir_ + "/archive"; }
  std::string ChainDir() const { return Archive() + "/default/" + kModel + "/0"; }
  std::string PublicKey() const { return dir_ + "/keys/audit.pub"; }

  void Start(const std::string& id) {
    ASSERT_NO_FATAL_FAILURE(StartNode(id, {"--audit_archive_dir=" + Archive()}));
  }

  CommandResult Cli(const std::string& address, const std::string& args) {
    return RunCommand(std::string(kCli) + " --server " + address + " " + args);
  }

  // `n` events (t from *t on) as a CSV file for `ingest`.
  std::string Events(int n, uint64_t* t) {
    const std::string path = absl::StrCat(dir_, "/events_", *t, ".csv");
    std::ofstream out(path);
    out << "t,k0,k1,k2,k3,v0,v1\n";
    sau::CounterRng rng(Seed(), *t);
    for (int i = 0; i < n; ++i) {
      out << (*t)++;
      for (int j = 0; j < 6; ++j) out << "," << rng.NextNormal();
      out << "\n";
    }
    return path;
  }

  // The [first, end) ranges of the segment files in the chain's directory, in order.
  std::vector<std::pair<uint64_t, uint64_t>> Segments() const {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(ChainDir(), ec)) {
      const std::string name = e.path().filename().string();
      if (!absl::EndsWith(name, ".seg")) continue;
      std::vector<std::string> parts = absl::StrSplit(name.substr(0, name.size() - 4), '-');
      out.emplace_back(std::stoull(parts.at(0)), std::stoull(parts.at(1)));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // The indices of the records in the model's archive stream, message by message (the last
  // index of each message).
  std::vector<uint64_t> StreamMessagesLastIndex() {
    std::vector<uint64_t> out;
    absl::StatusOr<std::unique_ptr<storage::NatsClient>> nats =
        storage::NatsClient::Connect({.servers = nats_->urls()});
    EXPECT_TRUE(nats.ok()) << nats.status();
    if (!nats.ok()) return out;
    absl::StatusOr<std::vector<std::string>> subjects = (*nats)->Subjects("SL_AUDIT", "sl.a.>");
    EXPECT_TRUE(subjects.ok()) << subjects.status();
    if (!subjects.ok() || subjects->empty()) return out;
    absl::StatusOr<uint64_t> last = (*nats)->LastSeq("SL_AUDIT");
    EXPECT_TRUE(last.ok()) << last.status();
    for (const std::string& subject : *subjects) {
      absl::Status st = (*nats)->ScanSubject(
          "SL_AUDIT", subject, 1, *last, [&](const storage::StoredMsg& m) {
            journal::AuditArchive batch;
            EXPECT_TRUE(batch.ParseFromString(m.data));
            if (batch.records_size() > 0) {
              out.push_back(batch.records(batch.records_size() - 1).index());
            }
            return true;
          });
      EXPECT_TRUE(st.ok()) << st;
    }
    return out;
  }

  // Snapshots the model at `address` (its owner) and checks what archiving must have left:
  // segments from record 0 up to the multiple of the segment size the live bound gives, and
  // no message of the archive stream that holds only archived records. Returns the number of
  // the stream's messages.
  void SnapshotAndCheckTheBound(const std::string& address, uint64_t records,
                                size_t* stream_messages) {
    CommandResult r = Cli(address, std::string("snapshot ") + kModel);
    ASSERT_EQ(r.exit_code, 0) << r.err << Logs();
    const std::vector<std::pair<uint64_t, uint64_t>> segments = Segments();
    ASSERT_FALSE(segments.empty()) << Logs();
    uint64_t next = 0;
    for (const auto& [first, end] : segments) {
      EXPECT_EQ(first, next);
      EXPECT_EQ(end - first, kSegment);
      next = end;
    }
    // The snapshot's own record came after `records`; the pass archives while more than
    // kLive records would stay.
    EXPECT_GE(next + kLive + kSegment, records);
    const std::vector<uint64_t> in_stream = StreamMessagesLastIndex();
    // The subject's last message stays even when all of it is sealed (the next publish names
    // it as the last sequence).
    for (size_t i = 0; i + 1 < in_stream.size(); ++i) {
      EXPECT_GE(in_stream[i], next) << "an archive stream message holds only archived records";
    }
    *stream_messages = in_stream.size();
    std::cout << records << " records: " << segments.size() << " segment(s) up to " << next
              << ", " << in_stream.size() << " archive stream message(s)" << std::endl;
  }

  // The chain's length through `address` (audit head).
  uint64_t ChainLength(const std::string& address) {
    CommandResult r = Cli(address, std::string("audit head ") + kModel + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // Protobuf's JSON: "next_index": "N" (a uint64 as a string).
    size_t at = r.out.find("\"next_index\"");
    if (at != std::string::npos) at = r.out.find_first_of("0123456789", at + 12);
    EXPECT_NE(at, std::string::npos) << r.out;
    return at == std::string::npos ? 0 : std::stoull(r.out.substr(at));
  }
};

TEST_F(ClusterArchiveTest, SegmentsInASharedDirectoryBoundJetStreamAndSurviveATakeover) {
  std::cout << "STREAMLEARN_TEST_SEED=" << Seed() << std::endl;
  ASSERT_NO_FATAL_FAILURE(Start("s1"));
  const std::string s1 = nodes_[0].address;
  CommandResult r = Cli(s1, std::string("create --name ") + kModel + " --d 4 --dv 2 --r 16");
  ASSERT_EQ(r.exit_code, 0) << r.err << Logs();
  uint64_t t = 1;
  // s1 is the only server: it takes the shard's lease. Wait until it serves it.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (;;) {
    r = Cli(s1, std::string("ingest ") + kModel + " " + Events(300, &t) + " --batch 2");
    if (r.exit_code == 0) break;
    ASSERT_LT(Clock::now(), deadline) << r.err << Logs();
    t -= 300;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  size_t stream_messages = 0;
  ASSERT_NO_FATAL_FAILURE(SnapshotAndCheckTheBound(s1, ChainLength(s1), &stream_messages));
  const std::vector<std::pair<uint64_t, uint64_t>> sealed_by_s1 = Segments();

  // s2 joins; s1 dies; s2 takes the shard over once s1's lease runs out.
  ASSERT_NO_FATAL_FAILURE(Start("s2"));
  const std::string s2 = nodes_[1].address;
  nodes_[0].process->Kill();
  nodes_[0].alive = false;
  const auto takeover = Clock::now() + std::chrono::seconds(90);
  for (;;) {
    r = Cli(s2, std::string("ingest ") + kModel + " " + Events(300, &t) + " --batch 2");
    if (r.exit_code == 0) break;
    ASSERT_LT(Clock::now(), takeover) << r.err << Logs();
    t -= 300;  // resent whole: the acknowledged part comes back as duplicates
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const uint64_t records = ChainLength(s2);
  // The journal's prefix of 300 batches is compacted now (past JetStreamOptions'
  // compact_after = 256): its records reach the archive stream, and the sealed ones leave it.
  ASSERT_NO_FATAL_FAILURE(SnapshotAndCheckTheBound(s2, records, &stream_messages));
  EXPECT_GT(stream_messages, 0u) << "the compaction copied the live records to the stream";
  const std::vector<std::pair<uint64_t, uint64_t>> segments = Segments();
  ASSERT_GT(segments.size(), sealed_by_s1.size()) << "s2 sealed segments after s1's";

  // The whole chain verifies through s2 with the key published at --init_keys, ...
  r = Cli(s2, std::string("audit verify ") + kModel + " --public-key " + PublicKey());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
  EXPECT_TRUE(absl::StrContains(r.out, "OK:")) << r.out;
  // ... a record s1 sealed is proved against a tree head s2 signs, ...
  const std::string head = dir_ + "/head";
  r = Cli(s2, std::string("audit tree-head ") + kModel + " --out " + head);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Cli(s2, std::string("audit prove ") + kModel + " --index 5 --tree-head " + head +
                  " --public-key " + PublicKey());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // ... and the shared directory checks offline, seals and all.
  r = RunCommand(std::string(kCli) + " audit archive " + ChainDir() + " --public-key " +
                 PublicKey());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat("records 0..", segments.back().second - 1,
                                                    " verified")))
      << r.out;
}

}  // namespace
}  // namespace streamlearn::server
