// The cluster mode (servers sharing every model's shards over NATS JetStream, docs/CLUSTER.md)
// measured: what a replicated ack costs beside the embedded store, how long a shard goes
// unserved after its owner is killed, and what several servers on one machine add up to. One
// real 3-node nats-server cluster with JetStream on loopback (tests/nats_cluster.h; Debian's
// nats-server) serves every case, each case under its own stream prefix; every stream and
// bucket has 3 replicas, and every server runs with lease_ttl = 2 s.
//
//   BM_Ingest/<mode>/<batch>  events/s over one pipelined SAU.Ingest stream (model
//   d = d_v = 64, r = 256, one shard, the event pool and window of rpc_durability_bench), at
//   batches of 1 and 256 events, into
//     0  embedded-process  an in-process server with a data_dir, --durability=process: batch +
//                          records + log entry in one RocksDB write (WAL not fsync'ed) before
//                          the ack;
//     1  cluster           an in-process server in the cluster mode, alone under its prefix:
//                          each batch's journal record (the batch's log entry with its audit
//                          records) is published to the R=3 journal stream and acknowledged by
//                          a JetStream quorum before the ack. A shard has one writer and each
//                          publish names the subject's expected last sequence, so one shard's
//                          publishes never overlap: batch 1 is one JetStream round trip per
//                          batch.
//   Snapshots at the server defaults (every 10^5 events or 5 min) in both. Counters: the
//   cores used (as BM_Aggregate's); after the ratio table, the bytes of a batch's journal
//   record as stored in JetStream.
//   Claim (the issue's): cluster >= 0.5 x embedded-process at batch 256; batch 1 reported.
//
//   BM_Aggregate/<n>  events/s of 6 concurrent pipelined Ingest streams at batch 256, one per
//   shard of a 6-shard model (the same SAU spec), each sent straight to the shard's owner (as
//   the owner's own Admin.ShardMap says), with n = 1, 2, 3 streamlearn-server processes
//   sharing the shards (6 / n each). Counters: the cores used meanwhile (CPU seconds per wall
//   second, from /proc) by this process (the client streams, and the idle in-process servers
//   of BM_Ingest), by the streamlearn-server processes, by the nats-server processes and by
//   the busiest nats-server node (cores_nats_max).
//   Ratios 2/1 and 3/1, no target: they say what another server buys when the machine's
//   cores are already shared by NATS, the servers and the clients.
//
//   BM_ClientIngest/<route>  events/s of ONE IngestSession of the C++ Client
//   (client/lib/client.h) over BM_Aggregate/3's servers and model (3 streamlearn-server
//   processes, 6 shards, 2 each; the same SAU spec and event pool), window 64, batch 256, the
//   batches round-robin over BM_Aggregate's 6 routing keys (one per shard), the Client
//   connected to one server's address (the first's), with Client::Options::route =
//     0  no route: every batch goes to that server on one stream; it applies its own 2 shards'
//        batches and forwards the other 4 shards' over a hop (a stream to their owner, each
//        batch written and its ack awaited in turn), so the one stream applies one batch at a
//        time;
//     1  route: the session reads the shard map and sends each batch to its shard's owner,
//        one stream per server, the window shared by the three.
//   A repetition is one Client and one session: 2 iterations (fixed, the same work in both
//   modes) of 96 batches (16 per shard) and a Flush. Counters: the cores used (as
//   BM_Aggregate's), and the session's stats().streams_opened and resends (0 unless a lease
//   moved or a stream broke).
//   Claim: routing saves the hop, expect route 1 / route 0 > 1 (checked as >= 1).
//
//   Takeover (a timed measurement, not a Google Benchmark case; it runs first, alone on the
//   machine): 3 streamlearn-server processes, a 3-shard model; --takeover_kills=N times
//   (default 12, 0 = skip): once every shard is served by a server of its own and the entry (a
//   survivor-to-be) acknowledges a shard-0 batch, wait a random U[0, lease_ttl) (seeded,
//   printed: the kill must not be in phase with the servers' rounds), SIGKILL the owner of
//   shard 0, then every 20 ms send a one-event Ingest stream for a shard-0 routing key to the
//   entry (which serves it or forwards it to the owner it knows) until one is acknowledged
//   OK; the time from the kill to that ack. A replacement process then joins and the shards
//   are rebalanced before the next kill. Prints every kill (with the new owner and the last
//   refusal), then p50 / p99 / max (nearest rank) with the lease_ttl, after the ratio table
//   and as context of the JSON output. Expected: the survivors judge the lease expired by
//   their own clocks lease_ttl after they first saw its last renewal, at a balance round
//   (every lease_ttl / 3); the renewal was 0..lease_ttl/3 before the kill and first seen
//   0..lease_ttl/3 after it was written, so the take comes lease_ttl -lease_ttl/3..+lease_ttl/3
//   after the kill, plus the shard's replay, plus up to lease_ttl / 3 when the entry is not the
//   new owner and learns of it at its next round. --takeover_only runs it and nothing else.
//
//   Control-plane probe (timed, after the takeovers, before the cases): on a scratch R=3
//   key-value stream of 2000 lease-sized keys, the latency of one renewal (a compare-and-set
//   publish, as LeaseTable::Renew) and of one pass renewing every key in turn (as
//   ClusterNode::Renew does with its leases), and the time to list every key (stream info +
//   ordered consumer, as LeaseTable::Leases in every balance round). The per-unit costs behind
//   the estimate for 100 servers and 10^5 shards in bench/RESULTS.md.
//
// Every nats-server and streamlearn-server process is a child of this process (the server
// binary is the build's streamlearn-server); their logs, the NATS store, the keys and the
// embedded data_dir live under one temporary directory, removed at the end (--keep_logs keeps
// the servers' logs). The event pool is Dgp kind A, seed 7 (printed with the rest of the
// configuration). About 3 minutes on 2 cores: ~1.5 min of takeovers, ~0.5 min of set-up
// (NATS, 7 servers), the rest the cases (~0.5 min of it BM_ClientIngest).
//   cluster_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <semaphore>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "admin.grpc.pb.h"
#include "bench/bench_main.h"
#include "bench/ratio_reporter.h"
#include "bench/rpc_fixture.h"
#include "benchmark/benchmark.h"
#include "client/lib/client.h"
#include "core/common/routing.h"
#include "core/workloads/dgp.h"
#include "gtest/gtest.h"  // first: the tests' helpers below report their failures through it
#include "sau.grpc.pb.h"
#include "server/server.h"
#include "server/storage/nats_client.h"
#include "server/storage/store.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tests/nats_cluster.h"
#include "tests/server_process.h"

