// Test helpers for running the project's binaries as child processes and reading what they
// printed (tests/client_cli_test.cc, tests/client_lmu_cli_test.cc).
//
//   CommandResult r = RunCommand(kCli + " --server " + address + " list");
//   EXPECT_EQ(r.exit_code, 0) << Describe(r);
//   EXPECT_TRUE(Contains(r.out, "clicks")) << r.out;
#ifndef STREAMLEARN_TESTS_COMMAND_RUNNER_H_
#define STREAMLEARN_TESTS_COMMAND_RUNNER_H_

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace streamlearn::test_util {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh path under the test's temporary directory: unique in the process (a counter) and
// across processes (the pid and a random tag drawn once per process, because pids are reused
// and a path left by an earlier test process with the same pid must not be found again).
inline std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  static const std::string tag = [] {
    std::random_device rd;
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
    return std::string(buf);
  }();
  return ::testing::TempDir() + "/cli_" + std::to_string(getpid()) + "_" + tag + "_" +
         std::to_string(counter++) + "_" + name;
}

// Runs `command` through the shell, capturing stdout and stderr.
inline CommandResult RunCommand(const std::string& command) {
  const std::string out = TempPath("out"), err = TempPath("err");
  const int status = std::system((command + " > " + out + " 2> " + err).c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

inline std::string Describe(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace streamlearn::test_util

#endif  // STREAMLEARN_TESTS_COMMAND_RUNNER_H_
