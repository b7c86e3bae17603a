// The Kubernetes deployments of deploy/k8s/ as `kubectl kustomize` renders them (the embedded
// and the cluster overlay), and deploy/Dockerfile, parsed (python3-yaml) and checked for the
// things that break a deployment silently: names and labels that must match across objects
// (selectors, Services, headless Services, disruption budgets), probes and ports, mounts and
// the flags that point into them, the config file and the server's flags (parsed by the
// server's own config parser and checked against its --help), the NATS configuration
// (`nats-server -t`) and the names it and the servers use for each other, the security
// context, and the Prometheus discovery of the pods. Security: TLS on the gRPC port from the
// Secret streamlearn-tls, the access policy from the Secret streamlearn-access, both mounted
// read-only where the config file points, the probes on the plaintext health-only port; the
// certificate that docs/OPERATIONS.md's make-certs.sh command makes covers the Service and
// the advertised names; and a real server started with the rendered config file and those
// files serves TLS to a token of the policy only, and health on the health port.
//
// The schema of every rendered object (field names and types) is checked apart, by
// tests/deploy/k8s_schema_check.py (tests/CMakeLists.txt). `kubectl` is whichever is on PATH:
// the overlays render the same objects with the kustomize of Debian's kubectl 1.20 (v2.0.3)
// and of current ones (v5), because they use only what both accept: files under `resources`,
// the base under `bases`, `patchesStrategicMerge`. Not `patches`, `replicas` or `labels`
// (v2.0.3 has none of them), nor `commonLabels` (it rewrites the StatefulSets' immutable
// selectors) or generators (hash-suffixed names); deploy/k8s/base/kustomization.yaml.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/config.h"
#include "tests/command_runner.h"
#include "tests/deploy_util.h"
#include "tests/server_process.h"

namespace streamlearn {
namespace {

using nlohmann::json;
using test_util::DeployPath;
using test_util::Describe;
using test_util::HaveTool;
using test_util::MissingTool;
using test_util::RunCommand;
using test_util::YamlDocuments;

constexpr char kNamespace[] = "streamlearn";
constexpr char kServerBinary[] = STREAMLEARN_BINARY_DIR "/server/streamlearn-server";
constexpr char kCliBinary[] = STREAMLEARN_BINARY_DIR "/client/streamlearn";
// The image's user (deploy/Dockerfile).
constexpr int kImageUid = 10001;
// The server's drain takes up to 10 s after it has handed its shards over (server/main.cc);
// the grace period must leave room for both.
constexpr int kMinGraceSeconds = 30;
// Secrets the operator creates (docs/OPERATIONS.md, "Kubernetes"), never rendered: no key
// material is kept in the repository.
const std::set<std::string> kOperatorSecrets = {"streamlearn-keys", "streamlearn-tls",
                                                "streamlearn-access"};
// The Secrets of the gRPC port's certificate (cert-manager's layout: tls.crt, tls.key, ca.crt)
// and of the access policy (access.json).
constexpr char kTlsSecret[] = "streamlearn-tls";
constexpr char kAccessSecret[] = "streamlearn-access";

using Objects = std::vector<json>;

// The objects `kubectl kustomize deploy/k8s/overlays/<overlay>` renders; rendered once per
// process. A failure to render is a test failure and leaves the list empty.
const Objects& Rendered(const std::string& overlay) {
  static auto* const cache = new std::map<std::string, Objects>();
  if (auto it = cache->find(overlay); it != cache->end()) return it->second;
  Objects& objects = (*cache)[overlay];
  if (!HaveTool("kubectl")) {
    ADD_FAILURE() << MissingTool("kubectl");
    return objects;
  }
  const std::string dir = DeployPath("k8s/overlays/" + overlay);
  const test_util::CommandResult r = RunCommand("kubectl kustomize '" + dir + "'");
  if (r.exit_code != 0) {
    ADD_FAILURE() << "kubectl kustomize " << dir << " failed\n" << Describe(r);
    return objects;
  }
  const std::string path = test_util::TempPath(overlay + ".yaml");
  std::ofstream(path) << r.out;
  const json docs = YamlDocuments(path);
  std::remove(path.c_str());
  if (!docs.is_array()) return objects;
  for (const json& doc : docs) {
    if (!doc.is_null()) objects.push_back(doc);
  }
  return objects;
}

std::string Name(const json& object) { return object.at("metadata").value("name", ""); }

std::vector<const json*> All(const Objects& objects, const std::string& kind) {
  std::vector<const json*> out;
  for (const json& o : objects) {
    if (o.value("kind", "") == kind) out.push_back(&o);
  }
  return out;
}

// The object of that kind and name; a test failure and an empty object when there is none.
const json& Find(const Objects& objects, const std::string& kind, const std::string& name) {
  for (const json* o : All(objects, kind)) {
    if (Name(*o) == name) return *o;
  }
  ADD_FAILURE() << "no " << kind << " named '" << name << "'";
  static const json kEmpty = json::object();
  return kEmpty;
}

bool LabelsContain(const json& labels, const json& subset) {
  if (!labels.is_object() || !subset.is_object() || subset.empty()) return false;
  for (auto it = subset.begin(); it != subset.end(); ++it) {
    if (!labels.contains(it.key()) || labels.at(it.key()) != it.value()) return false;
  }
  return true;
}

const json& PodLabels(const json& sts) {
  return sts.at("spec").at("template").at("metadata").at("labels");
}
const json& PodSpec(const json& sts) { return sts.at("spec").at("template").at("spec"); }
const json& FirstContainer(const json& sts) { return PodSpec(sts).at("containers").at(0); }

// The StatefulSets whose pods carry every label of `selector`.
std::vector<const json*> Selected(const Objects& objects, const json& selector) {
  std::vector<const json*> out;
  for (const json* sts : All(objects, "StatefulSet")) {
    if (LabelsContain(PodLabels(*sts), selector)) out.push_back(sts);
  }
  return out;
}

// The number of the container port named `name` in any container of the pod; 0 when none.
int ContainerPort(const json& sts, const std::string& name) {
  for (const json& c : PodSpec(sts).at("containers")) {
    for (const json& p : c.value("ports", json::array())) {
      if (p.value("name", "") == name) return p.at("containerPort").get<int>();
    }
  }
  return 0;
}

// volume name -> mount path, of the container.
std::map<std::string, std::string> Mounts(const json& container) {
  std::map<std::string, std::string> out;
  for (const json& m : container.value("volumeMounts", json::array())) {
    out[m.at("name").get<std::string>()] = m.at("mountPath").get<std::string>();
  }
  return out;
}

// The container's args, each --name=value, by name; a test failure for any other form.
std::map<std::string, std::string> Flags(const json& container) {
  std::map<std::string, std::string> out;
  for (const json& arg : container.value("args", json::array())) {
    const std::string a = arg.get<std::string>();
    const size_t eq = a.find('=');
    if (!absl::StartsWith(a, "--") || eq == std::string::npos) {
      ADD_FAILURE() << "not --name=value: " << a;
      continue;
    }
    EXPECT_FALSE(out.contains(a.substr(2, eq - 2))) << "given twice: " << a;
    out[a.substr(2, eq - 2)] = a.substr(eq + 1);
  }
  return out;
}

// `text` with each $(VAR) replaced as Kubernetes does from the container's env, for the pod of
// ordinal 0: a field reference to the pod's name or namespace becomes that value. A reference
// the env does not define is a test failure (Kubernetes would leave it as it is).
std::string Expand(const json& sts, const json& container, std::string text) {
  std::map<std::string, std::string> values;
  for (const json& e : container.value("env", json::array())) {
    const std::string field =
        e.contains("valueFrom") ? e.at("valueFrom").at("fieldRef").value("fieldPath", "") : "";
    if (field == "metadata.name") values[e.at("name")] = Name(sts) + "-0";
    if (field == "metadata.namespace") values[e.at("name")] = kNamespace;
  }
  for (size_t at; (at = text.find("$(")) != std::string::npos;) {
    const size_t end = text.find(')', at);
    const std::string var = text.substr(at + 2, end - at - 2);
    if (end == std::string::npos || !values.contains(var)) {
      ADD_FAILURE() << "$(" << var << ") is not a field reference of the container's env";
      return text;
    }
    text.replace(at, end - at + 1, values[var]);
  }
  return text;
}

// The key of the ConfigMap (mounted from `volume`) that the file `path` names, checked to be
// mounted there; "" (and a test failure) when it is not.
std::string ConfigMapKeyAt(const Objects& objects, const json& sts, const std::string& path,
                           std::string* config_map) {
  const std::map<std::string, std::string> mounts = Mounts(FirstContainer(sts));
  for (const json& v : PodSpec(sts).value("volumes", json::array())) {
    if (!v.contains("configMap") || !mounts.contains(v.at("name"))) continue;
    const std::string dir = mounts.at(v.at("name"));
    if (!absl::StartsWith(path, dir + "/")) continue;
    *config_map = v.at("configMap").at("name").get<std::string>();
    const std::string key = path.substr(dir.size() + 1);
    EXPECT_TRUE(Find(objects, "ConfigMap", *config_map).at("data").contains(key)) << key;
    return key;
  }
  ADD_FAILURE() << path << " is not in a mounted ConfigMap";
  return "";
}

// The streamlearn config file of the StatefulSet: the JSON text of the ConfigMap key that
// --config names.
std::string ServerConfigText(const Objects& objects, const json& sts) {
  const std::map<std::string, std::string> flags = Flags(FirstContainer(sts));
  if (!flags.contains("config")) {
    ADD_FAILURE() << "no --config in the container's args";
    return "";
  }
  std::string config_map;
  const std::string key = ConfigMapKeyAt(objects, sts, flags.at("config"), &config_map);
  if (key.empty()) return "";
  return Find(objects, "ConfigMap", config_map).at("data").value(key, "");
}

// The flag names `streamlearn-server --help` lists.
std::set<std::string> ServerFlagNames() {
  const test_util::CommandResult r = RunCommand(std::string(kServerBinary) + " --help");
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  std::set<std::string> names;
  const std::regex line(R"(^  --([a-z_]+)  \(default: )");
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) names.insert(m[1]);
  }
  EXPECT_TRUE(names.contains("cluster") && names.contains("listen")) << r.out;
  return names;
}

