#!/usr/bin/env python3
"""Offline checks of docker-compose.yml, deploy/compose/ and deploy/Dockerfile.

There is no Docker daemon where the tests run, so nothing here starts a container: each check
reads the files, or the config as docker-compose renders it, and cross-checks them with each
other, with the repository's files and with the real server's flags.

  check_compose.py --repo ROOT config      docker-compose config -q, without and with the
                                           embedded profile; which services each starts;
                                           nats-server -t on the NATS config
  check_compose.py --repo ROOT coherence   the rendered config hangs together (below), and
                                           each server's addresses: it starts (a non-loopback
                                           --listen has TLS or --allow_plaintext), metrics on
                                           a non-loopback address for Prometheus, the
                                           healthcheck on a port that speaks plaintext
  check_compose.py --repo ROOT promtool    promtool check config on the compose Prometheus
                                           config, its rule files mapped to the repo's
  check_compose.py --repo ROOT flags --server_binary PATH
                                           every flag given to streamlearn-server (compose
                                           commands, the keys script, the Dockerfile's CMD)
                                           is one its --help lists
  check_compose.py --repo ROOT dockerfile  deploy/Dockerfile: final stage debian:12-slim, a
                                           non-root USER, a default CMD that starts (TLS or
                                           --allow_plaintext on its non-loopback --listen),
                                           a HEALTHCHECK with the CLI on the plaintext health
                                           port, ...

Prints each failed expectation and exits 1 if there is one; a missing tool is a failure.
"""
import argparse
import json
import pathlib
import re
import shutil
import sys
import tempfile
import urllib.parse

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from compose_lib import Compose, flags, host_path, mounts, run, seconds, volume_at  # noqa: E402

# The service names of the file, which the docs (docs/OPERATIONS.md) use.
NATS = ["nats-1", "nats-2", "nats-3"]
SERVERS = ["sl-1", "sl-2", "sl-3"]
KEYS, PROMETHEUS, GRAFANA, EMBEDDED = "keys", "prometheus", "grafana", "streamlearn-embedded"
DEFAULT_SERVICES = set(NATS + SERVERS + [KEYS, PROMETHEUS, GRAFANA])
SERVER_DRAIN_SECONDS = 10  # server/main.cc kDrainDeadline: the grace period must exceed it


class Checks:
    """Collects failed expectations instead of stopping at the first."""

    def __init__(self):
        self.count = 0
        self.failures = []

    def expect(self, ok, what):
        self.count += 1
        if not ok:
            self.failures.append(what)
        return ok

    def finish(self, name) -> int:
        for f in self.failures:
            print(f"FAILED: {f}")
        print(f"{name}: {self.count - len(self.failures)} of {self.count} checks passed")
        return 1 if self.failures else 0


def need_tool(checks, tool):
    return checks.expect(shutil.which(tool) is not None,
                         f"{tool} is not installed; run scripts/setup.sh")


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def host_of(address):
    return address.rsplit(":", 1)[0].strip("[]")


# The server's defaults (streamlearn-server --help): loopback-only gRPC and metrics, no health
# port.
DEFAULT_LISTEN, DEFAULT_METRICS = "127.0.0.1:50051", "127.0.0.1:9464"


def is_loopback(host):
    """server/auth/tls.cc IsLoopbackHost: localhost, 127.0.0.0/8, ::1."""
    return host in ("localhost", "::1") or re.fullmatch(r"127(\.\d{1,3}){3}", host) is not None


def truthy(value):
    return str(value).lower() in ("true", "1", "yes", "t", "y")


