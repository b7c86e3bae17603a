// A real Prometheus (the `prometheus` binary of Debian's package) scraping an in-process
// streamlearn server every second while SAU and LMU batches flow, read back through its HTTP
// API: the margin and RJ series arrive with their model and shard labels and finite values,
// the snapshot age is measured in seconds, the alert rules load and evaluate, and every
// dashboard query is valid PromQL. One server and one Prometheus for the whole suite.
//
// Both listen on ports of the kernel's choice (read back from the exposer and from
// Prometheus's log), and every wait is for something that must happen (a start, a scrape, a
// rule evaluation) with a generous deadline: the suite runs beside other tests on a loaded
// 2-core machine.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/server.h"
#include "tests/command_runner.h"
#include "tests/deploy_traffic.h"
#include "tests/deploy_util.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

using std::chrono::steady_clock;

// How long to wait for Prometheus to start, to scrape what the test needs or to evaluate its
// rules, all of which it does within a few seconds on a quiet machine.
constexpr std::chrono::seconds kPatience{120};

struct HttpResponse {
  int status = 0;  // 0: no connection or no valid response
  std::string body;
};

// GET http://127.0.0.1:port<path> (HTTP/1.0, the server closes the connection), 60 s timeout.
HttpResponse HttpGet(int port, const std::string& path) {
  HttpResponse response;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return response;
  timeval timeout{.tv_sec = 60, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return response;
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port, "\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return response;
  }
  std::string raw;
  char buf[8192];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t header_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/", 0) != 0 || header_end == std::string::npos) return response;
  response.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  response.body = raw.substr(header_end + 4);
  return response;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// A prometheus child process with its own config, storage and log under `dir`.
class PrometheusProcess {
 public:
  // Starts it on a port of the kernel's choice, reads the port from its log and waits until
  // /-/ready answers 200. Errors: a message (with the log).
  std::string Start(const std::string& dir, const std::string& config) {
    dir_ = dir;
    std::filesystem::create_directories(dir + "/data");
    std::ofstream(dir + "/prometheus.yml") << config;
    const std::string log = dir + "/prometheus.log";
    const std::vector<std::string> args = {
        "prometheus",
        "--config.file=" + dir + "/prometheus.yml",
        "--storage.tsdb.path=" + dir + "/data",
        "--web.listen-address=127.0.0.1:0",
        "--log.level=info"};  // info: the "Listening on" line with the bound address
    // posix_spawn, not fork: the test process runs gRPC threads.
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int err = posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) {
      pid_ = -1;
      return absl::StrCat("cannot start prometheus: ", std::strerror(err));
    }
    const auto deadline = steady_clock::now() + kPatience;
    while (steady_clock::now() < deadline) {
      if (port_ == 0) port_ = ListeningPort();
      if (port_ != 0 && HttpGet(port_, "/-/ready").status == 200) return "";
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "prometheus exited at start-up:\n" + Log();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return absl::StrCat("prometheus not ready after ", kPatience.count(), " s (port ", port_,
                        "):\n", Log());
  }

  // SIGTERM, then SIGKILL if it has not exited within 5 s.
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    const auto deadline = steady_clock::now() + std::chrono::seconds(5);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    pid_ = -1;
  }

  // GET /api/v1/query?query=<promql>: the JSON answer, or null.
  nlohmann::json Query(const std::string& promql) const {
    const HttpResponse r = HttpGet(port_, "/api/v1/query?query=" + UrlEncode(promql));
    return nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  }
  nlohmann::json Get(const std::string& path) const {
    return nlohmann::json::parse(HttpGet(port_, path).body, nullptr, /*allow_exceptions=*/false);
  }

  std::string Log() const { return test_util::ReadFile(dir_ + "/prometheus.log"); }

  // The port of the log's `msg="Listening on" address=127.0.0.1:N` line; 0 before it.
  int ListeningPort() const {
    const std::string log = Log();
    const std::string key = "msg=\"Listening on\" address=127.0.0.1:";
    const size_t at = log.find(key);
    return at == std::string::npos ? 0 : std::atoi(log.c_str() + at + key.size());
  }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

constexpr char kModel[] = "scrape";

class DeployPrometheusScrapeTest : public test_util::SharedServerSuite<DeployPrometheusScrapeTest> {
 public:
  static server::Server::Options SuiteOptions() {
    server::Server::Options options;
    options.metrics = "127.0.0.1:0";  // the exposer's port is read back below
    return options;
  }

  static void SetUpTestSuite() {
    if (!test_util::HaveTool("prometheus")) {
      *setup_error_ = test_util::MissingTool("prometheus (Debian package prometheus)");
      return;
    }
    SharedServerSuite::SetUpTestSuite();
    metrics_port_ = server_->port() == 0 ? 0 : server_->metrics().exposer_port();
    if (metrics_port_ == 0) {
      *setup_error_ = "the streamlearn server or its metrics exposer did not start";
      return;
    }
    absl::StatusOr<std::unique_ptr<test_util::TrafficDriver>> driver =
        test_util::TrafficDriver::Start(address_, kModel);
    if (!driver.ok()) {
      *setup_error_ = driver.status().ToString();
      return;
    }
    driver_ = driver->release();
    if (absl::Status s = driver_->Round(); !s.ok()) {
      *setup_error_ = s.ToString();
      return;
    }

    *dir_ = test_util::TempPath("prometheus");
    const std::string config = absl::StrCat(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\n"
        "rule_files:\n"
        "  - ", test_util::DeployPath("prometheus/alerts.yml"), "\n"
        "scrape_configs:\n"
        "  - job_name: streamlearn\n"
        "    metrics_path: /metrics\n"
        "    static_configs:\n"
        "      - targets: ['127.0.0.1:", metrics_port_, "']\n");
    prometheus_ = new PrometheusProcess();
    *setup_error_ = prometheus_->Start(*dir_, config);
  }

  static void TearDownTestSuite() {
    if (prometheus_ != nullptr) {
      prometheus_->Stop();
      delete prometheus_;
      prometheus_ = nullptr;
      std::error_code ignored;
      std::filesystem::remove_all(*dir_, ignored);
    }
    delete driver_;
    driver_ = nullptr;
    if (server_ != nullptr) SharedServerSuite::TearDownTestSuite();
  }

 protected:
  void SetUp() override { ASSERT_TRUE(setup_error_->empty()) << *setup_error_; }

  // Runs traffic rounds (and `also` before each) until the result vector of `promql`
  // satisfies `done`, or kPatience passes. Returns the last result vector.
  static nlohmann::json QueryUntil(const std::string& promql,
                                   const std::function<bool(const nlohmann::json&)>& done,
                                   const std::function<void()>& also = [] {}) {
    nlohmann::json result = nlohmann::json::array();
    const auto deadline = steady_clock::now() + kPatience;
    while (steady_clock::now() < deadline) {
      also();
      const absl::Status round = driver_->Round();
      EXPECT_TRUE(round.ok()) << round;
      const nlohmann::json answer = prometheus_->Query(promql);
      if (answer.is_object() && answer.value("status", "") == "success") {
        result = answer.at("data").at("result");
        if (done(result)) return result;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    ADD_FAILURE() << "no complete answer to " << promql << " after " << kPatience.count()
                  << " s; last result "
                  << result.dump() << "\nprometheus log:\n" << prometheus_->Log();
    return result;
  }

  // Until there is a series for every shard the traffic writes to.
  static nlohmann::json QueryUntilEveryShard(const std::string& promql,
                                             const std::function<void()>& also = [] {}) {
    return QueryUntil(
        promql,
        [](const nlohmann::json& result) {
          std::set<std::string> shards;
          for (const nlohmann::json& series : result) {
            shards.insert(series.at("metric").value("shard", ""));
          }
          return shards.size() >= driver_->shards().size();
        },
        also);
  }

  // The value of one instant-vector sample, ["<time>", "<value>"].
  static double SampleValue(const nlohmann::json& series) {
    return std::stod(series.at("value").at(1).get<std::string>());
  }

  inline static int metrics_port_ = 0;
  inline static test_util::TrafficDriver* driver_ = nullptr;
  inline static PrometheusProcess* prometheus_ = nullptr;
  inline static auto* const dir_ = new std::string();
  inline static auto* const setup_error_ = new std::string();
};

TEST_F(DeployPrometheusScrapeTest, MarginAndRjSeriesArriveWithModelAndShardLabels) {
  std::set<std::string> expected_shards;
  for (uint32_t s : driver_->shards()) expected_shards.insert(std::to_string(s));
  for (const char* metric : {"streamlearn_sau_margin", "streamlearn_sau_rj_gap",
                             "streamlearn_sau_rj_level", "streamlearn_sau_beta_floor"}) {
    SCOPED_TRACE(metric);
    const nlohmann::json result =
        QueryUntilEveryShard(absl::StrCat(metric, "{model=\"", kModel, "\"}"));
    std::set<std::string> shards;
    for (const nlohmann::json& series : result) {
      const nlohmann::json& labels = series.at("metric");
      EXPECT_EQ(labels.value("__name__", ""), metric);
      EXPECT_EQ(labels.value("model", ""), kModel);
      EXPECT_EQ(labels.value("job", ""), "streamlearn");
      shards.insert(labels.value("shard", ""));
      const double value = SampleValue(series);
      EXPECT_TRUE(std::isfinite(value)) << series.dump();
      if (std::string(metric) == "streamlearn_sau_rj_level") {
        EXPECT_TRUE(value == 0 || value == 1 || value == 2) << value;
      }
    }
    EXPECT_EQ(shards, expected_shards);
  }
}

TEST_F(DeployPrometheusScrapeTest, RpcHistogramGivesLatencyQuantiles) {
  const nlohmann::json result = QueryUntil(
      "histogram_quantile(0.99, sum by (le, method) "
      "(rate(streamlearn_rpc_latency_seconds_bucket{method=\"Ingest\"}[10s])))",
      [](const nlohmann::json& r) { return r.size() == 1 && std::isfinite(SampleValue(r[0])); });
  // No shard label here: one series, method Ingest, a finite positive latency.
  ASSERT_EQ(result.size(), 1u) << result.dump();
  const double p99 = SampleValue(result[0]);
  EXPECT_TRUE(std::isfinite(p99) && p99 > 0) << result.dump();
}

TEST_F(DeployPrometheusScrapeTest, SnapshotAgeIsMeasuredInSeconds) {
  const nlohmann::json result = QueryUntilEveryShard(
      absl::StrCat("time() - streamlearn_snapshot_last_timestamp_seconds{model=\"", kModel, "\"}"),
      [] {
        for (uint32_t s : driver_->shards()) server_->metrics().RecordSnapshot(kModel, s, 0.01, 1000);
      });
  // Seconds, not milliseconds or minutes: a sample recorded a moment ago (the same machine's
  // clock) is a small non-negative number of seconds old. How small depends on when the
  // scrape that carried it ran, so the bound is an hour; a wrong unit is off by ~1e9 or more.
  for (const nlohmann::json& series : result) {
    const double age = SampleValue(series);
    EXPECT_GE(age, -1) << series.dump();
    EXPECT_LT(age, 3600) << series.dump();
  }
}

TEST_F(DeployPrometheusScrapeTest, AlertRulesLoadAndEvaluate) {
  // Wait for an evaluation of every group (evaluation_interval 1 s).
  const auto deadline = steady_clock::now() + kPatience;
  nlohmann::json groups;
  bool evaluated = false;
  while (!evaluated && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const nlohmann::json answer = prometheus_->Get("/api/v1/rules");
    if (!answer.is_object() || answer.value("status", "") != "success") continue;
    groups = answer.at("data").at("groups");
    evaluated = !groups.empty();
    for (const nlohmann::json& group : groups) {
      for (const nlohmann::json& rule : group.at("rules")) {
        evaluated = evaluated && rule.value("health", "") != "unknown";
      }
    }
  }
  ASSERT_TRUE(evaluated) << groups.dump() << "\n" << prometheus_->Log();
  int rules = 0;
  for (const nlohmann::json& group : groups) {
    for (const nlohmann::json& rule : group.at("rules")) {
      SCOPED_TRACE(rule.value("name", "?"));
      EXPECT_EQ(rule.value("health", ""), "ok") << rule.dump();
      ++rules;
    }
  }
  EXPECT_GE(rules, 6);
}

TEST_F(DeployPrometheusScrapeTest, EveryDashboardQueryIsValidPromql) {
  std::ifstream in(test_util::DeployPath("grafana/dashboards/streamlearn-health.json"));
  const nlohmann::json dashboard = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(dashboard.is_object());
  int queries = 0;
  std::function<void(const nlohmann::json&)> check = [&](const nlohmann::json& panels) {
    for (const nlohmann::json& panel : panels) {
      if (panel.contains("panels")) check(panel.at("panels"));
      if (!panel.contains("targets")) continue;
      for (const nlohmann::json& target : panel.at("targets")) {
        // Grafana's variables as Grafana would expand "All" and the rate interval.
        const std::string expr = absl::StrReplaceAll(
            target.at("expr").get<std::string>(),
            {{"$model", ".*"}, {"$shard", ".*"}, {"$__rate_interval", "10s"}});
        SCOPED_TRACE(expr);
        const nlohmann::json answer = prometheus_->Query(expr);
        ASSERT_TRUE(answer.is_object());
        EXPECT_EQ(answer.value("status", ""), "success") << answer.dump();
        ++queries;
      }
    }
  };
  check(dashboard.at("panels"));
  EXPECT_GT(queries, 20);
}

}  // namespace
}  // namespace streamlearn
