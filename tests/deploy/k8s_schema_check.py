#!/usr/bin/python3
"""Checks Kubernetes objects against the API schema, offline.

The schema is the one of Debian's python3-kubernetes (22.6: the models of Kubernetes 1.22).
Each model class in kubernetes.client.models names its fields (`attribute_map`: Python name ->
JSON name) and their types (`openapi_types`: 'str', 'int', 'bool', 'list[V1Container]',
'dict(str, str)', 'V1ObjectMeta', 'object', ...), and its setters refuse None for a required
field. Every object is walked field by field from the model its apiVersion and kind name, and
every unknown field, value of the wrong type, missing required field and unknown kind is
reported with the place it is at:

  StatefulSet/streamlearn: spec.template.spec.containers[0].resourcse: unknown field

Usage:
  k8s_schema_check.py --kustomize DIR   # the objects `kubectl kustomize DIR` renders
  k8s_schema_check.py FILE...           # the YAML documents of the files ('-': stdin)

Exit status 0 when every object passes, 1 otherwise (one line per problem on stderr).
Tested by k8s_schema_check_test.py beside it; tests/CMakeLists.txt runs both.
"""

import argparse
import difflib
import re
import shutil
import subprocess
import sys

import yaml
from kubernetes import client
from kubernetes.client import models

# The kinds the manifests may use, by apiVersion and kind, and their model classes. Anything
# else is an unknown kind: add it here when deploy/k8s starts to use it.
KINDS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("v1", "Service"): "V1Service",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
}

# Fields newer than Kubernetes 1.22 that the manifests use, added to the 1.22 models. Each
# entry: model -> {JSON field name: type}, with the types of new models in NEW_MODELS.
EXTENSIONS = {
    # The probe's gRPC action (grpc.health.v1.Health): beta in Kubernetes 1.24, GA in 1.27.
    "V1Probe": {"grpc": "V1GRPCAction"},
}
# New models: name -> (fields {JSON name: type}, required JSON names).
NEW_MODELS = {
    "V1GRPCAction": ({"port": "int", "service": "str"}, {"port"}),
}

# The 'object' fields that are IntOrString in the API (a port number or name, a count or a
# percentage): an int or a string, nothing else. Other 'object' fields are free-form JSON.
INT_OR_STRING = {
    ("V1HTTPGetAction", "port"),
    ("V1TCPSocketAction", "port"),
    ("V1ServicePort", "target_port"),
    ("V1NetworkPolicyPort", "port"),
    ("V1PodDisruptionBudgetSpec", "max_unavailable"),
    ("V1PodDisruptionBudgetSpec", "min_available"),
    ("V1RollingUpdateDeployment", "max_surge"),
    ("V1RollingUpdateDeployment", "max_unavailable"),
    ("V1RollingUpdateDaemonSet", "max_surge"),
    ("V1RollingUpdateDaemonSet", "max_unavailable"),
}

# Resource quantities: the models type them 'str', but the API reads a JSON number as a
# quantity too (`cpu: 1`), so these maps' values may be an int or a string.
QUANTITY_MAPS = {
    ("V1ResourceRequirements", "limits"),
    ("V1ResourceRequirements", "requests"),
}

_LIST = re.compile(r"^list\[(.+)\]$")
_DICT = re.compile(r"^dict\(str, (.+)\)$")


class Model:
    """A model's fields by JSON name: their types, Python names and which are required."""

    def __init__(self, name):
        self.name = name
        self.types = {}  # JSON name -> type string
        self.attr = {}  # JSON name -> Python name (the key of INT_OR_STRING, QUANTITY_MAPS)
        self.required = set()
        if name in NEW_MODELS:
            fields, required = NEW_MODELS[name]
            self.types = dict(fields)
            self.attr = {f: f for f in fields}
            self.required = set(required)
            return
        cls = getattr(models, name)
        config = client.Configuration()
        config.client_side_validation = True
        for attr, json_name in cls.attribute_map.items():
            self.types[json_name] = cls.openapi_types[attr]
            self.attr[json_name] = attr
            # A required field's setter raises ValueError for None.
            probe = cls.__new__(cls)
            probe.local_vars_configuration = config
            try:
                getattr(cls, attr).fset(probe, None)
            except ValueError:
                self.required.add(json_name)
        for json_name, type_name in EXTENSIONS.get(name, {}).items():
            self.types[json_name] = type_name
            self.attr[json_name] = json_name


_models = {}


def model(name):
    if name not in _models:
        _models[name] = Model(name)
    return _models[name]


def is_model(type_name):
    return type_name in NEW_MODELS or (
        type_name[:1].isupper() and isinstance(getattr(models, type_name, None), type))


