// Persistence over FakeStorage (tests/fake_storage.h), without a server: batches go through
// the shards' commit hooks exactly as the request handlers send them, and the tests restart
// (a second Persistence over the same store), fail writes and reads, and corrupt snapshots.
// What they check: recovery is bit-identical (state digests, log_seq, audit chain heads), a
// failed write changes nothing visible (SAU) or fences the part until the store heals (LMU),
// recovery falls back past corrupt snapshots and reports DATA_LOSS when it cannot, a read
// error is returned and registers nothing, and a failed snapshot leaves the manifest as it was.
//
// The inputs are pseudo-random from one seed, printed with every failure; set
// STREAMLEARN_TEST_SEED to replay another one.
#include "server/storage/persistence.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "core/audit/merkle_tree.h"
#include "core/audit/tree_head.h"
#include "core/audit/verifier.h"
#include "core/common/digest.h"
#include "core/common/mutex.h"
#include "core/shard/model_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/storage/audit_archive.h"
#include "server/storage/audit_key.h"
#include "server/storage/audit_replay.h"
#include "server/storage/jetstream_storage.h"
#include "server/storage/manifest.h"
#include "server/storage/shard_chain.h"
#include "server/storage/shard_writer.h"
#include "tests/fake_storage.h"
#include "tests/nats_cluster.h"

namespace streamlearn::storage {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kModel[] = "demo";
constexpr uint32_t kShards = 2;
constexpr int kD = 8;
constexpr int kDv = 3;
constexpr int kM = 2;
constexpr int kFeatures = 3;  // per LMU sample
constexpr int kBatch = 12;    // events / samples per batch
constexpr size_t kMaxBatch = 4096;

uint64_t TestSeed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("STREAMLEARN_TEST_SEED");
    const uint64_t s =
        env != nullptr && *env != '\0' ? std::strtoull(env, nullptr, 10) : 20240611;
    std::cout << "persistence_test: STREAMLEARN_TEST_SEED=" << s << std::endl;
    return s;
  }();
  return seed;
}

// splitmix64: the same numbers on every platform.
class Inputs {
 public:
  explicit Inputs(uint64_t seed) : state_(seed) {}
  uint64_t Next64() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next64() >> 11) * 0x1.0p-52 - 1.0; }  // [-1, 1)

 private:
  uint64_t state_;
};

// A batch and the memory its views point into (moving it keeps the views valid).
struct SauBatch {
  std::vector<double> k, v;
  std::vector<EventView> views;
};
struct LmuBatch {
  std::vector<lmu::Feature> x;
  std::vector<double> y;
  std::vector<SampleView> views;
};

ModelSpec Spec() {
  ModelSpec s;
  s.name = kModel;
  s.shards = kShards;
  s.has_sau = true;
  s.sau.d = kD;
  s.sau.d_v = kDv;
  s.sau.r = 32;
  s.sau.seed = 5;
  s.has_lmu = true;
  s.lmu.m = kM;
  s.lmu.schedule = lmu::LrSchedule::kInverseSqrt;
  s.lmu.l2 = 0.001;
  s.lmu.delta_buckets = 64;  // C = 256: rebuilds within a few batches
  s.lmu.lambda_max = 10;
  s.lmu.margin = 16;
  s.lmu.background_rebuild = false;  // the table layout depends on the samples alone
  return s;
}

PersistenceOptions Options() {
  PersistenceOptions o;
  o.checkpoint_every = 16;  // signed checkpoints inside the chains
  o.sau_digest_every = 40;
  o.lmu_digest_every = 50;
  o.snapshot_every_steps = 0;  // snapshots on demand only
  o.snapshot_interval = absl::ZeroDuration();
  o.keep_snapshots = 2;
  return o;
}

std::string Name(PartKind kind) { return std::string(PartName(kind)); }

lmu::HashSecret Secret() {
  lmu::HashSecret s{};
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(7 * i + 1);
  return s;
}

// One store and what a test does with it: open Persistence over it (each Open is a restart),
// create the model, send batches through the commit hooks, read states and chain heads.
// A restart that must recover: a new Persistence over the same store, and the model read back.
struct Recovered {
  std::unique_ptr<Persistence> p;
  std::unique_ptr<ModelRegistry> registry;
  std::shared_ptr<Model> model;
};

class World {
 public:
  World() : trace_(__FILE__, __LINE__, absl::StrCat("STREAMLEARN_TEST_SEED=", TestSeed())) {}
  // Over another backend: `open` makes a new view of the same store at every Open.
  explicit World(std::function<std::unique_ptr<StorageBackend>()> open) : World() {
    open_ = std::move(open);
  }

  FakeStorage& fake() { return fake_; }

  std::unique_ptr<Persistence> Open() {
    std::unique_ptr<StorageBackend> backend = open_ ? open_() : fake_.Share();
    if (backend == nullptr) return nullptr;
    absl::StatusOr<std::unique_ptr<Persistence>> p =
        Persistence::OpenWith(Options(), std::move(backend), nullptr);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }

  // Opens a new Persistence over the store (a restart), recovers every model into a new
  // registry and finds the test's model. Fails the test if any of it fails.
  void RestartAndRecover(Recovered* out) {
    out->p = Open();
    ASSERT_NE(out->p, nullptr);
    out->registry = std::make_unique<ModelRegistry>(Secret());
    const absl::Status recovered = out->p->Recover(out->registry.get());
    ASSERT_TRUE(recovered.ok()) << recovered;
    absl::StatusOr<std::shared_ptr<Model>> m = out->registry->Find(kModel);
    ASSERT_TRUE(m.ok()) << m.status();
    out->model = *std::move(m);
  }

  std::shared_ptr<Model> Create(Persistence& p, ModelRegistry& registry) {
    absl::StatusOr<std::shared_ptr<Model>> m = registry.Create(
        Spec(), [&p, &registry](const std::shared_ptr<Model>& model) {
          return p.OnCreate(model, registry.secret());
        });
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : nullptr;
  }

  SauBatch NextSau(uint32_t shard) {
    SauBatch b;
    for (int i = 0; i < kBatch * kD; ++i) b.k.push_back(inputs_.Uniform());
    for (int i = 0; i < kBatch * kDv; ++i) b.v.push_back(inputs_.Uniform());
    for (int i = 0; i < kBatch; ++i) {
      b.views.push_back(EventView{.t = ++sau_t_[shard],
                                  .k = std::span<const double>(b.k).subspan(i * kD, kD),
                                  .v = std::span<const double>(b.v).subspan(i * kDv, kDv)});
    }
    return b;
  }
  LmuBatch NextLmu(uint32_t shard) {
    LmuBatch b;
    for (int i = 0; i < kBatch * kFeatures; ++i) {
      b.x.push_back({.id = 1 + inputs_.Next64() % 400, .val = inputs_.Uniform()});
    }
    for (int i = 0; i < kBatch * kM; ++i) b.y.push_back(inputs_.Uniform());
    for (int i = 0; i < kBatch; ++i) {
      b.views.push_back(
          SampleView{.t = ++lmu_t_[shard],
                     .x = std::span<const lmu::Feature>(b.x).subspan(i * kFeatures, kFeatures),
                     .y = std::span<const double>(b.y).subspan(i * kM, kM)});
    }
    return b;
  }

