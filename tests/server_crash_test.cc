// The crash test of docs/DURABILITY.md: the real streamlearn-server binary, killed with SIGKILL
// at seeded random points while a client streams SAU events and LMU samples into one SAU+LMU
// model, restarted on the same data_dir each time; the client resends every batch it holds no
// ack for.
//
// What is checked, after every restart and at the end, per shard and part:
//   - nothing acknowledged is lost: the shard's last_t is at least the last acknowledged t;
//   - nothing is applied twice, nothing half: last_t ends a batch the client sent, the event
//     (sample) count is exactly the number of distinct t up to it, and each ack of a resent
//     batch either applies all of it (it was not committed before) or reports all of it as
//     duplicates (it was committed by a life whose ack was lost, and the previous restart
//     already showed it);
//   - the state digest (Admin.GetModel) equals that of a clean in-process replay (core/shard,
//     same spec, same LMU secret) of exactly those batches, in order;
//   - at the end, the whole audit chain of each shard verifies (AuditVerifier, the server's key
//     and checkpoint cadence), across all the kills.
// The kills land right after start (possibly during recovery), mid-stream with batches in flight,
// and right after an Admin.Snapshot call; background snapshots and log trimming happen
// throughout (small thresholds), but nothing asserted depends on how many of them landed: the
// last batch of every shard part is held back to the final life, which snapshots explicitly
// before and after sending it, so every part's manifest is full and its log trimmed by then.
// A second test kills the server inside Admin.Snapshot of a large state: at fixed points
// (STREAMLEARN_FAILPOINT, server/failpoint.h: before and after the snapshot's store write) and
// at random delays.
//
// STREAMLEARN_CRASH_SEED (environment) replaces the default seed; the seed is printed.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "client/lib/client.h"
#include "core/audit/ed25519_key.h"
#include "core/audit/verifier.h"
#include "core/common/digest.h"
#include "core/shard/model_registry.h"
#include "core/common/routing.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/storage/lmu_secret.h"
#include "server/storage/persistence.h"
#include "server/storage/spec_conversion.h"
#include "server/storage/store.h"
#include "tests/server_process.h"

