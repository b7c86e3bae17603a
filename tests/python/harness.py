"""Helpers of the Python client's tests: real server and nats-server child processes.

Children start through `setpriv --pdeathsig KILL` (as tests/spawn_util.h does), so none
outlives a test process that is killed (a ctest timeout). Every wait is for a condition with a
generous deadline, never for a fixed time.

    args = harness.parse_args()          # --server_binary, --nats_server; the rest: unittest
    server = harness.ServerProcess(args.server_binary, ["--data_dir=" + d], log_path)
    port = server.wait_for_port()        # from its "(port N)" log line
"""

import argparse
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Callable, Dict, List, Optional, Sequence

SETPRIV = "/usr/bin/setpriv"
DEFAULT_SEED = 20261126


class Args(argparse.Namespace):
    server_binary: str
    nats_server: str
    unittest_argv: List[str]


ARGS: Optional[Args] = None


def parse_args() -> Args:
    """Reads --server_binary and --nats_server; the remaining arguments go to unittest."""
    global ARGS
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--server_binary", "--server-binary", dest="server_binary",
                        default=os.environ.get("STREAMLEARN_SERVER", ""))
    parser.add_argument("--nats_server", "--nats-server", dest="nats_server",
                        default="/usr/sbin/nats-server")
    args, rest = parser.parse_known_args(namespace=Args())
    args.unittest_argv = [sys.argv[0]] + rest
    ARGS = args
    return args


def seed() -> int:
    """STREAMLEARN_TEST_SEED, or a fixed default; printed so a failure can be replayed."""
    value = int(os.environ.get("STREAMLEARN_TEST_SEED", DEFAULT_SEED))
    print(f"STREAMLEARN_TEST_SEED={value}", flush=True)
    return value


def rng(offset: int = 0) -> random.Random:
    return random.Random(seed() + offset)


def with_parent_death_signal(argv: Sequence[str]) -> List[str]:
    if os.access(SETPRIV, os.X_OK):
        return [SETPRIV, "--pdeathsig", "KILL", "--"] + list(argv)
    return list(argv)


def wait_for(condition: Callable[[], object], what: str, timeout: float = 90.0,
             interval: float = 0.05) -> object:
    """Polls condition() until it returns a true value (returned); AssertionError naming
    `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    """A port that was free a moment ago (the caller retries if it is taken in between)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


class Process:
    """A child process writing stdout and stderr to a log file; killed by kill()."""

    def __init__(self, argv: Sequence[str], log_path: str) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.popen = subprocess.Popen(with_parent_death_signal(argv), stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def pause(self) -> None:
        """SIGSTOP: the process freezes until SIGCONT or kill(). Returns once every thread
        has stopped: kill() returns when the signal is queued, and the process serves on
        until the thread that takes it runs (milliseconds on a loaded machine)."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGSTOP)
            wait_for(self.stopped, f"pid {self.pid} to stop", 30.0, 0.001)

    def stopped(self) -> bool:
        """Whether every thread is stopped (state T), or the process is gone."""
        try:
            states = []
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                with open(f"/proc/{self.pid}/task/{tid}/stat", encoding="ascii") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            return not self.alive()
        return all(s == "T" for s in states)

    def resume(self) -> None:
        """SIGCONT: a paused process goes on."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL (and SIGCONT, should it be stopped) and reap; idempotent."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            try:
                self.popen.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.popen.wait()


class ServerProcess(Process):
    """A streamlearn-server child on 127.0.0.1 (by default on a port of its choosing, read
    from its log) with metrics off unless flags say otherwise."""

    def __init__(self, binary: str, flags: Sequence[str], log_path: str) -> None:
        argv = [binary]
        if not any(f.startswith("--listen=") for f in flags):
            argv.append("--listen=127.0.0.1:0")
        if not any(f.startswith("--metrics=") for f in flags):
            argv.append("--metrics=")
        super().__init__(argv + list(flags), log_path)

    def wait_for_port(self, timeout: float = 150.0) -> int:
        """The bound port, from the "serving gRPC on ... (port N)" line; 0 if the process
        exited first. AssertionError after `timeout`."""
        def port() -> int:
            m = re.search(r"serving gRPC on \S+ \(port (\d+)\)", self.log())
            if m:
                return int(m.group(1))
            if not self.alive():
                return -1
            return 0
        value = wait_for(port, f"the server's port (log {self.log_path})", timeout)
        return max(int(value), 0)


class NatsServer(Process):
    """One nats-server with JetStream on 127.0.0.1 (a free port, retried if taken)."""

    def __init__(self, binary: str, directory: str) -> None:
        last = ""
        for attempt in range(5):
            self.port = free_port()
            log = os.path.join(directory, f"nats-{attempt}.log")
            super().__init__([binary, "-js", "-a", "127.0.0.1", "-p", str(self.port),
                              "-sd", os.path.join(directory, "js")], log)
            ready = wait_for(lambda: (not self.alive()) or
                             ("Server is ready" in self.log() and accepts(self.port)),
                             "nats-server to accept connections", 60.0)
            if ready and self.alive():
                return
            last = self.log()
            self.kill()
        raise AssertionError(f"nats-server did not start:\n{last}")

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode("utf-8")


_SAMPLE = re.compile(r"^(\w+)(?:\{([^}]*)\})?\s+(\S+)")


def metric_samples(text: str, name: str) -> List[Dict[str, str]]:
    """The samples of metric `name` in Prometheus text: each its labels plus "value"."""
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m or m.group(1) != name:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        labels["value"] = m.group(3)
        out.append(labels)
    return out


def temp_dir(prefix: str) -> str:
    return tempfile.mkdtemp(prefix=prefix)
