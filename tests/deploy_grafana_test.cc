// The Grafana dashboard and the alert rules of deploy/ against the metrics the server really
// exports: every metric named in a dashboard query or an alert expression must be a family of
// the server's registry (histograms through _bucket, _sum or _count) after a little traffic
// and a call of each Record* method. Also: the dashboard's uid and model/shard templating,
// per-shard queries filtered by both variables, the health signals of docs/DECISIONS.md,
// "Observability", each on a panel, and the provisioning files.
#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prometheus/metric_family.h"
#include "server/metrics.h"
#include "server/server.h"
#include "tests/deploy_traffic.h"
#include "tests/deploy_util.h"
#include "tests/test_server.h"

namespace streamlearn {
namespace {

using test_util::DeployPath;
using test_util::YamlDocuments;

// ---------------------------------------------------------------------------------------
// A PromQL tokenizer just good enough to find metric names.
//
// A metric name is an identifier that is not: inside a string, a {label matcher} block or a
// [range]; a number or duration; a Grafana variable ($x, ${x}); a keyword, aggregation
// operator or set operator; a function (an identifier followed by '('); a label name in the
// list after by / without / on / ignoring / group_left / group_right. Selectors written
// only as {__name__="..."} are not seen (the deploy files do not use them).

bool IsIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool IsIdentChar(char c) { return IsIdentStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const std::set<std::string>& NotMetricKeywords() {
  static const auto* const kWords = new std::set<std::string>{
      // aggregation operators
      "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
      "bottomk", "topk", "quantile",
      // binary and set operators, modifiers, literals
      "and", "or", "unless", "atan2", "bool", "offset", "inf", "nan", "start", "end"};
  return *kWords;
}

const std::set<std::string>& LabelListKeywords() {
  static const auto* const kWords = new std::set<std::string>{
      "by", "without", "on", "ignoring", "group_left", "group_right"};
  return *kWords;
}

class PromqlScanner {
 public:
  explicit PromqlScanner(std::string_view expr) : s_(expr) {}

  std::set<std::string> MetricNames() {
    std::set<std::string> names;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i_;
      } else if (c == '"' || c == '\'' || c == '`') {
        SkipString();
      } else if (c == '{') {
        SkipGroup('{', '}');
      } else if (c == '[') {
        SkipGroup('[', ']');
      } else if (c == '$') {
        ++i_;
        if (i_ < s_.size() && s_[i_] == '{') {
          SkipGroup('{', '}');
        } else {
          while (i_ < s_.size() && IsIdentChar(s_[i_])) ++i_;
        }
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && i_ + 1 < s_.size() &&
                  std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
        SkipNumber();
      } else if (IsIdentStart(c)) {
        const size_t start = i_;
        while (i_ < s_.size() && IsIdentChar(s_[i_])) ++i_;
        const std::string word(s_.substr(start, i_ - start));
        const std::string lower = Lower(word);
        const char next = NextNonSpace();
        if (LabelListKeywords().contains(lower)) {
          if (next == '(') {
            SkipSpaces();
            SkipGroup('(', ')');
          }
        } else if (next != '(' && !NotMetricKeywords().contains(lower)) {
          names.insert(word);
        }
      } else {
        ++i_;  // operators, parentheses, commas, @
      }
    }
    return names;
  }

