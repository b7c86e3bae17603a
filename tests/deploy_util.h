// Test helpers for the files under deploy/ (tests/deploy_*_test.cc): their paths, the
// external tools that check them, and YAML read through python3-yaml as JSON.
//
//   const std::string rules = DeployPath("prometheus/alerts.yml");
//   ASSERT_TRUE(HaveTool("promtool")) << MissingTool("promtool");
//   nlohmann::json docs = YamlDocuments(rules);   // one element per YAML document
//
// A missing tool is a test failure, never a skip: scripts/setup.sh installs every one.
#ifndef STREAMLEARN_TESTS_DEPLOY_UTIL_H_
#define STREAMLEARN_TESTS_DEPLOY_UTIL_H_

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/command_runner.h"

namespace streamlearn::test_util {

inline std::string DeployPath(const std::string& relative) {
  return std::string(STREAMLEARN_SOURCE_DIR) + "/deploy/" + relative;
}

inline bool HaveTool(const std::string& name) {
  return RunCommand("command -v " + name).exit_code == 0;
}

inline std::string MissingTool(const std::string& what) {
  return what + " is not installed; run scripts/setup.sh (it installs the Debian packages "
                "the tests need)";
}

// The documents of the YAML file at `path` as a JSON array, parsed by python3-yaml
// (safe_load_all). A parse error is a test failure and returns null.
inline nlohmann::json YamlDocuments(const std::string& path) {
  const CommandResult r = RunCommand(
      "python3 -c 'import json, sys, yaml; "
      "json.dump(list(yaml.safe_load_all(open(sys.argv[1]))), sys.stdout)' '" +
      path + "'");
  if (r.exit_code != 0) {
    ADD_FAILURE() << "cannot parse " << path << " as YAML with python3-yaml (if python3 or "
                  << "python3-yaml is missing, run scripts/setup.sh)\n"
                  << Describe(r);
    return nullptr;
  }
  return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

}  // namespace streamlearn::test_util

#endif  // STREAMLEARN_TESTS_DEPLOY_UTIL_H_