namespace streamlearn::server {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kModel[] = "crash";

uint64_t Seed(uint64_t fallback) {
  const char* env = std::getenv("STREAMLEARN_CRASH_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : fallback;
}

// ---------------------------------------------------------------------------------------------
// The workload: SAU and LMU batches of varying size, each routed by its key to one of the
// shards, in one fixed send order. t counts up separately for the SAU and the LMU, so it
// increases within every shard and part.

enum class Part { kSau = 0, kLmu = 1 };
const char* PartName(Part p) { return p == Part::kSau ? "sau" : "lmu"; }

struct Batch {
  Part part = Part::kSau;
  size_t request = 0;  // index into Workload::sau or ::lmu
  uint32_t shard = 0;
  uint64_t first_t = 0;
  uint64_t last_t = 0;
  uint32_t n = 0;
};

struct WorkloadOptions {
  uint32_t shards = 2;
  int d = 8, d_v = 4, m = 2;
  size_t sau_events = 100000;
  size_t lmu_samples = 20000;
  uint64_t lmu_ids = 3000;  // id universe
  size_t max_batch = 256;
};

struct Workload {
  std::vector<v1::IngestRequest> sau;
  std::vector<v1::UpdateRequest> lmu;
  std::vector<Batch> order;  // the send order
};

// A batch size: a third tiny (1..4), a third medium (5..64), a third large (65..max).
uint32_t BatchSize(std::mt19937_64& rng, size_t max_batch) {
  const int cls = static_cast<int>(rng() % 3);
  if (cls == 0) return 1 + static_cast<uint32_t>(rng() % 4);
  if (cls == 1) return 5 + static_cast<uint32_t>(rng() % 60);
  return 65 + static_cast<uint32_t>(rng() % (max_batch - 64));
}

Workload MakeWorkload(const WorkloadOptions& o, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<std::string> keys;
  std::vector<bool> covered(o.shards, false);
  for (int i = 0; i < 16; ++i) {
    keys.push_back(absl::StrCat("key-", i));
    covered[ShardFor(keys.back(), o.shards)] = true;
  }
  for (uint32_t s = 0; s < o.shards; ++s) EXPECT_TRUE(covered[s]) << "no key routes to " << s;

  Workload w;
  std::vector<Batch> sau, lmu;
  uint64_t t = 0;
  for (size_t sent = 0; sent < o.sau_events;) {
    const uint32_t n = std::min<uint32_t>(BatchSize(rng, o.max_batch), o.sau_events - sent);
    v1::IngestRequest& req = w.sau.emplace_back();
    req.set_model(kModel);
    req.set_routing_key(keys[rng() % keys.size()]);
    for (uint32_t i = 0; i < n; ++i) {
      v1::Event* e = req.add_events();
      e->set_t(++t);
      for (int j = 0; j < o.d; ++j) e->add_k(u(rng));
      for (int j = 0; j < o.d_v; ++j) e->add_v(u(rng));
    }
    sau.push_back({Part::kSau, w.sau.size() - 1, ShardFor(req.routing_key(), o.shards),
                   t - n + 1, t, n});
    sent += n;
  }
  t = 0;
  for (size_t sent = 0; sent < o.lmu_samples;) {
    const uint32_t n = std::min<uint32_t>(BatchSize(rng, o.max_batch), o.lmu_samples - sent);
    v1::UpdateRequest& req = w.lmu.emplace_back();
    req.set_model(kModel);
    req.set_routing_key(keys[rng() % keys.size()]);
    for (uint32_t i = 0; i < n; ++i) {
      v1::Sample* s = req.add_samples();
      s->set_t(++t);
      const int nnz = 1 + static_cast<int>(rng() % 6);
      for (int j = 0; j < nnz; ++j) {
        s->add_ids(rng() % o.lmu_ids);
        s->add_vals(u(rng));
      }
      for (int j = 0; j < o.m; ++j) s->add_y(u(rng));
    }
    lmu.push_back({Part::kLmu, w.lmu.size() - 1, ShardFor(req.routing_key(), o.shards),
                   t - n + 1, t, n});
    sent += n;
  }
  // Interleave, keeping each part's order: SAU next with probability (SAU left) / (all left).
  size_t i = 0, j = 0;
  while (i < sau.size() || j < lmu.size()) {
    const size_t left = (sau.size() - i) + (lmu.size() - j);
    if (rng() % left < sau.size() - i) {
      w.order.push_back(sau[i++]);
    } else {
      w.order.push_back(lmu[j++]);
    }
  }
  return w;
}

// ---------------------------------------------------------------------------------------------
// CleanReplay: the same model built in-process from the server's effective spec and the same
// LMU secret; each shard part is advanced batch by batch, in order.

class CleanReplay {
 public:
  CleanReplay(const v1::ModelSpec& effective, const lmu::HashSecret& secret) {
    absl::StatusOr<ModelSpec> spec = storage::ModelSpecFromProto(effective);
    EXPECT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<std::shared_ptr<Model>> model = Model::Create(*spec, secret);
    EXPECT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  absl::Status Apply(const Workload& w, const Batch& b) {
    if (b.part == Part::kSau) {
      const v1::IngestRequest& req = w.sau[b.request];
      std::vector<EventView> views;
      for (const v1::Event& e : req.events()) {
        views.push_back({.t = e.t(),
                         .k = {e.k().data(), static_cast<size_t>(e.k_size())},
                         .v = {e.v().data(), static_cast<size_t>(e.v_size())}});
      }
      absl::StatusOr<IngestOutcome> out = model_->sau(b.shard).Ingest(views, SIZE_MAX);
      if (!out.ok()) return out.status();
      if (out->applied != b.n) return absl::InternalError("clean replay: duplicates");
      return absl::OkStatus();
    }
    const v1::UpdateRequest& req = w.lmu[b.request];
    std::vector<std::vector<lmu::Feature>> xs;
    std::vector<SampleView> views;
    for (const v1::Sample& s : req.samples()) {
      std::vector<lmu::Feature>& x = xs.emplace_back();
      for (int j = 0; j < s.ids_size(); ++j) x.push_back({s.ids(j), s.vals(j)});
    }
    for (int i = 0; i < req.samples_size(); ++i) {
      const v1::Sample& s = req.samples(i);
      views.push_back({.t = s.t(),
                       .x = xs[static_cast<size_t>(i)],
                       .y = {s.y().data(), static_cast<size_t>(s.y_size())}});
    }
    absl::StatusOr<UpdateOutcome> out = model_->lmu(b.shard).Update(views, SIZE_MAX);
    if (!out.ok()) return out.status();
    if (out->applied != b.n) return absl::InternalError("clean replay: duplicates");
    return absl::OkStatus();
  }

  std::string Digest(Part part, uint32_t shard) const {
    return part == Part::kSau ? ToHex(model_->sau(shard).Stats().digest)
                              : ToHex(model_->lmu(shard).Stats().digest);
  }
  uint64_t Steps(Part part, uint32_t shard) const {
    return part == Part::kSau ? model_->sau(shard).Stats().events
                              : model_->lmu(shard).Stats().samples;
  }

 private:
  std::shared_ptr<Model> model_;
};

// What the server reports of one shard part.
struct ShardReport {
  uint64_t steps = 0;  // events or samples
  uint64_t last_t = 0;
  std::string digest;
};

std::optional<ShardReport> Report(const v1::ModelInfo& info, Part part, uint32_t shard) {
  if (part == Part::kSau) {
    for (const v1::ShardInfo& s : info.shards()) {
      if (s.shard() == shard) return ShardReport{s.events(), s.last_t(), s.state_digest()};
    }
  } else {
    for (const v1::LmuShardInfo& s : info.lmu_shards()) {
      if (s.shard() == shard) return ShardReport{s.samples(), s.last_t(), s.state_digest()};
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Ledger: the client's bookkeeping. Each batch is acknowledged at most once over the whole run
// (a life sends only batches without an ack, once each). Per shard part: the batches in t
// order, how far the clean replay has gone, the last acknowledged t, and the last t the server
// reported at the latest restart (`committed`).

class Ledger {
 public:
  Ledger(const Workload& w, uint32_t shards) : w_(w), acked_(w.order.size(), 0) {
    for (Part p : {Part::kSau, Part::kLmu}) lanes_[static_cast<int>(p)].resize(shards);
    for (size_t id = 0; id < w.order.size(); ++id) lane(w.order[id]).batches.push_back(id);
  }

  // The ack of batch `id` (on a session's reader thread).
  void OnAck(size_t id, const absl::Status& status, uint32_t applied, int duplicates) {
    std::lock_guard<std::mutex> lock(mu_);
    const Batch& b = w_.order[id];
    const std::string what = absl::StrCat(PartName(b.part), " batch ", id, " (shard ", b.shard,
                                          ", t ", b.first_t, "..", b.last_t, ")");
    if (!status.ok()) return Fail(absl::StrCat(what, ": rejected: ", status.ToString()));
    if (acked_[id] != 0) return Fail(absl::StrCat(what, ": acknowledged twice"));
    Lane& l = lane(b);
    if (applied + static_cast<uint32_t>(duplicates) != b.n) {
      return Fail(absl::StrCat(what, ": applied ", applied, " + duplicates ", duplicates,
                               " != ", b.n, " events"));
    }
    if (applied == b.n) {
      // Fresh: then no earlier life may have committed any of it.
      if (b.first_t <= l.committed) {
        return Fail(absl::StrCat(what, ": applied again although the server had it (last_t ",
                                 l.committed, " at the last restart)"));
      }
      acked_[id] = 1;
      applied_events_ += applied;
    } else if (static_cast<uint32_t>(duplicates) == b.n) {
      // All duplicates: an earlier life committed it and the last restart showed it.
      if (b.last_t > l.committed) {
        return Fail(absl::StrCat(what, ": reported as duplicates, but the server's last_t at "
                                 "the last restart was ",
                                 l.committed));
      }
      acked_[id] = 2;
      duplicate_events_ += static_cast<uint64_t>(duplicates);
    } else {
      return Fail(absl::StrCat(what, ": partly applied (", applied, " of ", b.n, ")"));
    }
    if (b.first_t <= l.acked_through)
      return Fail(absl::StrCat(what, ": acknowledged out of order"));
    l.acked_through = b.last_t;
    ++acks_;
  }

  bool Acked(size_t id) const {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_[id] != 0;
  }
  size_t FirstUnacked() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t id = 0;
    while (id < acked_.size() && acked_[id] != 0) ++id;
    return id;
  }
  bool AllAcked() const { return FirstUnacked() == acked_.size(); }

  // After a restart (no session open): checks the server's report of every shard part against
  // the acks and the clean replay, which it advances to the server's last_t.
  void CheckRecovered(const v1::ModelInfo& info, CleanReplay* clean, const std::string& when) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Part p : {Part::kSau, Part::kLmu}) {
      for (uint32_t s = 0; s < lanes_[static_cast<int>(p)].size(); ++s) {
        SCOPED_TRACE(absl::StrCat(when, ": ", PartName(p), " shard ", s));
        Lane& l = lanes_[static_cast<int>(p)][s];
        const std::optional<ShardReport> r = Report(info, p, s);
        ASSERT_TRUE(r.has_value());
        EXPECT_GE(r->last_t, l.acked_through) << "acknowledged events lost";
        EXPECT_GE(r->last_t, l.committed) << "events seen at an earlier restart are gone";
        // Advance the clean replay through the batches the server has.
        while (l.replayed < l.batches.size() &&
               w_.order[l.batches[l.replayed]].last_t <= r->last_t) {
          const absl::Status st = clean->Apply(w_, w_.order[l.batches[l.replayed]]);
          ASSERT_TRUE(st.ok()) << st;
          l.replayed_last_t = w_.order[l.batches[l.replayed]].last_t;
          ++l.replayed;
        }
        EXPECT_EQ(r->last_t, l.replayed_last_t)
            << "the server's last_t does not end a batch the client sent (half a batch?)";
        EXPECT_EQ(r->steps, clean->Steps(p, s)) << "events applied twice or lost";
        EXPECT_EQ(r->digest, clean->Digest(p, s)) << "state differs from the clean replay";
        l.committed = std::max(l.committed, r->last_t);
      }
    }
  }

  // At the end: every batch acknowledged once, and each applied exactly once in total.
  void CheckComplete(const v1::ModelInfo& info) const {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t total = 0;
    for (const Batch& b : w_.order) total += b.n;
    EXPECT_EQ(applied_events_ + duplicate_events_, total);
    for (Part p : {Part::kSau, Part::kLmu}) {
      for (uint32_t s = 0; s < lanes_[static_cast<int>(p)].size(); ++s) {
        const Lane& l = lanes_[static_cast<int>(p)][s];
        uint64_t n = 0;
        for (size_t id : l.batches) n += w_.order[id].n;
        const std::optional<ShardReport> r = Report(info, p, s);
        ASSERT_TRUE(r.has_value());
        EXPECT_EQ(r->steps, n) << PartName(p) << " shard " << s;
        EXPECT_EQ(r->last_t, w_.order[l.batches.back()].last_t) << PartName(p) << " shard " << s;
      }
    }
  }

  std::vector<std::string> TakeFailures() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(failures_);
  }
  uint64_t duplicate_events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return duplicate_events_;
  }
  uint64_t acks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return acks_;
  }

