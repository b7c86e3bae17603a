// NatsTestCluster: real nats-server processes (Debian's nats-server) with JetStream on
// loopback, for the cluster mode's tests: one node, or an n-node JetStream cluster (Raft)
// whose streams can have up to n replicas. A node can be killed (SIGKILL), stopped (SIGSTOP)
// and continued, and restarted with its data.
//
//   auto nats = NatsTestCluster::Start(3);            // ASSERT_TRUE(nats.ok())
//   NatsOptions o{.servers = (*nats)->urls()};        // "nats://127.0.0.1:p1,nats://..."
//   (*nats)->Kill(1);  ...  (*nats)->Restart(1);
//
// Ports are drawn at random below the kernel's ephemeral range, checked free, and the whole
// cluster starts again on other ports if a node exits at start (a port taken in between).
// Start returns once a stream with n replicas can be created (the JetStream meta group has a
// leader). Each node writes its log to <dir>/n<i>.log, which a failing test prints. Each node
// has a monitoring port, through which WaitUntilReplicasAgree reads every node's own copy of
// the streams.
#ifndef STREAMLEARN_TESTS_NATS_CLUSTER_H_
#define STREAMLEARN_TESTS_NATS_CLUSTER_H_

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "server/storage/nats_client.h"
#include "tests/spawn_util.h"

extern char** environ;

namespace streamlearn::test_util {


class NatsTestCluster {
 public:
  static constexpr const char* kServer = "/usr/sbin/nats-server";

  static absl::StatusOr<std::unique_ptr<NatsTestCluster>> Start(int nodes,
                                                                std::string dir = "") {
    if (access(kServer, X_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          kServer, " is missing: the cluster tests need Debian's nats-server "
                   "(scripts/setup.sh installs it)"));
    }
    if (dir.empty()) {
      dir = absl::StrCat(::testing::TempDir(), "/nats_", getpid(), "_", Tag());
    }
    std::unique_ptr<NatsTestCluster> c(new NatsTestCluster(nodes, dir));
    absl::Status last;
    for (int attempt = 0; attempt < 5; ++attempt) {
      last = c->StartAll();
      if (last.ok()) return c;
      c->KillAll();
    }
    return last;
  }

  ~NatsTestCluster() {
    KillAll();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string urls() const {
    std::vector<std::string> u;
    for (const Node& n : nodes_) u.push_back(absl::StrCat("nats://127.0.0.1:", n.client_port));
    return absl::StrJoin(u, ",");
  }
  std::string url(int i) const { return absl::StrCat("nats://127.0.0.1:", nodes_[i].client_port); }
  int size() const { return static_cast<int>(nodes_.size()); }

  void Kill(int i) { Signal(i, SIGKILL, /*reap=*/true); }
  // Returns once the node has stopped (see ServerProcess::Pause).
  void Pause(int i) {
    Signal(i, SIGSTOP, false);
    int status = 0;
    if (nodes_[i].pid > 0 && waitpid(nodes_[i].pid, &status, WUNTRACED) == nodes_[i].pid &&
        !WIFSTOPPED(status)) {
      nodes_[i].pid = -1;  // it had exited
    }
  }
  void Resume(int i) { Signal(i, SIGCONT, false); }
  // Starts a killed node again, with its data and ports; returns once it accepts connections.
  absl::Status Restart(int i) {
    if (nodes_[i].pid > 0) Kill(i);
    return Launch(i);
  }

  // Waits until every running node holds the same messages (count and last sequence) of each
  // stream in `streams`, as each node's monitoring endpoint reports its own copy. A node
  // restarted after a loss catches up with the others in the background; R = 3 survives the
  // loss of one node when the other two are complete copies, so a test takes down a second
  // node only after this. (nats-server 2.9, Debian 12's, can elect a restarted node still
  // catching up as the leader when the node that fed it is lost, and go on without the
  // messages it had not received: nats-server PR 7038, fixed in 2.12; docs/CLUSTER.md.)
  absl::Status WaitUntilReplicasAgree(const std::vector<std::string>& streams,
                                      absl::Duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(timeout);
    std::string last;
    for (;;) {
      last.clear();
      bool agree = true;
      for (const std::string& stream : streams) {
        std::set<std::pair<uint64_t, uint64_t>> states;  // (messages, last_seq) per node
        for (int i = 0; i < size(); ++i) {
          if (nodes_[i].pid <= 0) continue;
          std::optional<std::pair<uint64_t, uint64_t>> st = NodeStreamState(i, stream);
          absl::StrAppend(&last, stream, "@n", i, "=",
                          st ? absl::StrCat(st->first, "/", st->second) : "none", " ");
          if (!st.has_value()) agree = false;
          else states.insert(*st);
        }
        agree = agree && states.size() == 1;
      }
      if (agree) return absl::OkStatus();
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("the replicas do not agree (messages/last_seq): ", last, "\n", Logs()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // Every node's log, for a failing test's output.
  std::string Logs() const {
    std::string out;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      std::ifstream in(LogPath(static_cast<int>(i)));
      std::stringstream ss;
      ss << in.rdbuf();
      std::string text = ss.str();
      if (text.size() > 4000) text = "..." + text.substr(text.size() - 4000);
      absl::StrAppend(&out, "--- nats node ", i, " ---\n", text, "\n");
    }
    return out;
  }

 private:
  struct Node {
    int client_port = 0;
    int cluster_port = 0;
    int monitor_port = 0;
    pid_t pid = -1;
  };

  NatsTestCluster(int n, std::string dir) : nodes_(n), dir_(std::move(dir)) {}

  static std::string Tag() {
    std::random_device rd;
    return absl::StrCat(rd() % 1000000);
  }

  static bool PortFree(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    close(fd);
    return ok;
  }

  static bool Accepts(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    close(fd);
    return ok;
  }

  int PickPort(std::set<int>* taken) {
    static std::mt19937 rng(std::random_device{}());
    while (true) {
      const int p = 20000 + static_cast<int>(rng() % 12000);
      if (taken->count(p) == 0 && PortFree(p)) {
        taken->insert(p);
        return p;
      }
    }
  }

  // GET `path` from node i's monitoring port (HTTP/1.0: the body runs to the end); empty when
  // the node does not answer.
  std::string HttpGet(int i, const std::string& path) const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return "";
    timeval tv{.tv_sec = 5, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(nodes_[i].monitor_port));
    std::string out;
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      const std::string req =
          absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
      if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
        char buf[8192];
        for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
      }
    }
    close(fd);
    const size_t body = out.find("\r\n\r\n");
    return body == std::string::npos ? "" : out.substr(body + 4);
  }