namespace streamlearn::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kD = 64;
constexpr int kDv = 64;
constexpr int kR = 256;
constexpr size_t kPoolEvents = 4096;
constexpr uint64_t kDgpSeed = 7;
constexpr int kNatsNodes = 3;
constexpr int kReplicas = 3;
constexpr absl::Duration kLeaseTtl = absl::Seconds(2);
constexpr char kLeaseTtlFlag[] = "--lease_ttl=2s";
constexpr char kModel[] = "bench";
constexpr uint32_t kAggregateShards = 6;
constexpr size_t kAggregateBatch = 256;
constexpr size_t kAggregateBatchesPerShard = 16;  // 4096 events per stream per iteration
constexpr int kClientServers = 3;  // BM_ClientIngest: BM_Aggregate/3's servers and model
constexpr size_t kClientWindow = 64;
constexpr int kClientIterations = 2;  // x 96 batches: the same work in both modes
constexpr uint32_t kTakeoverShards = 3;
constexpr int kDefaultKills = 12;
constexpr auto kRetryEvery = milliseconds(20);
constexpr uint64_t kTakeoverSeed = 20261126;  // the random delays before the kills
bool g_keep_logs = false;                     // --keep_logs

enum Mode { kEmbedded = 0, kCluster = 1 };
constexpr const char* kModeNames[] = {"embedded-process", "cluster"};

// Batches per iteration: 4096 events (and >= 64 batches) as rpc_durability_bench, except the
// cluster at batch 1 (one quorum round trip per batch): 512 batches.
size_t BatchesPerIteration(Mode mode, size_t batch) {
  if (mode == kCluster && batch == 1) return 512;
  return std::max<size_t>(kPoolEvents, 64 * batch) / batch;
}
size_t Window(size_t batch) { return std::clamp<size_t>(2048 / batch, 4, 64); }

// ---------------------------------------------------------------------------------------
// What every case shares: the temporary root, the NATS cluster, the keys, the event pool.

struct Env {
  std::string root;
  std::unique_ptr<test_util::NatsTestCluster> nats;
  std::unique_ptr<storage::NatsClient> client;  // the benchmark's own look at the streams
  std::vector<sau::DgpEvent> events;
  std::string keys() const { return root + "/keys"; }
  std::string audit_key() const { return keys() + "/audit.key"; }
  std::string lmu_secret() const { return keys() + "/lmu.secret"; }
};

Env* g_env = nullptr;

Env& GetEnv() {
  if (g_env != nullptr) return *g_env;
  auto* env = new Env;
  env->root = (fs::temp_directory_path() / ("cluster_bench_" + std::to_string(getpid()))).string();
  if (access(server::kServerBinary, X_OK) != 0) {
    Die(absl::StrCat(server::kServerBinary, " is missing (build the streamlearn-server target)"));
  }
  fs::remove_all(env->root);
  fs::create_directories(env->root);
  // Before any thread of ours exists: a plain shell command.
  const std::string init = absl::StrCat(server::kServerBinary, " --init_keys ", env->keys(),
                                        " > ", env->root, "/init_keys.log 2>&1");
  if (std::system(init.c_str()) != 0) Die("streamlearn-server --init_keys failed");
  absl::StatusOr<std::unique_ptr<test_util::NatsTestCluster>> nats =
      test_util::NatsTestCluster::Start(kNatsNodes, env->root + "/nats");
  if (!nats.ok()) Die("NATS cluster: " + nats.status().ToString());
  env->nats = *std::move(nats);
  absl::StatusOr<std::unique_ptr<storage::NatsClient>> client =
      storage::NatsClient::Connect({.servers = env->nats->urls(), .name = "cluster_bench"});
  if (!client.ok()) Die("NATS client: " + client.status().ToString());
  env->client = *std::move(client);
  sau::Dgp dgp(sau::Dgp::Options{.kind = sau::Dgp::Kind::kA, .d = kD, .d_v = kDv}, kDgpSeed);
  for (size_t i = 0; i < kPoolEvents; ++i) env->events.push_back(dgp.Next());
  g_env = env;
  return *env;
}

// ---------------------------------------------------------------------------------------
// RPC helpers.