 private:
  void SkipSpaces() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  char NextNonSpace() const {
    size_t j = i_;
    while (j < s_.size() && std::isspace(static_cast<unsigned char>(s_[j]))) ++j;
    return j < s_.size() ? s_[j] : '\0';
  }
  void SkipString() {
    const char quote = s_[i_++];
    while (i_ < s_.size() && s_[i_] != quote) {
      if (s_[i_] == '\\' && quote != '`') ++i_;
      ++i_;
    }
    ++i_;
  }
  // REQUIRES: s_[i_] == open. Skips to after the matching close, stepping over strings.
  void SkipGroup(char open, char close) {
    int depth = 0;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '"' || c == '\'' || c == '`') {
        SkipString();
        continue;
      }
      ++i_;
      if (c == open) ++depth;
      if (c == close && --depth == 0) return;
    }
  }
  // Numbers (1, 0.5, 1e-3, 0x1f, Inf is a keyword) and durations (5m, 1h30m).
  void SkipNumber() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      const bool exponent_sign = (c == '+' || c == '-') && i_ > 0 &&
                                 (s_[i_ - 1] == 'e' || s_[i_ - 1] == 'E') && i_ + 1 < s_.size() &&
                                 std::isdigit(static_cast<unsigned char>(s_[i_ + 1]));
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || exponent_sign)) return;
      ++i_;
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

std::set<std::string> MetricNames(std::string_view expr) {
  return PromqlScanner(expr).MetricNames();
}

struct ScanCase {
  std::string expr;
  std::set<std::string> names;
};

TEST(PromqlScannerTest, FindsMetricNamesAndNothingElse) {
  const std::vector<ScanCase> cases = {
      {R"(streamlearn_sau_margin{model=~"$model",shard=~"$shard"})", {"streamlearn_sau_margin"}},
      {R"(histogram_quantile(0.99, sum by (le, method) (rate(a_bucket[$__rate_interval]))))",
       {"a_bucket"}},
      {R"(sum(rate(x_total{code!="OK"}[5m])) by (code) / ignoring(code) group_left sum(rate(x_total[5m])))",
       {"x_total"}},
      {"time() - ts_seconds offset 5m > 900", {"ts_seconds"}},
      {"a < bool b and on(model, shard) c or d unless e", {"a", "b", "c", "d", "e"}},
      {"max_over_time(m[10m:1m]) unless m2 @ end()", {"m", "m2"}},
      {R"(count_values("value", x) + topk(3, y) + quantile(0.5, z))", {"x", "y", "z"}},
      {"1e-3 * y + 2.5E+3 - .5 + 0x1f + Inf - NaN", {"y"}},
      {R"q(label_replace(y, "dst", "$1 by (x)", "src", "(.*)"))q", {"y"}},
      {"SUM BY (le) (X) > ${threshold} * $k", {"X"}},
      {"rec:rule:rate5m{job='a'} without (instance)", {"rec:rule:rate5m"}},
      {"sum without (instance) (up == 0)", {"up"}},
      {R"({__name__="hidden"})", {}},
  };
  for (const ScanCase& c : cases) {
    SCOPED_TRACE(c.expr);
    EXPECT_EQ(MetricNames(c.expr), c.names);
  }
}

// ---------------------------------------------------------------------------------------
// The families the server exports, after traffic and a call of each Record* method.

struct ExportedFamily {
  bool per_shard = false;  // its series carry the model and shard labels
};

class DeployGrafanaTest : public test_util::SharedServerSuite<DeployGrafanaTest> {
 public:
  static server::Server::Options SuiteOptions() { return server::Server::Options(); }

