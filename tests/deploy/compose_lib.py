"""Reading docker-compose.yml as docker-compose renders it, for tests/deploy/check_compose.py.

  compose = Compose(repo)                        # runs docker-compose; no Docker daemon needed
  rendered = compose.render(profiles=["embedded"])  # `docker-compose config`, parsed
  for m in mounts(rendered["services"]["sl-1"]):   # Mount(source, target, read_only, named)
      ...

docker-compose is Debian's (1.29): `config` validates the file against the compose schema,
merges the YAML anchors, interpolates variables and makes bind-mount sources absolute; it never
contacts the daemon. It runs here with the caller's COMPOSE_*, DOCKER_* and variables of the
file removed from the environment, so that the file's own defaults are what is checked.
"""
import dataclasses
import os
import pathlib
import re
import subprocess

import yaml

# Variables the compose file interpolates (with a default); removed from the environment.
FILE_VARIABLES = ("GRAFANA_ADMIN_PASSWORD",)


@dataclasses.dataclass
class Result:
    code: int
    out: str
    err: str

    def describe(self) -> str:
        return f"exit code {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}"


def run(argv, env=None) -> Result:
    p = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    return Result(p.returncode, p.stdout, p.stderr)


class Compose:
    """docker-compose on the repository's docker-compose.yml."""

    def __init__(self, repo: pathlib.Path):
        self.repo = repo
        self.file = repo / "docker-compose.yml"
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("COMPOSE_", "DOCKER_")) and k not in FILE_VARIABLES}

    def run(self, profiles, *args) -> Result:
        argv = ["docker-compose", "--file", str(self.file), "--project-directory", str(self.repo)]
        for p in profiles:
            argv += ["--profile", p]
        return run(argv + list(args), env=self.env)

    def render(self, profiles=()) -> dict:
        """The rendered config (`docker-compose config`); raises with the output on failure."""
        r = self.run(profiles, "config")
        if r.code != 0:
            raise RuntimeError("docker-compose config failed\n" + r.describe())
        return yaml.safe_load(r.out)


@dataclasses.dataclass
class Mount:
    source: str      # an absolute host path (bind) or a volume name
    target: str      # the path in the container
    read_only: bool
    named: bool      # a named volume, not a bind mount


def mounts(service: dict) -> list:
    """The service's volumes, from the rendered short form "source:target[:mode]"."""
    out = []
    for v in service.get("volumes", []):
        if isinstance(v, dict):  # the long form, in case a later edit uses it
            out.append(Mount(v.get("source", ""), v["target"], bool(v.get("read_only")),
                             v.get("type") == "volume"))
            continue
        parts = v.split(":")
        mode = parts.pop() if parts[-1] in ("ro", "rw", "z", "Z") else "rw"
        target = parts.pop()
        source = ":".join(parts)
        out.append(Mount(source, target, "ro" in mode.split(","), not source.startswith("/")))
    return out


def host_path(service: dict, container_path: str):
    """The host file or directory a bind mount of `service` shows at `container_path`, or None."""
    best = None
    for m in mounts(service):
        if m.named:
            continue
        if container_path == m.target or container_path.startswith(m.target.rstrip("/") + "/"):
            if best is None or len(m.target) > len(best.target):
                best = m
    if best is None:
        return None
    rest = container_path[len(best.target):].lstrip("/")
    return pathlib.Path(best.source) / rest if rest else pathlib.Path(best.source)


def volume_at(service: dict, container_dir: str):
    """The named volume mounted at `container_dir` in `service`, or None."""
    for m in mounts(service):
        if m.named and m.target.rstrip("/") == container_dir.rstrip("/"):
            return m.source
    return None


def flags(argv) -> dict:
    """--name=value arguments as {name: value} (a bare --name is "true")."""
    out = {}
    for a in argv or []:
        if a.startswith("--"):
            name, _, value = a[2:].partition("=")
            out[name] = value if "=" in a else "true"
    return out


def seconds(duration) -> float:
    """A compose duration ("30s", "1m30s", "2m", or a number of seconds) in seconds."""
    if isinstance(duration, (int, float)):
        return float(duration)
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 1e-6}
    total = 0.0
    for value, unit in re.findall(r"([0-9.]+)(h|ms|us|m|s)", duration):
        total += float(value) * units[unit]
    return total
