// The audit archive's segment files and the archive over a store (audit_archive.h): what is
// written reads back byte for byte from any index, a damaged file is DATA_LOSS naming it, a
// chain reads across segments and the live tail as one, a crash between the segment and the
// trim loses and repeats nothing, and a missing segment or leftover segments are refused.
#include "server/storage/audit_archive.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_storage.h"

namespace streamlearn::storage {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class AuditArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = absl::StrCat(::testing::TempDir(), "/audit_archive_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Records of varied lengths (the empty line included), as a chain would hold them.
  static std::string Line(uint64_t i) {
    return i % 97 == 5 ? std::string() : absl::StrCat("{\"i\":", i, ",\"pad\":\"",
                                                       std::string(i % 700, 'x'), "\"}");
  }
  static absl::Status ScanLines(uint64_t first, uint64_t end, uint64_t from,
                                const AuditVisitor& fn) {
    for (uint64_t i = std::max(first, from); i < end; ++i) {
      if (!fn(i, Line(i))) break;
    }
    return absl::OkStatus();
  }
  // Every (index, line) a scan from `from` gives.
  static std::vector<std::pair<uint64_t, std::string>> Read(const AuditSegmentInfo& s,
                                                            uint64_t from) {
    std::vector<std::pair<uint64_t, std::string>> out;
    bool stopped = false;
    const absl::Status st = ScanAuditSegment(
        s, from,
        [&](uint64_t i, std::string_view line) {
          out.emplace_back(i, std::string(line));
          return true;
        },
        &stopped);
    EXPECT_TRUE(st.ok()) << st;
    return out;
  }
  static std::vector<std::pair<uint64_t, std::string>> Expected(uint64_t from, uint64_t end) {
    std::vector<std::pair<uint64_t, std::string>> out;
    for (uint64_t i = from; i < end; ++i) out.emplace_back(i, Line(i));
    return out;
  }

  std::string dir_;
};

TEST_F(AuditArchiveTest, SegmentReadsBackEveryRecordFromAnyIndexWithItsSeal) {
  const std::string path = dir_ + "/a.seg";
  constexpr uint64_t kFirst = 4096, kEnd = 4096 + 2500;  // three blocks, the last partial
  absl::StatusOr<AuditSegmentInfo> w = WriteAuditSegment(
      path, kFirst, kEnd, "the seal\n",
      [](uint64_t from, const AuditVisitor& fn) { return ScanLines(0, 1 << 20, from, fn); });
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<AuditSegmentInfo> info = ReadAuditSegmentInfo(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->first, kFirst);
  EXPECT_EQ(info->end, kEnd);
  EXPECT_EQ(info->seal, "the seal\n");
  EXPECT_EQ(info->bytes, fs::file_size(path));
  for (uint64_t from : {kFirst - 10, kFirst, kFirst + 1023, kFirst + 1024, kEnd - 1}) {
    SCOPED_TRACE(from);
    EXPECT_EQ(Read(*info, from), Expected(std::max(from, kFirst), kEnd));
  }
  EXPECT_TRUE(Read(*info, kEnd).empty());
  // A visitor that stops is not called again, and the scan says it stopped.
  bool stopped = false;
  int calls = 0;
  ASSERT_TRUE(ScanAuditSegment(*info, kFirst, [&](uint64_t, std::string_view) {
                return ++calls < 3;
              }, &stopped).ok());
  EXPECT_TRUE(stopped);
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(VerifyAuditSegment(path).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST_F(AuditArchiveTest, ASourceThatSkipsARecordWritesNoSegment) {
  const std::string path = dir_ + "/gap.seg";
  absl::StatusOr<AuditSegmentInfo> w = WriteAuditSegment(
      path, 0, 100, "seal", [](uint64_t from, const AuditVisitor& fn) {
        for (uint64_t i = from; i < 100; ++i) {
          if (i != 42 && !fn(i, Line(i))) break;
        }
        return absl::OkStatus();
      });
  EXPECT_EQ(w.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(w.status().message(), HasSubstr("jumps from 42 to 43"));
  absl::StatusOr<AuditSegmentInfo> short_source = WriteAuditSegment(
      path, 0, 100, "seal",
      [](uint64_t from, const AuditVisitor& fn) { return ScanLines(0, 60, from, fn); });
  EXPECT_EQ(short_source.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(short_source.status().message(), HasSubstr("records 60 to 99"));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST_F(AuditArchiveTest, AnyFlippedByteOrTruncationIsDataLossNamingTheFile) {
  const std::string path = dir_ + "/b.seg";
  ASSERT_TRUE(WriteAuditSegment(path, 0, 1500, "seal", [](uint64_t from, const AuditVisitor& fn) {
                return ScanLines(0, 1500, from, fn);
              }).ok());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const auto write = [&](const std::string& b) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << b;
  };
  // A byte inside the first block's compressed data: the scan (CRC-32) and the file check
  // (SHA-256) both refuse it.
  std::string flipped = bytes;
  flipped[100] ^= 0x01;
  write(flipped);
  absl::StatusOr<AuditSegmentInfo> info = ReadAuditSegmentInfo(path);
  ASSERT_TRUE(info.ok()) << info.status();
  bool stopped = false;
  absl::Status scan =
      ScanAuditSegment(*info, 0, [](uint64_t, std::string_view) { return true; }, &stopped);
  EXPECT_EQ(scan.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(scan.message(), HasSubstr(path));
  EXPECT_THAT(scan.message(), HasSubstr("CRC-32"));
  absl::Status verify = VerifyAuditSegment(path);
  EXPECT_EQ(verify.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(verify.message(), HasSubstr("SHA-256"));
  // Any single flipped byte fails the file check.
  for (size_t at = 0; at < bytes.size(); at += 97) {
    std::string b = bytes;
    b[at] ^= 0x20;
    write(b);
    EXPECT_EQ(VerifyAuditSegment(path).code(), absl::StatusCode::kDataLoss) << "byte " << at;
  }
  write(bytes.substr(0, bytes.size() - 3));
  absl::StatusOr<AuditSegmentInfo> truncated = ReadAuditSegmentInfo(path);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(truncated.status().message(), HasSubstr(path));
}

// The archive over FakeStorage: a chain of 700 records.
class ArchiveOverStoreTest : public AuditArchiveTest {
 protected:
  void SetUp() override {
    AuditArchiveTest::SetUp();
    std::vector<std::string> genesis = {Line(0)};
    ASSERT_TRUE(fake_.Share()->CreateModel("acme/m", "spec", genesis).ok());
    std::unique_ptr<ShardStore> s = fake_.Share()->OpenShard("acme/m", 0);
    ShardWrite w;
    std::vector<std::string> lines;
    for (uint64_t i = 1; i < kRecords; ++i) lines.push_back(Line(i));
    for (uint64_t i = 1; i < kRecords; ++i) w.audit.push_back({.index = i, .line = lines[i - 1]});
    ASSERT_TRUE(s->Commit(w).ok());
  }
  std::unique_ptr<StorageBackend> Archived() {
    absl::StatusOr<std::unique_ptr<StorageBackend>> b =
        ArchiveAuditTo(fake_.Share(), {.dir = dir_ + "/archive"});
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }
  static std::vector<std::pair<uint64_t, std::string>> ReadAll(const ShardStore& s,
                                                               uint64_t from) {
    std::vector<std::pair<uint64_t, std::string>> out;
    const absl::Status st = s.ScanAudit(from, [&](uint64_t i, std::string_view line) {
      out.emplace_back(i, std::string(line));
      return true;
    });
    EXPECT_TRUE(st.ok()) << st;
    return out;
  }
  static constexpr uint64_t kRecords = 700;
  FakeStorage fake_;
};

TEST_F(ArchiveOverStoreTest, TheChainReadsAsOneAcrossSegmentsAndTheBoundedLiveTail) {
  std::unique_ptr<StorageBackend> b = Archived();
  std::unique_ptr<ShardStore> s = b->OpenShard("acme/m", 0);
  ASSERT_TRUE(s->ArchiveAudit(256, "seal 256").ok());
  ASSERT_TRUE(s->ArchiveAudit(512, "seal 512").ok());
  ASSERT_TRUE(s->ArchiveAudit(300, "older").ok());  // already archived: nothing happens
  EXPECT_EQ(s->ArchivedBelow(), 512u);
  // The live store keeps only the tail.
  EXPECT_EQ(ReadAll(*fake_.Share()->OpenShard("acme/m", 0), 0), Expected(512, kRecords));
  for (uint64_t from : {0, 1, 255, 256, 511, 512, 699, 700}) {
    SCOPED_TRACE(from);
    EXPECT_EQ(ReadAll(*s, from), Expected(from, kRecords));
  }
  absl::StatusOr<std::optional<std::pair<uint64_t, std::string>>> last = s->LastAudit();
  ASSERT_TRUE(last.ok() && last->has_value());
  EXPECT_EQ((*last)->first, kRecords - 1);
  // Two files under <tenant>/<model>/<shard>, each sealed and whole.
  const std::string chain_dir = AuditSegmentDir(dir_ + "/archive", "acme/m", 0);
  EXPECT_EQ(chain_dir, dir_ + "/archive/acme/m/0");
  const std::string second =
      chain_dir + "/00000000000000000256-00000000000000000512.seg";
  ASSERT_TRUE(fs::exists(second));
  EXPECT_TRUE(VerifyAuditSegment(second).ok());
  EXPECT_EQ(ReadAuditSegmentInfo(second)->seal, "seal 512");
  // A fresh backend (a restart) lists the same segments.
  std::unique_ptr<StorageBackend> again = Archived();
  EXPECT_EQ(ReadAll(*again->OpenShard("acme/m", 0), 0), Expected(0, kRecords));
  EXPECT_EQ(again->OpenShard("acme/m", 0)->ArchivedBelow(), 512u);
}

TEST_F(ArchiveOverStoreTest, ACrashBetweenSegmentAndTrimRepeatsNothingAndTheNextTrimCleansUp) {
  std::unique_ptr<StorageBackend> b = Archived();
  std::unique_ptr<ShardStore> s = b->OpenShard("acme/m", 0);
  fake_.FailWrites(absl::UnavailableError("disk gone"));
  const absl::Status failed = s->ArchiveAudit(200, "seal");
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
  fake_.HealWrites();
  // The segment was written, the live copies stayed: each index is read once.
  EXPECT_EQ(s->ArchivedBelow(), 200u);
  EXPECT_EQ(ReadAll(*fake_.Share()->OpenShard("acme/m", 0), 0).size(), kRecords);
  EXPECT_EQ(ReadAll(*s, 0), Expected(0, kRecords));
  EXPECT_EQ(ReadAll(*Archived()->OpenShard("acme/m", 0), 0), Expected(0, kRecords));
  ASSERT_TRUE(s->ArchiveAudit(400, "seal").ok());
  EXPECT_EQ(ReadAll(*fake_.Share()->OpenShard("acme/m", 0), 0), Expected(400, kRecords));
  EXPECT_EQ(ReadAll(*s, 0), Expected(0, kRecords));
}

TEST_F(ArchiveOverStoreTest, AMissingSegmentOrAGapIsDataLossAndLeftoversBlockANewModel) {
  {
    std::unique_ptr<StorageBackend> b = Archived();
    std::unique_ptr<ShardStore> s = b->OpenShard("acme/m", 0);
    ASSERT_TRUE(s->ArchiveAudit(100, "a").ok());
    ASSERT_TRUE(s->ArchiveAudit(200, "b").ok());
    absl::Status again = b->CreateModel("acme/m", "spec", std::vector<std::string>{Line(0)});
    EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(again.message(), HasSubstr("move them away"));
  }
  const std::string chain_dir = AuditSegmentDir(dir_ + "/archive", "acme/m", 0);
  fs::remove(chain_dir + "/00000000000000000000-00000000000000000100.seg");
  std::unique_ptr<ShardStore> s = Archived()->OpenShard("acme/m", 0);
  const absl::Status scan = s->ScanAudit(0, [](uint64_t, std::string_view) { return true; });
  EXPECT_EQ(scan.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(scan.message(), HasSubstr("no segment starts at record 0"));
  EXPECT_EQ(s->ArchiveAudit(300, "c").code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace streamlearn::storage