 private:
  struct Lane {
    std::vector<size_t> batches;  // ids, t increasing
    size_t replayed = 0;          // batches[0..replayed) are in the clean replay
    uint64_t replayed_last_t = 0;
    uint64_t acked_through = 0;   // last t acknowledged
    uint64_t committed = 0;       // last_t the server reported at the latest restart check
  };
  Lane& lane(const Batch& b) { return lanes_[static_cast<int>(b.part)][b.shard]; }
  void Fail(std::string what) { failures_.push_back(std::move(what)); }

  const Workload& w_;
  mutable std::mutex mu_;
  std::vector<uint8_t> acked_;  // 0: no ack yet, 1: applied by its ack, 2: all duplicates
  std::vector<Lane> lanes_[2];
  uint64_t applied_events_ = 0;
  uint64_t duplicate_events_ = 0;
  uint64_t acks_ = 0;
  std::vector<std::string> failures_;
};

// ---------------------------------------------------------------------------------------------
// Streaming one life: sessions for both parts, every unacknowledged batch in order, once.

class LifeStream {
 public:
  LifeStream(Client& client, const Workload& w, Ledger* ledger) : w_(w), ledger_(ledger) {
    auto on_ack = [this](Part p) {
      return [this, p](const auto& r) {
        size_t id;
        {
          std::lock_guard<std::mutex> lock(mu_);
          id = sent_[static_cast<int>(p)][r.batch];
        }
        ledger_->OnAck(id, r.status, r.ack.applied(), r.ack.duplicate_t_size());
      };
    };
    // resend = false: a life ends with its server; the test resends the unacknowledged
    // batches itself, in order, to the next life's server (the ledger).
    auto sau = client.OpenIngest(
        kModel, {.window = 64, .on_ack = on_ack(Part::kSau), .on_close = {}, .resend = false});
    auto lmu = client.OpenLmuUpdate(
        kModel, {.window = 64, .on_ack = on_ack(Part::kLmu), .on_close = {}, .resend = false});
    status_ = sau.ok() ? lmu.status() : sau.status();
    if (sau.ok()) sau_ = *std::move(sau);
    if (lmu.ok()) lmu_ = *std::move(lmu);
  }