  // As SauRequestHandler::Ingest: the shard's writer commits the batch before it is published.
  static absl::StatusOr<IngestOutcome> Ingest(Persistence& p, Model& m, uint32_t shard,
                                              const SauBatch& b) {
    std::shared_ptr<ModelWriters> writers = p.Find(m.spec().name);
    if (writers == nullptr) return absl::NotFoundError("no writers");
    Receipt receipt;
    ShardWriter* log = &writers->shard(shard);
    SauCommitHook hook = [log, &receipt](const SauCommit& c) {
      return log->CommitSau(c, &receipt);
    };
    return m.sau(shard).Ingest(b.views, kMaxBatch, &hook);
  }
  // As LmuRequestHandler::Update: a fenced part is reinstated first.
  static absl::StatusOr<UpdateOutcome> Update(Persistence& p, ModelRegistry& registry, Model& m,
                                              uint32_t shard, const LmuBatch& b) {
    std::shared_ptr<ModelWriters> writers = p.Find(m.spec().name);
    if (writers == nullptr) return absl::NotFoundError("no writers");
    LmuShard& lmu = m.lmu(shard);
    if (lmu.fenced()) {
      if (absl::Status s = p.ReinstateFenced(m, shard, PartKind::kLmu, registry.secret());
          !s.ok()) {
        return s;
      }
    }
    Receipt receipt;
    ShardWriter* log = &writers->shard(shard);
    LmuCommitHook hook = [log, &receipt](const LmuCommit& c) {
      return log->CommitLmu(c, &receipt);
    };
    return lmu.Update(b.views, kMaxBatch, &hook);
  }

  // `rounds` rounds of one SAU and one LMU batch to every shard; each must be applied whole.
  void Feed(Persistence& p, ModelRegistry& registry, Model& m, int rounds) {
    for (int r = 0; r < rounds; ++r) {
      for (uint32_t i = 0; i < kShards; ++i) {
        absl::StatusOr<IngestOutcome> in = Ingest(p, m, i, NextSau(i));
        ASSERT_TRUE(in.ok()) << in.status();
        ASSERT_EQ(in->applied, static_cast<uint32_t>(kBatch));
        absl::StatusOr<UpdateOutcome> up = Update(p, registry, m, i, NextLmu(i));
        ASSERT_TRUE(up.ok()) << up.status();
        ASSERT_EQ(up->applied, static_cast<uint32_t>(kBatch));
      }
    }
  }

 private:
  const ::testing::ScopedTrace trace_;
  FakeStorage fake_;
  std::function<std::unique_ptr<StorageBackend>()> open_;
  Inputs inputs_{TestSeed()};
  uint64_t sau_t_[kShards] = {};
  uint64_t lmu_t_[kShards] = {};
};

// "shard 0 sau log_seq 7 digest <hex>" for every part.
std::vector<std::string> States(const Model& m) {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < m.num_shards(); ++i) {
    for (const ShardPart* part : m.parts(i)) {
      out.push_back(absl::StrCat("shard ", i, " ", Name(part->kind()), " log_seq ",
                                 part->log_seq(), " digest ", ToHex(part->StateDigest())));
    }
  }
  return out;
}

// "shard 0 chain next 45 head <hex>" for every shard.
std::vector<std::string> Heads(const Persistence& p, const Model& m) {
  std::vector<std::string> out;
  std::shared_ptr<ModelWriters> writers = p.Find(m.spec().name);
  if (writers == nullptr) return {"no writers"};
  for (uint32_t i = 0; i < writers->num_shards(); ++i) {
    const ChainHead h = writers->shard(i).chain().head();
    out.push_back(absl::StrCat("shard ", i, " chain next ", h.next_index, " head ",
                               ToHex(h.head)));
  }
  return out;
}

std::vector<uint64_t> Seqs(uint64_t first, uint64_t last) {
  std::vector<uint64_t> out;
  for (uint64_t s = first; s <= last; ++s) out.push_back(s);
  return out;
}

// The snapshot seqs a stored manifest lists, newest first.
std::vector<uint64_t> ManifestSeqs(const std::optional<std::string>& bytes) {
  if (!bytes.has_value()) return {};
  absl::StatusOr<std::vector<ManifestEntry>> m = DecodeManifest(*bytes);
  EXPECT_TRUE(m.ok()) << m.status();
  std::vector<uint64_t> out;
  if (m.ok()) {
    for (const ManifestEntry& e : *m) out.push_back(e.snapshot_seq);
  }
  return out;
}

// The snapshot seqs the writer's bookkeeping lists, newest first.
std::vector<uint64_t> WriterManifestSeqs(Persistence& p, uint32_t shard, PartKind part) {
  std::shared_ptr<ModelWriters> writers = p.Find(kModel);
  if (writers == nullptr) return {};
  ShardWriter& w = writers->shard(shard);
  MutexLock lock(&w.snapshot_mu());
  std::vector<uint64_t> out;
  for (const ManifestEntry& e : w.manifest(part)) out.push_back(e.snapshot_seq);
  return out;
}

void ExpectAllTaken(const absl::StatusOr<std::vector<SnapshotInfo>>& infos,
                    uint64_t snapshot_seq) {
  ASSERT_TRUE(infos.ok()) << infos.status();
  ASSERT_EQ(infos->size(), kShards * 2);
  for (const SnapshotInfo& info : *infos) {
    SCOPED_TRACE(absl::StrCat("shard ", info.shard, " ", Name(info.part)));
    EXPECT_TRUE(info.taken);
    EXPECT_EQ(info.snapshot_seq, snapshot_seq);
  }
}

constexpr PartKind kParts[] = {PartKind::kSau, PartKind::kLmu};