// The flags that have a config file key, and its place (server/config.h, docs/SERVER.md).
const std::map<std::string, std::vector<std::string>>& ConfigKeys() {
  static const auto* const keys = new std::map<std::string, std::vector<std::string>>{
      {"listen", {"listen"}},
      {"metrics", {"metrics"}},
      {"data_dir", {"data_dir"}},
      {"audit_key_file", {"audit_key_file"}},
      {"lmu_secret_file", {"lmu_secret_file"}},
      {"tls_cert", {"tls_cert"}},
      {"tls_key", {"tls_key"}},
      {"tls_client_ca", {"tls_client_ca"}},
      {"tls_peer_ca", {"tls_peer_ca"}},
      {"allow_plaintext", {"allow_plaintext"}},
      {"access_file", {"access_file"}},
      {"health_listen", {"health_listen"}},
      {"cluster", {"cluster", "nats"}},
      {"server_id", {"cluster", "server_id"}},
      {"advertise", {"cluster", "advertise"}},
      {"cluster_replicas", {"cluster", "replicas"}},
      {"lease_ttl", {"cluster", "lease_ttl"}},
      {"cluster_prefix", {"cluster", "prefix"}},
      {"audit_archive_dir", {"cluster", "audit_archive_dir"}},
  };
  return *keys;
}

// The config file of the StatefulSet with the container's flags on top, as the server merges
// them (for pod 0: $(VAR) expanded); null when the file does not parse.
json MergedConfig(const Objects& objects, const json& sts) {
  json merged = json::parse(ServerConfigText(objects, sts), nullptr, false);
  if (!merged.is_object()) return nullptr;
  const json& container = FirstContainer(sts);
  for (const auto& [name, raw] : Flags(container)) {
    if (!ConfigKeys().contains(name)) continue;
    const std::string value = Expand(sts, container, raw);
    const std::vector<std::string>& place = ConfigKeys().at(name);
    json& slot = place.size() == 1 ? merged[place[0]] : merged[place[0]][place[1]];
    if (name == "cluster_replicas") {
      slot = std::stoi(value);
    } else if (name == "allow_plaintext") {
      slot = value == "true";
    } else {
      slot = value;
    }
  }
  return merged;
}

// A string setting of the merged config; "" when unset.
std::string Setting(const json& merged, const std::string& key) {
  return merged.is_object() && merged.contains(key) && merged.at(key).is_string()
             ? merged.at(key).get<std::string>()
             : "";
}

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }
int PortOf(const std::string& address) {
  return std::atoi(address.substr(address.rfind(':') + 1).c_str());
}

// The Secret volume mounted over `path` in the StatefulSet's first container: the Secret's
// name and the key that is the file at `path`. Checked: mounted read-only as a directory (no
// subPath: the kubelet then updates the files when the Secret changes), not optional (the pod
// waits for it), and the key is not left out by `items`. Empty names (and a test failure)
// when `path` is in no mounted Secret.
std::pair<std::string, std::string> SecretFileAt(const json& sts, const std::string& path) {
  const json& container = FirstContainer(sts);
  for (const json& m : container.value("volumeMounts", json::array())) {
    const std::string dir = m.at("mountPath").get<std::string>();
    if (!absl::StartsWith(path, dir + "/")) continue;
    for (const json& v : PodSpec(sts).value("volumes", json::array())) {
      if (v.at("name") != m.at("name") || !v.contains("secret")) continue;
      const json& secret = v.at("secret");
      const std::string name = secret.value("secretName", "");
      const std::string key = path.substr(dir.size() + 1);
      SCOPED_TRACE(path + " in Secret " + name);
      EXPECT_TRUE(m.value("readOnly", false)) << "the Secret is mounted writable";
      EXPECT_FALSE(m.contains("subPath")) << "a subPath mount is never updated by the kubelet";
      EXPECT_FALSE(secret.value("optional", false)) << "the pod must wait for the Secret";
      if (secret.contains("items")) {
        bool listed = false;
        for (const json& item : secret.at("items")) listed = listed || item.value("key", "") == key;
        EXPECT_TRUE(listed) << "items leaves the key out";
      }
      // Readable by the server: the pod's group (fsGroup) or everyone.
      const int mode = secret.value("defaultMode", 0644);
      EXPECT_NE(mode & 0040, 0) << "mode " << mode << " keeps the file from the pod's group";
      return {name, key};
    }
  }
  ADD_FAILURE() << path << " is not in a mounted Secret";
  return {"", ""};
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.");
}