def check_server_addresses(where, f, checks):
    """The addresses of a server started with the flags `f` ({name: value}): it starts (the
    server refuses a non-loopback --listen without TLS unless --allow_plaintext is given), it
    is reachable from other containers, Prometheus can scrape it, and it has a health port.
    Returns (listen, metrics, health_listen, tls)."""
    listen = f.get("listen", DEFAULT_LISTEN)
    metrics = f.get("metrics", DEFAULT_METRICS)
    health = f.get("health_listen", "")
    tls = bool(f.get("tls_cert")) and bool(f.get("tls_key"))
    checks.expect(bool(f.get("tls_cert")) == bool(f.get("tls_key")),
                  f"{where}: --tls_cert and --tls_key come together")
    checks.expect(not is_loopback(host_of(listen)),
                  f"{where}: --listen {listen} is reachable from outside the container (the "
                  f"default is loopback only)")
    checks.expect(is_loopback(host_of(listen)) or tls or truthy(f.get("allow_plaintext")),
                  f"{where}: a non-loopback --listen {listen} needs --tls_cert and --tls_key or "
                  f"--allow_plaintext, else the server refuses to start")
    checks.expect("metrics" in f and not is_loopback(host_of(metrics)) and metrics != "",
                  f"{where}: --metrics is given on a non-loopback address (Prometheus scrapes "
                  f"it from another container; the default is loopback): {f.get('metrics')}")
    checks.expect(bool(health), f"{where}: --health_listen gives the healthcheck a plaintext "
                                f"health-only port")
    if health:
        checks.expect(port_of(health) not in (port_of(listen), port_of(metrics)),
                      f"{where}: --health_listen {health} has a port of its own")
    return listen, metrics, health, tls


def check_health_target(where, test, listen, health, tls, checks):
    """The CLI health command `test` asks a port of the container that answers it in
    plaintext: the health port, or the gRPC port when it serves plaintext."""
    servers = [a.split("=", 1)[1] for a in test if a.startswith("--server=")]
    if not checks.expect(len(servers) == 1, f"{where}: the healthcheck names one --server"):
        return
    target = servers[0]
    ok_ports = {port_of(health)} if health else set()
    if not tls:
        ok_ports.add(port_of(listen))
    checks.expect(is_loopback(host_of(target)) and port_of(target) in ok_ports,
                  f"{where}: the healthcheck asks {target}, not a loopback address of a "
                  f"plaintext port the server serves health on ({sorted(ok_ports)})")
    checks.expect("--tls" not in test and not any(a.startswith("--token") for a in test),
                  f"{where}: the healthcheck needs no credentials: {test}")


# --- deploy/Dockerfile ------------------------------------------------------------------------