  // Sends every unacknowledged batch before `end` but those `held` marks, calling `trigger`
  // once on reaching batch `trigger_at` (or after the last send); then waits for the acks.
  // Returns the first stream error (the server died) or OK when every batch sent was
  // acknowledged.
  absl::Status Run(size_t trigger_at, const std::function<void()>& trigger,
                   size_t end = SIZE_MAX, const std::vector<bool>* held = nullptr) {
    if (!status_.ok()) return status_;
    bool triggered = false;
    absl::Status st;
    end = std::min(end, w_.order.size());
    for (size_t id = ledger_->FirstUnacked(); id < end && st.ok(); ++id) {
      if (ledger_->Acked(id) || (held != nullptr && (*held)[id])) continue;
      if (!triggered && id >= trigger_at) {
        triggered = true;
        trigger();
      }
      const Batch& b = w_.order[id];
      {
        std::lock_guard<std::mutex> lock(mu_);
        sent_[static_cast<int>(b.part)].push_back(id);
      }
      st = b.part == Part::kSau ? sau_->Send(w_.sau[b.request]) : lmu_->Send(w_.lmu[b.request]);
    }
    if (!triggered) trigger();
    if (st.ok()) st = sau_->Flush();
    if (st.ok()) st = lmu_->Flush();
    return st;
  }

  absl::Status Finish() {
    absl::Status a = sau_->Finish();
    absl::Status b = lmu_->Finish();
    return a.ok() ? b : a;
  }

 private:
  const Workload& w_;
  Ledger* const ledger_;
  absl::Status status_;
  std::unique_ptr<IngestSession> sau_;
  std::unique_ptr<LmuUpdateSession> lmu_;
  std::mutex mu_;
  std::vector<size_t> sent_[2];  // per part: session batch index -> batch id
};

// ---------------------------------------------------------------------------------------------
// Shared test plumbing.

std::string FreshDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) /
                       absl::StrCat("server_crash_test_", getpid(), "_", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

// 32 seeded bytes in a 0600 file, and the secret as the server will read it.
lmu::HashSecret WriteSecret(const std::string& path, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string bytes(32, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()), 32);
  close(fd);
  absl::StatusOr<lmu::HashSecret> secret = storage::LoadOrCreateLmuSecret(path);
  EXPECT_TRUE(secret.ok()) << secret.status();
  return secret.ok() ? *secret : lmu::HashSecret{};
}

std::unique_ptr<Client> ConnectTo(int port) {
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect(absl::StrCat("127.0.0.1:", port),
                      Client::Options{.connect_timeout = milliseconds(20000),
                                      .rpc_timeout = milliseconds(60000)});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

std::shared_ptr<grpc::Channel> ChannelTo(int port) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                             grpc::InsecureChannelCredentials());
}

absl::StatusOr<v1::SnapshotResponse> SnapshotNow(int port) {
  auto stub = v1::Admin::NewStub(ChannelTo(port));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::SnapshotRequest req;
  req.set_name(kModel);
  v1::SnapshotResponse resp;
  grpc::Status s = stub->Snapshot(&ctx, req, &resp);
  if (!s.ok()) return absl::UnavailableError(s.error_message());
  return resp;
}

// Reads the whole audit chain of every shard through Auditor.Read and verifies it with the
// server's public key and checkpoint cadence. The read is bounded by the head it reports (a
// background snapshot may append records after Head answered), and its last record must be
// that head. Returns the records read.
uint64_t VerifyAuditChains(int port, uint32_t shards) {
  auto stub = v1::Auditor::NewStub(ChannelTo(port));
  uint64_t total = 0;
  for (uint32_t s = 0; s < shards; ++s) {
    SCOPED_TRACE(absl::StrCat("audit chain of shard ", s));
    v1::HeadRequest hreq;
    hreq.set_model(kModel);
    hreq.set_shard(s);
    v1::HeadResponse head;
    grpc::ClientContext hctx;
    const grpc::Status hs = stub->Head(&hctx, hreq, &head);
    EXPECT_TRUE(hs.ok()) << hs.error_message();
    EXPECT_TRUE(head.durable());
    absl::StatusOr<Ed25519PublicKey> key = Ed25519PublicKey::FromPem(head.public_key_pem());
    EXPECT_TRUE(key.ok()) << key.status();
    if (!key.ok()) return total;
    AuditVerifier verifier({.public_key = &*key, .checkpoint_every = head.checkpoint_every()});
    v1::ReadRequest rreq;
    rreq.set_model(kModel);
    rreq.set_shard(s);
    grpc::ClientContext rctx;
    auto reader = stub->Read(&rctx, rreq);
    v1::ReadResponse chunk;
    uint64_t n = 0, read_head = 0;
    std::string read_head_curr;
    absl::Status first_failure;
    while (reader->Read(&chunk)) {
      read_head = chunk.head_next_index();
      read_head_curr = chunk.head_merkle_curr();
      for (const v1::AuditLine& line : chunk.records()) {
        EXPECT_EQ(line.index(), n);
        ++n;
        if (absl::Status st = verifier.Feed(line.line()); !st.ok() && first_failure.ok()) {
          first_failure = st;
        }
      }
    }
    const grpc::Status rs = reader->Finish();
    EXPECT_TRUE(rs.ok()) << rs.error_message();
    EXPECT_TRUE(first_failure.ok()) << first_failure;
    if (first_failure.ok()) {
      EXPECT_TRUE(verifier.Finish().ok()) << verifier.Finish();
    }
    EXPECT_GE(read_head, head.next_index()) << "the read ends before the head Head reported";
    EXPECT_EQ(n, read_head) << "records read != the head the read reports";
    EXPECT_EQ(ToHex(verifier.head()), read_head_curr) << "the last record is not the head";
    total += n;
  }
  return total;
}