// The lines of the shell blocks of docs/OPERATIONS.md's section `heading` that start with
// `prefix` (continuation lines joined, a trailing comment removed).
std::vector<std::string> DocCommands(const std::string& heading, const std::string& prefix) {
  const std::string doc = test_util::ReadFile(STREAMLEARN_SOURCE_DIR "/docs/OPERATIONS.md");
  EXPECT_FALSE(doc.empty());
  const size_t start = doc.find("\n## " + heading + "\n");
  if (start == std::string::npos) {
    ADD_FAILURE() << "docs/OPERATIONS.md has no section " << heading;
    return {};
  }
  const size_t end = doc.find("\n## ", start + 1);
  const std::string section = std::regex_replace(
      doc.substr(start, end == std::string::npos ? std::string::npos : end - start),
      std::regex("\\\\\n\\s*"), " ");
  std::vector<std::string> out;
  bool in_block = false;
  std::istringstream lines(section);
  for (std::string line; std::getline(lines, line);) {
    if (absl::StartsWith(line, "```")) {
      in_block = !in_block;
      continue;
    }
    if (!in_block || !absl::StartsWith(line, prefix)) continue;
    if (const size_t comment = line.find("  #"); comment != std::string::npos) {
      line = line.substr(0, comment);
    }
    out.push_back(std::string(absl::StripTrailingAsciiWhitespace(line)));
  }
  return out;
}

// key -> file of each --from-file of the documented `kubectl ... create secret generic NAME`.
std::map<std::string, std::string> DocSecretFiles(const std::string& name) {
  std::map<std::string, std::string> files;
  int commands = 0;
  for (const std::string& line : DocCommands("Kubernetes", "kubectl ")) {
    if (!absl::StrContains(line, " create secret generic " + name + " ")) continue;
    ++commands;
    const std::regex from_file(R"(--from-file=(?:([^=\s]+)=)?(\S+))");
    for (std::sregex_iterator it(line.begin(), line.end(), from_file), e; it != e; ++it) {
      const std::string file = (*it)[2];
      const std::string key =
          (*it)[1].matched ? std::string((*it)[1]) : file.substr(file.rfind('/') + 1);
      files[key] = file;
    }
  }
  EXPECT_EQ(commands, 1) << "docs/OPERATIONS.md, Kubernetes: one command creates " << name;
  return files;
}

// Runs the make-certs.sh command of docs/OPERATIONS.md ("Kubernetes") in `dir` (with the
// repository's script); false (and a test failure) if there is none or it fails.
bool MakeDocumentedCertificates(const std::string& dir) {
  const std::vector<std::string> commands = DocCommands("Kubernetes", "scripts/make-certs.sh ");
  if (commands.size() != 1) {
    ADD_FAILURE() << "docs/OPERATIONS.md, Kubernetes: want one scripts/make-certs.sh command, "
                  << "got " << commands.size();
    return false;
  }
  const test_util::CommandResult r =
      RunCommand("mkdir -p '" + dir + "' && cd '" + dir + "' && bash " STREAMLEARN_SOURCE_DIR "/" +
                 commands[0]);
  EXPECT_EQ(r.exit_code, 0) << commands[0] << "\n" << Describe(r);
  return r.exit_code == 0;
}

// A TCP port that was free a moment ago (bound to port 0 and closed).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// Every overlay, checked for what both must get right.
class DeployK8sOverlayTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ASSERT_FALSE(objects().empty()) << "the overlay did not render"; }
  const Objects& objects() const { return Rendered(GetParam()); }
  const json& Streamlearn() const { return Find(objects(), "StatefulSet", "streamlearn"); }
};

INSTANTIATE_TEST_SUITE_P(Overlays, DeployK8sOverlayTest, ::testing::Values("embedded", "cluster"),
                         [](const auto& info) { return info.param; });

TEST_P(DeployK8sOverlayTest, EveryObjectIsNamedAndInTheNamespace) {
  for (const json& object : objects()) {
    const std::string kind = object.value("kind", "");
    SCOPED_TRACE(kind + "/" + Name(object));
    EXPECT_TRUE(object.contains("apiVersion"));
    EXPECT_FALSE(Name(object).empty());
    if (kind == "Namespace") {
      EXPECT_EQ(Name(object), kNamespace);
    } else {
      EXPECT_EQ(object.at("metadata").value("namespace", ""), kNamespace);
    }
  }
  EXPECT_EQ(All(objects(), "Namespace").size(), 1u);
}

TEST_P(DeployK8sOverlayTest, NoSecretIsRendered) {
  // Keys are made and stored by the operator (kubectl create secret); the overlays refer to
  // them by name.
  for (const json* secret : All(objects(), "Secret")) ADD_FAILURE() << Name(*secret);
}

TEST_P(DeployK8sOverlayTest, EachStatefulSetSelectsItsOwnPodsOnly) {
  const std::vector<const json*> sets = All(objects(), "StatefulSet");
  ASSERT_FALSE(sets.empty());
  for (const json* sts : sets) {
    SCOPED_TRACE(Name(*sts));
    const json& selector = sts->at("spec").at("selector").at("matchLabels");
    const std::vector<const json*> selected = Selected(objects(), selector);
    ASSERT_EQ(selected.size(), 1u) << "its selector matches the pods of other StatefulSets";
    EXPECT_EQ(selected[0], sts);
  }
}

TEST_P(DeployK8sOverlayTest, ServicesSelectOneStatefulSetAndNameItsContainerPorts) {
  const std::vector<const json*> services = All(objects(), "Service");
  ASSERT_FALSE(services.empty());
  for (const json* service : services) {
    SCOPED_TRACE(Name(*service));
    const std::vector<const json*> selected =
        Selected(objects(), service->at("spec").at("selector"));
    ASSERT_EQ(selected.size(), 1u);
    for (const json& p : service->at("spec").at("ports")) {
      const std::string name = p.value("name", "");
      SCOPED_TRACE(name);
      // A named target port follows the container's number if it changes.
      EXPECT_EQ(p.value("targetPort", ""), name);
      EXPECT_EQ(p.at("port").get<int>(), ContainerPort(*selected[0], name));
    }
  }
  // Clients reach the servers through a ClusterIP Service on the gRPC port.
  const json& client = Find(objects(), "Service", "streamlearn");
  EXPECT_NE(client.at("spec").value("clusterIP", ""), "None");
  ASSERT_EQ(client.at("spec").at("ports").size(), 1u);
  EXPECT_EQ(client.at("spec").at("ports").at(0).value("name", ""), "grpc");
}

TEST_P(DeployK8sOverlayTest, EveryStatefulSetIsGovernedByAHeadlessServiceOfItsPods) {
  for (const json* sts : All(objects(), "StatefulSet")) {
    SCOPED_TRACE(Name(*sts));
    const json& service = Find(objects(), "Service", sts->at("spec").value("serviceName", ""));
    ASSERT_TRUE(service.contains("spec"));
    EXPECT_EQ(service.at("spec").value("clusterIP", ""), "None");
    // Peers reach a pod by its DNS name before it is ready (a NATS node before JetStream has a
    // quorum, a cluster server before it holds its whole share).
    EXPECT_TRUE(service.at("spec").value("publishNotReadyAddresses", false));
    EXPECT_TRUE(LabelsContain(PodLabels(*sts), service.at("spec").at("selector")));
  }
}