TEST(PersistenceTest, RestartRecoversBitIdenticalStateAndChainHeadsWithAnyNumberOfSnapshots) {
  struct Case {
    const char* name;
    int snapshots;          // each after 3 rounds; 2 more rounds follow the last
    uint64_t first_logged;  // the oldest log entry kept (the log is trimmed once 2 exist)
  };
  const Case cases[] = {
      {"no snapshot: the whole log replays", 0, 1},
      {"one snapshot: the log is kept whole", 1, 1},
      {"two snapshots: the log is trimmed through the older", 2, 4},
      {"three snapshots: the oldest is dropped", 3, 7},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    World w;
    std::unique_ptr<Persistence> p1 = w.Open();
    ASSERT_NE(p1, nullptr);
    ModelRegistry reg1(Secret());
    std::shared_ptr<Model> m1 = w.Create(*p1, reg1);
    ASSERT_NE(m1, nullptr);
    for (int s = 0; s < c.snapshots; ++s) {
      ASSERT_NO_FATAL_FAILURE(w.Feed(*p1, reg1, *m1, 3));
      ExpectAllTaken(p1->SnapshotModel(*m1), static_cast<uint64_t>(s + 1));
    }
    ASSERT_NO_FATAL_FAILURE(w.Feed(*p1, reg1, *m1, 2));
    const uint64_t last = static_cast<uint64_t>(3 * c.snapshots + 2);
    const std::vector<std::string> states = States(*m1);
    const std::vector<std::string> heads = Heads(*p1, *m1);
    std::vector<uint64_t> kept_snapshots;  // oldest first
    for (int s = std::max(1, c.snapshots - 1); s <= c.snapshots; ++s) {
      kept_snapshots.push_back(static_cast<uint64_t>(s));
    }
    for (uint32_t i = 0; i < kShards; ++i) {
      for (PartKind part : kParts) {
        SCOPED_TRACE(absl::StrCat("shard ", i, " ", Name(part)));
        EXPECT_EQ(m1->part(i, part)->log_seq(), last);
        EXPECT_EQ(w.fake().LogSeqs(kModel, i, part), Seqs(c.first_logged, last));
        EXPECT_EQ(w.fake().SnapshotSeqs(kModel, i, part), kept_snapshots);
      }
    }
    p1.reset();  // the "process" ends; the store stays

    Recovered r;
    ASSERT_NO_FATAL_FAILURE(w.RestartAndRecover(&r));
    std::unique_ptr<Persistence>& p2 = r.p;
    ModelRegistry& reg2 = *r.registry;
    const std::shared_ptr<Model>* const m2 = &r.model;
    EXPECT_EQ(States(**m2), states);
    EXPECT_EQ(Heads(*p2, **m2), heads);
    for (uint32_t i = 0; i < kShards; ++i) {
      for (PartKind part : kParts) {
        SCOPED_TRACE(absl::StrCat("shard ", i, " ", Name(part)));
        EXPECT_FALSE((*m2)->part(i, part)->fenced());
        EXPECT_THAT(WriterManifestSeqs(*p2, i, part),
                    ElementsAreArray(kept_snapshots.rbegin(), kept_snapshots.rend()));
      }
    }
    // The recovered model takes the next batch as the next log entry (the fake refuses a seq
    // that does not follow the part's last one).
    const uint64_t commits = w.fake().commits();
    ASSERT_NO_FATAL_FAILURE(w.Feed(*p2, reg2, **m2, 1));
    EXPECT_EQ(w.fake().commits(), commits + 2 * kShards);
    EXPECT_EQ(w.fake().LogSeqs(kModel, 1, PartKind::kLmu), Seqs(c.first_logged, last + 1));
  }
}

// Options over a fresh RocksDB data directory (under the test's temporary directory, named
// `name` and the pid, the tests' LMU secret in it) that archive the audit chains beyond 50 live
// records in segments of 64; snapshots on demand only, as Options().
PersistenceOptions ArchivingOptions(const std::string& name) {
  namespace fs = std::filesystem;
  PersistenceOptions o = Options();
  o.data_dir = absl::StrCat(::testing::TempDir(), "/", name, getpid());
  fs::remove_all(o.data_dir);
  fs::create_directories(o.data_dir);
  const lmu::HashSecret secret = Secret();
  std::ofstream(o.data_dir + "/lmu.secret", std::ios::binary)
      .write(reinterpret_cast<const char*>(secret.data()), secret.size());
  o.audit_live_records = 50;
  o.audit_segment_records = 64;
  return o;
}