// Snapshots and trimming, as the service guarantees them once the final life took two explicit
// snapshots with new batches of every shard part between them (--keep_snapshots=2): every
// part's manifest is full, its newest snapshot covers the part's whole log, and the log was
// trimmed through the oldest kept snapshot.
void ExpectSnapshotsAndTrimming(const std::string& data_dir, uint32_t shards) {
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::Store::Open({.path = data_dir + "/db", .read_only = true});
  ASSERT_TRUE(store.ok()) << store.status();
  for (uint32_t s = 0; s < shards; ++s) {
    for (PartKind part : {PartKind::kSau, PartKind::kLmu}) {
      SCOPED_TRACE(absl::StrCat(std::string(PartName(part)), " shard ", s));
      absl::StatusOr<std::optional<std::string>> bytes = (*store)->GetManifest(kModel, s, part);
      ASSERT_TRUE(bytes.ok() && bytes->has_value()) << bytes.status();
      absl::StatusOr<std::vector<storage::ManifestEntry>> manifest =
          storage::DecodeManifest(**bytes);
      ASSERT_TRUE(manifest.ok()) << manifest.status();
      ASSERT_EQ(manifest->size(), 2u) << "--keep_snapshots=2 and two snapshots were taken";
      uint64_t first = 0;
      ASSERT_TRUE((*store)
                      ->ScanLog(kModel, s, part, 0,
                                [&](uint64_t seq, std::string_view) {
                                  first = seq;
                                  return false;
                                })
                      .ok());
      absl::StatusOr<std::optional<uint64_t>> last = (*store)->LastLogSeq(kModel, s, part);
      ASSERT_TRUE(last.ok()) << last.status();
      const uint64_t oldest = manifest->back().log_seq;
      if (last->has_value()) {
        EXPECT_EQ(manifest->front().log_seq, **last) << "the newest snapshot misses logged batches";
        EXPECT_GT(first, oldest) << "the log was not trimmed through the oldest kept snapshot";
      }
      EXPECT_GT(oldest, 0u);
      std::printf("%s shard %u: snapshots %llu, %llu (log_seq %llu, %llu); log %s\n",
                  std::string(PartName(part)).c_str(), s,
                  static_cast<unsigned long long>(manifest->front().snapshot_seq),
                  static_cast<unsigned long long>(manifest->back().snapshot_seq),
                  static_cast<unsigned long long>(manifest->front().log_seq),
                  static_cast<unsigned long long>(oldest),
                  first == 0 ? "empty" : absl::StrCat("starts at ", first).c_str());
    }
  }
}