  static void SetUpTestSuite() {
    SharedServerSuite::SetUpTestSuite();
    ASSERT_NE(server_->port(), 0);
    absl::StatusOr<std::unique_ptr<test_util::TrafficDriver>> driver =
        test_util::TrafficDriver::Start(address_, "deploy");
    ASSERT_TRUE(driver.ok()) << driver.status();
    for (int round = 0; round < 3; ++round) {
      const absl::Status s = (*driver)->Round();
      ASSERT_TRUE(s.ok()) << s;
    }

    server::Metrics& metrics = server_->metrics();
    metrics.RecordAuditRecords("deploy", 0, 3, "00ff", 3);
    metrics.RecordSnapshot("deploy", 0, 0.02, 4096);
    metrics.RecordSnapshotFailure("deploy", 1);
    metrics.RecordStoreWrite(0.001, 4096);
    metrics.RecordRecovery("deploy", 0, 7, 0.5);
    metrics.RecordFuse("deploy", 0,
                       server::FuseHealth{.gate = 0.7, .g_min = 0.1, .g_max = 0.9, .y_err_abs = 0.2,
                                          .margin = 3, .rj_gap = 0.01, .rj_level = 0,
                                          .beta_floor = 1e-12, .lambda_star = 0, .den = 0.5,
                                          .actions = 2});
    metrics.SetLogBacklog("deploy", 0, 5);
    metrics.SetAuditArchive("deploy", 0, 65536, 300000, 327680);
    metrics.RecordAuditArchiveFailure("deploy", 0);
    metrics.RecordForward("Ingest", absl::StatusCode::kOk);
    metrics.SetOwnedShards(3);
    metrics.RecordLeaseEvent("lost");

    for (const prometheus::MetricFamily& family : metrics.registry()->Collect()) {
      ExportedFamily exported;
      for (const prometheus::ClientMetric& m : family.metric) {
        for (const prometheus::ClientMetric::Label& l : m.label) {
          exported.per_shard = exported.per_shard || l.name == "model";
        }
      }
      if (family.type == prometheus::MetricType::Histogram) {
        for (const char* suffix : {"_bucket", "_sum", "_count"}) {
          exported_->emplace(family.name + suffix, exported);
        }
      } else {
        exported_->emplace(family.name, exported);
      }
    }
  }

  static void TearDownTestSuite() {
    SharedServerSuite::TearDownTestSuite();
    exported_->clear();
  }

 protected:
  // Checks one PromQL expression: names at least one metric and only exported ones (or
  // `also_allowed`); a per-shard metric's query must filter by $model and $shard when
  // `templated`.
  void CheckExpr(const std::string& expr, const std::set<std::string>& also_allowed,
                 bool templated) {
    SCOPED_TRACE(expr);
    const std::set<std::string> names = MetricNames(expr);
    EXPECT_FALSE(names.empty()) << "names no metric";
    for (const std::string& name : names) {
      if (also_allowed.contains(name)) continue;
      auto it = exported_->find(name);
      if (it == exported_->end()) {
        ADD_FAILURE() << "'" << name << "' is not a metric the server exports";
        continue;
      }
      if (templated && it->second.per_shard) {
        EXPECT_NE(expr.find("model=~\"$model\""), std::string::npos) << name;
        EXPECT_NE(expr.find("shard=~\"$shard\""), std::string::npos) << name;
      }
    }
  }

  static nlohmann::json Dashboard() {
    std::ifstream in(DeployPath("grafana/dashboards/streamlearn-health.json"));
    EXPECT_TRUE(in.good()) << "cannot open the dashboard JSON";
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }

  // Every panel, including those nested in collapsed rows.
  static void CollectPanels(const nlohmann::json& panels, std::vector<nlohmann::json>* out) {
    for (const nlohmann::json& p : panels) {
      out->push_back(p);
      if (p.contains("panels")) CollectPanels(p.at("panels"), out);
    }
  }

  inline static auto* const exported_ = new std::map<std::string, ExportedFamily>();
};