v1::ModelSpec SauSpec(const std::string& name, uint32_t shards) {
  v1::ModelSpec spec;
  spec.set_name(name);
  spec.set_shards(shards);
  spec.mutable_sau()->set_d(kD);
  spec.mutable_sau()->set_d_v(kDv);
  spec.mutable_sau()->set_r(kR);
  return spec;
}

std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void Deadline(grpc::ClientContext* ctx, milliseconds d) {
  ctx->set_deadline(std::chrono::system_clock::now() + d);
}

void CreateModel(const std::string& address, const v1::ModelSpec& spec) {
  v1::CreateModelRequest req;
  *req.mutable_spec() = spec;
  grpc::ClientContext ctx;
  Deadline(&ctx, milliseconds(30000));
  v1::ModelInfo info;
  grpc::Status s = v1::Admin::NewStub(ChannelTo(address))->CreateModel(&ctx, req, &info);
  if (!s.ok()) Die("CreateModel '" + spec.name() + "' at " + address + ": " + s.error_message());
}

// The shard map as the server at `address` saw it at its last lease round.
std::optional<v1::ShardMapResponse> ShardMapAt(const std::string& address,
                                               const std::string& model) {
  grpc::ClientContext ctx;
  Deadline(&ctx, milliseconds(3000));
  v1::ShardMapRequest req;
  req.set_model(model);
  v1::ShardMapResponse resp;
  if (!v1::Admin::NewStub(ChannelTo(address))->ShardMap(&ctx, req, &resp).ok()) {
    return std::nullopt;
  }
  return resp;
}

// Which of `addresses` serves each shard, each server asked about itself ("here"); nullopt
// unless every shard is served by exactly one of them.
std::optional<std::vector<int>> OwnersByThemselves(const std::vector<std::string>& addresses,
                                                   const std::string& model, uint32_t shards) {
  std::vector<int> owner(shards, -1);
  for (size_t i = 0; i < addresses.size(); ++i) {
    std::optional<v1::ShardMapResponse> m = ShardMapAt(addresses[i], model);
    if (!m.has_value() || m->shards_size() != static_cast<int>(shards)) return std::nullopt;
    for (const v1::ShardOwner& row : m->shards()) {
      if (!row.here()) continue;
      if (row.shard() >= shards || owner[row.shard()] != -1) return std::nullopt;
      owner[row.shard()] = static_cast<int>(i);
    }
  }
  for (int o : owner) {
    if (o < 0) return std::nullopt;
  }
  return owner;
}

