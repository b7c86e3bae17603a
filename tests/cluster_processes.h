// A test fixture for the cluster mode with real processes: a NATS JetStream cluster of
// Debian's nats-server (tests/nats_cluster.h), the shared keys (`streamlearn-server
// --init_keys`), and streamlearn-server processes started on demand, each with its log in the
// test's directory.
//
//   class MyTest : public test_util::ClusterProcessTest {
//    protected:
//     MyTest() : ClusterProcessTest("mine", /*nats_nodes=*/1, {"--cluster_replicas=1"}) {}
//   };
//   TEST_F(MyTest, X) { ASSERT_NO_FATAL_FAILURE(StartNode("s1")); ... nodes_[0].address ... }
#ifndef STREAMLEARN_TESTS_CLUSTER_PROCESSES_H_
#define STREAMLEARN_TESTS_CLUSTER_PROCESSES_H_

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/command_runner.h"
#include "tests/nats_cluster.h"
#include "tests/server_process.h"
#include "tests/test_server.h"

namespace streamlearn::test_util {

// One server process of the test and its address.
struct ClusterNodeProcess {
  std::string id;
  std::unique_ptr<server::ServerProcess> process;
  std::string address;
  bool alive = false;
};

class ClusterProcessTest : public ::testing::Test {
 protected:
  // name: of the test's directory; server_flags: added to every server's (after the cluster
  // flags: --cluster, --server_id, --lease_ttl=2s, --data_dir=, the keys).
  ClusterProcessTest(std::string name, int nats_nodes, std::vector<std::string> server_flags)
      : name_(std::move(name)), nats_nodes_(nats_nodes), server_flags_(std::move(server_flags)) {}

  void SetUp() override {
    dir_ = TempPath(name_);
    std::cerr << "[" << name_ << "] logs in " << dir_ << std::endl;
    std::filesystem::create_directories(dir_);
    absl::StatusOr<std::unique_ptr<NatsTestCluster>> nats =
        NatsTestCluster::Start(nats_nodes_, dir_ + "/nats");
    ASSERT_TRUE(nats.ok()) << nats.status();
    nats_ = *std::move(nats);
    CommandResult keys =
        RunCommand(std::string(server::kServerBinary) + " --init_keys " + dir_ + "/keys");
    ASSERT_EQ(keys.exit_code, 0) << keys.err;
  }

  // Starts server `id` (with `extra` flags after the fixture's) and waits for its port.
  void StartNode(const std::string& id, const std::vector<std::string>& extra = {}) {
    ClusterNodeProcess n;
    n.id = id;
    std::vector<std::string> flags = {"--cluster=" + nats_->urls(), "--server_id=" + id,
                                      "--lease_ttl=2s", "--data_dir=",
                                      "--audit_key_file=" + dir_ + "/keys/audit.key",
                                      "--lmu_secret_file=" + dir_ + "/keys/lmu.secret"};
    flags.insert(flags.end(), server_flags_.begin(), server_flags_.end());
    flags.insert(flags.end(), extra.begin(), extra.end());
    n.process = std::make_unique<server::ServerProcess>(flags, dir_ + "/" + id + ".log");
    const int port = n.process->WaitForPort(std::chrono::milliseconds(150000));
    ASSERT_GT(port, 0) << n.process->Log();
    n.address = absl::StrCat("127.0.0.1:", port);
    n.alive = true;
    nodes_.push_back(std::move(n));
  }

  // The live node at `address`; null if none.
  ClusterNodeProcess* NodeAt(const std::string& address) {
    for (ClusterNodeProcess& n : nodes_) {
      if (n.alive && n.address == address) return &n;
    }
    return nullptr;
  }

  // The tail of every server's log, for failure messages.
  std::string Logs() {
    std::string out;
    for (const ClusterNodeProcess& n : nodes_) {
      std::string log = n.process->Log();
      if (log.size() > 6000) log = "..." + log.substr(log.size() - 6000);
      absl::StrAppend(&out, "--- server ", n.id, " ---\n", log, "\n");
    }
    return out;
  }

  const std::string name_;
  const int nats_nodes_;
  const std::vector<std::string> server_flags_;
  std::string dir_;
  std::unique_ptr<NatsTestCluster> nats_;
  std::vector<ClusterNodeProcess> nodes_;
};

}  // namespace streamlearn::test_util

#endif  // STREAMLEARN_TESTS_CLUSTER_PROCESSES_H_