std::vector<std::string> ServerFlags(const std::string& data_dir, const std::string& secret,
                                     const char* durability,
                                     const std::vector<std::string>& more) {
  std::vector<std::string> flags = {"--data_dir=" + data_dir, "--lmu_secret_file=" + secret,
                                    absl::StrCat("--durability=", durability)};
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

// ---------------------------------------------------------------------------------------------
// Kill -9 at >= 20 random points of a 10^5-event stream.

enum class KillAt { kStart, kMidStream, kAfterSnapshotCall };

const char* KillAtName(KillAt k) {
  switch (k) {
    case KillAt::kStart:
      return "right after start";
    case KillAt::kMidStream:
      return "mid-stream";
    case KillAt::kAfterSnapshotCall:
      return "right after Admin.Snapshot";
  }
  return "?";
}

// Every engine of the SAU part (docs/ENGINES.md) is killed at random points: the prf engine
// 30 times, ridge and vla 10 times each (their recovery goes through the same shard code; the
// kills check their snapshots and replay).
class ServerCrashEngineTest : public ::testing::TestWithParam<v1::Engine> {};

TEST_P(ServerCrashEngineTest, KillNineAtRandomPointsLosesNothingAndAppliesNothingTwice) {
  const v1::Engine engine = GetParam();
  const auto test_start = Clock::now();
  const uint64_t seed = Seed(20240404);
  std::printf("seed %llu (STREAMLEARN_CRASH_SEED)\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const std::string dir = FreshDir(absl::StrCat("kills_", v1::Engine_Name(engine)));
  const std::string data_dir = dir + "/data";
  const std::string secret_file = dir + "/lmu.secret";
  const lmu::HashSecret secret = WriteSecret(secret_file, seed);
  const WorkloadOptions wo;
  const Workload w = MakeWorkload(wo, rng);
  Ledger ledger(w, wo.shards);
  // The last batch of every shard part waits for the final life (see ExpectSnapshotsAndTrimming).
  std::vector<bool> held(w.order.size(), false);
  {
    std::vector<bool> seen(2 * wo.shards, false);
    for (size_t id = w.order.size(); id-- > 0;) {
      const size_t lane = static_cast<size_t>(w.order[id].part) * wo.shards + w.order[id].shard;
      if (!seen[lane]) held[id] = seen[lane] = true;
    }
  }
  const std::vector<std::string> snapshot_flags = {
      "--snapshot_every_steps=3000", "--snapshot_interval=500ms", "--keep_snapshots=2"};
  int life = 0;
  auto spawn = [&](const char* durability) {
    return std::make_unique<ServerProcess>(
        ServerFlags(data_dir, secret_file, durability, snapshot_flags),
        absl::StrCat(dir, "/server_", life++, ".log"));
  };

  // Life 0: create the model.
  std::unique_ptr<CleanReplay> clean;
  {
    auto server = spawn("process");
    const int port = server->WaitForPort(milliseconds(30000));
    ASSERT_NE(port, 0) << server->Log();
    auto client = ConnectTo(port);
    ASSERT_NE(client, nullptr);
    v1::ModelSpec spec;
    spec.set_name(kModel);
    spec.set_shards(wo.shards);
    spec.mutable_sau()->set_d(wo.d);
    spec.mutable_sau()->set_d_v(wo.d_v);
    spec.mutable_sau()->set_engine(engine);
    if (engine == v1::ENGINE_PRF) spec.mutable_sau()->set_r(32);
    v1::LmuSpec* lmu = spec.mutable_lmu();
    lmu->set_m(wo.m);
    // A small delta so that background rebuilds happen: C = 1024 slots, headroom
    // 0.2 C = 204 >= lambda_max T_rb + margin = 164.
    lmu->set_delta_buckets(256);
    lmu->set_lambda_max(100);
    lmu->set_rebuild_seconds(1);
    lmu->set_margin(64);
    absl::StatusOr<v1::ModelInfo> info = client->CreateModel(spec);
    ASSERT_TRUE(info.ok()) << info.status();
    clean = std::make_unique<CleanReplay>(info->spec(), secret);
    server->Kill();
  }

  // The kill plan: 30 kills; the mid-stream ones trigger at sorted random batch positions.
  const int kKills = engine == v1::ENGINE_PRF ? 30 : 10;
  std::vector<size_t> positions;
  for (int i = 0; i < kKills; ++i) positions.push_back(rng() % (w.order.size() * 97 / 100));
  std::sort(positions.begin(), positions.end());
  std::atomic<int> mid_snapshot_calls{0}, snapshot_calls_finished{0};
  int stream_errors = 0, snapshot_rounds = 0;
  for (int round = 0; round <= kKills; ++round) {
    const bool last = round == kKills;
    const KillAt at = round % 6 == 3   ? KillAt::kStart
                      : round % 5 == 2 ? KillAt::kAfterSnapshotCall
                                       : KillAt::kMidStream;
    const char* durability = round % 6 == 4 ? "machine" : "process";
    if (!last && at == KillAt::kAfterSnapshotCall) ++snapshot_rounds;
    SCOPED_TRACE(absl::StrCat("round ", round, " (life ", life, ", ", durability, ", kill ",
                              last ? "none" : KillAtName(at), ")"));
    auto server = spawn(durability);
    if (!last && at == KillAt::kStart) {
      // Anywhere in the first 80 ms: during start-up, recovery, or the first snapshot.
      std::this_thread::sleep_for(milliseconds(rng() % 80));
      server->Kill();
      continue;
    }
    const int port = server->WaitForPort(milliseconds(60000));
    ASSERT_NE(port, 0) << server->Log();
    auto client = ConnectTo(port);
    ASSERT_NE(client, nullptr);
    absl::StatusOr<v1::ModelInfo> info = client->GetModel(kModel);
    ASSERT_TRUE(info.ok()) << info.status();
    ledger.CheckRecovered(*info, clean.get(), "after restart");
    if (::testing::Test::HasFatalFailure()) return;

    std::thread killer;
    absl::Status streamed;
    {
      LifeStream stream(*client, w, &ledger);
      const size_t trigger_at = last ? SIZE_MAX : positions[static_cast<size_t>(round)];
      const int delay_ms = static_cast<int>(rng() % 30);
      const int snapshot_delay_us = static_cast<int>(rng() % 3000);
      streamed = stream.Run(
          trigger_at,
          [&] {
        if (last) return;
        killer = std::thread([&, delay_ms, snapshot_delay_us] {
          std::this_thread::sleep_for(milliseconds(delay_ms));
          if (at == KillAt::kAfterSnapshotCall) {
            std::atomic<bool> done{false};
            std::thread call([&] {
              if (SnapshotNow(port).ok()) ++snapshot_calls_finished;
              done = true;
            });
            std::this_thread::sleep_for(std::chrono::microseconds(snapshot_delay_us));
            if (!done) ++mid_snapshot_calls;
            server->Kill();
            call.join();
          } else {
            server->Kill();
          }
        });
          },
          SIZE_MAX, &held);
      if (last) {
        ASSERT_TRUE(streamed.ok()) << streamed << "\n" << server->Log();
        // Two explicit snapshots with each part's held batch between them.
        absl::StatusOr<v1::SnapshotResponse> before = SnapshotNow(port);
        ASSERT_TRUE(before.ok()) << before.status();
        streamed = stream.Run(SIZE_MAX, [] {});
        ASSERT_TRUE(streamed.ok()) << streamed << "\n" << server->Log();
        absl::StatusOr<v1::SnapshotResponse> after = SnapshotNow(port);
        ASSERT_TRUE(after.ok()) << after.status();
        // The newest snapshot of each part (this call's, or a background one taken after the
        // held batch) holds the part's every step.
        ASSERT_EQ(after->shards_size(), static_cast<int>(2 * wo.shards));
        for (const v1::ShardSnapshot& ss : after->shards()) {
          uint64_t steps = 0;
          for (const Batch& b : w.order) {
            if (b.shard == ss.shard() && PartName(b.part) == ss.part()) steps += b.n;
          }
          EXPECT_EQ(ss.steps(), steps) << ss.part() << " shard " << ss.shard();
        }
      }
      if (!streamed.ok()) ++stream_errors;
      if (killer.joinable()) killer.join();
    }
    for (const std::string& f : ledger.TakeFailures()) ADD_FAILURE() << f;
    if (last) {
      absl::StatusOr<v1::ModelInfo> end = client->GetModel(kModel);
      ASSERT_TRUE(end.ok()) << end.status();
      ASSERT_TRUE(ledger.AllAcked());
      ledger.CheckRecovered(*end, clean.get(), "at the end");
      ledger.CheckComplete(*end);
      // An independent replay from scratch of every batch, in send order, gives the same
      // digests as the incremental one the checks used.
      CleanReplay fresh(end->spec(), secret);
      for (const Batch& b : w.order) ASSERT_TRUE(fresh.Apply(w, b).ok());
      for (uint32_t s = 0; s < wo.shards; ++s) {
        for (Part p : {Part::kSau, Part::kLmu}) {
          EXPECT_EQ(Report(*end, p, s)->digest, fresh.Digest(p, s)) << PartName(p) << " " << s;
        }
      }
      const uint64_t records = VerifyAuditChains(port, wo.shards);
      std::printf("audit chains verified: %llu records\n",
                  static_cast<unsigned long long>(records));
      // A last kill and restart after everything was acknowledged.
      server->Kill();
      auto again = spawn("process");
      const int port2 = again->WaitForPort(milliseconds(60000));
      ASSERT_NE(port2, 0) << again->Log();
      auto client2 = ConnectTo(port2);
      ASSERT_NE(client2, nullptr);
      absl::StatusOr<v1::ModelInfo> after = client2->GetModel(kModel);
      ASSERT_TRUE(after.ok()) << after.status();
      ledger.CheckRecovered(*after, clean.get(), "after the final kill");
      EXPECT_EQ(again->Terminate(), 0) << again->Log();
    }
  }
  ExpectSnapshotsAndTrimming(data_dir, wo.shards);

  std::printf("%d lives; %d kills broke a stream; %d kills right after an Admin.Snapshot "
              "call (%d before it returned, %d calls finished); %llu acks, %llu events "
              "acknowledged as duplicates of an unacknowledged commit; %.1f s\n",
              life, stream_errors, snapshot_rounds, mid_snapshot_calls.load(),
              snapshot_calls_finished.load(),
              static_cast<unsigned long long>(ledger.acks()),
              static_cast<unsigned long long>(ledger.duplicate_events()),
              std::chrono::duration<double>(Clock::now() - test_start).count());
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Engines, ServerCrashEngineTest,
                         ::testing::Values(v1::ENGINE_PRF, v1::ENGINE_RIDGE, v1::ENGINE_VLA),
                         [](const ::testing::TestParamInfo<v1::Engine>& info) {
                           return v1::Engine_Name(info.param);
                         });

// ---------------------------------------------------------------------------------------------
// Kill -9 while Admin.Snapshot writes a large state (r = 1024, d_v = 128, 4 shards, an LMU with
// tens of thousands of ids): the store keeps the previous snapshot or the new one, never half.
// Two kills land at fixed points through failpoints (before the K-th part's snapshot write and
// after it), the rest at random delays inside the call's calibrated duration (where those land
// is printed, not asserted).

// The snapshot manifests of every shard part, read from a data directory no server holds.
std::vector<std::string> ReadManifests(const std::string& data_dir, uint32_t shards) {
  std::vector<std::string> out;
  absl::StatusOr<std::unique_ptr<storage::Store>> store =
      storage::Store::Open({.path = data_dir + "/db", .read_only = true});
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return out;
  for (uint32_t s = 0; s < shards; ++s) {
    for (PartKind part : {PartKind::kSau, PartKind::kLmu}) {
      absl::StatusOr<std::optional<std::string>> m = (*store)->GetManifest(kModel, s, part);
      EXPECT_TRUE(m.ok()) << m.status();
      out.push_back(m.ok() && m->has_value() ? **m : std::string());
    }
  }
  return out;
}

TEST(ServerCrashTest, KillNineDuringSnapshotOfLargeStateRecoversTheAcknowledgedState) {
  const auto test_start = Clock::now();
  const uint64_t seed = Seed(20240404) + 1;
  std::printf("seed %llu (STREAMLEARN_CRASH_SEED + 1)\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const std::string dir = FreshDir("snapshot");
  const std::string data_dir = dir + "/data";
  const std::string secret_file = dir + "/lmu.secret";
  const lmu::HashSecret secret = WriteSecret(secret_file, seed);
  const WorkloadOptions wo{.shards = 4,
                           .d = 16,
                           .d_v = 128,
                           .m = 2,
                           .sau_events = 6000,
                           .lmu_samples = 24000,
                           .lmu_ids = 1u << 20};
  const Workload w = MakeWorkload(wo, rng);
  Ledger ledger(w, wo.shards);
  // Snapshots only on demand, so that each one is the Admin.Snapshot the test kills.
  const std::vector<std::string> flags =
      ServerFlags(data_dir, secret_file, "process",
                  {"--snapshot_every_steps=0", "--snapshot_interval=0s", "--keep_snapshots=2"});
  int life = 0;
  auto spawn = [&](const std::vector<std::string>& env = {}) {
    return std::make_unique<ServerProcess>(flags, absl::StrCat(dir, "/server_", life++, ".log"),
                                           env);
  };

  auto server = spawn();
  int port = server->WaitForPort(milliseconds(30000));
  ASSERT_NE(port, 0) << server->Log();
  std::unique_ptr<CleanReplay> clean;
  {
    auto client = ConnectTo(port);
    ASSERT_NE(client, nullptr);
    v1::ModelSpec spec;
    spec.set_name(kModel);
    spec.set_shards(wo.shards);
    spec.mutable_sau()->set_d(wo.d);
    spec.mutable_sau()->set_d_v(wo.d_v);
    spec.mutable_sau()->set_r(1024);
    spec.mutable_lmu()->set_m(wo.m);
    absl::StatusOr<v1::ModelInfo> info = client->CreateModel(spec);
    ASSERT_TRUE(info.ok()) << info.status();
    clean = std::make_unique<CleanReplay>(info->spec(), secret);
    std::printf("SAU state %llu bytes per shard\n",
                static_cast<unsigned long long>(info->state_bytes()));
  }
  auto restart = [&](const std::vector<std::string>& env, const std::string& when) {
    server = spawn(env);
    port = server->WaitForPort(milliseconds(60000));
    ASSERT_NE(port, 0) << server->Log();
    auto after = ConnectTo(port);
    ASSERT_NE(after, nullptr);
    absl::StatusOr<v1::ModelInfo> info = after->GetModel(kModel);
    ASSERT_TRUE(info.ok()) << info.status();
    // Everything sent so far was acknowledged: the recovered state is exactly the replay.
    ledger.CheckRecovered(*info, clean.get(), when);
  };

  constexpr int kRounds = 6;
  const size_t per_round = w.order.size() / kRounds;
  double snapshot_seconds = 0;  // wall time of one Admin.Snapshot, from the first round
  int killed_mid_call = 0, random_kills = 0;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round, " (life ", life - 1, ")"));
    const size_t end = round + 1 == kRounds ? w.order.size() : (round + 1) * per_round;
    {
      auto client = ConnectTo(port);
      ASSERT_NE(client, nullptr);
      LifeStream stream(*client, w, &ledger);
      const absl::Status st = stream.Run(SIZE_MAX, [] {}, end);
      ASSERT_TRUE(st.ok()) << st;
      ASSERT_TRUE(stream.Finish().ok());
    }
    for (const std::string& f : ledger.TakeFailures()) ADD_FAILURE() << f;
    if (round == 0) {  // calibrate: one snapshot, not killed
      const auto start = Clock::now();
      absl::StatusOr<v1::SnapshotResponse> snap = SnapshotNow(port);
      ASSERT_TRUE(snap.ok()) << snap.status();
      snapshot_seconds = std::chrono::duration<double>(Clock::now() - start).count();
      uint64_t bytes = 0;
      for (const v1::ShardSnapshot& ss : snap->shards()) bytes += ss.bytes();
      std::printf("Admin.Snapshot: %llu bytes in %.3f s\n", static_cast<unsigned long long>(bytes),
                  snapshot_seconds);
      continue;
    }
    if (round <= 2) {
      // At a failpoint: the K-th part with new batches dies before (round 1) or after (round 2)
      // its snapshot's store write. Parts are snapshotted in (shard, part) order, each once.
      std::vector<bool> fresh(2 * wo.shards, false);
      for (size_t id = round * per_round; id < end; ++id) {
        fresh[static_cast<size_t>(w.order[id].part) + 2 * w.order[id].shard] = true;
      }
      const int parts_with_news = static_cast<int>(std::count(fresh.begin(), fresh.end(), true));
      ASSERT_GE(parts_with_news, 1);
      const int k = std::min(2, parts_with_news);
      const bool before = round == 1;
      const std::string fp =
          absl::StrCat(before ? "snapshot.before_write@" : "snapshot.after_write@", k);
      EXPECT_EQ(server->Terminate(), 0) << server->Log();
      const std::vector<std::string> manifests = ReadManifests(data_dir, wo.shards);
      restart({"STREAMLEARN_FAILPOINT=" + fp}, "after a clean restart");
      if (::testing::Test::HasFatalFailure()) return;
      EXPECT_FALSE(SnapshotNow(port).ok()) << "the server passed failpoint " << fp;
      ASSERT_TRUE(server->WaitKilledBySelf(milliseconds(60000))) << server->Log();
      const std::vector<std::string> after = ReadManifests(data_dir, wo.shards);
      int changed = 0;
      for (size_t i = 0; i < after.size(); ++i) changed += after[i] != manifests[i] ? 1 : 0;
      EXPECT_EQ(changed, before ? k - 1 : k) << "parts whose snapshot landed before " << fp;
      restart({}, absl::StrCat("after a kill at ", fp));
      if (::testing::Test::HasFatalFailure()) return;
      continue;
    }
    // At a random delay within the first 90% of the call's calibrated duration.
    const auto delay = std::chrono::microseconds(
        static_cast<int64_t>(snapshot_seconds * 0.9e6 * static_cast<double>(rng() % 1000) / 1000));
    std::atomic<bool> returned{false};
    std::thread call([&] {
      (void)SnapshotNow(port);
      returned = true;
    });
    std::this_thread::sleep_for(delay);
    const bool mid = !returned;
    server->Kill();
    call.join();
    killed_mid_call += mid ? 1 : 0;
    ++random_kills;
    restart({}, absl::StrCat("after a kill ", delay.count(), " us into Admin.Snapshot"));
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_TRUE(ledger.AllAcked());
  absl::StatusOr<v1::ModelInfo> end = ConnectTo(port)->GetModel(kModel);
  ASSERT_TRUE(end.ok()) << end.status();
  ledger.CheckComplete(*end);
  // The snapshot taken after the kills verifies, and a clean restart from it agrees.
  ASSERT_TRUE(SnapshotNow(port).ok());
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
  restart({}, "after a clean restart");
  if (::testing::Test::HasFatalFailure()) return;
  VerifyAuditChains(port, wo.shards);
  EXPECT_EQ(server->Terminate(), 0) << server->Log();
  std::printf("%d of %d random kills landed before Admin.Snapshot returned; %.1f s\n",
              killed_mid_call, random_kills,
              std::chrono::duration<double>(Clock::now() - test_start).count());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace streamlearn::server