TEST_P(DeployK8sOverlayTest, ServerProbesUseTheGrpcHealthServicesOnThePlaintextHealthPort) {
  const json& container = FirstContainer(Streamlearn());
  const int grpc_port = ContainerPort(Streamlearn(), "grpc");
  const int health_port = ContainerPort(Streamlearn(), "health");
  EXPECT_EQ(grpc_port, 50051);
  ASSERT_NE(health_port, 0) << "no container port named health";
  EXPECT_NE(health_port, grpc_port);
  EXPECT_NE(health_port, ContainerPort(Streamlearn(), "metrics"));
  // The kubelet's gRPC probes cannot speak TLS, and the gRPC port serves TLS only: they ask
  // the server's health-only port, which listens on the pod IP (the kubelet probes it there).
  const json merged = MergedConfig(objects(), Streamlearn());
  const std::string health_listen = Setting(merged, "health_listen");
  EXPECT_EQ(PortOf(health_listen), health_port) << health_listen;
  EXPECT_FALSE(IsLoopbackHost(HostOf(health_listen))) << health_listen;
  // service "": SERVING while the server runs and is not draining; "streamlearn.ready": it
  // holds its share (cluster) or has recovered (embedded).
  for (const auto& [probe, service] : std::map<std::string, std::string>{
           {"startupProbe", ""}, {"livenessProbe", ""}, {"readinessProbe", "streamlearn.ready"}}) {
    SCOPED_TRACE(probe);
    ASSERT_TRUE(container.contains(probe));
    const json& p = container.at(probe);
    ASSERT_TRUE(p.contains("grpc"));
    EXPECT_EQ(p.at("grpc").at("port").get<int>(), health_port);
    EXPECT_EQ(p.at("grpc").value("service", ""), service);
  }
  // The health port is for the kubelet only: no Service exposes it.
  for (const json* service : All(objects(), "Service")) {
    for (const json& port : service->at("spec").at("ports")) {
      EXPECT_NE(port.value("targetPort", json()), json("health")) << Name(*service);
      EXPECT_NE(port.value("port", 0), health_port) << Name(*service);
    }
  }
}

TEST_P(DeployK8sOverlayTest, GrpcServesTlsFromTheSecretStreamlearnTls) {
  const json merged = MergedConfig(objects(), Streamlearn());
  ASSERT_TRUE(merged.is_object());
  // On every interface, with TLS; never plaintext (the server refuses a non-loopback listen
  // address without TLS unless allow_plaintext says so).
  const std::string listen = Setting(merged, "listen");
  EXPECT_EQ(HostOf(listen), "0.0.0.0");
  EXPECT_EQ(PortOf(listen), ContainerPort(Streamlearn(), "grpc"));
  EXPECT_FALSE(merged.value("allow_plaintext", false)) << "plaintext on the gRPC port";
  const std::string cert = Setting(merged, "tls_cert"), key = Setting(merged, "tls_key");
  ASSERT_FALSE(cert.empty()) << "no tls_cert";
  ASSERT_FALSE(key.empty()) << "no tls_key";
  // The files of the Secret in cert-manager's layout.
  EXPECT_EQ(SecretFileAt(Streamlearn(), cert),
            std::make_pair(std::string(kTlsSecret), std::string("tls.crt")));
  EXPECT_EQ(SecretFileAt(Streamlearn(), key),
            std::make_pair(std::string(kTlsSecret), std::string("tls.key")));
  // Client certificates, when asked for, are checked against the same Secret's CA.
  if (const std::string ca = Setting(merged, "tls_client_ca"); !ca.empty()) {
    EXPECT_EQ(SecretFileAt(Streamlearn(), ca),
              std::make_pair(std::string(kTlsSecret), std::string("ca.crt")));
  }
}

TEST_P(DeployK8sOverlayTest, AccessPolicyComesFromTheSecretStreamlearnAccess) {
  const json merged = MergedConfig(objects(), Streamlearn());
  const std::string access = Setting(merged, "access_file");
  ASSERT_FALSE(access.empty()) << "no access_file: the server would be open to every caller";
  EXPECT_EQ(SecretFileAt(Streamlearn(), access),
            std::make_pair(std::string(kAccessSecret), std::string("access.json")));
}

TEST_P(DeployK8sOverlayTest, MetricsListenOnThePodIpForPrometheus) {
  // The server's default is loopback; Prometheus scrapes the pod IP.
  const std::string metrics = Setting(MergedConfig(objects(), Streamlearn()), "metrics");
  EXPECT_EQ(HostOf(metrics), "0.0.0.0");
  EXPECT_EQ(PortOf(metrics), ContainerPort(Streamlearn(), "metrics"));
}

TEST_P(DeployK8sOverlayTest, PodsRunAsNonRootWithAReadOnlyRootAndNoCapabilities) {
  for (const json* sts : All(objects(), "StatefulSet")) {
    SCOPED_TRACE(Name(*sts));
    const json& pod = PodSpec(*sts);
    const json& security = pod.at("securityContext");
    EXPECT_TRUE(security.value("runAsNonRoot", false));
    EXPECT_GT(security.value("runAsUser", 0), 0);
    EXPECT_EQ(security.value("fsGroup", 0), security.value("runAsGroup", -1));
    EXPECT_EQ(security.value("seccompProfile", json::object()).value("type", ""), "RuntimeDefault");
    EXPECT_FALSE(pod.value("automountServiceAccountToken", true));
    for (const json& c : pod.at("containers")) {
      SCOPED_TRACE(c.value("name", ""));
      const json& s = c.at("securityContext");
      EXPECT_FALSE(s.value("allowPrivilegeEscalation", true));
      EXPECT_TRUE(s.value("readOnlyRootFilesystem", false));
      EXPECT_EQ(s.at("capabilities").at("drop"), json::array({"ALL"}));
      // Requests for the scheduler, a memory limit; no CPU limit (a throttled member of a
      // cluster stalls like a paused one).
      EXPECT_TRUE(c.at("resources").at("requests").contains("cpu"));
      EXPECT_TRUE(c.at("resources").at("requests").contains("memory"));
      EXPECT_TRUE(c.at("resources").at("limits").contains("memory"));
      EXPECT_FALSE(c.at("resources").at("limits").contains("cpu"));
    }
  }
  EXPECT_EQ(PodSpec(Streamlearn()).at("securityContext").value("runAsUser", 0), kImageUid);
  EXPECT_TRUE(absl::StrContains(test_util::ReadFile(DeployPath("Dockerfile")),
                                absl::StrCat("USER ", kImageUid, ":", kImageUid)));
}

TEST_P(DeployK8sOverlayTest, PodsSpreadOverNodesAndStopGracefully) {
  for (const json* sts : All(objects(), "StatefulSet")) {
    SCOPED_TRACE(Name(*sts));
    EXPECT_EQ(sts->at("spec").value("podManagementPolicy", ""), "Parallel");
    EXPECT_GE(PodSpec(*sts).value("terminationGracePeriodSeconds", 0), kMinGraceSeconds);
    const json& terms = PodSpec(*sts)
                            .at("affinity")
                            .at("podAntiAffinity")
                            .at("preferredDuringSchedulingIgnoredDuringExecution");
    ASSERT_EQ(terms.size(), 1u);
    const json& term = terms.at(0).at("podAffinityTerm");
    EXPECT_EQ(term.value("topologyKey", ""), "kubernetes.io/hostname");
    EXPECT_EQ(Selected(objects(), term.at("labelSelector").at("matchLabels")),
              std::vector<const json*>{sts});
  }
}