// Every (index, line) of a chain, read through its store.
std::vector<std::string> ChainLines(const ShardStore& store) {
  std::vector<std::string> out;
  const absl::Status s = store.ScanAudit(0, [&](uint64_t index, std::string_view line) {
    EXPECT_EQ(index, out.size());
    out.emplace_back(line);
    return true;
  });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Bounded audit storage end to end over the embedded store (a RocksDB data directory): at a
// snapshot the chains' old records move to segment files and the store keeps a bounded tail;
// across the segments each chain reads, verifies and proves as it did before, every segment
// is sealed by the signed tree head of its end, the offline replay checks every batch, and a
// restart resumes the chains.
TEST(PersistenceTest, ArchivedChainsReadVerifyProveReplayAndResumeAcrossSegments) {
  namespace fs = std::filesystem;
  const PersistenceOptions o = ArchivingOptions("persistence_archive_");
  const std::string dir = o.data_dir;
  World w;
  std::vector<std::string> states, heads;
  {
    absl::StatusOr<std::unique_ptr<Persistence>> p = Persistence::Open(o, nullptr);
    ASSERT_TRUE(p.ok()) << p.status();
    ModelRegistry registry(Secret());
    std::shared_ptr<Model> m = w.Create(**p, registry);
    ASSERT_NE(m, nullptr);
    ASSERT_NO_FATAL_FAILURE(w.Feed(**p, registry, *m, 20));
    ShardChain& chain = (*p)->Find(kModel)->shard(0).chain();
    const uint64_t n = chain.head().next_index;
    ASSERT_GT(n, 50u + 3 * 64u);
    const std::vector<std::string> lines = ChainLines(*chain.store());
    absl::StatusOr<SignedTreeHead> before = chain.SignedHead(0);
    ASSERT_TRUE(before.ok()) << before.status();

    // An archive that cannot be written (a file where its directory must go) fails the
    // snapshot call, naming it, and changes nothing; once it can, the next one archives.
    const std::string blocker = AuditArchiveDir(dir) + "/default";
    fs::create_directories(AuditArchiveDir(dir));
    std::ofstream(blocker) << "not a directory";
    absl::StatusOr<std::vector<SnapshotInfo>> blocked = (*p)->SnapshotModel(*m);
    ASSERT_FALSE(blocked.ok());
    EXPECT_EQ(blocked.status().code(), absl::StatusCode::kFailedPrecondition) << blocked.status();
    EXPECT_THAT(blocked.status().message(), HasSubstr("archiving the audit chain of shard 0"));
    EXPECT_EQ(chain.store()->ArchivedBelow(), 0u);
    fs::remove(blocker);
    // (Nothing changed since the snapshots: none is taken, the archive is.)
    absl::StatusOr<std::vector<SnapshotInfo>> again = (*p)->SnapshotModel(*m);
    ASSERT_TRUE(again.ok()) << again.status();
    const uint64_t archived = chain.store()->ArchivedBelow();
    EXPECT_EQ(archived, (chain.head().next_index - 50) / 64 * 64);
    // The store itself keeps only the tail.
    uint64_t first_live = 0;
    ASSERT_TRUE((*p)->store()->ScanAudit(kModel, 0, 0, [&](uint64_t index, std::string_view) {
                  first_live = index;
                  return false;
                }).ok());
    EXPECT_EQ(first_live, archived);
    // Read through the archive, the chain is what it was, and it still verifies.
    // (The snapshot appended its records after the n lines read before.)
    const std::vector<std::string> now = ChainLines(*chain.store());
    ASSERT_GT(now.size(), lines.size());
    EXPECT_TRUE(std::equal(lines.begin(), lines.end(), now.begin()));
    AuditVerifier verifier({.public_key = &(*p)->public_key(), .checkpoint_every = 16});
    for (const std::string& line : now) ASSERT_TRUE(verifier.Feed(line).ok()) << line;
    EXPECT_TRUE(verifier.Finish().ok());
    // The same tree: the same root, and proofs of archived records against it.
    absl::StatusOr<SignedTreeHead> after = chain.SignedHead(n);
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_EQ(after->head.root, before->head.root);
    for (uint64_t index : {uint64_t{0}, uint64_t{3}, archived - 1, archived, n - 1}) {
      // The tree before the snapshot's records.
      absl::StatusOr<ShardChain::Inclusion> proof = chain.InclusionProof(index, n);
      ASSERT_TRUE(proof.ok()) << proof.status();
      EXPECT_EQ(proof->tree_size, n);
      EXPECT_EQ(proof->line, lines[index]);
      EXPECT_TRUE(VerifyInclusion(LeafHash(proof->line), index, proof->tree_size, proof->path,
                                  before->head.root))
          << index;
    }
    absl::StatusOr<ShardChain::Consistency> consistency = chain.ConsistencyProof(64, n);
    ASSERT_TRUE(consistency.ok()) << consistency.status();
    EXPECT_EQ(consistency->second_size, n);
    absl::StatusOr<SignedTreeHead> at64 = chain.SignedHead(64);
    ASSERT_TRUE(at64.ok()) << at64.status();
    EXPECT_TRUE(
        VerifyConsistency(64, n, at64->head.root, before->head.root, consistency->hashes));
    // One segment per 64 records, each whole and sealed by the tree head of its end.
    int segments = 0;
    for (const fs::directory_entry& e :
         fs::directory_iterator(AuditSegmentDir(AuditArchiveDir(dir), kModel, 0))) {
      ++segments;
      SCOPED_TRACE(e.path().string());
      EXPECT_TRUE(VerifyAuditSegment(e.path().string()).ok());
      absl::StatusOr<AuditSegmentInfo> info = ReadAuditSegmentInfo(e.path().string());
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->end - info->first, 64u);
      absl::StatusOr<TreeHead> seal = OpenTreeHead(info->seal, (*p)->public_key());
      ASSERT_TRUE(seal.ok()) << seal.status();
      EXPECT_EQ(seal->size, info->end);
      EXPECT_EQ(seal->origin, TreeHeadOrigin(kModel, 0));
      absl::StatusOr<SignedTreeHead> then = chain.SignedHead(info->end);
      ASSERT_TRUE(then.ok()) << then.status();
      EXPECT_EQ(seal->root, then->head.root);
    }
    EXPECT_EQ(static_cast<uint64_t>(segments), archived / 64);
    // A third party checks the archive from its files and the public key alone: records,
    // checkpoints, and each seal's root recomputed from the records before it.
    const std::string chain_dir = AuditSegmentDir(AuditArchiveDir(dir), kModel, 0);
    absl::StatusOr<ArchiveCheck> check = VerifyArchivedChain(chain_dir, (*p)->public_key());
    ASSERT_TRUE(check.ok()) << check.status();
    EXPECT_EQ(check->segments, archived / 64);
    EXPECT_EQ(check->records, archived);
    EXPECT_EQ(check->origin, TreeHeadOrigin(kModel, 0));
    absl::StatusOr<SignedTreeHead> at_archived = chain.SignedHead(archived);
    ASSERT_TRUE(at_archived.ok()) << at_archived.status();
    EXPECT_EQ(check->root, at_archived->head.root);
    {
      // Copies of the archive, each with one well-formed forgery: a segment whose files and
      // checksums are whole, but with one record changed, or resealed with a root the records
      // do not give, or sealed by another key.
      absl::StatusOr<Ed25519PrivateKey> key = LoadOrCreateAuditKey(dir + "/audit.key");
      ASSERT_TRUE(key.ok()) << key.status();
      absl::StatusOr<Ed25519PrivateKey> other = Ed25519PrivateKey::Generate();
      ASSERT_TRUE(other.ok());
      const std::string last = absl::StrFormat("%s/%020d-%020d.seg", chain_dir, archived - 64,
                                               archived);
      absl::StatusOr<AuditSegmentInfo> info = ReadAuditSegmentInfo(last);
      ASSERT_TRUE(info.ok()) << info.status();
      std::vector<std::string> records;
      bool stopped = false;
      ASSERT_TRUE(ScanAuditSegment(*info, info->first, [&](uint64_t, std::string_view line) {
                    records.emplace_back(line);
                    return true;
                  }, &stopped).ok());
      absl::StatusOr<TreeHead> sealed = OpenTreeHead(info->seal, (*p)->public_key());
      ASSERT_TRUE(sealed.ok()) << sealed.status();
      TreeHead wrong_root = *sealed;
      wrong_root.root[0] ^= 1;
      struct Forgery {
        const char* name;
        std::function<std::string(std::vector<std::string>&)> seal;  // may alter the records
        absl::StatusCode code;
        const char* says;
      };
      const Forgery forgeries[] = {
          {"a record changed",
           [&](std::vector<std::string>& r) {
             r[5][r[5].find("\"t\":") + 4] ^= 1;
             return info->seal;
           },
           absl::StatusCode::kDataLoss, "record"},
          {"resealed over another root",
           [&](std::vector<std::string>&) { return *SignTreeHead(*key, wrong_root); },
           absl::StatusCode::kDataLoss, "hash to the root"},
          {"sealed by another key",
           [&](std::vector<std::string>&) { return *SignTreeHead(*other, *sealed); },
           absl::StatusCode::kPermissionDenied, "seal"},
      };
      for (const Forgery& f : forgeries) {
        SCOPED_TRACE(f.name);
        const std::string copy = dir + "/forged";
        fs::remove_all(copy);
        fs::copy(chain_dir, copy);
        std::vector<std::string> r = records;
        const std::string seal = f.seal(r);
        const std::string path = copy + "/" + fs::path(last).filename().string();
        ASSERT_TRUE(WriteAuditSegment(path, info->first, info->end, seal,
                                      [&](uint64_t from, const AuditVisitor& fn) {
                                        for (uint64_t i = from; i < info->end; ++i) {
                                          if (!fn(i, r[i - info->first])) break;
                                        }
                                        return absl::OkStatus();
                                      })
                        .ok());
        absl::StatusOr<ArchiveCheck> forged = VerifyArchivedChain(copy, (*p)->public_key());
        EXPECT_EQ(forged.status().code(), f.code) << forged.status();
        EXPECT_THAT(forged.status().message(), HasSubstr(f.says));
        fs::remove_all(copy);
      }
    }
    ASSERT_NO_FATAL_FAILURE(w.Feed(**p, registry, *m, 2));
    states = States(*m);
    heads = Heads(**p, *m);
    (*p)->Stop();
  }
  // The offline replay reads each chain from its genesis, through the segments.
  absl::StatusOr<std::vector<ReplayReport>> reports = ReplayAndCheckAllShards(dir, kModel);
  ASSERT_TRUE(reports.ok()) << reports.status();
  for (const ReplayReport& r : *reports) {
    EXPECT_TRUE(r.ok()) << FormatReplayReport(r);
    for (const ReplayPartReport& part : r.parts) EXPECT_TRUE(part.complete);
  }
  // A restart resumes each chain from its live tail.
  {
    absl::StatusOr<std::unique_ptr<Persistence>> p = Persistence::Open(o, nullptr);
    ASSERT_TRUE(p.ok()) << p.status();
    ModelRegistry registry(Secret());
    ASSERT_TRUE((*p)->Recover(&registry).ok());
    absl::StatusOr<std::shared_ptr<Model>> m = registry.Find(kModel);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(States(**m), states);
    EXPECT_EQ(Heads(**p, **m), heads);
    (*p)->Stop();
  }
  fs::remove_all(dir);
}

