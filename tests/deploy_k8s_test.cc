// The Kubernetes manifests of deploy/k8s/ and deploy/Dockerfile, parsed (python3-yaml) and
// checked for the things that break a deployment silently: names and labels that must match
// across objects, probes and ports, mounts, the config file the server will read (parsed by
// the server's own config parser), and the Prometheus discovery name of the Service.
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/config.h"
#include "tests/command_runner.h"
#include "tests/deploy_util.h"

namespace streamlearn {
namespace {

using test_util::DeployPath;
using test_util::YamlDocuments;

constexpr char kNamespace[] = "streamlearn";

// Every document of every manifest listed in kustomization.yaml, by kind; read once.
class DeployK8sTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const nlohmann::json kustomization = YamlDocuments(DeployPath("k8s/kustomization.yaml"));
    ASSERT_TRUE(kustomization.is_array() && kustomization.size() == 1);
    for (const nlohmann::json& file : kustomization[0].at("resources")) {
      const std::string name = file.get<std::string>();
      SCOPED_TRACE(name);
      const nlohmann::json docs = YamlDocuments(DeployPath("k8s/" + name));
      ASSERT_TRUE(docs.is_array() && !docs.empty());
      for (const nlohmann::json& doc : docs) {
        ASSERT_TRUE(doc.is_object());
        objects_->emplace(doc.at("kind").get<std::string>(), doc);
      }
    }
  }

  void SetUp() override { ASSERT_FALSE(objects_->empty()) << "no manifest could be read"; }

  const nlohmann::json& One(const std::string& kind) {
    EXPECT_EQ(objects_->count(kind), 1u) << kind;
    static const nlohmann::json kEmpty = nlohmann::json::object();
    auto it = objects_->find(kind);
    return it == objects_->end() ? kEmpty : it->second;
  }

  const nlohmann::json& Container() {
    return One("StatefulSet").at("spec").at("template").at("spec").at("containers").at(0);
  }

  int ContainerPort(const std::string& name) {
    for (const nlohmann::json& p : Container().at("ports")) {
      if (p.value("name", "") == name) return p.at("containerPort").get<int>();
    }
    ADD_FAILURE() << "no container port named " << name;
    return 0;
  }

  static bool LabelsContain(const nlohmann::json& labels, const nlohmann::json& subset) {
    for (auto it = subset.begin(); it != subset.end(); ++it) {
      if (!labels.contains(it.key()) || labels.at(it.key()) != it.value()) return false;
    }
    return true;
  }

  inline static auto* const objects_ = new std::multimap<std::string, nlohmann::json>();
};

TEST_F(DeployK8sTest, EveryObjectIsNamedAndInTheNamespace) {
  for (const auto& [kind, object] : *objects_) {
    SCOPED_TRACE(kind);
    EXPECT_TRUE(object.contains("apiVersion"));
    const nlohmann::json& metadata = object.at("metadata");
    EXPECT_FALSE(metadata.value("name", "").empty());
    if (kind == "Namespace") {
      EXPECT_EQ(metadata.value("name", ""), kNamespace);
    } else {
      EXPECT_EQ(metadata.value("namespace", ""), kNamespace);
    }
  }
  for (const char* kind : {"Namespace", "ConfigMap", "Service", "StatefulSet"}) {
    EXPECT_EQ(objects_->count(kind), 1u) << kind;
  }
}

TEST_F(DeployK8sTest, StatefulSetServiceAndSelectorsMatch) {
  const nlohmann::json& sts = One("StatefulSet");
  const nlohmann::json& service = One("Service");
  const nlohmann::json& pod_labels = sts.at("spec").at("template").at("metadata").at("labels");
  EXPECT_EQ(sts.at("spec").value("serviceName", ""), service.at("metadata").value("name", ""));
  EXPECT_TRUE(LabelsContain(pod_labels, sts.at("spec").at("selector").at("matchLabels")));
  EXPECT_TRUE(LabelsContain(pod_labels, service.at("spec").at("selector")));
  EXPECT_EQ(service.at("spec").value("clusterIP", ""), "None") << "the Service must be headless";
  EXPECT_GE(sts.at("spec").value("replicas", 0), 1);

  // Service ports point at the container's named ports, with the same numbers.
  std::set<std::string> service_ports;
  for (const nlohmann::json& p : service.at("spec").at("ports")) {
    const std::string name = p.value("name", "");
    SCOPED_TRACE(name);
    service_ports.insert(name);
    EXPECT_EQ(p.value("targetPort", ""), name);
    EXPECT_EQ(p.at("port").get<int>(), ContainerPort(name));
  }
  EXPECT_EQ(service_ports, (std::set<std::string>{"grpc", "metrics"}));
}