def type_word(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


def join(path, field):
    return field if not path else path + "." + field


class Checker:
    def __init__(self):
        self.errors = []

    def error(self, where, path, problem):
        self.errors.append("%s: %s: %s" % (where, path or "(object)", problem))

    def check_model(self, where, path, value, model_name):
        if not isinstance(value, dict):
            self.error(where, path, "expected a map (%s), got %s" % (model_name, type_word(value)))
            return
        m = model(model_name)
        for key, item in value.items():
            if key not in m.types:
                hint = difflib.get_close_matches(str(key), list(m.types), n=1)
                self.error(where, join(path, str(key)), "unknown field" +
                           (" (did you mean %s?)" % hint[0] if hint else ""))
                continue
            if item is None:
                continue  # null is an absent field; a required one is reported below
            self.check_value(where, join(path, key), item, m.types[key], (model_name, m.attr[key]))
        for key in sorted(m.required):
            if value.get(key) is None:
                self.error(where, join(path, key), "required field missing")

    def check_value(self, where, path, value, type_name, field):
        list_of = _LIST.match(type_name)
        dict_of = _DICT.match(type_name)
        if list_of:
            if not isinstance(value, list):
                self.error(where, path, "expected a list, got %s" % type_word(value))
                return
            for i, item in enumerate(value):
                self.check_value(where, "%s[%d]" % (path, i), item, list_of.group(1), None)
        elif dict_of:
            if not isinstance(value, dict):
                self.error(where, path, "expected a map, got %s" % type_word(value))
                return
            item_type = "quantity" if field in QUANTITY_MAPS else dict_of.group(1)
            for key, item in value.items():
                self.check_value(where, '%s["%s"]' % (path, key), item, item_type, None)
        elif type_name == "object":
            if field in INT_OR_STRING and (isinstance(value, bool) or
                                           not isinstance(value, (int, str))):
                self.error(where, path, "expected an int or a string, got %s" % type_word(value))
        elif type_name == "quantity":
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                self.error(where, path, "expected a quantity, got %s" % type_word(value))
        elif is_model(type_name):
            self.check_model(where, path, value, type_name)
        else:
            expected = {"str": str, "datetime": str, "date": str, "int": int, "bool": bool,
                        "float": (int, float)}.get(type_name)
            if expected is None:
                self.error(where, path, "the validator does not know the type %s" % type_name)
            elif (isinstance(value, bool) != (type_name == "bool") or
                  not isinstance(value, expected)):  # a bool is an int to Python
                self.error(where, path, "expected %s, got %s" % (type_name, type_word(value)))

    def check_object(self, index, obj):
        if not isinstance(obj, dict):
            self.error("document %d" % index, "", "expected an object (a map), got %s" %
                       type_word(obj))
            return
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        name = metadata.get("name") or metadata.get("generateName")
        where = "%s/%s" % (kind, name) if name else "%s (document %d)" % (kind, index)
        if not name:
            self.error(where, "metadata.name", "required field missing")
        model_name = KINDS.get((api_version, kind))
        if model_name is None:
            self.error(where, "", "unknown kind %s in apiVersion %s (known: %s)" % (
                kind, api_version, ", ".join("%s %s" % k for k in sorted(KINDS))))
            return
        self.check_model(where, "", obj, model_name)


def check_documents(documents):
    """The problems of the objects, one line each; empty when all pass. None documents (an
    empty YAML document) are skipped."""
    checker = Checker()
    for index, obj in enumerate(documents):
        if obj is not None:
            checker.check_object(index, obj)
    return checker.errors


def render(directory):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        sys.exit("kubectl is not installed; run scripts/setup.sh (it installs Debian's "
                 "kubernetes-client when no kubectl exists)")
    r = subprocess.run([kubectl, "kustomize", directory], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    if r.returncode != 0:
        sys.exit("kubectl kustomize %s failed (exit %d):\n%s" % (directory, r.returncode, r.stderr))
    return r.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kustomize", metavar="DIR", help="render DIR with kubectl kustomize")
    parser.add_argument("files", nargs="*", help="YAML files ('-': stdin)")
    args = parser.parse_args()
    if bool(args.kustomize) == bool(args.files):
        parser.error("give either --kustomize DIR or files")
    if args.kustomize:
        sources = [(args.kustomize, render(args.kustomize))]
    else:
        sources = [(f, sys.stdin.read() if f == "-" else open(f).read()) for f in args.files]
    failed = False
    for source, text in sources:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
        errors = check_documents(documents)
        if not documents:
            errors = ["no object"]
        for e in errors:
            print("%s: %s" % (source, e), file=sys.stderr)
        if errors:
            failed = True
        else:
            kinds = sorted("%s/%s" % (d["kind"], d["metadata"]["name"]) for d in documents)
            print("%s: %d objects pass the schema of Kubernetes 1.22 (+ %s): %s" % (
                source, len(documents), ", ".join(sorted(NEW_MODELS)), ", ".join(kinds)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