TEST_F(DeployGrafanaTest, ServerExportsTheNewFamilies) {
  for (const char* name :
       {"streamlearn_audit_records_total", "streamlearn_audit_chain_length",
        "streamlearn_snapshots_total", "streamlearn_snapshot_failures_total",
        "streamlearn_snapshot_last_timestamp_seconds", "streamlearn_snapshot_duration_seconds",
        "streamlearn_snapshot_bytes", "streamlearn_store_write_seconds_bucket",
        "streamlearn_store_write_bytes_total", "streamlearn_recovery_replayed_batches",
        "streamlearn_recovery_seconds", "streamlearn_log_backlog_batches", "streamlearn_fuse_gate",
        "streamlearn_fuse_gate_min", "streamlearn_fuse_gate_max", "streamlearn_fuse_abs_error",
        "streamlearn_control_actions_total", "streamlearn_sau_rj_red_events_total",
        "streamlearn_audit_archived_records", "streamlearn_audit_live_records"}) {
    EXPECT_TRUE(exported_->contains(name)) << name;
  }
  EXPECT_DOUBLE_EQ(test_util::SeriesValue(*server_, "streamlearn_audit_chain_length", "deploy", 0),
                   3);
  EXPECT_DOUBLE_EQ(
      test_util::SeriesValue(*server_, "streamlearn_control_actions_total", "deploy", 0), 2);
  EXPECT_DOUBLE_EQ(test_util::SeriesValue(*server_, "streamlearn_fuse_gate", "deploy", 0), 0.7);
  // RecordFuse sets the SAU health gauges of the same shard.
  EXPECT_DOUBLE_EQ(test_util::SeriesValue(*server_, "streamlearn_sau_margin", "deploy", 0), 3);
  EXPECT_DOUBLE_EQ(test_util::SeriesValue(*server_, "streamlearn_sau_denominator", "deploy", 0),
                   0.5);
  EXPECT_DOUBLE_EQ(
      test_util::SeriesValue(*server_, "streamlearn_recovery_replayed_batches", "deploy", 0), 7);
  EXPECT_DOUBLE_EQ(test_util::SeriesValue(*server_, "streamlearn_log_backlog_batches", "deploy", 0),
                   5);
  EXPECT_DOUBLE_EQ(
      test_util::SeriesValue(*server_, "streamlearn_snapshot_failures_total", "deploy", 1), 1);
  EXPECT_DOUBLE_EQ(
      test_util::SeriesValue(*server_, "streamlearn_audit_archived_records", "deploy", 0), 65536);
  EXPECT_DOUBLE_EQ(
      test_util::SeriesValue(*server_, "streamlearn_audit_live_records", "deploy", 0), 300000);
}

TEST_F(DeployGrafanaTest, DashboardHasItsUidAndModelShardVariables) {
  const nlohmann::json dashboard = Dashboard();
  ASSERT_TRUE(dashboard.is_object());
  EXPECT_EQ(dashboard.value("uid", ""), "streamlearn-health");
  std::set<std::string> variables;
  for (const nlohmann::json& v : dashboard.at("templating").at("list")) {
    variables.insert(v.at("name").get<std::string>());
  }
  EXPECT_TRUE(variables.contains("model"));
  EXPECT_TRUE(variables.contains("shard"));
  EXPECT_TRUE(variables.contains("datasource"));
}

TEST_F(DeployGrafanaTest, EveryDashboardQueryNamesExportedMetricsFilteredByModelAndShard) {
  const nlohmann::json dashboard = Dashboard();
  ASSERT_TRUE(dashboard.is_object());
  std::vector<nlohmann::json> panels;
  CollectPanels(dashboard.at("panels"), &panels);
  std::set<int> ids;
  int queries = 0;
  for (const nlohmann::json& panel : panels) {
    SCOPED_TRACE(panel.value("title", "?"));
    EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second) << "duplicate panel id";
    if (panel.value("type", "") == "row") continue;
    ASSERT_TRUE(panel.contains("targets"));
    EXPECT_FALSE(panel.at("targets").empty());
    for (const nlohmann::json& target : panel.at("targets")) {
      CheckExpr(target.at("expr").get<std::string>(), {}, /*templated=*/true);
      ++queries;
    }
  }
  EXPECT_GT(queries, 20);

  // Variable queries: label_values(label) or label_values(selector, label).
  for (const nlohmann::json& v : dashboard.at("templating").at("list")) {
    if (v.value("type", "") != "query") continue;
    const nlohmann::json& q = v.at("query");
    const std::string query = q.is_string() ? q.get<std::string>() : q.value("query", "");
    SCOPED_TRACE(query);
    ASSERT_EQ(query.rfind("label_values(", 0), 0u);
    const size_t comma = query.rfind(',');
    if (comma == std::string::npos) continue;
    const std::string selector = query.substr(13, comma - 13);
    for (const std::string& name : MetricNames(selector)) {
      EXPECT_TRUE(exported_->contains(name)) << name;
    }
  }
}