TEST_P(DeployK8sOverlayTest, MountsNameVolumesAndTheConfigFileIsOneTheServerAccepts) {
  for (const json* sts : All(objects(), "StatefulSet")) {
    SCOPED_TRACE(Name(*sts));
    std::set<std::string> volumes;
    for (const json& v : PodSpec(*sts).value("volumes", json::array())) {
      const std::string name = v.at("name").get<std::string>();
      volumes.insert(name);
      if (v.contains("configMap")) {
        Find(objects(), "ConfigMap", v.at("configMap").at("name").get<std::string>());
      }
      if (v.contains("secret") && !v.at("secret").value("optional", false)) {
        EXPECT_TRUE(kOperatorSecrets.contains(v.at("secret").value("secretName", "")))
            << "volume " << name << ": a Secret that is neither rendered nor documented";
      }
    }
    for (const json& c : sts->at("spec").value("volumeClaimTemplates", json::array())) {
      volumes.insert(c.at("metadata").at("name").get<std::string>());
      EXPECT_FALSE(c.at("spec").at("resources").at("requests").value("storage", "").empty());
    }
    for (const json& c : PodSpec(*sts).at("containers")) {
      for (const auto& [volume, path] : Mounts(c)) EXPECT_TRUE(volumes.contains(volume)) << volume;
    }
  }

  absl::StatusOr<server::ServerConfig> config =
      server::ParseServerConfig(ServerConfigText(objects(), Streamlearn()));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->models.empty());
  // The server listens where the ports and probes point.
  ASSERT_TRUE(config->listen && config->metrics);
  EXPECT_TRUE(
      absl::EndsWith(*config->listen, absl::StrCat(":", ContainerPort(Streamlearn(), "grpc"))));
  EXPECT_TRUE(
      absl::EndsWith(*config->metrics, absl::StrCat(":", ContainerPort(Streamlearn(), "metrics"))));
  // Shard counts are multiples of the replicas: every server's fair share is the same.
  const int replicas = Streamlearn().at("spec").value("replicas", 0);
  for (const ModelSpec& model : config->models) {
    EXPECT_EQ(model.shards % replicas, 0u) << model.name;
  }
}

TEST_P(DeployK8sOverlayTest, PrometheusFindsTheServersMetricsPort) {
  const json& headless =
      Find(objects(), "Service", Streamlearn().at("spec").value("serviceName", ""));
  bool has_metrics_port = false;
  for (const json& p : headless.at("spec").at("ports")) {
    has_metrics_port = has_metrics_port || p.value("name", "") == "metrics";
  }
  ASSERT_TRUE(has_metrics_port) << "no port named metrics on " << Name(headless);

  // prometheus-k8s.yml: the headless Service's SRV records of the port named "metrics".
  const json dns = YamlDocuments(DeployPath("prometheus/prometheus-k8s.yml"));
  ASSERT_TRUE(dns.is_array() && dns.size() == 1);
  const std::string srv =
      absl::StrCat("_metrics._tcp.", Name(headless), ".", kNamespace, ".svc.cluster.local");
  bool found = false;
  for (const json& job : dns[0].at("scrape_configs")) {
    for (const json& sd : job.value("dns_sd_configs", json::array())) {
      for (const json& name : sd.at("names")) found = found || name == srv;
    }
  }
  EXPECT_TRUE(found) << "no dns_sd_configs name " << srv;

  // prometheus-k8s-pods.yml: pod discovery in the namespace, keeping the pods with the
  // servers' label and their container port named like the metrics port. Prometheus anchors
  // relabel regexes at both ends, as std::regex_match does.
  const json pods = YamlDocuments(DeployPath("prometheus/prometheus-k8s-pods.yml"));
  ASSERT_TRUE(pods.is_array() && pods.size() == 1);
  const json& job = pods[0].at("scrape_configs").at(0);
  EXPECT_EQ(job.value("job_name", ""), "streamlearn");  // alerts.yml: up{job="streamlearn"}
  const json& sd = job.at("kubernetes_sd_configs").at(0);
  EXPECT_EQ(sd.value("role", ""), "pod");
  EXPECT_EQ(sd.at("namespaces").at("names"), json::array({kNamespace}));
  std::map<std::string, std::string> pod_values;  // discovery label -> this pod's value
  const json& labels = PodLabels(Streamlearn());
  for (auto it = labels.begin(); it != labels.end(); ++it) {
    pod_values["__meta_kubernetes_pod_label_" +
               std::regex_replace(it.key(), std::regex("[^a-zA-Z0-9_]"), "_")] =
        it.value().get<std::string>();
  }
  pod_values["__meta_kubernetes_pod_container_port_name"] = "metrics";
  int keeps = 0;
  for (const json& r : job.at("relabel_configs")) {
    if (r.value("action", "replace") != "keep") continue;
    ++keeps;
    ASSERT_EQ(r.at("source_labels").size(), 1u);
    const std::string label = r.at("source_labels").at(0).get<std::string>();
    SCOPED_TRACE(label);
    ASSERT_TRUE(pod_values.contains(label)) << "keeps on a label the servers' pods do not have";
    EXPECT_TRUE(std::regex_match(pod_values[label], std::regex(r.value("regex", "(.*)"))));
  }
  EXPECT_EQ(keeps, 2);
}

// The embedded overlay: one server, its state on its own volume.
TEST(DeployK8sEmbeddedTest, OneServerWithItsDataDirectoryOnAVolume) {
  const Objects& objects = Rendered("embedded");
  ASSERT_FALSE(objects.empty());
  EXPECT_EQ(All(objects, "StatefulSet").size(), 1u);
  const json& sts = Find(objects, "StatefulSet", "streamlearn");
  EXPECT_EQ(sts.at("spec").value("replicas", 0), 1);
  const std::map<std::string, std::string> flags = Flags(FirstContainer(sts));
  EXPECT_FALSE(flags.contains("cluster")) << "the embedded mode has no NATS";
  EXPECT_FALSE(flags.contains("data_dir")) << "the config file's data_dir is the volume";

  absl::StatusOr<server::ServerConfig> config =
      server::ParseServerConfig(ServerConfigText(objects, sts));
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->data_dir.has_value());
  EXPECT_FALSE(config->cluster.has_value());
  const std::map<std::string, std::string> mounts = Mounts(FirstContainer(sts));
  ASSERT_TRUE(mounts.contains("data"));
  EXPECT_EQ(*config->data_dir, mounts.at("data"));
  const json& claims = sts.at("spec").at("volumeClaimTemplates");
  ASSERT_EQ(claims.size(), 1u);
  EXPECT_EQ(claims.at(0).at("metadata").value("name", ""), "data");
  EXPECT_EQ(claims.at(0).at("spec").at("accessModes"), json::array({"ReadWriteOnce"}));
}