TEST(PersistenceTest, FailedSauWriteChangesNothingAndTheNextBatchCommitsOnceHealed) {
  struct Case {
    const char* name;
    uint64_t commits_before;  // batches that still commit after the fault is armed
    bool once;                // a transient fault: the next write succeeds without healing
  };
  const Case cases[] = {{"writes fail at once", 0, false},
                        {"writes fail after two commits", 2, false},
                        {"one write fails (transient)", 0, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    World w;
    std::unique_ptr<Persistence> p = w.Open();
    ASSERT_NE(p, nullptr);
    ModelRegistry reg(Secret());
    std::shared_ptr<Model> m = w.Create(*p, reg);
    ASSERT_NE(m, nullptr);
    absl::StatusOr<sau::SauEstimator> est = sau::SauEstimator::Create(m->spec().sau);
    ASSERT_TRUE(est.ok()) << est.status();
    SauShard reference(*est);  // sees the committed batches of shard 0 only

    for (int b = 0; b < 3; ++b) {
      SauBatch batch = w.NextSau(0);
      ASSERT_TRUE(World::Ingest(*p, *m, 0, batch).ok());
      ASSERT_TRUE(reference.Ingest(batch.views, kMaxBatch).ok());
    }
    const absl::Status injected = absl::UnavailableError("injected: no space left on device");
    if (c.once) {
      w.fake().FailWriteOnce(c.commits_before, injected);
    } else {
      w.fake().FailWritesAfter(c.commits_before, injected);
    }
    for (uint64_t b = 0; b < c.commits_before; ++b) {
      SauBatch batch = w.NextSau(0);
      ASSERT_TRUE(World::Ingest(*p, *m, 0, batch).ok());
      ASSERT_TRUE(reference.Ingest(batch.views, kMaxBatch).ok());
    }
    const ShardStats before = m->sau(0).Stats();
    const uint64_t log_seq = m->sau(0).log_seq();
    const std::vector<std::string> heads = Heads(*p, *m);
    const uint64_t audit = w.fake().AuditSize(kModel, 0);
    const uint64_t commits = w.fake().commits();
    ASSERT_EQ(log_seq, 3 + c.commits_before);
    ASSERT_EQ(before.digest, reference.Stats().digest);

    const SauBatch failing = w.NextSau(0);
    absl::StatusOr<IngestOutcome> out = World::Ingest(*p, *m, 0, failing);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("no space left on device"));
    const ShardStats after = m->sau(0).Stats();
    EXPECT_EQ(after.version, before.version);
    EXPECT_EQ(after.events, before.events);
    EXPECT_EQ(after.last_t, before.last_t);
    EXPECT_EQ(after.digest, before.digest);
    EXPECT_EQ(m->sau(0).log_seq(), log_seq);
    EXPECT_EQ(Heads(*p, *m), heads);
    EXPECT_EQ(w.fake().LogSeqs(kModel, 0, PartKind::kSau), Seqs(1, log_seq));
    EXPECT_EQ(w.fake().AuditSize(kModel, 0), audit);
    EXPECT_EQ(w.fake().commits(), commits);
    EXPECT_EQ(w.fake().failed_writes(), 1u);

    if (!c.once) w.fake().HealWrites();
    out = World::Ingest(*p, *m, 0, failing);  // the client's retry
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->applied, static_cast<uint32_t>(kBatch));
    EXPECT_EQ(out->version, before.version + 1);
    EXPECT_EQ(m->sau(0).log_seq(), log_seq + 1);
    ASSERT_TRUE(reference.Ingest(failing.views, kMaxBatch).ok());
    EXPECT_EQ(m->sau(0).Stats().digest, reference.Stats().digest);
    EXPECT_EQ(w.fake().LogSeqs(kModel, 0, PartKind::kSau), Seqs(1, log_seq + 1));
    EXPECT_GT(w.fake().AuditSize(kModel, 0), audit);
    EXPECT_NE(Heads(*p, *m), heads);
  }
}

TEST(PersistenceTest, FailedLmuWriteFencesThePartUntilTheStoreHealsThenItResumesFromTheStore) {
  struct Case {
    const char* name;
    bool reinstate_explicitly;  // false: the next Update reinstates it (the handler's path)
  };
  const Case cases[] = {{"ReinstateFenced after healing", true},
                        {"the next batch after healing reinstates", false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    World w;
    std::unique_ptr<Persistence> p = w.Open();
    ASSERT_NE(p, nullptr);
    ModelRegistry reg(Secret());
    std::shared_ptr<Model> m = w.Create(*p, reg);
    ASSERT_NE(m, nullptr);
    LmuShard reference(m->spec().lmu, reg.secret());  // the committed batches of shard 0 only

    for (int b = 0; b < 4; ++b) {
      LmuBatch batch = w.NextLmu(0);
      ASSERT_TRUE(World::Update(*p, reg, *m, 0, batch).ok());
      ASSERT_TRUE(reference.Update(batch.views, kMaxBatch).ok());
    }
    LmuShard& lmu = m->lmu(0);
    ASSERT_EQ(lmu.log_seq(), 4u);
    ASSERT_EQ(lmu.StateDigest(), reference.StateDigest());
    const std::vector<std::string> heads = Heads(*p, *m);

    w.fake().FailWrites(absl::UnavailableError("injected: no space left on device"));
    const LmuBatch failing = w.NextLmu(0);
    absl::StatusOr<UpdateOutcome> out = World::Update(*p, reg, *m, 0, failing);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(out.status().message()), HasSubstr("no space left on device"));
    EXPECT_TRUE(lmu.fenced());
    EXPECT_EQ(lmu.log_seq(), 4u);
    // The batch was applied in place before its commit failed: that is what the fence hides.
    EXPECT_NE(lmu.StateDigest(), reference.StateDigest());
    EXPECT_EQ(Heads(*p, *m), heads);
    EXPECT_EQ(w.fake().LogSeqs(kModel, 0, PartKind::kLmu), Seqs(1, 4));
    EXPECT_FALSE(m->lmu(1).fenced());

    // While the store still fails, neither path lifts the fence.
    absl::Status st = p->ReinstateFenced(*m, 0, PartKind::kLmu, reg.secret());
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(st.message()), HasSubstr("no space left on device"));
    EXPECT_TRUE(lmu.fenced());
    out = World::Update(*p, reg, *m, 0, failing);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(lmu.fenced());
    absl::StatusOr<std::vector<SnapshotInfo>> snap = p->SnapshotModel(*m);
    EXPECT_EQ(snap.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(lmu.fenced());

    w.fake().HealWrites();
    if (c.reinstate_explicitly) {
      st = p->ReinstateFenced(*m, 0, PartKind::kLmu, reg.secret());
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_FALSE(lmu.fenced());
      EXPECT_EQ(lmu.log_seq(), 4u);
      EXPECT_EQ(lmu.StateDigest(), reference.StateDigest());
    }
    out = World::Update(*p, reg, *m, 0, failing);  // the client's retry
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->applied, static_cast<uint32_t>(kBatch));
    EXPECT_FALSE(lmu.fenced());
    ASSERT_TRUE(reference.Update(failing.views, kMaxBatch).ok());
    EXPECT_EQ(lmu.log_seq(), 5u);
    EXPECT_EQ(lmu.StateDigest(), reference.StateDigest());
    EXPECT_EQ(w.fake().LogSeqs(kModel, 0, PartKind::kLmu), Seqs(1, 5));
  }
}

