// soak: minutes of mixed load against one real server process (docs/SECURITY.md and
// bench/RESULTS.md, "Soak"): SAU ingest and queries, LMU updates (with rebuilds) and
// predictions, fused learning and predictions, audit appends and heads, snapshots every 30 s.
// Every call's status is checked; every call's latency is kept. The server's resident memory
// is sampled every second from /proc, and with it the memory its store accounts for
// (streamlearn_store_memory_bytes on its metrics page: RocksDB's block cache, memtables and
// table readers), so that a store warming up is told from a leak.
//
//   soak [--minutes 10] [--server_binary PATH] [--seed N]
//
// Prints per RPC: calls, errors, p50 and p99 latency and their ratio; the mean RSS of the
// second minute and of the last one and their ratio, the same for RSS less the store's memory;
// the RSS, the store's memory, the rest, malloc's allocated and free bytes and the data
// directory's size by minute; the LMU rebuilds and snapshots taken.
// Exits 0 when no call failed and the last minute's RSS is within 2% of the second's, 1
// otherwise. Not a test (it takes minutes): run it by hand or from bench/run_all.sh.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "admin.grpc.pb.h"
#include "audit.grpc.pb.h"
#include "fuse.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "lmu.grpc.pb.h"
#include "sau.grpc.pb.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = streamlearn::v1;

constexpr int kD = 16, kDv = 4, kIds = 50000, kFeatures = 10, kKeys = 8;

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

double RssMiB(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

// The server's metrics page, or "" when it cannot be read.
std::string MetricsPage(int metrics_port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(metrics_port));
  std::string page;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[16384];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) page.append(buf, n);
    }
  }
  close(fd);
  return page;
}

// The sum of the samples on `page` whose line starts with `prefix`, in MiB; -1 when there
// are none. With "streamlearn_store_memory_bytes{" it is RocksDB's own accounting of its
// block cache, memtables and table readers; with
// "streamlearn_process_heap_bytes{kind=\"free\"}" malloc's free bytes.
double SumMiB(const std::string& page, const std::string& prefix) {
  double bytes = 0;
  bool found = false;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    bytes += std::atof(line.c_str() + space + 1);
    found = true;
  }
  return found ? bytes / (1024.0 * 1024.0) : -1;
}

// The bytes of the regular files under `dir`, in MiB (files that vanish meanwhile are skipped).
double DirMiB(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  uintmax_t bytes = 0;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) {
      const uintmax_t n = it->file_size(size_ec);
      if (!size_ec) bytes += n;
    }
  }
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// Latencies (microseconds) and errors per RPC.
class Ledger {
 public:
  void Record(const std::string& rpc, double us, const grpc::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[rpc];
    e.us.push_back(us);
    if (!s.ok()) {
      ++e.errors;
      if (e.first_error.empty()) e.first_error = s.error_message();
    }
  }
  int64_t Errors() {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = 0;
    for (auto& [rpc, e] : entries_) n += e.errors;
    return n;
  }
  void Print() {
    std::lock_guard<std::mutex> lock(mu_);
    std::printf("| RPC | calls | errors | p50 (us) | p99 (us) | p99/p50 |\n|---|---|---|---|---|---|\n");
    for (auto& [rpc, e] : entries_) {
      std::sort(e.us.begin(), e.us.end());
      const double p50 = e.us[e.us.size() / 2], p99 = e.us[e.us.size() * 99 / 100];
      std::printf("| %s | %zu | %lld | %.0f | %.0f | %.1f |\n", rpc.c_str(), e.us.size(),
                  static_cast<long long>(e.errors), p50, p99, p99 / p50);
      if (!e.first_error.empty()) std::printf("  first error: %s\n", e.first_error.c_str());
    }
  }

 private:
  struct Entry {
    std::vector<double> us;
    int64_t errors = 0;
    std::string first_error;
  };
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

template <typename Fn>
grpc::Status Timed(Ledger& ledger, const std::string& rpc, Fn fn) {
  const auto t0 = Clock::now();
  grpc::Status s = fn();
  ledger.Record(rpc, std::chrono::duration<double, std::micro>(Clock::now() - t0).count(), s);
  return s;
}

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return c;
}

grpc::Status InBand(const v1::BatchStatus& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), s.message());
}

}  // namespace