TEST_F(DeployGrafanaTest, DashboardShowsEveryHealthSignal) {
  // docs/DECISIONS.md, "Observability": margin, RJ gap and alarms by level, beta_floor,
  // lambda_*, clip rate, denominator, gate, LMU probe maxima and delta load, rebuilds, audit
  // records, snapshot age, RPC latency; and the RPC rate by code.
  const nlohmann::json dashboard = Dashboard();
  ASSERT_TRUE(dashboard.is_object());
  std::set<std::string> used;
  std::vector<nlohmann::json> panels;
  CollectPanels(dashboard.at("panels"), &panels);
  for (const nlohmann::json& panel : panels) {
    if (!panel.contains("targets")) continue;
    for (const nlohmann::json& target : panel.at("targets")) {
      for (const std::string& n : MetricNames(target.at("expr").get<std::string>())) used.insert(n);
    }
  }
  for (const char* name :
       {"streamlearn_sau_margin", "streamlearn_sau_rj_gap", "streamlearn_sau_rj_level",
        "streamlearn_sau_alarms_total", "streamlearn_sau_rj_red_events_total",
        "streamlearn_sau_beta_floor", "streamlearn_sau_lambda_star", "streamlearn_sau_clip_rate",
        "streamlearn_sau_denominator", "streamlearn_fuse_gate", "streamlearn_fuse_gate_min",
        "streamlearn_fuse_gate_max", "streamlearn_lmu_lookup_probes_max",
        "streamlearn_lmu_insert_probes_max", "streamlearn_lmu_delta_load",
        "streamlearn_lmu_rebuilds_total", "streamlearn_lmu_ring_used", "streamlearn_lmu_stash_used",
        "streamlearn_lmu_emergency_used", "streamlearn_audit_records_total",
        "streamlearn_snapshot_last_timestamp_seconds", "streamlearn_rpc_latency_seconds_bucket",
        "streamlearn_rpc_total"}) {
    EXPECT_TRUE(used.contains(name)) << name << " is on no panel";
  }
}

TEST_F(DeployGrafanaTest, EveryAlertExpressionNamesExportedMetrics) {
  const nlohmann::json alerts = YamlDocuments(DeployPath("prometheus/alerts.yml"));
  ASSERT_TRUE(alerts.is_array() && alerts.size() == 1);
  int rules = 0;
  for (const nlohmann::json& group : alerts[0].at("groups")) {
    for (const nlohmann::json& rule : group.at("rules")) {
      SCOPED_TRACE(rule.value("alert", "?"));
      // `up` is written by Prometheus itself for every scrape target.
      CheckExpr(rule.at("expr").get<std::string>(), {"up"}, /*templated=*/false);
      ++rules;
    }
  }
  EXPECT_GT(rules, 5);
}

TEST(DeployGrafanaProvisioningTest, DatasourceAndDashboardProviderParse) {
  const nlohmann::json datasources =
      YamlDocuments(DeployPath("grafana/provisioning/datasources/streamlearn.yml"));
  ASSERT_TRUE(datasources.is_array() && datasources.size() == 1);
  EXPECT_EQ(datasources[0].value("apiVersion", 0), 1);
  const nlohmann::json& ds = datasources[0].at("datasources").at(0);
  EXPECT_EQ(ds.value("type", ""), "prometheus");
  EXPECT_FALSE(ds.value("url", "").empty());

  const nlohmann::json dashboards =
      YamlDocuments(DeployPath("grafana/provisioning/dashboards/streamlearn.yml"));
  ASSERT_TRUE(dashboards.is_array() && dashboards.size() == 1);
  EXPECT_EQ(dashboards[0].value("apiVersion", 0), 1);
  const nlohmann::json& provider = dashboards[0].at("providers").at(0);
  EXPECT_EQ(provider.value("type", ""), "file");
  EXPECT_FALSE(provider.at("options").value("path", "").empty());
}

}  // namespace
}  // namespace streamlearn