// Three rounds, a snapshot, three rounds, a snapshot (the log is trimmed through 3), two
// rounds: every part at log_seq 8, snapshots 1 (log_seq 3) and 2 (log_seq 6), log 4..8.
struct TwoSnapshots {
  std::unique_ptr<Persistence> p;
  std::unique_ptr<ModelRegistry> reg;
  std::shared_ptr<Model> m;
};
void MakeTwoSnapshots(World& w, TwoSnapshots* out, int snapshots = 2) {
  out->p = w.Open();
  ASSERT_NE(out->p, nullptr);
  out->reg = std::make_unique<ModelRegistry>(Secret());
  out->m = w.Create(*out->p, *out->reg);
  ASSERT_NE(out->m, nullptr);
  for (int s = 1; s <= snapshots; ++s) {
    ASSERT_NO_FATAL_FAILURE(w.Feed(*out->p, *out->reg, *out->m, 3));
    ExpectAllTaken(out->p->SnapshotModel(*out->m), static_cast<uint64_t>(s));
  }
  ASSERT_NO_FATAL_FAILURE(w.Feed(*out->p, *out->reg, *out->m, 2));
}

TEST(PersistenceTest, CorruptNewestSnapshotFallsBackToTheOlderOneAndReachesTheSameState) {
  struct Corruption {
    const char* name;
    std::function<bool(FakeStorage&, uint32_t, PartKind)> apply;  // to snapshot 2
  };
  const Corruption corruptions[] = {
      {"a flipped byte",
       [](FakeStorage& f, uint32_t shard, PartKind part) {
         std::optional<std::string> blob = f.Snapshot(kModel, shard, part, 2);
         if (!blob.has_value() || blob->empty()) return false;
         (*blob)[blob->size() / 2] ^= 0x01;
         return f.CorruptSnapshot(kModel, shard, part, 2, *blob);
       }},
      {"truncated",
       [](FakeStorage& f, uint32_t shard, PartKind part) {
         std::optional<std::string> blob = f.Snapshot(kModel, shard, part, 2);
         if (!blob.has_value()) return false;
         return f.CorruptSnapshot(kModel, shard, part, 2, blob->substr(0, blob->size() / 2));
       }},
      {"missing",
       [](FakeStorage& f, uint32_t shard, PartKind part) {
         return f.DeleteSnapshot(kModel, shard, part, 2);
       }},
  };
  for (const Corruption& c : corruptions) {
    for (PartKind part : kParts) {
      const uint32_t shard = 1;
      SCOPED_TRACE(absl::StrCat(c.name, ", shard ", shard, " ", Name(part)));
      World w;
      TwoSnapshots before;
      ASSERT_NO_FATAL_FAILURE(MakeTwoSnapshots(w, &before));
      const std::vector<std::string> states = States(*before.m);
      const std::vector<std::string> heads = Heads(*before.p, *before.m);
      before.p.reset();
      ASSERT_TRUE(c.apply(w.fake(), shard, part));

      Recovered r;
      ASSERT_NO_FATAL_FAILURE(w.RestartAndRecover(&r));
      std::unique_ptr<Persistence>& p2 = r.p;
      ModelRegistry& reg2 = *r.registry;
      const std::shared_ptr<Model>* const m2 = &r.model;
      EXPECT_EQ(States(**m2), states);
      EXPECT_EQ(Heads(*p2, **m2), heads);
      // The writer forgot the corrupt snapshot; the others keep both.
      for (uint32_t i = 0; i < kShards; ++i) {
        for (PartKind k : kParts) {
          SCOPED_TRACE(absl::StrCat("writer of shard ", i, " ", Name(k)));
          if (i == shard && k == part) {
            EXPECT_THAT(WriterManifestSeqs(*p2, i, k), ElementsAre(1));
          } else {
            EXPECT_THAT(WriterManifestSeqs(*p2, i, k), ElementsAre(2, 1));
          }
        }
      }

      // The next snapshot of that part takes seq 2 again and replaces the corrupt blob; a
      // restart from it reaches the same state.
      ASSERT_NO_FATAL_FAILURE(w.Feed(*p2, reg2, **m2, 1));
      absl::StatusOr<std::vector<SnapshotInfo>> infos = p2->SnapshotModel(**m2);
      ASSERT_TRUE(infos.ok()) << infos.status();
      EXPECT_THAT(ManifestSeqs(w.fake().Manifest(kModel, shard, part)), ElementsAre(2, 1));
      EXPECT_EQ(w.fake().LogSeqs(kModel, shard, part), Seqs(4, 9));
      const std::vector<std::string> states2 = States(**m2);
      p2.reset();
      std::unique_ptr<Persistence> p3 = w.Open();
      ASSERT_NE(p3, nullptr);
      ModelRegistry reg3(Secret());
      ASSERT_TRUE(p3->Recover(&reg3).ok());
      absl::StatusOr<std::shared_ptr<Model>> m3 = reg3.Find(kModel);
      ASSERT_TRUE(m3.ok()) << m3.status();
      EXPECT_EQ(States(**m3), states2);
      EXPECT_THAT(WriterManifestSeqs(*p3, shard, part), ElementsAre(2, 1));
    }
  }
}

TEST(PersistenceTest, EverySnapshotCorruptIsDataLossNamingThePartOnceTheLogIsTrimmed) {
  struct Case {
    const char* name;
    int snapshots;    // 1: the log is kept whole (the manifest is not full)
    bool data_loss;
  };
  const Case cases[] = {
      {"one snapshot, log whole: replays from seq 1", 1, false},
      {"two snapshots, log trimmed through 3: DATA_LOSS", 2, true},
  };
  for (const Case& c : cases) {
    for (uint32_t shard = 0; shard < kShards; ++shard) {
      for (PartKind part : kParts) {
        SCOPED_TRACE(absl::StrCat(c.name, "; shard ", shard, " ", Name(part)));
        World w;
        TwoSnapshots before;
        ASSERT_NO_FATAL_FAILURE(MakeTwoSnapshots(w, &before, c.snapshots));
        const std::vector<std::string> states = States(*before.m);
        before.p.reset();
        ASSERT_EQ(w.fake().LogSeqs(kModel, shard, part).front(), c.data_loss ? 4u : 1u);
        for (int s = 1; s <= c.snapshots; ++s) {
          ASSERT_TRUE(w.fake().CorruptSnapshot(kModel, shard, part, static_cast<uint64_t>(s),
                                               "not a snapshot"));
        }

        std::unique_ptr<Persistence> p2 = w.Open();
        ASSERT_NE(p2, nullptr);
        ModelRegistry reg2(Secret());
        const absl::Status recovered = p2->Recover(&reg2);
        if (!c.data_loss) {
          ASSERT_TRUE(recovered.ok()) << recovered;
          absl::StatusOr<std::shared_ptr<Model>> m2 = reg2.Find(kModel);
          ASSERT_TRUE(m2.ok()) << m2.status();
          EXPECT_EQ(States(**m2), states);
          EXPECT_THAT(WriterManifestSeqs(*p2, shard, part), IsEmpty());
          continue;
        }
        EXPECT_EQ(recovered.code(), absl::StatusCode::kDataLoss);
        EXPECT_THAT(std::string(recovered.message()),
                    HasSubstr(absl::StrFormat("model '%s' shard %d %s", kModel, shard,
                                              Name(part))));
        EXPECT_THAT(std::string(recovered.message()), HasSubstr("trimmed"));
        EXPECT_THAT(reg2.List(), IsEmpty());
        EXPECT_EQ(p2->Find(kModel), nullptr);
      }
    }
  }
}