int main(int argc, char** argv) {
  double minutes = 10;
  uint64_t seed = 20261126;
  std::string server_binary = STREAMLEARN_BINARY_DIR "/server/streamlearn-server";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--minutes") minutes = std::atof(argv[i + 1]);
    if (flag == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "--server_binary") server_binary = argv[i + 1];
  }
  std::printf("soak: %.1f minutes, seed %llu\n", minutes, static_cast<unsigned long long>(seed));
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/streamlearn_soak_", getpid());
  std::filesystem::create_directories(dir);
  const int port = FreePort();
  int metrics_port = FreePort();
  while (metrics_port == port) metrics_port = FreePort();
  std::vector<std::string> args = {server_binary, absl::StrCat("--listen=127.0.0.1:", port),
                                   absl::StrCat("--metrics=127.0.0.1:", metrics_port),
                                   "--data_dir=" + dir + "/data",
                                   "--snapshot_interval=30s", "--snapshot_every_steps=0"};
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, (dir + "/server.log").c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  if (posix_spawn(&pid, cargs[0], &actions, nullptr, cargs.data(), environ) != 0) {
    std::fprintf(stderr, "cannot start %s\n", server_binary.c_str());
    return 2;
  }
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(60))) {
    std::fprintf(stderr, "the server did not start; its log: %s/server.log\n", dir.c_str());
    kill(pid, SIGKILL);
    return 2;
  }
  auto admin = v1::Admin::NewStub(channel);
  {
    v1::CreateModelRequest a;
    v1::ModelSpec* s = a.mutable_spec();
    s->set_name("soak");
    s->set_shards(4);
    s->mutable_sau()->set_d(kD);
    s->mutable_sau()->set_d_v(kDv);
    s->mutable_sau()->set_r(256);
    s->mutable_lmu()->set_m(1);
    s->mutable_lmu()->set_delta_buckets(1024);
    s->mutable_lmu()->set_lambda_max(100);
    s->mutable_lmu()->set_margin(256);
    v1::CreateModelRequest f;
    v1::ModelSpec* g = f.mutable_spec();
    g->set_name("soak-fused");
    g->set_shards(2);
    g->mutable_fuse()->mutable_sau()->set_d(kD);
    g->mutable_fuse()->mutable_sau()->set_r(128);
    g->mutable_fuse()->mutable_lmu()->set_delta_buckets(1024);
    g->mutable_fuse()->mutable_lmu()->set_lambda_max(100);
    g->mutable_fuse()->mutable_lmu()->set_margin(256);
    for (const v1::CreateModelRequest* r : {&a, &f}) {
      v1::ModelInfo info;
      auto ctx = Ctx();
      grpc::Status st = admin->CreateModel(ctx.get(), *r, &info);
      if (!st.ok()) {
        std::fprintf(stderr, "CreateModel: %s\n", st.error_message().c_str());
        kill(pid, SIGKILL);
        return 2;
      }
    }
  }

  Ledger ledger;
  const auto end = Clock::now() + std::chrono::duration<double, std::ratio<60>>(minutes);
  std::vector<std::thread> workers;
  const auto key = [](int i) { return absl::StrCat("key-", i % kKeys); };

  // Writers: one lock-step stream each (a batch, its ack), the ack's latency recorded.
  workers.emplace_back([&] {
    std::mt19937_64 rng(seed + 1);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<uint64_t> t(kKeys, 0);
    auto ctx = Ctx();
    ctx->set_deadline(std::chrono::system_clock::time_point::max());
    auto stream = v1::SAU::NewStub(channel)->Ingest(ctx.get());
    for (int i = 0; Clock::now() < end; ++i) {
      v1::IngestRequest r;
      r.set_model("soak");
      r.set_routing_key(key(i));
      for (int e = 0; e < 32; ++e) {
        v1::Event* ev = r.add_events();
        ev->set_t(++t[i % kKeys]);
        for (int j = 0; j < kD; ++j) ev->add_k(u(rng) * 0.5);
        for (int j = 0; j < kDv; ++j) ev->add_v(u(rng));
      }
      v1::IngestAck ack;
      Timed(ledger, "SAU.Ingest (batch of 32)", [&] {
        if (!stream->Write(r) || !stream->Read(&ack)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream broke");
        return InBand(ack.status());
      });
    }
    stream->WritesDone();
    stream->Finish();
  });
  workers.emplace_back([&] {
    std::mt19937_64 rng(seed + 2);
    std::uniform_int_distribution<uint64_t> id(0, kIds - 1);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<uint64_t> t(kKeys, 0);
    auto ctx = Ctx();
    ctx->set_deadline(std::chrono::system_clock::time_point::max());
    auto stream = v1::LMU::NewStub(channel)->Update(ctx.get());
    for (int i = 0; Clock::now() < end; ++i) {
      v1::UpdateRequest r;
      r.set_model("soak");
      r.set_routing_key(key(i));
      for (int e = 0; e < 32; ++e) {
        v1::Sample* s = r.add_samples();
        s->set_t(++t[i % kKeys]);
        for (int j = 0; j < kFeatures; ++j) {
          s->add_ids(id(rng));
          s->add_vals(1.0);
        }
        s->add_y(u(rng));
      }
      v1::UpdateAck ack;
      Timed(ledger, "LMU.Update (batch of 32)", [&] {
        if (!stream->Write(r) || !stream->Read(&ack)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream broke");
        return InBand(ack.status());
      });
    }
    stream->WritesDone();
    stream->Finish();
  });
  workers.emplace_back([&] {
    std::mt19937_64 rng(seed + 3);
    std::uniform_int_distribution<uint64_t> id(0, kIds - 1);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<uint64_t> t(kKeys, 0);
    auto ctx = Ctx();
    ctx->set_deadline(std::chrono::system_clock::time_point::max());
    auto stream = v1::Fuse::NewStub(channel)->Learn(ctx.get());
    for (int i = 0; Clock::now() < end; ++i) {
      v1::LearnRequest r;
      r.set_model("soak-fused");
      r.set_routing_key(key(i));
      for (int e = 0; e < 16; ++e) {
        v1::FuseSample* s = r.add_samples();
        s->set_t(++t[i % kKeys]);
        for (int j = 0; j < kFeatures; ++j) {
          s->add_ids(id(rng));
          s->add_vals(1.0);
        }
        for (int j = 0; j < kD; ++j) s->add_q(u(rng) * 0.5);
        s->add_y(u(rng));
      }
      v1::LearnAck ack;
      Timed(ledger, "Fuse.Learn (batch of 16)", [&] {
        if (!stream->Write(r) || !stream->Read(&ack)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stream broke");
        return InBand(ack.status());
      });
    }
    stream->WritesDone();
    stream->Finish();
  });
  // Readers.
  workers.emplace_back([&] {
    std::mt19937_64 rng(seed + 4);
    std::uniform_int_distribution<uint64_t> id(0, kIds - 1);
    std::uniform_real_distribution<double> u(-1, 1);
    auto sau = v1::SAU::NewStub(channel);
    auto lmu = v1::LMU::NewStub(channel);
    auto fuse = v1::Fuse::NewStub(channel);
    for (int i = 0; Clock::now() < end; ++i) {
      v1::QueryRequest q;
      q.set_model("soak");
      q.set_routing_key(key(i));
      for (int j = 0; j < kD; ++j) q.add_q(u(rng) * 0.5);
      v1::QueryResponse qr;
      Timed(ledger, "SAU.Query", [&] { auto c = Ctx(); return sau->Query(c.get(), q, &qr); });
      v1::PredictRequest p;
      p.set_model("soak");
      p.set_routing_key(key(i));
      for (int j = 0; j < kFeatures; ++j) {
        p.add_ids(id(rng));
        p.add_vals(1.0);
      }
      v1::PredictResponse pr;
      Timed(ledger, "LMU.Predict", [&] { auto c = Ctx(); return lmu->Predict(c.get(), p, &pr); });
      v1::FusePredictRequest f;
      f.set_model("soak-fused");
      f.set_routing_key(key(i));
      for (int j = 0; j < kFeatures; ++j) {
        f.add_ids(id(rng));
        f.add_vals(1.0);
      }
      for (int j = 0; j < kD; ++j) f.add_q(u(rng) * 0.5);
      v1::FusePredictResponse fr;
      Timed(ledger, "Fuse.Predict", [&] { auto c = Ctx(); return fuse->Predict(c.get(), f, &fr); });
    }
  });
  // Audit and admin: appends and heads every 100 ms, a snapshot of each model every 30 s (and
  // the server's own timed snapshots).
  std::atomic<int> snapshots{0};
  workers.emplace_back([&] {
    auto auditor = v1::Auditor::NewStub(channel);
    auto next_snapshot = Clock::now() + std::chrono::seconds(30);
    for (int i = 0; Clock::now() < end; ++i) {
      v1::AppendRequest a;
      a.set_model("soak");
      a.set_shard(i % 4);
      a.set_json(absl::StrCat("{\"note\": \"soak\", \"i\": ", i, "}"));
      v1::AppendResponse ar;
      Timed(ledger, "Auditor.Append", [&] { auto c = Ctx(); return auditor->Append(c.get(), a, &ar); });
      v1::HeadRequest h;
      h.set_model("soak-fused");
      h.set_shard(i % 2);
      v1::HeadResponse hr;
      Timed(ledger, "Auditor.Head", [&] { auto c = Ctx(); return auditor->Head(c.get(), h, &hr); });
      if (Clock::now() >= next_snapshot) {
        for (const char* m : {"soak", "soak-fused"}) {
          v1::SnapshotRequest s;
          s.set_name(m);
          v1::SnapshotResponse sr;
          Timed(ledger, "Admin.Snapshot", [&] { auto c = Ctx(); return admin->Snapshot(c.get(), s, &sr); });
          ++snapshots;
        }
        next_snapshot += std::chrono::seconds(30);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // RSS and the store's accounted memory every second.
  std::vector<std::pair<double, double>> rss;    // (seconds since start, MiB)
  std::vector<std::pair<double, double>> store;  // (seconds since start, MiB)
  std::vector<std::pair<double, double>> heap_allocated, heap_free;  // malloc's view
  std::vector<std::pair<double, double>> disk;  // the data directory, every 10 s
  const auto start = Clock::now();
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double at = std::chrono::duration<double>(Clock::now() - start).count();
    rss.emplace_back(at, RssMiB(pid));
    const std::string page = MetricsPage(metrics_port);
    store.emplace_back(at, SumMiB(page, "streamlearn_store_memory_bytes{"));
    heap_allocated.emplace_back(
        at, SumMiB(page, "streamlearn_process_heap_bytes{kind=\"allocated\"}"));
    heap_free.emplace_back(at, SumMiB(page, "streamlearn_process_heap_bytes{kind=\"free\"}"));
    if (rss.size() % 10 == 0) disk.emplace_back(at, DirMiB(dir));
  }
  for (std::thread& w : workers) w.join();

  uint64_t rebuilds = 0;
  {
    v1::GetModelRequest r;
    r.set_name("soak");
    v1::ModelInfo info;
    auto c = Ctx();
    if (admin->GetModel(c.get(), r, &info).ok()) {
      for (const v1::LmuShardInfo& s : info.lmu_shards()) rebuilds += s.rebuilds();
    }
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);

  ledger.Print();
  const double total = minutes * 60;
  // The rest: RSS less what the store accounts for (samples where the page was read).
  std::vector<std::pair<double, double>> rest;
  for (size_t i = 0; i < rss.size(); ++i) {
    if (store[i].second >= 0) rest.emplace_back(rss[i].first, rss[i].second - store[i].second);
  }
  const auto mean_between = [](const std::vector<std::pair<double, double>>& s, double from,
                               double to) {
    double sum = 0;
    int n = 0;
    for (const auto& [at, mib] : s) {
      if (at >= from && at < to) sum += mib, ++n;
    }
    return n > 0 ? sum / n : -1.0;
  };
  for (const auto& [name, series] :
       {std::pair<const char*, const std::vector<std::pair<double, double>>*>{"RSS", &rss},
        {"store (RocksDB's accounting)", &store},
        {"RSS less the store", &rest},
        {"malloc: allocated", &heap_allocated},
        {"malloc: free in its arenas", &heap_free},
        {"the data directory on disk", &disk}}) {
    std::printf("%s by minute (MiB):", name);
    for (int m = 0; m * 60 < total; ++m) {
      const double mean = mean_between(*series, m * 60, (m + 1) * 60);
      if (mean >= 0) std::printf(" %.1f", mean);
    }
    std::printf("\n");
  }
  const double second = mean_between(rss, 60, 120), last = mean_between(rss, total - 60, total);
  const double ratio = last / second;
  std::printf("RSS: second minute %.1f MiB, last minute %.1f MiB, ratio %.4f\n", second, last,
              ratio);
  const double rest_ratio = mean_between(rest, total - 60, total) / mean_between(rest, 60, 120);
  std::printf("RSS less the store: last minute / second minute %.4f (within 2%%: %s)\n",
              rest_ratio, std::abs(rest_ratio - 1) <= 0.02 ? "yes" : "no");
  std::printf("LMU rebuilds (model soak): %llu; snapshots asked: %d; server exit status %d\n",
              static_cast<unsigned long long>(rebuilds), snapshots.load(),
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  const int64_t errors = ledger.Errors();
  const bool ok = errors == 0 && std::abs(ratio - 1) <= 0.02;
  std::printf("%s: %lld errors, RSS within 2%%: %s\n", ok ? "PASS" : "FAIL",
              static_cast<long long>(errors), std::abs(ratio - 1) <= 0.02 ? "yes" : "no");
  std::filesystem::remove_all(dir);
  return ok ? 0 : 1;
}