def dockerfile_stages(path):
    """The Dockerfile's stages, each a list of (INSTRUCTION, arguments), continuations joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((word.upper(), rest.strip()))
    return stages


def exec_form(args):
    """The JSON array of an exec-form instruction (CMD, ENTRYPOINT, HEALTHCHECK's CMD)."""
    m = re.search(r"\[.*\]", args)
    return json.loads(m.group(0)) if m else None


def image_default_command(repo):
    final = dockerfile_stages(repo / "deploy" / "Dockerfile")[-1]
    cmds = [exec_form(a) for w, a in final if w == "CMD"]
    return cmds[-1] if cmds else []


def image_healthcheck(repo):
    """The exec form of the final stage's HEALTHCHECK CMD, or []."""
    final = dockerfile_stages(repo / "deploy" / "Dockerfile")[-1]
    health = [a for w, a in final if w == "HEALTHCHECK"]
    return (exec_form(health[-1]) or []) if health else []


def image_uid(repo):
    final = dockerfile_stages(repo / "deploy" / "Dockerfile")[-1]
    users = [a for w, a in final if w == "USER"]
    return users[-1].split(":")[0] if users else None


def check_dockerfile(repo, checks):
    stages = dockerfile_stages(repo / "deploy" / "Dockerfile")
    if not checks.expect(len(stages) >= 2, "deploy/Dockerfile is multi-stage"):
        return
    final = stages[-1]
    base = final[0][1].split()[0]
    checks.expect(base == "debian:12-slim", f"the final stage's base is debian:12-slim, not {base}")
    users = [a for w, a in final if w == "USER"]
    uid = users[-1].split(":")[0] if users else "root"
    checks.expect(uid not in ("root", "0"), f"the final stage runs as a non-root USER (got {uid})")

    entry = [exec_form(a) for w, a in final if w == "ENTRYPOINT"]
    checks.expect(entry and entry[-1] == ["/usr/local/bin/streamlearn-server"],
                  f"ENTRYPOINT is the server: {entry}")
    cmd = image_default_command(repo)
    cmd_flags = flags(cmd)
    checks.expect("cluster" not in cmd_flags, f"the default CMD is the embedded mode: {cmd}")
    checks.expect(cmd_flags.get("data_dir", "").startswith("/"),
                  f"the default CMD keeps its state in an absolute data_dir: {cmd}")
    listen, metrics, health_listen, tls = check_server_addresses("the default CMD", cmd_flags,
                                                                 checks)
    listen_port, metrics_port = port_of(listen), port_of(metrics)
    exposed = " ".join(a for w, a in final if w == "EXPOSE").split()
    checks.expect(str(listen_port) in exposed and str(metrics_port) in exposed,
                  f"EXPOSE names the gRPC and metrics ports {listen_port}, {metrics_port}: "
                  f"{exposed}")

    copied = " ".join(a for w, a in final if w == "COPY")
    checks.expect(re.search(r"/streamlearn(\s|$)", copied) is not None,
                  "the CLI (streamlearn) is copied into the final stage, for the healthcheck")
    health = [a for w, a in final if w == "HEALTHCHECK"]
    if checks.expect(len(health) == 1, "the final stage has one HEALTHCHECK"):
        test = exec_form(health[0]) or []
        checks.expect(test[:1] == ["/usr/local/bin/streamlearn"] and "health" in test,
                      f"the HEALTHCHECK runs the CLI's health command: {test}")
        check_health_target("the HEALTHCHECK", test, listen, health_listen, tls, checks)
        checks.expect("--service=streamlearn.ready" not in test,
                      "the HEALTHCHECK asks liveness (service \"\"), not readiness")
        checks.expect(re.search(r"--start-period=\S+", health[0]) is not None,
                      "the HEALTHCHECK has a start period (recovery takes time)")

    ignore = (repo / "deploy" / "Dockerfile.dockerignore").read_text().split()
    for entry in (".git", "build", "build-*"):
        checks.expect(entry in ignore, f"deploy/Dockerfile.dockerignore leaves out {entry}")


# --- docker-compose config -q and the profiles -----------------------------------------------

def depends_on(service):
    d = service.get("depends_on", {})
    return d if isinstance(d, dict) else {name: {} for name in d}


def check_config(repo, checks):
    if not need_tool(checks, "docker-compose"):
        return
    compose = Compose(repo)
    valid = True
    for profiles in ([], ["embedded"]):
        r = compose.run(profiles, "config", "-q")
        valid &= checks.expect(r.code == 0 and "WARNING" not in r.err,
                               f"docker-compose {' '.join('--profile ' + p for p in profiles)} "
                               f"config -q passes without warnings\n{r.describe()}")
    if not valid:
        return

    # The profiles: `docker-compose up` starts the services without one, `--profile embedded
    # up` adds the embedded server, and `up streamlearn-embedded` starts it alone (a named
    # service's profiles are enabled, and it depends on nothing). Debian's docker-compose 1.29
    # lists every service in `config --services` whatever the profiles, so the rule is
    # checked on the rendered config.
    services = compose.render(["embedded"])["services"]
    plain = {n for n, s in services.items() if not s.get("profiles")}
    checks.expect(plain == DEFAULT_SERVICES,
                  f"`docker-compose up` starts {sorted(DEFAULT_SERVICES)}, not {sorted(plain)}")
    profiled = {n: s["profiles"] for n, s in services.items() if s.get("profiles")}
    checks.expect(profiled == {EMBEDDED: ["embedded"]},
                  f"only {EMBEDDED} has a profile, `embedded`: {profiled}")
    for name in plain:
        for dep in depends_on(services[name]):
            checks.expect(dep in plain, f"{name} depends on {dep}, which has a profile")
    checks.expect(not depends_on(services.get(EMBEDDED, {})),
                  f"{EMBEDDED} depends on nothing, so that it starts alone")

    if need_tool(checks, "nats-server"):
        for name in NATS:
            nats = services[name]
            conf = host_path(nats, nats["command"][nats["command"].index("--config") + 1])
            r = run(["nats-server", "--config", str(conf), "--name", name, "-t"])
            checks.expect(r.code == 0, f"nats-server -t accepts {conf} for {name}\n{r.describe()}")


# --- the rendered config hangs together --------------------------------------------------------

def nats_conf(path):
    text = path.read_text()
    one = lambda pattern: (re.search(pattern, text, re.M) or [None, None])[1]  # noqa: E731
    return {
        "port": one(r"^port:\s*(\d+)"),
        "http_port": one(r"^http_port:\s*(\d+)"),
        "store_dir": one(r"^\s*store_dir:\s*(\S+)"),
        "cluster_port": one(r"^\s*listen:\s*[^:\s]+:(\d+)"),
        "routes": re.findall(r"nats-route://([^:\s]+):(\d+)", text),
    }


def check_nats(services, checks):
    """The three NATS nodes; returns their client port."""
    client_ports, volumes = set(), set()
    for name in NATS:
        s = services[name]
        cmd = s.get("command", [])
        checks.expect(str(s.get("image", "")).startswith("nats:2.10"), f"{name} runs nats:2.10")
        checks.expect("--name" in cmd and cmd[cmd.index("--name") + 1] == name,
                      f"{name}'s NATS server name is its service name: {cmd}")
        if not checks.expect("--config" in cmd, f"{name} is started with --config"):
            continue
        path = host_path(s, cmd[cmd.index("--config") + 1])
        if not checks.expect(path is not None and path.is_file(),
                             f"{name}'s --config is a repository file mounted into it: {path}"):
            continue
        conf = nats_conf(path)
        client_ports.add(conf["port"])
        hosts = {h for h, _ in conf["routes"]}
        checks.expect(hosts == set(NATS), f"{path.name}: the routes name {NATS}: {sorted(hosts)}")
        checks.expect({p for _, p in conf["routes"]} == {conf["cluster_port"]},
                      f"{path.name}: every route's port is the cluster listen port")
        vol = volume_at(s, conf["store_dir"] or "")
        checks.expect(vol is not None, f"{name}'s JetStream store_dir is on a named volume")
        volumes.add(vol)
        test = " ".join(s.get("healthcheck", {}).get("test", []))
        checks.expect(f":{conf['http_port']}/healthz" in test,
                      f"{name}'s healthcheck asks /healthz on the monitoring port: {test}")
    checks.expect(len(volumes) == len(NATS), "each NATS node has a volume of its own")
    checks.expect(len(client_ports) == 1, f"one client port: {client_ports}")
    return int(next(iter(client_ports))) if client_ports else 4222


def keys_dir_and_volume(services, uid, checks):
    """The directory the keys service fills and the volume mounted there."""
    s = services[KEYS]
    script = " ".join(s.get("command", []))
    m = re.search(r"streamlearn-server --init_keys (\S+)", script)
    if not checks.expect(m is not None, f"{KEYS} runs streamlearn-server --init_keys DIR"):
        return None, None
    key_dir = m.group(1)
    vol = volume_at(s, key_dir)
    checks.expect(vol is not None, f"{KEYS} writes into a named volume at {key_dir}")
    checks.expect(all(not x.read_only for x in mounts(s) if x.source == vol),
                  f"{KEYS} mounts its volume writable")
    chown = re.search(r"chown -R (\d+):(\d+) (\S+)", script)
    checks.expect(chown is not None and chown.group(1) == uid and chown.group(3) == key_dir,
                  f"{KEYS} hands {key_dir} to the image's uid {uid}")
    checks.expect(str(s.get("restart", "no")) == "no", f"{KEYS} is one-shot (restart: no)")
    return key_dir, vol


def check_servers(services, nats_port, key_dir, key_volume, checks):
    """The cluster servers; returns {service: metrics port}."""
    ids, metrics = set(), {}
    for name in SERVERS:
        s = services[name]
        f = flags(s.get("command"))
        listen_address, metrics_address, health, tls = check_server_addresses(name, f, checks)
        listen = port_of(listen_address)
        metrics[name] = port_of(metrics_address)
        urls = [urllib.parse.urlsplit(u) for u in f.get("cluster", "").split(",") if u]
        checks.expect(all(u.scheme == "nats" and u.port == nats_port for u in urls),
                      f"{name}: --cluster URLs are nats://HOST:{nats_port}")
        checks.expect({u.hostname for u in urls} == set(NATS),
                      f"{name}: --cluster names the NATS services {NATS}: {f.get('cluster')}")
        checks.expect(f.get("advertise") == f"{name}:{listen}",
                      f"{name}: --advertise is its own service and port: {f.get('advertise')}")
        checks.expect(f.get("server_id") == name, f"{name}: --server_id is its service name")
        ids.add(f.get("server_id"))
        checks.expect(f.get("data_dir") == "", f"{name}: a cluster server has --data_dir=")
        checks.expect(1 <= int(f.get("cluster_replicas", "3")) <= len(NATS),
                      f"{name}: --cluster_replicas fits the {len(NATS)} NATS nodes")
        for flag, base in (("audit_key_file", "audit.key"), ("lmu_secret_file", "lmu.secret")):
            checks.expect(f.get(flag) == f"{key_dir}/{base}",
                          f"{name}: --{flag} is {key_dir}/{base}, where {KEYS} writes it")
        checks.expect(volume_at(s, key_dir or "") == key_volume,
                      f"{name}: the keys volume {key_volume} is mounted at {key_dir}")
        deps = depends_on(s)
        checks.expect(deps.get(KEYS, {}).get("condition") == "service_completed_successfully",
                      f"{name} waits for {KEYS} to complete")
        for n in NATS:
            checks.expect(deps.get(n, {}).get("condition") == "service_healthy",
                          f"{name} waits for {n} to be healthy")
        test = s.get("healthcheck", {}).get("test", [])
        checks.expect(test[:2] == ["CMD", "streamlearn"] and "health" in test and
                      "--service=streamlearn.ready" in test,
                      f"{name}'s healthcheck asks the CLI for streamlearn.ready: {test}")
        check_health_target(name, test, listen_address, health, tls, checks)
        # Cluster servers forward to one another at --advertise: in plaintext here, so the
        # peers' port must be the plaintext one, or TLS with --tls_peer_ca.
        checks.expect(not tls or bool(f.get("tls_peer_ca")),
                      f"{name}: with TLS, --tls_peer_ca names the CA of the other servers")
        grace = seconds(s.get("stop_grace_period", "10s"))
        checks.expect(grace > SERVER_DRAIN_SECONDS,
                      f"{name}: stop_grace_period {grace}s exceeds the "
                      f"{SERVER_DRAIN_SECONDS}s drain")
        targets = {int(str(p).split(":")[-1].split("/")[0]) for p in s.get("ports", [])}
        checks.expect(targets <= {listen}, f"{name} publishes only its gRPC port: {targets}")
    checks.expect(len(ids) == len(SERVERS), f"the server ids are distinct: {ids}")
    # The audit archive: one directory on one volume, the same for every server
    # (docs/CLUSTER.md, "Audit archive").
    archives = set()
    for name in SERVERS:
        s = services[name]
        archive = flags(s.get("command")).get("audit_archive_dir", "")
        volume = next((volume_at(s, d) for d in ancestors(archive) if volume_at(s, d)), None)
        checks.expect(bool(archive) and volume is not None,
                      f"{name}: --audit_archive_dir {archive!r} lies on a named volume")
        archives.add((archive, volume))
    checks.expect(len(archives) == 1,
                  f"every server archives into the same directory of the same volume: {archives}")
    return metrics


def ancestors(path):
    """The path and the directories above it, the path first ("/a/b" -> "/a/b", "/a", "/")."""
    out = []
    while path:
        out.append(path)
        parent = path.rsplit("/", 1)[0] or "/"
        if parent == path:
            break
        path = parent
    return out


def check_published_ports(services, checks):
    host_ports = []
    for name, s in services.items():
        for p in s.get("ports", []):
            parts = str(p).split("/")[0].split(":")
            host_ports.append(parts[-2])
    checks.expect(len(host_ports) == len(set(host_ports)), f"host ports are distinct: {host_ports}")
    for port in ("50051", "9090", "3000"):
        checks.expect(port in host_ports, f"host port {port} is published")


def check_prometheus(repo, services, metrics, checks):
    s = services[PROMETHEUS]
    cfg_path = flags(s.get("command")).get("config.file", "/etc/prometheus/prometheus.yml")
    path = host_path(s, cfg_path)
    if not checks.expect(path is not None and path.is_file(),
                         f"{PROMETHEUS}: --config.file {cfg_path} is a repository file"):
        return
    cfg = yaml.safe_load(path.read_text())
    jobs = {j["job_name"]: j for j in cfg.get("scrape_configs", [])}
    targets = {t for sc in jobs.get("streamlearn", {}).get("static_configs", [])
               for t in sc.get("targets", [])}
    want = {f"{name}:{port}" for name, port in metrics.items()}
    checks.expect(targets == want,
                  f"job streamlearn (the alerts' job) scrapes {sorted(want)}: {sorted(targets)}")
    alerts = repo / "deploy" / "prometheus" / "alerts.yml"
    mapped = [host_path(s, r) for r in cfg.get("rule_files", [])]
    checks.expect(all(m is not None and m.is_file() for m in mapped),
                  f"every rule file is a repository file mounted into {PROMETHEUS}: {mapped}")
    checks.expect(any(m is not None and m.is_file() and m.samefile(alerts) for m in mapped),
                  f"{PROMETHEUS} loads deploy/prometheus/alerts.yml")


def check_grafana(repo, services, checks):
    s = services[GRAFANA]
    for m in mounts(s):
        if not m.named:
            checks.expect(pathlib.Path(m.source).exists() and
                          pathlib.Path(m.source).resolve().is_relative_to(repo),
                          f"{GRAFANA}: the mounted {m.source} exists in the repository")
    prom_port = port_of(flags(services[PROMETHEUS].get("command")).get(
        "web.listen-address", "0.0.0.0:9090"))
    provisioning = "/etc/grafana/provisioning/"
    sources = [m for m in mounts(s) if m.target.startswith(provisioning + "datasources/")]
    checks.expect(len(sources) >= 1, f"{GRAFANA} has a provisioned data source")
    for m in sources:
        for ds in yaml.safe_load(pathlib.Path(m.source).read_text()).get("datasources", []):
            url = urllib.parse.urlsplit(ds.get("url", ""))
            checks.expect(ds.get("type") == "prometheus" and url.hostname == PROMETHEUS and
                          url.port == prom_port,
                          f"{GRAFANA}: data source {ds.get('name')} is http://{PROMETHEUS}:"
                          f"{prom_port}, not {ds.get('url')}")
    providers = [m for m in mounts(s) if m.target.startswith(provisioning + "dashboards/")]
    checks.expect(len(providers) >= 1, f"{GRAFANA} has a provisioned dashboard provider")
    for m in providers:
        for p in yaml.safe_load(pathlib.Path(m.source).read_text()).get("providers", []):
            folder = host_path(s, p.get("options", {}).get("path", ""))
            found = sorted(folder.glob("*.json")) if folder and folder.is_dir() else []
            checks.expect(bool(found), f"{GRAFANA}: provider {p.get('name')}'s path shows the "
                                       f"repository's dashboards: {folder}")
            for dashboard in found:
                checks.expect(json.loads(dashboard.read_text()).get("uid"),
                              f"{dashboard} parses and has a uid")
    home = s.get("environment", {}).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
    if home:
        path = host_path(s, home)
        checks.expect(path is not None and path.is_file(), f"{GRAFANA}: the home dashboard {home} "
                                                           "is a mounted repository file")


def check_embedded(repo, services, checks):
    s = services[EMBEDDED]
    command = s.get("command") or image_default_command(repo)
    f = flags(command)
    checks.expect("cluster" not in f, f"{EMBEDDED} runs the embedded mode: {command}")
    data_dir = f.get("data_dir", "./data")
    checks.expect(data_dir.startswith("/") and volume_at(s, data_dir) is not None,
                  f"{EMBEDDED}: its data_dir {data_dir} is a named volume")
    listen, metrics, health, tls = check_server_addresses(EMBEDDED, f, checks)
    targets = {int(str(p).split(":")[-1].split("/")[0]) for p in s.get("ports", [])}
    checks.expect(port_of(listen) in targets, f"{EMBEDDED} publishes its gRPC port {listen}")
    checks.expect(port_of(metrics) in targets, f"{EMBEDDED} publishes its metrics port {metrics}")
    # Its healthcheck, or the image's, asks a port its command serves health on.
    checks.expect(s.get("healthcheck", {}).get("disable") is not True,
                  f"{EMBEDDED} keeps a healthcheck")
    test = s.get("healthcheck", {}).get("test") or image_healthcheck(repo)
    check_health_target(EMBEDDED, test, listen, health, tls, checks)


def check_coherence(repo, checks):
    if not need_tool(checks, "docker-compose"):
        return
    services = Compose(repo).render(["embedded"])["services"]
    for name in DEFAULT_SERVICES | {EMBEDDED}:
        if not checks.expect(name in services, f"the service {name} exists"):
            return
    images = {services[n].get("image") for n in SERVERS + [KEYS, EMBEDDED]}
    builds = [services[n].get("build", {}) for n in SERVERS + [KEYS, EMBEDDED]]
    checks.expect(len(images) == 1, f"every streamlearn service runs one image: {images}")
    checks.expect(all(b.get("dockerfile") == "deploy/Dockerfile" and
                      pathlib.Path(b.get("context", "")).resolve() == repo for b in builds),
                  "every streamlearn service builds deploy/Dockerfile from the repository root")
    nats_port = check_nats(services, checks)
    key_dir, key_volume = keys_dir_and_volume(services, image_uid(repo), checks)
    metrics = check_servers(services, nats_port, key_dir, key_volume, checks)
    check_published_ports(services, checks)
    check_prometheus(repo, services, metrics, checks)
    check_grafana(repo, services, checks)
    check_embedded(repo, services, checks)


# --- promtool on the compose Prometheus config --------------------------------------------------

def check_promtool(repo, checks):
    if not (need_tool(checks, "docker-compose") and need_tool(checks, "promtool")):
        return
    s = Compose(repo).render()["services"][PROMETHEUS]
    cfg_path = flags(s.get("command")).get("config.file", "/etc/prometheus/prometheus.yml")
    cfg = yaml.safe_load(host_path(s, cfg_path).read_text())
    # The rule files as the container sees them, at their repository paths.
    mapped_rules = [host_path(s, r) for r in cfg.get("rule_files", [])]
    if not checks.expect(all(mapped_rules), f"every rule file of {cfg_path} is mounted into "
                                            f"{PROMETHEUS}: {cfg.get('rule_files')}"):
        return
    cfg["rule_files"] = [str(r) for r in mapped_rules]
    with tempfile.TemporaryDirectory() as tmp:
        mapped = pathlib.Path(tmp) / "prometheus.yml"
        mapped.write_text(yaml.safe_dump(cfg))
        r = run(["promtool", "check", "config", str(mapped)])
    checks.expect(r.code == 0, f"promtool check config passes\n{r.describe()}")
    checks.expect("alerts.yml" in r.out + r.err and "SUCCESS" in r.out + r.err,
                  f"promtool checked the rule file alerts.yml with the config\n{r.describe()}")


# --- the server's flags ---------------------------------------------------------------------

def check_flags(repo, server_binary, checks):
    if not need_tool(checks, "docker-compose"):
        return
    r = run([server_binary, "--help"])
    if not checks.expect(r.code == 0, f"{server_binary} --help exits 0\n{r.describe()}"):
        return
    known = set(re.findall(r"^\s+--([a-z_]+)\s", r.out, re.M))
    checks.expect(len(known) > 10, f"--help lists the flags: {sorted(known)}")
    services = Compose(repo).render(["embedded"])["services"]
    given = {"deploy/Dockerfile CMD": image_default_command(repo)}
    for name in SERVERS + [EMBEDDED]:
        if services[name].get("command"):
            given[name] = services[name]["command"]
    # The keys script's server invocations: the words after `streamlearn-server`.
    given[KEYS] = [word for line in "\n".join(services[KEYS].get("command", [])).splitlines()
                   if "streamlearn-server" in line
                   for word in line.split("streamlearn-server", 1)[1].split()]
    for where, argv in given.items():
        names = [a[2:].split("=")[0] for a in argv if a.startswith("--")]
        checks.expect(bool(names), f"{where} gives the server flags")
        for n in names:
            checks.expect(n in known, f"{where}: --{n} is not a flag of streamlearn-server")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", required=True, help="the repository root")
    parser.add_argument("check", choices=["config", "coherence", "promtool", "flags", "dockerfile"])
    parser.add_argument("--server_binary", help="streamlearn-server, for the flags check")
    args = parser.parse_args()
    repo = pathlib.Path(args.repo).resolve()
    if args.check == "flags" and not args.server_binary:
        parser.error("flags needs --server_binary")
    checks = Checks()
    try:
        if args.check == "config":
            check_config(repo, checks)
        elif args.check == "coherence":
            check_coherence(repo, checks)
        elif args.check == "promtool":
            check_promtool(repo, checks)
        elif args.check == "flags":
            check_flags(repo, args.server_binary, checks)
        else:
            check_dockerfile(repo, checks)
    except RuntimeError as e:  # docker-compose could not render the file
        checks.expect(False, str(e))
    return checks.finish(args.check)


if __name__ == "__main__":
    sys.exit(main())
