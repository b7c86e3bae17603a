// ServerProcess: one real streamlearn-server child process on 127.0.0.1 and a port of its
// choosing (read from its log, so a restart never races another process for a fixed port, and
// each life gets a fresh gRPC channel without reconnect backoff). The destructor kills it.
// Used by the tests that kill -9, stop and drain real servers (server_crash_test.cc,
// cluster_e2e_test.cc).
//
//   ServerProcess p({"--data_dir=" + dir}, dir + ".log");
//   int port = p.WaitForPort(std::chrono::seconds(60));   // 0: it exited; see p.Log()
//   p.Kill();                                             // SIGKILL, reaped
#ifndef STREAMLEARN_TESTS_SERVER_PROCESS_H_
#define STREAMLEARN_TESTS_SERVER_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/spawn_util.h"

extern char** environ;

namespace streamlearn::server {

inline constexpr char kServerBinary[] = STREAMLEARN_BINARY_DIR "/server/streamlearn-server";

class ServerProcess {
  using Clock = std::chrono::steady_clock;
  using milliseconds = std::chrono::milliseconds;

 public:
  // `env` entries ("NAME=value") are added to the test's environment.
  ServerProcess(const std::vector<std::string>& flags, std::string log,
                const std::vector<std::string>& env = {})
      : log_(std::move(log)) {
    std::vector<std::string> args = {kServerBinary, "--listen=127.0.0.1:0", "--metrics="};
    args.insert(args.end(), flags.begin(), flags.end());
    args = test_util::WithParentDeathSignal(std::move(args));
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // posix_spawn, not fork: the test process runs gRPC threads.
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<std::string> env_strings = env;
    std::vector<char*> envp;
    for (std::string& e : env_strings) envp.push_back(e.data());
    for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
    envp.push_back(nullptr);
    const int err = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) {
      ADD_FAILURE() << "cannot start " << kServerBinary << ": " << std::strerror(err);
      pid_ = -1;
    }
    started_ = Clock::now();
  }
  ~ServerProcess() { Kill(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The bound port, from the "serving gRPC on ... (port N)" line; 0 if the process exited or
  // did not listen within `timeout`.
  int WaitForPort(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      const std::string log = Log();
      const size_t at = log.find("(port ");
      if (at != std::string::npos && log.find(')', at) != std::string::npos) {
        return std::atoi(log.c_str() + at + 6);
      }
      if (Reaped()) return 0;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return 0;
  }

  // SIGSTOP / SIGCONT: the process freezes (its leases go unrenewed) and goes on. Pause
  // returns once the process has stopped: kill() returns when the signal is queued, and the
  // server serves on until the thread that takes it runs (milliseconds on a loaded machine).
  void Pause() {
    if (pid_ <= 0) return;
    kill(pid_, SIGSTOP);
    int status = 0;
    if (waitpid(pid_, &status, WUNTRACED) == pid_ && !WIFSTOPPED(status)) pid_ = -1;  // exited
  }
  void Resume() {
    if (pid_ > 0) kill(pid_, SIGCONT);
  }

  // SIGKILL and reap; idempotent.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    kill(pid_, SIGCONT);  // a stopped process dies of SIGKILL too; this only makes it prompt
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // SIGTERM (a graceful drain); the exit code, or -1 if it had to be killed after 30 s.
  int Terminate() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        Kill();
        return -1;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Waits for the process to end by itself; true if it died of SIGKILL (a failpoint).
  bool WaitKilledBySelf(milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    int status = 0;
    while (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
    pid_ = -1;
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }

  double SecondsSinceStart() const {
    return std::chrono::duration<double>(Clock::now() - started_).count();
  }

  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  bool Reaped() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
    pid_ = -1;
    return true;
  }

  const std::string log_;
  pid_t pid_ = -1;
  Clock::time_point started_;
};


}  // namespace streamlearn::server

#endif  // STREAMLEARN_TESTS_SERVER_PROCESS_H_
