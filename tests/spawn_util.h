// Starting child processes from tests: WithParentDeathSignal.
#ifndef STREAMLEARN_TESTS_SPAWN_UTIL_H_
#define STREAMLEARN_TESTS_SPAWN_UTIL_H_

#include <unistd.h>

#include <string>
#include <vector>

namespace streamlearn::test_util {

// args (a program and its arguments) run through `setpriv --pdeathsig KILL`, which sets the
// parent-death signal and execs the program (same pid): a child started by a test thread is
// killed when that thread's process dies, so nothing outlives a test that was killed. Without
// setpriv, args unchanged.
inline std::vector<std::string> WithParentDeathSignal(std::vector<std::string> args) {
  static const bool have = access("/usr/bin/setpriv", X_OK) == 0;
  if (!have) return args;
  args.insert(args.begin(), {"/usr/bin/setpriv", "--pdeathsig", "KILL", "--"});
  return args;
}

}  // namespace streamlearn::test_util

#endif  // STREAMLEARN_TESTS_SPAWN_UTIL_H_