// The embedded overlay's config file, with the files of the Secrets as docs/OPERATIONS.md
// makes them (make-certs.sh; an access policy with a `streamlearn token`) at the paths the
// mounts would give them, starts a real server: TLS on a non-loopback address without
// allow_plaintext, the access policy in force, health in plaintext on the health port.
// Only the ports (free ones) and the data directory (a temporary one) differ from the pod's.
TEST(DeployK8sEmbeddedTest, TheRenderedConfigStartsASecureServerWithTheDocumentedSecrets) {
  ASSERT_TRUE(HaveTool("openssl")) << MissingTool("openssl");
  const Objects& objects = Rendered("embedded");
  ASSERT_FALSE(objects.empty());
  const json& sts = Find(objects, "StatefulSet", "streamlearn");
  json config = MergedConfig(objects, sts);
  ASSERT_TRUE(config.is_object());

  // The Secrets' files, each at its mount path mapped under `root`.
  const std::string root = test_util::TempPath("pod");
  const std::string certs = root + "/certs";
  ASSERT_TRUE(MakeDocumentedCertificates(certs));
  const std::map<std::string, std::string> tls_files = DocSecretFiles(kTlsSecret);
  const test_util::CommandResult token = RunCommand(std::string(kCliBinary) + " token");
  ASSERT_EQ(token.exit_code, 0) << Describe(token);
  const std::vector<std::string> token_lines = absl::StrSplit(token.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(token_lines.size(), 2u) << token.out;
  const std::string access_json = json{
      {"principals", json::array({json{
                         {"id", "ops"},
                         {"roles", json::array({"operator"})},
                         {"token_sha256", token_lines[1]},
                     }})}}.dump();
  for (const std::string key : {"tls_cert", "tls_key", "access_file"}) {
    const std::string path = Setting(config, key);
    const auto [secret, secret_key] = SecretFileAt(sts, path);
    const std::string local = root + path;
    ASSERT_EQ(RunCommand("mkdir -p '" + local.substr(0, local.rfind('/')) + "'").exit_code, 0);
    if (secret == kTlsSecret) {
      ASSERT_TRUE(tls_files.contains(secret_key)) << secret_key;
      ASSERT_EQ(RunCommand("cp '" + certs + "/" + tls_files.at(secret_key) + "' '" + local + "'")
                    .exit_code,
                0);
    } else {
      std::ofstream(local) << access_json;
    }
    // As the kubelet mounts them: root's files, 0440, read through the group. Here the test's
    // user owns them; the mode is the Secret's.
    ASSERT_EQ(RunCommand("chmod 0440 '" + local + "'").exit_code, 0);
    config[key] = local;
  }
  const int health_port = FreePort();
  ASSERT_NE(health_port, 0);
  config["health_listen"] =
      absl::StrCat(HostOf(Setting(config, "health_listen")), ":", health_port);
  config["listen"] = HostOf(Setting(config, "listen")) + ":0";
  config["metrics"] = "";
  config["data_dir"] = root + "/data";
  const std::string config_path = root + "/config.json";
  std::ofstream(config_path) << config.dump(2);

  server::ServerProcess process(
      {"--config=" + config_path, "--listen=" + config["listen"].get<std::string>(), "--metrics="},
      root + "/server.log");
  const int port = process.WaitForPort(std::chrono::seconds(60));
  ASSERT_NE(port, 0) << process.Log();
  EXPECT_TRUE(absl::StrContains(process.Log(), "security: TLS")) << process.Log();

  const std::string cli = kCliBinary;
  const std::string health = absl::StrCat(cli, " --server=127.0.0.1:", health_port, " health");
  // The health port answers in plaintext, without credentials, as the probes ask.
  test_util::CommandResult r;
  for (int i = 0; i < 100; ++i) {
    r = RunCommand(health + " --service=streamlearn.ready");
    if (r.exit_code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(r.exit_code, 0) << Describe(r) << process.Log();
  r = RunCommand(health);
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  // The gRPC port: TLS with the documented certificate, under the client Service's name, and a
  // token of the policy; nothing without it, nothing in plaintext.
  const std::string tls =
      absl::StrCat(cli, " --server=127.0.0.1:", port, " --tls-ca '", certs, "/",
                   tls_files.at("ca.crt"), "' --tls-server-name streamlearn.", kNamespace, ".svc");
  r = RunCommand(tls + " --token " + token_lines[0] + " list");
  EXPECT_EQ(r.exit_code, 0) << Describe(r) << process.Log();
  EXPECT_TRUE(absl::StrContains(r.out, "quotes")) << "the config file's models: " << r.out;
  r = RunCommand(tls + " list");
  EXPECT_NE(r.exit_code, 0) << "no token, yet admitted\n" << Describe(r);
  EXPECT_TRUE(absl::StrContains(r.err, "UNAUTHENTICATED")) << Describe(r);
  r = RunCommand(
      absl::StrCat(cli, " --server=127.0.0.1:", port, " --token ", token_lines[0], " list"));
  EXPECT_NE(r.exit_code, 0) << "plaintext on the gRPC port\n" << Describe(r);
  EXPECT_EQ(process.Terminate(), 0) << process.Log();
  RunCommand("rm -rf '" + root + "'");
}

// The cluster overlay: 3 servers on a 3-node NATS JetStream.
class DeployK8sClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(objects().empty()) << "the overlay did not render"; }
  static const Objects& objects() { return Rendered("cluster"); }
  static const json& Streamlearn() { return Find(objects(), "StatefulSet", "streamlearn"); }
  static const json& Nats() { return Find(objects(), "StatefulSet", "nats"); }
  static std::map<std::string, std::string> ServerFlags() {
    return Flags(FirstContainer(Streamlearn()));
  }
};

TEST_F(DeployK8sClusterTest, ThreeServersThreeNatsNodesAndReplicasOfThree) {
  EXPECT_EQ(Streamlearn().at("spec").value("replicas", 0), 3);
  EXPECT_EQ(Nats().at("spec").value("replicas", 0), 3);
  // JetStream keeps R copies of each stream and bucket, one per NATS node at most.
  EXPECT_EQ(ServerFlags()["cluster_replicas"], "3");
  EXPECT_EQ(All(objects(), "StatefulSet").size(), 2u);
}

TEST_F(DeployK8sClusterTest, DisruptionBudgetsLetOnePodOfEachGoAtATime) {
  std::set<std::string> covered;
  for (const json* pdb : All(objects(), "PodDisruptionBudget")) {
    SCOPED_TRACE(Name(*pdb));
    EXPECT_EQ(pdb->at("spec").value("maxUnavailable", json()), json(1));
    const std::vector<const json*> selected =
        Selected(objects(), pdb->at("spec").at("selector").at("matchLabels"));
    ASSERT_EQ(selected.size(), 1u);
    EXPECT_TRUE(covered.insert(Name(*selected[0])).second) << "two budgets for one set";
  }
  EXPECT_EQ(covered, (std::set<std::string>{"nats", "streamlearn"}));
}

TEST_F(DeployK8sClusterTest, ServerArgsAreFlagsAndAConfigTheServerAccepts) {
  const std::set<std::string> known = ServerFlagNames();
  for (const auto& [name, raw] : ServerFlags()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(known.contains(name)) << "streamlearn-server --help does not list it";
    EXPECT_TRUE(name == "config" || ConfigKeys().contains(name))
        << "a flag without a config key here: add it to ConfigKeys()";
  }
  // The config file with the flags given on top, as the server merges them.
  const json merged = MergedConfig(objects(), Streamlearn());
  ASSERT_TRUE(merged.is_object());
  absl::StatusOr<server::ServerConfig> config = server::ParseServerConfig(merged.dump());
  ASSERT_TRUE(config.ok()) << config.status() << "\n" << merged.dump(2);
  ASSERT_TRUE(config->cluster.has_value());
  // The server checks the id when it starts: [A-Za-z0-9_-]{1,64}.
  ASSERT_TRUE(config->cluster->server_id.has_value());
  EXPECT_TRUE(std::regex_match(*config->cluster->server_id, std::regex("[A-Za-z0-9_-]{1,64}")))
      << *config->cluster->server_id;
  // No data directory: the state lives in JetStream.
  EXPECT_EQ(config->data_dir.value_or("unset"), "");
  EXPECT_TRUE(Streamlearn().at("spec").value("volumeClaimTemplates", json::array()).empty());
}

TEST_F(DeployK8sClusterTest, ServersNameThemselvesByTheirPodThroughTheHeadlessService) {
  const json& container = FirstContainer(Streamlearn());
  std::map<std::string, std::string> field_of;  // env name -> field path
  for (const json& e : container.value("env", json::array())) {
    ASSERT_TRUE(e.contains("valueFrom")) << e.dump();
    field_of[e.at("name")] = e.at("valueFrom").at("fieldRef").value("fieldPath", "");
  }
  EXPECT_EQ(field_of["POD_NAME"], "metadata.name");
  EXPECT_EQ(field_of["POD_NAMESPACE"], "metadata.namespace");
  std::map<std::string, std::string> flags = ServerFlags();
  EXPECT_EQ(flags["server_id"], "$(POD_NAME)");
  const std::string headless = Streamlearn().at("spec").value("serviceName", "");
  EXPECT_EQ(flags["advertise"],
            absl::StrCat("$(POD_NAME).", headless, ".$(POD_NAMESPACE).svc.cluster.local:",
                         ContainerPort(Streamlearn(), "grpc")));
  EXPECT_EQ(Expand(Streamlearn(), container, flags["advertise"]),
            absl::StrCat("streamlearn-0.", headless, ".", kNamespace, ".svc.cluster.local:50051"));
}

TEST_F(DeployK8sClusterTest, ServersCheckOneAnotherWithTheCaOfTheTlsSecret) {
  // A server forwards to the shard's owner at its --advertise name over TLS, presenting its own
  // certificate and checking the owner's against tls_peer_ca.
  const json merged = MergedConfig(objects(), Streamlearn());
  const std::string peer_ca = Setting(merged, "tls_peer_ca");
  ASSERT_FALSE(peer_ca.empty()) << "no tls_peer_ca: the peers would be checked against the "
                                   "system's roots";
  EXPECT_EQ(SecretFileAt(Streamlearn(), peer_ca),
            std::make_pair(std::string(kTlsSecret), std::string("ca.crt")));
  // The advertised port is the TLS gRPC port.
  const std::string advertise = merged.at("cluster").value("advertise", "");
  EXPECT_EQ(PortOf(advertise), ContainerPort(Streamlearn(), "grpc"));
}

// docs/OPERATIONS.md's make-certs.sh command makes a certificate that names every server's
// advertised name (each replica's, and a few more for scaling) and the client Service's names,
// and its kubectl command puts it in the Secret under the keys the pods read.
TEST_F(DeployK8sClusterTest, DocumentedCertificateCoversTheAdvertisedAndServiceNames) {
  ASSERT_TRUE(HaveTool("openssl")) << MissingTool("openssl");
  const std::string dir = test_util::TempPath("certs");
  ASSERT_TRUE(MakeDocumentedCertificates(dir));
  const std::map<std::string, std::string> files = DocSecretFiles(kTlsSecret);
  EXPECT_EQ(files.size(), 3u);
  for (const char* key : {"tls.crt", "tls.key", "ca.crt"}) {
    ASSERT_TRUE(files.contains(key)) << "the documented Secret has no key " << key;
    ASSERT_TRUE(std::ifstream(dir + "/" + files.at(key)).good()) << files.at(key);
  }
  const std::string crt = dir + "/" + files.at("tls.crt"), ca = dir + "/" + files.at("ca.crt");
  // The key is the certificate's.
  const test_util::CommandResult pub_crt =
      RunCommand("openssl x509 -noout -pubkey -in '" + crt + "'");
  const test_util::CommandResult pub_key =
      RunCommand("openssl pkey -pubout -in '" + dir + "/" + files.at("tls.key") + "'");
  EXPECT_EQ(pub_crt.exit_code, 0) << Describe(pub_crt);
  EXPECT_EQ(pub_crt.out, pub_key.out) << "tls.key is not the key of tls.crt";

  const json& container = FirstContainer(Streamlearn());
  const std::string advertise0 = Expand(Streamlearn(), container, ServerFlags()["advertise"]);
  const std::string host0 = HostOf(advertise0);
  const std::string pod0 = Name(Streamlearn()) + "-0";
  ASSERT_TRUE(absl::StartsWith(host0, pod0 + ".")) << host0;
  std::vector<std::string> names;
  const int replicas = Streamlearn().at("spec").value("replicas", 0);
  for (int i = 0; i < replicas + 7; ++i) {
    names.push_back(absl::StrCat(Name(Streamlearn()), "-", i, host0.substr(pod0.size())));
  }
  const std::string client_service = Name(Find(objects(), "Service", "streamlearn"));
  for (const char* suffix : {"", ".svc", ".svc.cluster.local"}) {
    names.push_back(absl::StrCat(client_service, ".", kNamespace, suffix));
  }
  for (const std::string& name : names) {
    const test_util::CommandResult r = RunCommand(
        "openssl verify -CAfile '" + ca + "' -verify_hostname '" + name + "' '" + crt + "'");
    EXPECT_EQ(r.exit_code, 0) << "the documented certificate does not name " << name << "\n"
                              << Describe(r);
  }
  // A name it must not cover: a wildcard covers one label.
  EXPECT_NE(RunCommand("openssl verify -CAfile '" + ca + "' -verify_hostname 'a.b." +
                       host0.substr(pod0.size() + 1) + "' '" + crt + "'")
                .exit_code,
            0);
  RunCommand("rm -rf '" + dir + "'");
}

TEST_F(DeployK8sClusterTest, NatsUrlsNameEveryNatsPodThroughItsHeadlessService) {
  const std::string headless = Nats().at("spec").value("serviceName", "");
  const int client_port = ContainerPort(Nats(), "client");
  ASSERT_NE(client_port, 0);
  std::set<std::string> expected, short_names;
  for (int i = 0; i < Nats().at("spec").value("replicas", 0); ++i) {
    const std::string host = absl::StrCat(Name(Nats()), "-", i, ".", headless);
    short_names.insert(absl::StrCat("nats://", host, ":", client_port));
    expected.insert(
        absl::StrCat("nats://", host, ".", kNamespace, ".svc.cluster.local:", client_port));
  }
  const std::vector<std::string> urls = absl::StrSplit(ServerFlags()["cluster"], ',');
  const std::set<std::string> given(urls.begin(), urls.end());
  EXPECT_EQ(given.size(), urls.size()) << "a URL twice";
  // Either the names in the namespace or the fully qualified ones.
  EXPECT_TRUE(given == short_names || given == expected) << ServerFlags()["cluster"];
}

// The audit archive (docs/CLUSTER.md, "Audit archive"): every pod mounts one claim that many
// pods may write at once, where --audit_archive_dir points.
TEST_F(DeployK8sClusterTest, EveryServerArchivesIntoOneSharedClaim) {
  std::string claim, volume;
  for (const json& v : PodSpec(Streamlearn()).at("volumes")) {
    if (!v.contains("persistentVolumeClaim")) continue;
    volume = v.at("name").get<std::string>();
    claim = v.at("persistentVolumeClaim").at("claimName").get<std::string>();
  }
  ASSERT_FALSE(claim.empty()) << "no volume of a PersistentVolumeClaim";
  const json& pvc = Find(objects(), "PersistentVolumeClaim", claim);
  EXPECT_EQ(pvc.at("spec").at("accessModes"), json::array({"ReadWriteMany"}));
  EXPECT_FALSE(pvc.at("spec").at("resources").at("requests").value("storage", "").empty());
  const std::map<std::string, std::string> mounts = Mounts(FirstContainer(Streamlearn()));
  ASSERT_TRUE(mounts.contains(volume));
  EXPECT_EQ(ServerFlags()["audit_archive_dir"], mounts.at(volume));
}

TEST_F(DeployK8sClusterTest, KeysSecretIsMountedWhereTheKeyFlagsPoint) {
  std::string volume;
  for (const json& v : PodSpec(Streamlearn()).at("volumes")) {
    if (!v.contains("secret") || v.at("secret").value("secretName", "") != "streamlearn-keys") {
      continue;
    }
    volume = v.at("name").get<std::string>();
    // The servers cannot start without the keys; a missing Secret must keep the pod waiting.
    EXPECT_FALSE(v.at("secret").value("optional", false));
    EXPECT_FALSE(v.at("secret").contains("items")) << "every file of the Secret is mounted";
  }
  ASSERT_FALSE(volume.empty()) << "no volume of the Secret streamlearn-keys";
  const std::map<std::string, std::string> mounts = Mounts(FirstContainer(Streamlearn()));
  ASSERT_TRUE(mounts.contains(volume));
  std::map<std::string, std::string> flags = ServerFlags();
  // The files `streamlearn-server --init_keys DIR` writes, under their names.
  EXPECT_EQ(flags["audit_key_file"], mounts.at(volume) + "/audit.key");
  EXPECT_EQ(flags["lmu_secret_file"], mounts.at(volume) + "/lmu.secret");
}

TEST_F(DeployK8sClusterTest, NatsConfigIsValidAndUsesTheVolumePortsAndPeers) {
  ASSERT_TRUE(HaveTool("nats-server")) << MissingTool("nats-server");
  const json& container = FirstContainer(Nats());
  EXPECT_TRUE(absl::StartsWith(container.value("image", ""), "nats:2."));
  // nats-server --config <file in the mounted ConfigMap>
  const json& command = container.at("command");
  ASSERT_EQ(command.size(), 3u);
  EXPECT_EQ(command.at(0), "nats-server");
  EXPECT_EQ(command.at(1), "--config");
  std::string config_map;
  const std::string key =
      ConfigMapKeyAt(objects(), Nats(), command.at(2).get<std::string>(), &config_map);
  ASSERT_FALSE(key.empty());
  const std::string conf = Find(objects(), "ConfigMap", config_map).at("data").value(key, "");

  // The configuration parses, for any node (its name is the pod's, from the env).
  bool pod_name_from_env = false;
  for (const json& e : container.value("env", json::array())) {
    pod_name_from_env =
        pod_name_from_env ||
        (e.value("name", "") == "POD_NAME" &&
         e.at("valueFrom").at("fieldRef").value("fieldPath", "") == "metadata.name");
  }
  EXPECT_TRUE(pod_name_from_env);
  const std::string path = test_util::TempPath("nats.conf");
  std::ofstream(path) << conf;
  const test_util::CommandResult r = RunCommand("POD_NAME=nats-0 nats-server -t -c '" + path + "'");
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 0) << Describe(r) << conf;

  // JetStream stores on the node's volume; the ports are the container's; the routes name
  // every node through the headless Service.
  const std::map<std::string, std::string> mounts = Mounts(container);
  ASSERT_TRUE(mounts.contains("data"));
  EXPECT_TRUE(absl::StrContains(conf, "store_dir: " + mounts.at("data") + "/jetstream")) << conf;
  EXPECT_EQ(Nats().at("spec").at("volumeClaimTemplates").at(0).at("metadata").value("name", ""),
            "data");
  EXPECT_TRUE(absl::StrContains(conf, absl::StrCat("\nport: ", ContainerPort(Nats(), "client"))));
  EXPECT_TRUE(
      absl::StrContains(conf, absl::StrCat("http_port: ", ContainerPort(Nats(), "monitor"))));
  EXPECT_TRUE(absl::StrContains(conf, absl::StrCat("  port: ", ContainerPort(Nats(), "cluster"))));
  const std::string headless = Nats().at("spec").value("serviceName", "");
  for (int i = 0; i < Nats().at("spec").value("replicas", 0); ++i) {
    EXPECT_TRUE(absl::StrContains(conf, absl::StrCat("nats://", Name(Nats()), "-", i, ".", headless,
                                                     ":", ContainerPort(Nats(), "cluster"))))
        << "no route to node " << i;
  }

  // Ready once JetStream is current (/healthz on the monitoring port).
  const json& readiness = container.at("readinessProbe").at("httpGet");
  EXPECT_EQ(readiness.value("path", ""), "/healthz");
  EXPECT_EQ(readiness.value("port", json()), json("monitor"));
}