TEST_F(DeployK8sTest, ProbesUseGrpcHealthOnTheGrpcPort) {
  const int grpc_port = ContainerPort("grpc");
  for (const char* probe : {"startupProbe", "readinessProbe", "livenessProbe"}) {
    SCOPED_TRACE(probe);
    ASSERT_TRUE(Container().contains(probe));
    const nlohmann::json& p = Container().at(probe);
    ASSERT_TRUE(p.contains("grpc"));
    EXPECT_EQ(p.at("grpc").at("port").get<int>(), grpc_port);
    EXPECT_EQ(p.at("grpc").value("service", ""), "") << "the server reports health for \"\"";
  }
}

TEST_F(DeployK8sTest, MountsExistAndTheConfigFileIsOneTheServerAccepts) {
  const nlohmann::json& pod = One("StatefulSet").at("spec").at("template").at("spec");
  std::map<std::string, nlohmann::json> volumes;
  for (const nlohmann::json& v : pod.at("volumes")) volumes[v.at("name").get<std::string>()] = v;
  std::set<std::string> claims;
  for (const nlohmann::json& c : One("StatefulSet").at("spec").at("volumeClaimTemplates")) {
    claims.insert(c.at("metadata").at("name").get<std::string>());
    EXPECT_FALSE(c.at("spec").at("resources").at("requests").value("storage", "").empty());
  }
  std::map<std::string, std::string> mount_of;  // volume name -> mount path
  for (const nlohmann::json& m : Container().at("volumeMounts")) {
    const std::string name = m.at("name").get<std::string>();
    EXPECT_TRUE(volumes.contains(name) || claims.contains(name)) << name;
    mount_of[name] = m.at("mountPath").get<std::string>();
  }

  // The --config flag names a key of the mounted ConfigMap.
  std::string config_path;
  for (const nlohmann::json& arg : Container().at("args")) {
    std::string a = arg.get<std::string>();
    if (absl::StartsWith(a, "--config=")) config_path = a.substr(9);
  }
  ASSERT_FALSE(config_path.empty()) << "no --config in the container's args";
  const nlohmann::json& config_map = One("ConfigMap");
  ASSERT_TRUE(volumes.contains("config"));
  EXPECT_EQ(volumes["config"].at("configMap").at("name"), config_map.at("metadata").at("name"));
  const std::string key = config_path.substr(config_path.rfind('/') + 1);
  EXPECT_EQ(config_path, mount_of["config"] + "/" + key);
  ASSERT_TRUE(config_map.at("data").contains(key)) << key;

  absl::StatusOr<server::ServerConfig> config =
      server::ParseServerConfig(config_map.at("data").at(key).get<std::string>());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->models.empty());
  // The server listens where the ports and probes point, and keeps its state on the volume.
  ASSERT_TRUE(config->listen && config->metrics && config->data_dir);
  EXPECT_TRUE(absl::EndsWith(*config->listen, absl::StrCat(":", ContainerPort("grpc"))));
  EXPECT_TRUE(absl::EndsWith(*config->metrics, absl::StrCat(":", ContainerPort("metrics"))));
  EXPECT_EQ(*config->data_dir, mount_of["data"]);
  EXPECT_TRUE(claims.contains("data"));
}

TEST_F(DeployK8sTest, PrometheusFindsThePodsThroughTheServiceSrvRecords) {
  const nlohmann::json prometheus = YamlDocuments(DeployPath("prometheus/prometheus-k8s.yml"));
  ASSERT_TRUE(prometheus.is_array() && prometheus.size() == 1);
  const std::string service = One("Service").at("metadata").at("name").get<std::string>();
  const std::string expected =
      absl::StrCat("_metrics._tcp.", service, ".", kNamespace, ".svc.cluster.local");
  bool found = false;
  for (const nlohmann::json& job : prometheus[0].at("scrape_configs")) {
    if (!job.contains("dns_sd_configs")) continue;
    for (const nlohmann::json& sd : job.at("dns_sd_configs")) {
      for (const nlohmann::json& name : sd.at("names")) found = found || name == expected;
    }
  }
  EXPECT_TRUE(found) << "no dns_sd_configs name " << expected;
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