  // Node i's own copy of `stream`: (messages, last_seq); nullopt if it holds none or does not
  // answer.
  std::optional<std::pair<uint64_t, uint64_t>> NodeStreamState(int i,
                                                                const std::string& stream) const {
    const nlohmann::json j = nlohmann::json::parse(
        HttpGet(i, "/jsz?accounts=true&streams=true"), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("account_details")) return std::nullopt;
    for (const nlohmann::json& acc : j["account_details"]) {
      if (!acc.is_object() || !acc.contains("stream_detail")) continue;
      for (const nlohmann::json& s : acc["stream_detail"]) {
        if (!s.is_object() || s.value("name", "") != stream || !s.contains("state")) continue;
        const nlohmann::json& st = s["state"];
        return std::make_pair(st.value("messages", uint64_t{0}), st.value("last_seq", uint64_t{0}));
      }
    }
    return std::nullopt;
  }

  std::string LogPath(int i) const { return absl::StrCat(dir_, "/n", i, ".log"); }

  absl::Status StartAll() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::filesystem::create_directories(dir_);
    std::set<int> taken;
    for (Node& n : nodes_) {
      n.client_port = PickPort(&taken);
      n.cluster_port = nodes_.size() > 1 ? PickPort(&taken) : 0;
      n.monitor_port = PickPort(&taken);
    }
    for (int i = 0; i < size(); ++i) {
      std::ofstream conf(absl::StrCat(dir_, "/n", i, ".conf"));
      conf << "server_name: n" << i << "\n"
           << "listen: 127.0.0.1:" << nodes_[i].client_port << "\n"
           << "http: 127.0.0.1:" << nodes_[i].monitor_port << "\n"
           << "max_payload: 8MB\n"
           << "jetstream {\n  store_dir: \"" << dir_ << "/n" << i << "\"\n"
           << "  max_memory_store: 64MB\n  max_file_store: 2GB\n}\n";
      if (size() > 1) {
        conf << "cluster {\n  name: streamlearn-test\n  listen: 127.0.0.1:"
             << nodes_[i].cluster_port << "\n  routes: [\n";
        for (int j = 0; j < size(); ++j) {
          if (j != i) conf << "    nats-route://127.0.0.1:" << nodes_[j].cluster_port << "\n";
        }
        conf << "  ]\n}\n";
      }
    }
    for (int i = 0; i < size(); ++i) {
      if (absl::Status s = Launch(i); !s.ok()) return s;
    }
    return WaitForJetStream();
  }

  absl::Status Launch(int i) {
    const std::string conf = absl::StrCat(dir_, "/n", i, ".conf");
    const std::string log = LogPath(i);
    // posix_spawn, not fork: the test process runs gRPC and NATS client threads.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    // Through setpriv --pdeathsig (util-linux, always there): the node dies with this process
    // even when a test is killed (a timeout) before its destructor runs.
    std::vector<std::string> args = WithParentDeathSignal({kServer, "-c", conf});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int err = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) return absl::InternalError(absl::StrCat("cannot start ", kServer, ": ", err));
    nodes_[i].pid = pid;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        nodes_[i].pid = -1;
        return absl::UnavailableError(absl::StrCat("nats node ", i, " exited at start:\n", Logs()));
      }
      if (Accepts(nodes_[i].client_port)) return absl::OkStatus();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return absl::DeadlineExceededError(absl::StrCat("nats node ", i, " did not listen:\n", Logs()));
  }

  // Until a stream with every node as a replica can be made (the meta group has a leader).
  absl::Status WaitForJetStream() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    absl::Status last;
    while (std::chrono::steady_clock::now() < deadline) {
      absl::StatusOr<std::unique_ptr<storage::NatsClient>> c = storage::NatsClient::Connect(
          {.servers = urls(), .name = "test-probe", .timeout = absl::Seconds(2)});
      if (c.ok()) {
        last = (*c)->EnsureStream(
            {.name = "PROBE", .subjects = {"probe.>"}, .replicas = size()});
        if (last.ok()) return absl::OkStatus();
      } else {
        last = c.status();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return absl::DeadlineExceededError(
        absl::StrCat("JetStream not ready: ", last.ToString(), "\n", Logs()));
  }

  void Signal(int i, int sig, bool reap) {
    if (nodes_[i].pid <= 0) return;
    kill(nodes_[i].pid, sig);
    if (reap) {
      int status = 0;
      waitpid(nodes_[i].pid, &status, 0);
      nodes_[i].pid = -1;
    }
  }

  void KillAll() {
    for (int i = 0; i < size(); ++i) {
      if (nodes_[i].pid > 0) kill(nodes_[i].pid, SIGCONT);
      Kill(i);
    }
  }

  std::vector<Node> nodes_;
  const std::string dir_;
};

}  // namespace streamlearn::test_util

#endif  // STREAMLEARN_TESTS_NATS_CLUSTER_H_