// prometheus-k8s-pods.yml uses kubernetes_sd_configs, which Debian's Prometheus build does not
// have (its promtool refuses the field). With a promtool that has it, the file must pass as it
// is; with Debian's, the refusal must be that field alone, and the file with the discovery
// replaced by a static target must pass (the rest: relabel rules, rule files, globals).
TEST(DeployK8sPrometheusTest, PodDiscoveryConfigIsValid) {
  ASSERT_TRUE(HaveTool("promtool")) << MissingTool("promtool");
  const std::string config = DeployPath("prometheus/prometheus-k8s-pods.yml");
  const test_util::CommandResult r = RunCommand("promtool check config '" + config + "'");
  if (r.exit_code == 0) return;
  const std::string output = r.out + r.err;
  std::istringstream lines(output);
  int refused = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!absl::StrContains(line, "not found in type")) continue;
    ++refused;
    EXPECT_TRUE(absl::StrContains(line, "field kubernetes_sd_configs not found")) << line;
  }
  ASSERT_EQ(refused, 1) << Describe(r);

  // The same file with a static target in place of the discovery block, checked beside the
  // rule file it names.
  const std::string text = test_util::ReadFile(config);
  const std::regex block(R"(    kubernetes_sd_configs:\n(      .*\n)+)");
  const std::string replaced = std::regex_replace(
      text, block, "    static_configs:\n      - targets: ['streamlearn-0:9464']\n");
  ASSERT_NE(replaced, text);
  const std::string dir = test_util::TempPath("prometheus");
  const std::string copy_rules =
      "mkdir -p '" + dir + "' && cp '" + DeployPath("prometheus/alerts.yml") + "' '" + dir + "/'";
  ASSERT_EQ(RunCommand(copy_rules).exit_code, 0);
  std::ofstream(dir + "/prometheus.yml") << replaced;
  const test_util::CommandResult s =
      RunCommand("promtool check config '" + dir + "/prometheus.yml'");
  RunCommand("rm -rf '" + dir + "'");
  EXPECT_EQ(s.exit_code, 0) << Describe(s) << replaced;
  EXPECT_TRUE(absl::StrContains(s.out + s.err, "alerts.yml")) << Describe(s);
}

TEST(DeployDockerfileTest, BuildsOnDebian12WithSetupAndRunsTheServer) {
  const std::string dockerfile = test_util::ReadFile(DeployPath("Dockerfile"));
  ASSERT_FALSE(dockerfile.empty());
  std::istringstream lines(dockerfile);
  int stages = 0;
  for (std::string line; std::getline(lines, line);) {
    if (!absl::StartsWith(line, "FROM ")) continue;
    ++stages;
    EXPECT_TRUE(absl::StartsWith(line, "FROM debian:12")) << line;
  }
  EXPECT_EQ(stages, 2);
  EXPECT_TRUE(absl::StrContains(dockerfile, "bash scripts/setup.sh"));
  EXPECT_TRUE(absl::StrContains(dockerfile, "--target streamlearn-server"));
  EXPECT_TRUE(absl::StrContains(dockerfile, "ENTRYPOINT [\"/usr/local/bin/streamlearn-server\"]"));
  EXPECT_TRUE(absl::StrContains(dockerfile, "EXPOSE 50051 9464"));
}

}  // namespace
}  // namespace streamlearn