TEST(PersistenceTest, ReadErrorAtAnyPointOfRecoveryIsReturnedAndRegistersNothing) {
  World w;
  TwoSnapshots before;
  ASSERT_NO_FATAL_FAILURE(MakeTwoSnapshots(w, &before));
  const std::vector<std::string> states = States(*before.m);
  before.p.reset();

  // How many reads a clean recovery makes.
  const uint64_t reads_before = w.fake().reads();
  {
    std::unique_ptr<Persistence> p = w.Open();
    ASSERT_NE(p, nullptr);
    ModelRegistry reg(Secret());
    ASSERT_TRUE(p->Recover(&reg).ok());
    absl::StatusOr<std::shared_ptr<Model>> m = reg.Find(kModel);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(States(**m), states);
  }
  const uint64_t reads = w.fake().reads() - reads_before;
  // At least: the specs, and per shard its chain's last record and per part its manifest, a
  // snapshot and its log.
  ASSERT_GE(reads, 1 + kShards * (1 + 2 * 3));

  // The read after n good ones fails: alone (a read error swallowed anywhere would let the
  // recovery succeed), or with every later one.
  struct Case {
    const char* name;
    bool once;
    absl::Status injected;
  };
  const Case cases[] = {
      {"that read alone fails", true, absl::UnavailableError("injected: I/O error")},
      {"that read alone fails", true, absl::DataLossError("injected: checksum mismatch")},
      {"every read from it on fails", false, absl::UnavailableError("injected: I/O error")},
  };
  for (const Case& c : cases) {
    const absl::Status& injected = c.injected;
    for (uint64_t n = 0; n < reads; ++n) {
      SCOPED_TRACE(absl::StrCat(c.name, ", ", injected.ToString(), "; after ", n,
                                " good reads of ", reads));
      if (c.once) {
        w.fake().FailReadOnce(n, injected);
      } else {
        w.fake().FailReadsAfter(n, injected);
      }
      std::unique_ptr<Persistence> p = w.Open();
      ASSERT_NE(p, nullptr);
      ModelRegistry reg(Secret());
      const absl::Status recovered = p->Recover(&reg);
      EXPECT_EQ(recovered.code(), injected.code());
      EXPECT_THAT(std::string(recovered.message()), HasSubstr(std::string(injected.message())));
      EXPECT_THAT(reg.List(), IsEmpty());
      EXPECT_EQ(p->Find(kModel), nullptr);
      w.fake().HealReads();
    }
  }
  // The store itself is unchanged: a recovery after the errors reaches the same state.
  std::unique_ptr<Persistence> p = w.Open();
  ASSERT_NE(p, nullptr);
  ModelRegistry reg(Secret());
  ASSERT_TRUE(p->Recover(&reg).ok());
  absl::StatusOr<std::shared_ptr<Model>> m = reg.Find(kModel);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(States(**m), states);
}

TEST(PersistenceTest, FailedSnapshotWriteLeavesTheManifestAsItWasAndALaterSnapshotSucceeds) {
  // SnapshotModel goes shard 0 sau, shard 0 lmu, shard 1 sau, shard 1 lmu; the write of the
  // (n+1)-th fails, the n before it commit.
  struct Target {
    uint32_t shard;
    PartKind part;
  };
  const Target order[] = {{0, PartKind::kSau}, {0, PartKind::kLmu}, {1, PartKind::kSau},
                          {1, PartKind::kLmu}};
  for (uint64_t n : {0, 1, 3}) {
    SCOPED_TRACE(absl::StrCat(n, " snapshot write(s) commit before the failure"));
    World w;
    std::unique_ptr<Persistence> p = w.Open();
    ASSERT_NE(p, nullptr);
    ModelRegistry reg(Secret());
    std::shared_ptr<Model> m = w.Create(*p, reg);
    ASSERT_NE(m, nullptr);
    ASSERT_NO_FATAL_FAILURE(w.Feed(*p, reg, *m, 3));
    ExpectAllTaken(p->SnapshotModel(*m), 1);
    ASSERT_NO_FATAL_FAILURE(w.Feed(*p, reg, *m, 2));
    std::vector<std::optional<std::string>> manifests;
    for (const Target& t : order) manifests.push_back(w.fake().Manifest(kModel, t.shard, t.part));
    const std::vector<std::string> states = States(*m);

    w.fake().FailWritesAfter(n, absl::UnavailableError("injected: no space left on device"));
    absl::StatusOr<std::vector<SnapshotInfo>> infos = p->SnapshotModel(*m);
    EXPECT_EQ(infos.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(infos.status().message()), HasSubstr("no space left on device"));
    EXPECT_THAT(std::string(infos.status().message()),
                HasSubstr(absl::StrFormat("snapshot of model '%s' shard %d %s", kModel,
                                          order[n].shard, Name(order[n].part))));
    for (size_t i = 0; i < std::size(order); ++i) {
      const Target& t = order[i];
      SCOPED_TRACE(absl::StrCat("shard ", t.shard, " ", Name(t.part)));
      if (i < n) {  // committed before the failure
        EXPECT_THAT(ManifestSeqs(w.fake().Manifest(kModel, t.shard, t.part)), ElementsAre(2, 1));
        EXPECT_EQ(w.fake().SnapshotSeqs(kModel, t.shard, t.part), Seqs(1, 2));
        EXPECT_THAT(WriterManifestSeqs(*p, t.shard, t.part), ElementsAre(2, 1));
        EXPECT_EQ(w.fake().LogSeqs(kModel, t.shard, t.part), Seqs(4, 5));
      } else {
        EXPECT_EQ(w.fake().Manifest(kModel, t.shard, t.part), manifests[i]);
        EXPECT_EQ(w.fake().SnapshotSeqs(kModel, t.shard, t.part), Seqs(1, 1));
        EXPECT_THAT(WriterManifestSeqs(*p, t.shard, t.part), ElementsAre(1));
        EXPECT_EQ(w.fake().LogSeqs(kModel, t.shard, t.part), Seqs(1, 5));
      }
    }
    EXPECT_EQ(States(*m), states);  // a failed snapshot fences nothing
    for (uint32_t i = 0; i < kShards; ++i) EXPECT_FALSE(m->lmu(i).fenced());

    w.fake().HealWrites();
    infos = p->SnapshotModel(*m);
    ASSERT_TRUE(infos.ok()) << infos.status();
    ASSERT_EQ(infos->size(), std::size(order));
    for (size_t i = 0; i < std::size(order); ++i) {
      const Target& t = order[i];
      SCOPED_TRACE(absl::StrCat("shard ", t.shard, " ", Name(t.part)));
      EXPECT_EQ((*infos)[i].taken, i >= n);  // nothing new where it committed before
      EXPECT_EQ((*infos)[i].snapshot_seq, 2u);
      EXPECT_EQ((*infos)[i].log_seq, 5u);
      EXPECT_THAT(ManifestSeqs(w.fake().Manifest(kModel, t.shard, t.part)), ElementsAre(2, 1));
      EXPECT_EQ(w.fake().SnapshotSeqs(kModel, t.shard, t.part), Seqs(1, 2));
      EXPECT_EQ(w.fake().LogSeqs(kModel, t.shard, t.part), Seqs(4, 5));
    }

    // A restart recovers the same state from the new snapshots.
    const std::vector<std::string> heads = Heads(*p, *m);
    p.reset();
    Recovered r;
    ASSERT_NO_FATAL_FAILURE(w.RestartAndRecover(&r));
    std::unique_ptr<Persistence>& p2 = r.p;
    const std::shared_ptr<Model>* const m2 = &r.model;
    EXPECT_EQ(States(**m2), states);
    EXPECT_EQ(Heads(*p2, **m2), heads);
  }
}