// Waits until each of `addresses` serves exactly shards / addresses.size() shards (and every
// shard is served); returns the owners. Dies after `timeout`.
std::vector<int> AwaitBalanced(const std::vector<std::string>& addresses,
                               const std::string& model, uint32_t shards, seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (std::optional<std::vector<int>> owner = OwnersByThemselves(addresses, model, shards)) {
      std::vector<size_t> count(addresses.size());
      for (int o : *owner) ++count[o];
      const size_t fair = shards / addresses.size();
      if (std::all_of(count.begin(), count.end(), [&](size_t c) { return c == fair; })) {
        return *owner;
      }
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  Die("model '" + model + "': the shards did not settle one server each within the timeout");
}

// A routing key of `shard`, "<prefix>-<i>" for the first i that routes there.
std::string KeyOfShard(const std::string& prefix, uint32_t shard, uint32_t shards) {
  for (int i = 0;; ++i) {
    std::string key = absl::StrCat(prefix, "-", i);
    if (ShardFor(key, shards) == shard) return key;
  }
}

std::vector<v1::IngestRequest> MakeRequests(const Env& env, const std::string& model,
                                            const std::string& key, size_t batch) {
  return MakeIngestRequests(env.events, model, key, batch);
}

// One batch on a stream of its own; true if it was acknowledged OK, else why not in *why.
bool SendOnce(v1::SAU::Stub& stub, v1::IngestRequest& req, uint64_t* next_t,
              milliseconds deadline, std::string* why = nullptr) {
  for (v1::Event& e : *req.mutable_events()) e.set_t(++*next_t);  // new t: never a duplicate
  grpc::ClientContext ctx;
  Deadline(&ctx, deadline);
  auto stream = stub.Ingest(&ctx);
  v1::IngestAck ack;
  const bool read = stream->Write(req) && stream->Read(&ack);
  stream->WritesDone();
  const grpc::Status st = stream->Finish();
  if (read && st.ok() && ack.status().code() == 0) return true;
  if (why != nullptr) {
    *why = read ? absl::StrCat("ack ", ack.status().code(), ": ", ack.status().message())
                : absl::StrCat("rpc ", static_cast<int>(st.error_code()), ": ",
                               st.error_message());
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// CPU seconds used so far by this process and by its child processes, from /proc.

struct Cpu {
  double self = 0;     // this process: the clients (and the in-process servers)
  double servers = 0;  // child streamlearn-server processes
  double nats = 0;     // child nats-server processes
  std::map<int, double> nats_node;  // by pid
};

Cpu CpuSeconds() {
  Cpu c;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  c.self = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  const pid_t me = getpid();
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    // pid (comm) state ppid ... utime stime: fields 4, 14 and 15.
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string comm = line.substr(open + 1, close - open - 1);
    std::istringstream rest(line.substr(close + 2));
    std::vector<std::string> f;
    for (std::string x; rest >> x && f.size() < 13;) f.push_back(x);
    if (f.size() < 13 || std::atoi(f[1].c_str()) != me) continue;
    const double cpu = (std::atof(f[11].c_str()) + std::atof(f[12].c_str())) / tick;
    if (comm.rfind("streamlearn", 0) == 0) c.servers += cpu;
    if (comm.rfind("nats-server", 0) == 0) {
      c.nats += cpu;
      c.nats_node[std::atoi(name.c_str())] = cpu;
    }
  }
  return c;
}

// Cores used between two samples `wall` seconds apart.
Cpu Cores(const Cpu& a, const Cpu& b, double wall) {
  Cpu c;
  c.self = (b.self - a.self) / wall;
  c.servers = (b.servers - a.servers) / wall;
  c.nats = (b.nats - a.nats) / wall;
  for (const auto& [pid, cpu] : b.nats_node) {
    auto it = a.nats_node.find(pid);
    c.nats_node[pid] = (cpu - (it == a.nats_node.end() ? 0 : it->second)) / wall;
  }
  return c;
}

// ---------------------------------------------------------------------------------------
// One streamlearn-server process of the cluster.

struct Node {
  std::string id;
  std::string address;
  std::unique_ptr<server::ServerProcess> process;
};

Node StartNode(const Env& env, const std::string& prefix, const std::string& id) {
  Node n;
  n.id = id;
  n.process = std::make_unique<server::ServerProcess>(
      std::vector<std::string>{"--cluster=" + env.nats->urls(), "--server_id=" + id,
                               kLeaseTtlFlag, absl::StrCat("--cluster_replicas=", kReplicas),
                               "--cluster_prefix=" + prefix, "--data_dir=",
                               "--audit_key_file=" + env.audit_key(),
                               "--lmu_secret_file=" + env.lmu_secret()},
      env.root + "/" + id + ".log");
  const int port = n.process->WaitForPort(milliseconds(60000));
  if (port <= 0) {
    std::string log = n.process->Log();
    if (log.size() > 4000) log = "..." + log.substr(log.size() - 4000);
    Die("server " + id + " did not start:\n" + log);
  }
  n.address = absl::StrCat("127.0.0.1:", port);
  return n;
}

// ---------------------------------------------------------------------------------------
// The fixtures of the Google Benchmark cases: all built together on first use, so that every
// case runs beside the same idle neighbours.

struct IngestTarget {
  std::unique_ptr<server::Server> server;
  std::unique_ptr<v1::SAU::Stub> stub;
  uint64_t next_t = 0;
};

struct AggShard {
  std::string key;
  int owner = -1;
  std::unique_ptr<v1::SAU::Stub> stub;
  uint64_t next_t = 0;
};

struct AggGroup {
  std::vector<Node> nodes;
  std::vector<AggShard> shards;
};

struct Fixtures {
  IngestTarget ingest[2];
  std::map<int, AggGroup> groups;  // by number of servers
  Cpu idle;                        // cores used while nothing is measured
};

Fixtures* g_fixtures = nullptr;

void SetUpIngest(Env& env, Fixtures& f) {
  for (Mode mode : {kEmbedded, kCluster}) {
    server::Server::Options options = LocalServerOptions();
    if (mode == kEmbedded) {
      options.lmu_secret = lmu::HashSecret{};
      options.data_dir = env.root + "/embedded";
      options.durability = storage::Durability::kProcess;
    } else {
      options.cluster = env.nats->urls();
      options.server_id = "ingest";
      options.cluster_prefix = "BI";
      options.cluster_replicas = kReplicas;
      options.lease_ttl = kLeaseTtl;
      options.audit_key_file = env.audit_key();
      options.lmu_secret_file = env.lmu_secret();
    }
    IngestTarget& t = f.ingest[mode];
    int port = 0;
    t.server = StartLocalServer(options, &port);
    const std::string address = absl::StrCat("127.0.0.1:", port);
    auto channel = Connect(port);
    CreateModel(address, SauSpec(kModel, 1));
    if (mode == kCluster) AwaitBalanced({address}, kModel, 1, seconds(60));
    t.stub = v1::SAU::NewStub(channel);
  }
}

void SetUpAggregate(Env& env, Fixtures& f) {
  for (int n = 1; n <= 3; ++n) {
    AggGroup& g = f.groups[n];
    const std::string prefix = absl::StrCat("A", n);
    std::vector<std::string> addresses;
    for (int i = 0; i < n; ++i) {
      g.nodes.push_back(StartNode(env, prefix, absl::StrCat("a", n, "-", i)));
      addresses.push_back(g.nodes.back().address);
    }
    CreateModel(addresses[0], SauSpec(kModel, kAggregateShards));
    const std::vector<int> owner =
        AwaitBalanced(addresses, kModel, kAggregateShards, seconds(90));
    g.shards.resize(kAggregateShards);
    for (uint32_t s = 0; s < kAggregateShards; ++s) {
      g.shards[s].key = KeyOfShard("agg", s, kAggregateShards);
      g.shards[s].owner = owner[s];
      g.shards[s].stub = v1::SAU::NewStub(ChannelTo(addresses[owner[s]]));
    }
  }
}

Fixtures& GetFixtures() {
  if (g_fixtures != nullptr) return *g_fixtures;
  Env& env = GetEnv();
  auto* f = new Fixtures;
  SetUpIngest(env, *f);
  SetUpAggregate(env, *f);
  // The neighbours' idle cost (lease renewals, balance rounds): 3 s of nothing.
  const Cpu a = CpuSeconds();
  std::this_thread::sleep_for(seconds(3));
  f->idle = Cores(a, CpuSeconds(), 3.0);
  Notes().push_back(absl::StrFormat(
      "idle background (7 cluster servers renewing, nothing sent): cores used by this process "
      "%.3f, server processes %.3f, nats-server %.3f",
      f->idle.self, f->idle.servers, f->idle.nats));
  g_fixtures = f;
  return *f;
}

void TearDown() {
  if (g_fixtures != nullptr) {
    for (IngestTarget& t : g_fixtures->ingest) {
      t.stub.reset();
      if (t.server != nullptr) t.server->Shutdown(absl::Seconds(1));
      t.server.reset();
    }
    delete g_fixtures;  // kills the server processes
    g_fixtures = nullptr;
  }
  if (g_env != nullptr) {
    g_env->client.reset();
    g_env->nats.reset();
    if (g_keep_logs) {
      std::fprintf(stderr, "server logs kept in %s\n", g_env->root.c_str());
      delete g_env;
      g_env = nullptr;
      return;
    }
    fs::remove_all(g_env->root);
    delete g_env;
    g_env = nullptr;
  }
}

void SetCoreCounters(benchmark::State& state, const Cpu& cores) {
  state.counters["cores_here"] = cores.self;
  state.counters["cores_servers"] = cores.servers;
  state.counters["cores_nats"] = cores.nats;
  double busiest = 0;
  for (const auto& [pid, c] : cores.nats_node) busiest = std::max(busiest, c);
  state.counters["cores_nats_max"] = busiest;  // the busiest node (a stream leader's)
}

// ---------------------------------------------------------------------------------------
// The cases.

void BM_Ingest(benchmark::State& state) {
  Fixtures& f = GetFixtures();
  const Mode mode = static_cast<Mode>(state.range(0));
  const size_t batch = static_cast<size_t>(state.range(1));
  std::vector<v1::IngestRequest> requests = MakeRequests(GetEnv(), kModel, "bench-key", batch);
  const size_t batches = BatchesPerIteration(mode, batch);
  IngestTarget& t = f.ingest[mode];
  uint64_t acks = 0, rejected = 0;
  const Cpu c0 = CpuSeconds();
  const auto w0 = Clock::now();
  for (auto _ : state) {
    grpc::Status s =
        PipelinedIngest(*t.stub, requests, batches, Window(batch), &t.next_t, &acks, &rejected);
    if (!s.ok()) {
      state.SkipWithError(("Ingest stream: " + s.error_message()).c_str());
      return;
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - w0).count();
  const uint64_t expected = static_cast<uint64_t>(state.iterations()) * batches;
  if (acks != expected || rejected != 0) {
    state.SkipWithError("missing or rejected acks");
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(expected * batch));
  SetCoreCounters(state, Cores(c0, CpuSeconds(), wall));
  if (mode == kCluster) {
    // What one batch's journal record weighs: the largest of the stream's last three (a
    // snapshot's manifest record may be among them).
    size_t bytes = 0;
    if (absl::StatusOr<uint64_t> last = GetEnv().client->LastSeq("BI_JOURNAL"); last.ok()) {
      for (uint64_t seq = *last; seq > 0 && seq + 3 > *last; --seq) {
        absl::StatusOr<storage::StoredMsg> m = GetEnv().client->GetMsg("BI_JOURNAL", seq);
        if (m.ok()) bytes = std::max(bytes, m->data.size());
      }
    }
    // A note, not a counter (a counter only some rows have splits the console table).
    static std::map<size_t, size_t> slot;  // batch -> line of Notes()
    if (slot.count(batch) == 0) {
      slot[batch] = Notes().size();
      Notes().emplace_back();
    }
    Notes()[slot[batch]] = absl::StrFormat(
        "cluster journal record at batch %d: %d bytes, %.0f bytes per event (stored 3 times)",
        batch, bytes, static_cast<double>(bytes) / static_cast<double>(batch));
  }
  state.SetLabel(kModeNames[mode]);
}
BENCHMARK(BM_Ingest)
    ->ArgsProduct({{kEmbedded, kCluster}, {1, 256}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_Aggregate(benchmark::State& state) {
  Fixtures& f = GetFixtures();
  const int n = static_cast<int>(state.range(0));
  AggGroup& g = f.groups.at(n);
  std::vector<std::vector<v1::IngestRequest>> requests;
  for (const AggShard& s : g.shards) {
    requests.push_back(MakeRequests(GetEnv(), kModel, s.key, kAggregateBatch));
  }
  std::vector<uint64_t> acks(g.shards.size()), rejected(g.shards.size());
  std::vector<grpc::Status> status(g.shards.size());
  const Cpu c0 = CpuSeconds();
  const auto w0 = Clock::now();
  for (auto _ : state) {
    std::vector<std::thread> streams;
    for (size_t s = 0; s < g.shards.size(); ++s) {
      streams.emplace_back([&, s] {
        status[s] = PipelinedIngest(*g.shards[s].stub, requests[s], kAggregateBatchesPerShard,
                                    Window(kAggregateBatch), &g.shards[s].next_t, &acks[s],
                                    &rejected[s]);
      });
    }
    for (std::thread& t : streams) t.join();
    for (size_t s = 0; s < g.shards.size(); ++s) {
      if (!status[s].ok()) {
        state.SkipWithError(
            absl::StrCat("shard ", s, " Ingest stream: ", status[s].error_message()).c_str());
        return;
      }
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - w0).count();
  uint64_t total = 0, bad = 0;
  for (size_t s = 0; s < g.shards.size(); ++s) {
    total += acks[s];
    bad += rejected[s];
  }
  const uint64_t expected =
      static_cast<uint64_t>(state.iterations()) * kAggregateBatchesPerShard * g.shards.size();
  if (total != expected || bad != 0) {
    state.SkipWithError("missing or rejected acks (did a lease move?)");
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(expected * kAggregateBatch));
  SetCoreCounters(state, Cores(c0, CpuSeconds(), wall));
  state.SetLabel(absl::StrCat(n, n == 1 ? " server" : " servers"));
}
BENCHMARK(BM_Aggregate)->DenseRange(1, 3)->UseRealTime()->Unit(benchmark::kMillisecond);

// One IngestSession of the C++ Client connected to one server of BM_Aggregate/3 (the first),
// with Client::Options::route = range(0). Per repetition: one Client, one session; an
// iteration sends 96 batches round-robin over the 6 shards (BM_Aggregate's keys, and their t
// counters: no event is a duplicate) and flushes.
void BM_ClientIngest(benchmark::State& state) {
  Fixtures& f = GetFixtures();
  const bool route = state.range(0) != 0;
  AggGroup& g = f.groups.at(kClientServers);
  std::vector<std::vector<v1::IngestRequest>> requests;
  for (const AggShard& s : g.shards) {
    requests.push_back(MakeRequests(GetEnv(), kModel, s.key, kAggregateBatch));
  }
  Client::Options options;
  options.route = route;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(g.nodes[0].address, options);
  if (!client.ok()) {
    state.SkipWithError(("Client::Connect: " + client.status().ToString()).c_str());
    return;
  }
  IngestSession::Options session_options;
  session_options.window = kClientWindow;
  absl::StatusOr<std::unique_ptr<IngestSession>> session =
      (*client)->OpenIngest(kModel, session_options);
  if (!session.ok()) {
    state.SkipWithError(("OpenIngest: " + session.status().ToString()).c_str());
    return;
  }
  const size_t batches = kAggregateBatchesPerShard * g.shards.size();
  const Cpu c0 = CpuSeconds();
  const auto w0 = Clock::now();
  for (auto _ : state) {
    for (size_t b = 0; b < batches; ++b) {
      AggShard& shard = g.shards[b % g.shards.size()];
      std::vector<v1::IngestRequest>& pool = requests[b % g.shards.size()];
      v1::IngestRequest& req = pool[(b / g.shards.size()) % pool.size()];
      for (v1::Event& e : *req.mutable_events()) e.set_t(++shard.next_t);
      if (absl::Status s = (*session)->Send(req); !s.ok()) {
        state.SkipWithError(("Send: " + s.ToString()).c_str());
        return;
      }
    }
    if (absl::Status s = (*session)->Flush(); !s.ok()) {
      state.SkipWithError(("Flush: " + s.ToString()).c_str());
      return;
    }
  }
  const double wall = std::chrono::duration<double>(Clock::now() - w0).count();
  const Cpu c1 = CpuSeconds();
  if (absl::Status s = (*session)->Finish(); !s.ok()) {
    state.SkipWithError(("Finish: " + s.ToString()).c_str());
    return;
  }
  const IngestStats stats = (*session)->stats();
  const uint64_t expected = static_cast<uint64_t>(state.iterations()) * batches;
  if (stats.batches_acked != expected || stats.batches_rejected != 0 ||
      stats.events_applied != expected * kAggregateBatch) {
    state.SkipWithError(absl::StrCat("acks ", stats.batches_acked, " of ", expected, ", ",
                                     stats.batches_rejected, " rejected, ", stats.duplicates,
                                     " duplicate events")
                            .c_str());
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(expected * kAggregateBatch));
  SetCoreCounters(state, Cores(c0, c1, wall));
  state.counters["streams_opened"] = static_cast<double>(stats.streams_opened);
  state.counters["resends"] = static_cast<double>(stats.resends);
  state.SetLabel(route ? "route: to the owners" : "no route: via one server");
}
BENCHMARK(BM_ClientIngest)
    ->DenseRange(0, 1)
    ->Iterations(kClientIterations)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void AddRatios(RatioReporter& rep) {
  const std::string eps = "items_per_second";
  for (const char* batch : {"1", "256"}) {
    const std::string b = batch;
    rep.AddRatio({"ingest events/s, cluster / embedded-process, batch " + b,
                  {"BM_Ingest/1/" + b, eps},
                  {"BM_Ingest/0/" + b, eps},
                  0.5,
                  b == "256" ? Target::kAtLeast : Target::kNone});
  }
  rep.AddRatio({"aggregate events/s (6 shards), 2 servers / 1",
                {"BM_Aggregate/2", eps},
                {"BM_Aggregate/1", eps},
                0,
                Target::kNone});
  rep.AddRatio({"aggregate events/s (6 shards), 3 servers / 1",
                {"BM_Aggregate/3", eps},
                {"BM_Aggregate/1", eps},
                0,
                Target::kNone});
  rep.AddRatio({"one client session's events/s (6 shards, 3 servers), routed / via one server",
                {"BM_ClientIngest/1", eps},
                {"BM_ClientIngest/0", eps},
                1.0,
                Target::kAtLeast});
}

// ---------------------------------------------------------------------------------------
// Takeover after kill -9.

double NearestRank(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// The control plane's unit costs on this NATS cluster, alone on the machine: a lease key's
// renewal (a compare-and-set publish to an R=3 key-value stream, as LeaseTable::Renew) and a
// listing of every key (an ordered consumer over the stream, as LeaseTable::Leases), over
// kProbeKeys lease-sized keys. The inputs of the estimate for large clusters in
// bench/RESULTS.md.
constexpr int kProbeKeys = 2000;

void ProbeControlPlane() {
  Env& env = GetEnv();
  storage::NatsClient& nats = *env.client;
  const std::string stream = "BENCH_PROBE_KV";
  if (absl::Status s = nats.EnsureStream({.name = stream,
                                          .subjects = {"bench.kv.>"},
                                          .replicas = kReplicas,
                                          .max_msgs_per_subject = 1});
      !s.ok()) {
    Die("probe stream: " + s.ToString());
  }
  const std::string value = R"({"owner":"server-042","epoch":17})";
  std::vector<uint64_t> rev(kProbeKeys);
  for (int i = 0; i < kProbeKeys; ++i) {
    absl::StatusOr<uint64_t> r = nats.Publish(absl::StrCat("bench.kv.lease.bWlkZWw.", i), value,
                                              storage::Expect::Empty());
    if (!r.ok()) Die("probe: " + r.status().ToString());
    rev[i] = *r;
  }
  std::vector<double> renew_ms;
  const auto pass0 = Clock::now();
  for (int i = 0; i < kProbeKeys; ++i) {
    const auto t0 = Clock::now();
    absl::StatusOr<uint64_t> r = nats.Publish(absl::StrCat("bench.kv.lease.bWlkZWw.", i), value,
                                              storage::Expect::LastSeq(rev[i]));
    if (!r.ok()) Die("probe: " + r.status().ToString());
    renew_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const double pass_s = std::chrono::duration<double>(Clock::now() - pass0).count();
  std::vector<double> list_ms;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    absl::StatusOr<uint64_t> last = nats.LastSeq(stream);
    size_t seen = 0;
    absl::Status s = last.ok() ? nats.ScanSubject(stream, "bench.kv.lease.>", 1, *last,
                                                  [&](const storage::StoredMsg&) {
                                                    ++seen;
                                                    return true;
                                                  })
                               : last.status();
    if (!s.ok() || seen != kProbeKeys) Die("probe listing: " + s.ToString());
    list_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const double list = NearestRank(list_ms, 0.5);
  const std::string line = absl::StrFormat(
      "control plane on this NATS cluster (R=%d key-value stream, %d lease-sized keys, nothing "
      "else running): a renewal (CAS publish) p50 %.2f ms, p99 %.2f ms, one pass over all %d "
      "keys %.2f s; listing all keys (stream info + ordered consumer, median of 5) %.1f ms = "
      "%.1f us per key",
      kReplicas, kProbeKeys, NearestRank(renew_ms, 0.5), NearestRank(renew_ms, 0.99),
      kProbeKeys, pass_s, list, 1000.0 * list / kProbeKeys);
  std::printf("%s\n\n", line.c_str());
  std::fflush(stdout);
  Notes().push_back(line);
  benchmark::AddCustomContext("probe_renew_p50_ms",
                              absl::StrFormat("%.2f", NearestRank(renew_ms, 0.5)));
  benchmark::AddCustomContext("probe_list_us_per_key",
                              absl::StrFormat("%.1f", 1000.0 * list / kProbeKeys));
}

void RunTakeover(int kills) {
  Env& env = GetEnv();
  const std::string model = "takeover";
  const std::string prefix = "TK";
  std::vector<Node> nodes;
  int next_id = 0;
  auto start_one = [&] { nodes.push_back(StartNode(env, prefix, absl::StrCat("t", next_id++))); };
  for (int i = 0; i < 3; ++i) start_one();
  CreateModel(nodes[0].address, SauSpec(model, kTakeoverShards));
  const std::string key = KeyOfShard("takeover", 0, kTakeoverShards);
  v1::IngestRequest req = MakeRequests(env, model, key, 1)[0];
  uint64_t next_t = 0;
  std::mt19937_64 rng(kTakeoverSeed);
  std::uniform_real_distribution<double> phase(0, absl::ToDoubleMilliseconds(kLeaseTtl));

  std::printf("\ntakeover after kill -9: 3 server processes, lease_ttl %s, %d kills\n",
              absl::FormatDuration(kLeaseTtl).c_str(), kills);
  std::printf("%5s %8s %8s %10s %12s %9s  %s\n", "kill", "victim", "entry", "new owner",
              "kill->ack ms", "attempts", "last refusal");
  std::fflush(stdout);
  std::vector<double> ms;
  int failed = 0;
  for (int k = 0; k < kills; ++k) {
    std::vector<std::string> addresses;
    for (const Node& n : nodes) addresses.push_back(n.address);
    const std::vector<int> owner = AwaitBalanced(addresses, model, kTakeoverShards, seconds(90));
    const int victim = owner[0];
    const int entry = victim == 0 ? 1 : 0;
    auto stub = v1::SAU::NewStub(ChannelTo(nodes[entry].address));
    // The entry knows the owner: a batch through it is acknowledged before the kill.
    const auto warm_deadline = Clock::now() + seconds(30);
    while (!SendOnce(*stub, req, &next_t, milliseconds(5000))) {
      if (Clock::now() > warm_deadline) Die("takeover: shard 0 not served before the kill");
      std::this_thread::sleep_for(kRetryEvery);
    }

    // At a random point of the lease's renewal and balance periods (lease_ttl / 3 each): the
    // settling above ends at a balance round of the entry, which would otherwise fix the phase.
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(phase(rng)));
    const auto killed = Clock::now();
    nodes[victim].process->Kill();
    int attempts = 0;
    std::optional<double> took;
    std::string why;
    while (Clock::now() - killed < seconds(60)) {
      const auto attempt = Clock::now();
      ++attempts;
      if (SendOnce(*stub, req, &next_t, milliseconds(5000), &why)) {
        took = std::chrono::duration<double, std::milli>(Clock::now() - killed).count();
        break;
      }
      std::this_thread::sleep_until(attempt + kRetryEvery);
    }
    if (why.size() > 80) why = why.substr(0, 77) + "...";
    // Who took it over, as the entry says now.
    std::string new_owner = "?";
    if (std::optional<v1::ShardMapResponse> m = ShardMapAt(nodes[entry].address, model);
        m.has_value() && m->shards_size() > 0) {
      new_owner = m->shards(0).owner();
    }
    if (took.has_value()) {
      ms.push_back(*took);
      std::printf("%5d %8s %8s %10s %12.0f %9d  %s\n", k + 1, nodes[victim].id.c_str(),
                  nodes[entry].id.c_str(), new_owner.c_str(), *took, attempts, why.c_str());
    } else {
      ++failed;
      std::printf("%5d %8s %8s %10s %12s %9d  %s\n", k + 1, nodes[victim].id.c_str(),
                  nodes[entry].id.c_str(), new_owner.c_str(), "none in 60 s", attempts,
                  why.c_str());
    }
    std::fflush(stdout);
    nodes.erase(nodes.begin() + victim);
    start_one();
  }
  nodes.clear();  // kills the rest

  std::string summary;
  if (ms.empty()) {
    summary = absl::StrFormat("takeover after kill -9 (lease_ttl %s): no takeover acknowledged",
                              absl::FormatDuration(kLeaseTtl));
  } else {
    const double p50 = NearestRank(ms, 0.5), p99 = NearestRank(ms, 0.99);
    const double max = *std::max_element(ms.begin(), ms.end());
    const double min = *std::min_element(ms.begin(), ms.end());
    summary = absl::StrFormat(
        "takeover after kill -9, kill to first ack through a survivor (lease_ttl %s, %d kills, "
        "%d without an ack in 60 s): p50 %.0f ms, p99 %.0f ms, max %.0f ms, min %.0f ms "
        "(nearest rank)",
        absl::FormatDuration(kLeaseTtl), kills, failed, p50, p99, max, min);
    benchmark::AddCustomContext("takeover_p50_ms", absl::StrFormat("%.0f", p50));
    benchmark::AddCustomContext("takeover_p99_ms", absl::StrFormat("%.0f", p99));
    benchmark::AddCustomContext("takeover_max_ms", absl::StrFormat("%.0f", max));
    benchmark::AddCustomContext("takeover_kills", absl::StrCat(kills));
  }
  std::printf("%s\n\n", summary.c_str());
  std::fflush(stdout);
  Notes().push_back(summary);
}

void PrintConfig(int kills) {
  const std::string config = absl::StrFormat(
      "config: Dgp kind A seed %d; SAU d=%d d_v=%d r=%d; NATS %d nodes (nats-server, "
      "JetStream), replicas %d, lease_ttl %s; BM_Ingest: 1 shard, window clamp(2048/batch, 4, "
      "64); BM_Aggregate: %d shards, batch %d, %d batches per stream per iteration; "
      "BM_ClientIngest: BM_Aggregate/%d's servers and model, one session, window %d, %d "
      "iterations of %d batches; takeover: %d kills, %d shards, retry every %d ms, random delay "
      "before each kill U[0, lease_ttl) seed %d",
      kDgpSeed, kD, kDv, kR, kNatsNodes, kReplicas, absl::FormatDuration(kLeaseTtl),
      kAggregateShards, kAggregateBatch, kAggregateBatchesPerShard, kClientServers,
      kClientWindow, kClientIterations, kAggregateShards * kAggregateBatchesPerShard, kills,
      kTakeoverShards, static_cast<int>(kRetryEvery.count()), kTakeoverSeed);
  std::printf("%s\n", config.c_str());
  std::fflush(stdout);
  benchmark::AddCustomContext("cluster_bench_config", config);
}

}  // namespace
}  // namespace streamlearn::bench

// Flags of this benchmark, taken out before Google Benchmark sees the rest:
//   --takeover_kills=N   kills of the takeover measurement (default 12; 0 = skip it)
//   --takeover_only      the takeover measurement alone
//   --keep_logs          keep the server processes' logs (the directory is printed at the end)
int main(int argc, char** argv) {
  namespace b = streamlearn::bench;
  int kills = b::kDefaultKills;
  bool takeover_only = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (i > 0 && a.rfind("--takeover_kills=", 0) == 0) {
      kills = std::atoi(a.c_str() + std::strlen("--takeover_kills="));
    } else if (i > 0 && a == "--takeover_only") {
      takeover_only = true;
    } else if (i > 0 && a == "--keep_logs") {
      b::g_keep_logs = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  // Server logs (warnings and worse) to stderr: the console table stays on stdout.
  spdlog::set_default_logger(spdlog::stderr_color_mt("cluster_bench"));
  spdlog::set_level(spdlog::level::warn);
  b::PrintConfig(kills);
  if (kills > 0) b::RunTakeover(kills);
  if (takeover_only) {
    b::TearDown();
    return 0;
  }
  b::ProbeControlPlane();
  b::RatioReporter reporter(b::ConsoleOptions());
  return b::RunRatioBenchmarks(n, args.data(), reporter, b::AddRatios, b::TearDown);
}
