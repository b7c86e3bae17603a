// The Prometheus files of deploy/prometheus/, checked by promtool (from Debian's prometheus
// package): both scrape configs, the alert rules, and the rules' unit tests. Also checks that
// every alert has a `for`, a severity and its annotations, and a unit test in which it fires.
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/command_runner.h"
#include "tests/deploy_util.h"

namespace streamlearn {
namespace {

using test_util::Contains;
using test_util::DeployPath;
using test_util::Describe;
using test_util::HaveTool;
using test_util::MissingTool;
using test_util::RunCommand;
using test_util::YamlDocuments;

class DeployPrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(HaveTool("promtool")) << MissingTool("promtool"); }
};

TEST_F(DeployPrometheusTest, ScrapeConfigsAreValid) {
  for (const char* config : {"prometheus/prometheus.yml", "prometheus/prometheus-k8s.yml"}) {
    SCOPED_TRACE(config);
    const test_util::CommandResult r = RunCommand("promtool check config " + DeployPath(config));
    EXPECT_EQ(r.exit_code, 0) << Describe(r);
    // The rule file is found relative to the config and checked with it.
    EXPECT_TRUE(Contains(r.out + r.err, "alerts.yml")) << Describe(r);
  }
}

TEST_F(DeployPrometheusTest, AlertRulesAreValid) {
  const test_util::CommandResult r =
      RunCommand("promtool check rules " + DeployPath("prometheus/alerts.yml"));
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
}

TEST_F(DeployPrometheusTest, RuleUnitTestsPass) {
  const test_util::CommandResult r =
      RunCommand("promtool test rules " + DeployPath("prometheus/rules_test.yml"));
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out + r.err, "SUCCESS")) << Describe(r);
}

TEST_F(DeployPrometheusTest, EveryAlertIsDescribedAndFiresInAUnitTest) {
  const nlohmann::json alerts = YamlDocuments(DeployPath("prometheus/alerts.yml"));
  const nlohmann::json tests = YamlDocuments(DeployPath("prometheus/rules_test.yml"));
  ASSERT_TRUE(alerts.is_array() && alerts.size() == 1);
  ASSERT_TRUE(tests.is_array() && tests.size() == 1);

  // Alert names for which some unit test expects it to fire, and some expects silence.
  std::set<std::string> fires, silent;
  for (const nlohmann::json& test : tests[0].at("tests")) {
    for (const nlohmann::json& check : test.at("alert_rule_test")) {
      const std::string name = check.at("alertname").get<std::string>();
      const bool expects_alerts =
          check.contains("exp_alerts") && !check.at("exp_alerts").empty();
      (expects_alerts ? fires : silent).insert(name);
    }
  }

  int count = 0;
  for (const nlohmann::json& group : alerts[0].at("groups")) {
    for (const nlohmann::json& rule : group.at("rules")) {
      ASSERT_TRUE(rule.contains("alert")) << "only alert rules expected: " << rule.dump();
      const std::string name = rule.at("alert").get<std::string>();
      SCOPED_TRACE(name);
      ++count;
      EXPECT_TRUE(rule.contains("for")) << "every alert needs a `for`";
      ASSERT_TRUE(rule.contains("labels"));
      const std::string severity = rule.at("labels").value("severity", "");
      EXPECT_TRUE(severity == "warning" || severity == "critical") << severity;
      ASSERT_TRUE(rule.contains("annotations"));
      EXPECT_FALSE(rule.at("annotations").value("summary", "").empty());
      EXPECT_FALSE(rule.at("annotations").value("description", "").empty());
      EXPECT_TRUE(fires.contains(name)) << "no unit test in which it fires";
      EXPECT_TRUE(silent.contains(name)) << "no unit test in which it stays silent";
    }
  }
  EXPECT_GE(count, 6);
}

}  // namespace
}  // namespace streamlearn
