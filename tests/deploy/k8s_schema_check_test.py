#!/usr/bin/python3
"""Tests of k8s_schema_check.py: broken objects are refused, naming the place and the
problem; valid ones (IntOrString fields as int or string, quantities as numbers, the gRPC
probe of the extension table) pass.

  /usr/bin/python3 tests/deploy/k8s_schema_check_test.py
"""

import copy
import os
import subprocess
import sys
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_schema_check  # noqa: E402

STATEFUL_SET = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "s", "namespace": "n", "labels": {"app": "s"}},
    "spec": {
        "serviceName": "s-headless",
        "replicas": 3,
        "selector": {"matchLabels": {"app": "s"}},
        "template": {
            "metadata": {"labels": {"app": "s"}},
            "spec": {
                "containers": [{
                    "name": "c",
                    "image": "i",
                    "args": ["--x=1"],
                    "ports": [{"name": "grpc", "containerPort": 50051}],
                    "readinessProbe": {"grpc": {"port": 50051, "service": "streamlearn.ready"}},
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": "grpc"}},
                    "resources": {"requests": {"cpu": 1, "memory": "1Gi"}},
                }],
            },
        },
    },
}

SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "svc"},
    "spec": {"ports": [{"name": "a", "port": 1, "targetPort": "a"},
                       {"name": "b", "port": 2, "targetPort": 2}]},
}

PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "p"},
    "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "s"}}},
}


def changed(obj, path, value):
    """A copy of obj with the value at path (keys and list indices) set, or deleted when
    value is DELETE."""
    out = copy.deepcopy(obj)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


DELETE = object()
CONTAINER = ["spec", "template", "spec", "containers", 0]

# (case, object, the one problem expected: None when the object is valid)
CASES = [
    ("valid StatefulSet", STATEFUL_SET, None),
    ("valid Service, targetPort name and number", SERVICE, None),
    ("valid PDB, maxUnavailable a count", PDB, None),
    ("valid PDB, maxUnavailable a percentage",
     changed(PDB, ["spec", "maxUnavailable"], "50%"), None),
    ("unknown field in a container",
     changed(STATEFUL_SET, CONTAINER + ["resourcse"], {}),
     "StatefulSet/s: spec.template.spec.containers[0].resourcse: unknown field "
     "(did you mean resources?)"),
    ("unknown top-level field",
     changed(SERVICE, ["spec", "clusterIp"], "None"),
     "Service/svc: spec.clusterIp: unknown field (did you mean clusterIP?)"),
    ("a string where an int is expected",
     changed(STATEFUL_SET, ["spec", "replicas"], "3"),
     "StatefulSet/s: spec.replicas: expected int, got str"),
    ("a bool where an int is expected",
     changed(SERVICE, ["spec", "ports", 0, "port"], True),
     "Service/svc: spec.ports[0].port: expected int, got bool"),
    ("an int where a string is expected (a label value)",
     changed(STATEFUL_SET, ["metadata", "labels", "version"], 1),
     'StatefulSet/s: metadata.labels["version"]: expected str, got int'),
    ("a list where a map is expected",
     changed(STATEFUL_SET, ["metadata", "labels"], ["app=s"]),
     "StatefulSet/s: metadata.labels: expected a map, got a list"),
    ("a map where a list is expected",
     changed(STATEFUL_SET, ["spec", "template", "spec", "containers"], {"name": "c"}),
     "StatefulSet/s: spec.template.spec.containers: expected a list, got a map"),
    ("a string where an object is expected",
     changed(STATEFUL_SET, ["spec", "selector"], "app=s"),
     "StatefulSet/s: spec.selector: expected a map (V1LabelSelector), got str"),
    ("IntOrString given a list",
     changed(SERVICE, ["spec", "ports", 1, "targetPort"], [2]),
     "Service/svc: spec.ports[1].targetPort: expected an int or a string, got a list"),
    ("IntOrString given a bool",
     changed(PDB, ["spec", "maxUnavailable"], True),
     "PodDisruptionBudget/p: spec.maxUnavailable: expected an int or a string, got bool"),
    ("a quantity given a list",
     changed(STATEFUL_SET, CONTAINER + ["resources", "requests", "cpu"], [1]),
     'StatefulSet/s: spec.template.spec.containers[0].resources.requests["cpu"]: '
     "expected a quantity, got a list"),
    ("unknown field in the gRPC probe (extension table)",
     changed(STATEFUL_SET, CONTAINER + ["readinessProbe", "grpc", "servce"], "x"),
     "StatefulSet/s: spec.template.spec.containers[0].readinessProbe.grpc.servce: unknown "
     "field (did you mean service?)"),
    ("the gRPC probe without its port",
     changed(STATEFUL_SET, CONTAINER + ["readinessProbe", "grpc", "port"], DELETE),
     "StatefulSet/s: spec.template.spec.containers[0].readinessProbe.grpc.port: required "
     "field missing"),
    ("a container without its name",
     changed(STATEFUL_SET, CONTAINER + ["name"], DELETE),
     "StatefulSet/s: spec.template.spec.containers[0].name: required field missing"),
    ("a StatefulSet without its selector",
     changed(STATEFUL_SET, ["spec", "selector"], DELETE),
     "StatefulSet/s: spec.selector: required field missing"),
    ("an object without a name",
     changed(SERVICE, ["metadata"], {}),
     "Service (document 0): metadata.name: required field missing"),
    ("unknown kind",
     changed(SERVICE, ["kind"], "Frobnicator"),
     "Frobnicator/svc: (object): unknown kind Frobnicator in apiVersion v1"),
    ("a known kind in an apiVersion it is not in",
     changed(PDB, ["apiVersion"], "policy/v1beta2"),
     "PodDisruptionBudget/p: (object): unknown kind PodDisruptionBudget in apiVersion "
     "policy/v1beta2"),
    ("a document that is not a map", ["a", "list"],
     "document 0: (object): expected an object (a map), got a list"),
]


class SchemaCheckTest(unittest.TestCase):

    def test_cases(self):
        for name, obj, expected in CASES:
            with self.subTest(name):
                errors = k8s_schema_check.check_documents([obj])
                if expected is None:
                    self.assertEqual(errors, [])
                else:
                    self.assertEqual(len(errors), 1, errors)
                    self.assertTrue(errors[0].startswith(expected), errors[0])

    def test_every_problem_of_a_document_set_is_reported(self):
        broken = [changed(STATEFUL_SET, ["spec", "replicas"], "3"),
                  changed(SERVICE, ["spec", "clusterIp"], "None")]
        self.assertEqual(len(k8s_schema_check.check_documents(broken)), 2)

    def test_the_command_fails_and_names_the_problem(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "k8s_schema_check.py")
        broken = yaml.safe_dump_all([SERVICE, changed(STATEFUL_SET, ["spec", "replicas"], "3")])
        r = subprocess.run([sys.executable, script, "-"], input=broken, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("-: StatefulSet/s: spec.replicas: expected int, got str", r.stderr)
        r = subprocess.run([sys.executable, script, "-"], input=yaml.safe_dump(SERVICE),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_every_known_kind_maps_to_a_model(self):
        for (api_version, kind), name in k8s_schema_check.KINDS.items():
            with self.subTest(kind):
                self.assertTrue(k8s_schema_check.is_model(name), name)
                self.assertIn("apiVersion", k8s_schema_check.model(name).types)


if __name__ == "__main__":
    unittest.main(verbosity=2)