// The stored spec is the wire form (ModelSpec proto): a parameter it cannot hold would come
// back as its default after a restart, and recovery would rebuild a different model. Such a
// spec is refused at creation, naming the parameter, and nothing is stored.
TEST(PersistenceTest, SpecTheStoreCannotHoldIsRefusedAtCreationNamingTheParameter) {
  struct Case {
    const char* name;
    void (*edit)(ModelSpec&);
    const char* parameter;
  };
  const Case cases[] = {
      {"sau warmup (not in the wire spec)", [](ModelSpec& s) { s.sau.warmup = 20; }, "warmup"},
      {"sau epoch_length", [](ModelSpec& s) { s.sau.epoch_length = 77; }, "epoch_length"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FakeStorage fake;
    absl::StatusOr<std::unique_ptr<Persistence>> p =
        Persistence::OpenWith(Options(), fake.Share(), nullptr);
    ASSERT_TRUE(p.ok()) << p.status();
    ModelRegistry registry(Secret());
    ModelSpec spec = Spec();
    c.edit(spec);
    absl::StatusOr<std::shared_ptr<Model>> m =
        registry.Create(spec, [&](const std::shared_ptr<Model>& model) {
          return (*p)->OnCreate(model, registry.secret());
        });
    ASSERT_TRUE(absl::IsInvalidArgument(m.status())) << m.status();
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.parameter));
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("cannot be stored as given"));
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> specs = fake.ListSpecs();
    ASSERT_TRUE(specs.ok()) << specs.status();
    EXPECT_TRUE(specs->empty());
    EXPECT_FALSE(registry.Find(kModel).ok());
  }
}

// A takeover over the replicated store: server A (a Persistence over its own NATS connection)
// writes, snapshots and trims; server B opens the same JetStream streams and recovers every
// shard to A's states and chain heads; from then on B writes and A, which has not noticed, is
// fenced by JetStream at its next commit; the chains replay end to end.
TEST(PersistenceTest, ANewOwnerRecoversFromJetStreamAndTheOldOneIsFenced) {
  absl::StatusOr<std::unique_ptr<test_util::NatsTestCluster>> nats =
      test_util::NatsTestCluster::Start(1);
  ASSERT_TRUE(nats.ok()) << nats.status();
  const std::string urls = (*nats)->urls();
  auto open = [urls]() -> std::unique_ptr<StorageBackend> {
    absl::StatusOr<std::unique_ptr<NatsClient>> c = NatsClient::Connect({.servers = urls});
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return nullptr;
    absl::StatusOr<std::unique_ptr<JetStreamStorage>> s = JetStreamStorage::Open(
        std::shared_ptr<NatsClient>(*std::move(c)), {.snapshot_chunk = 4096, .compact_after = 4});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  };
  World w(open);
  std::unique_ptr<Persistence> a = w.Open();
  ASSERT_NE(a, nullptr);
  ModelRegistry reg_a(Secret());
  std::shared_ptr<Model> m_a = w.Create(*a, reg_a);
  ASSERT_NE(m_a, nullptr);
  for (int s = 0; s < 3; ++s) {
    ASSERT_NO_FATAL_FAILURE(w.Feed(*a, reg_a, *m_a, 3));
    ExpectAllTaken(a->SnapshotModel(*m_a), static_cast<uint64_t>(s + 1));
  }
  ASSERT_NO_FATAL_FAILURE(w.Feed(*a, reg_a, *m_a, 2));
  const std::vector<std::string> states = States(*m_a);
  const std::vector<std::string> heads = Heads(*a, *m_a);

  Recovered b;  // a takeover: B loads every shard from the streams
  ASSERT_NO_FATAL_FAILURE(w.RestartAndRecover(&b));
  EXPECT_EQ(States(*b.model), states);
  EXPECT_EQ(Heads(*b.p, *b.model), heads);
  ASSERT_NO_FATAL_FAILURE(w.Feed(*b.p, *b.registry, *b.model, 1));

  // A still believes it owns shard 0: its commit is refused, nothing of it is stored.
  absl::StatusOr<IngestOutcome> stale = World::Ingest(*a, *m_a, 0, w.NextSau(0));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted) << stale.status();
  EXPECT_THAT(stale.status().message(), HasSubstr("fenced"));

  // B's history is the only one: a third server recovers B's state, and every chain replays.
  const std::vector<std::string> states_b = States(*b.model);
  Recovered c;
  ASSERT_NO_FATAL_FAILURE(w.RestartAndRecover(&c));
  EXPECT_EQ(States(*c.model), states_b);
  std::unique_ptr<StorageBackend> reader = open();
  ASSERT_NE(reader, nullptr);
  for (uint32_t i = 0; i < kShards; ++i) {
    absl::StatusOr<ReplayReport> r = ReplayAndCheck(*reader, Secret(), kModel, i);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->ok()) << FormatReplayReport(*r);
  }
}

}  // namespace
// A server with snapshots off still archives: the background thread runs for the archive
// alone and moves the old records out while no snapshot is ever taken.
TEST(PersistenceTest, TheArchiveRunsWithSnapshotsOff) {
  namespace fs = std::filesystem;
  const PersistenceOptions o = ArchivingOptions("persistence_archive_nosnap_");  // no snapshots
  const std::string dir = o.data_dir;
  World w;
  absl::StatusOr<std::unique_ptr<Persistence>> p = Persistence::Open(o, nullptr);
  ASSERT_TRUE(p.ok()) << p.status();
  ModelRegistry registry(Secret());
  std::shared_ptr<Model> m = w.Create(**p, registry);
  ASSERT_NE(m, nullptr);
  ASSERT_NO_FATAL_FAILURE(w.Feed(**p, registry, *m, 20));
  ShardChain& chain = (*p)->Find(kModel)->shard(0).chain();
  ASSERT_GT(chain.head().next_index, 50u + 64u);
  ASSERT_EQ(chain.store()->ArchivedBelow(), 0u);
  (*p)->StartSnapshotter(&registry);
  // The thread passes every 200 ms; the deadline only bounds a broken build's wait.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (chain.store()->ArchivedBelow() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  (*p)->Stop();
  EXPECT_GT(chain.store()->ArchivedBelow(), 0u);
  EXPECT_EQ(chain.store()->ArchivedBelow() % 64, 0u);
  EXPECT_EQ(ChainLines(*chain.store()).size(), chain.head().next_index);
  p->reset();
  fs::remove_all(dir);
}

}  // namespace streamlearn::storage
