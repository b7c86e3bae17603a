"""Generates the streamlearn package's protobuf and gRPC modules from proto/*.proto.

Used by setup.py at build time (never at import time). Two generators:

- ``protoc``: ``protoc --python_out --grpc_out --plugin=protoc-gen-grpc=grpc_python_plugin``
  when both programs are on PATH (Debian: protobuf-compiler, protobuf-compiler-grpc);
- ``grpc_tools``: ``python -m grpc_tools.protoc`` otherwise (the grpcio-tools package).

``STREAMLEARN_STUBS_GENERATOR=protoc|grpc_tools`` picks one explicitly.

protoc writes modules that import each other absolutely (``import common_pb2 as ...``); they
are rewritten to package-relative imports (``from . import common_pb2 as ...``), so the
generated modules live inside the package (``streamlearn._proto``) and never on sys.path.

    python3 build_stubs.py PROTO_DIR OUT_DIR     # what setup.py does, by hand
"""

import glob
import os
import re
import shutil
import subprocess
import sys
from typing import List, Optional, Tuple

GENERATOR_ENV = "STREAMLEARN_STUBS_GENERATOR"

_ABSOLUTE_IMPORT = re.compile(r"^import (\w+_pb2)((?: as \w+)?)$", re.MULTILINE)

_INIT = '''"""Protobuf and gRPC modules generated from proto/*.proto when the package was built
({generator}). Do not edit; they are not kept in the repository."""
'''


class StubError(Exception):
    """The stubs cannot be generated (no .proto files, no generator, protoc failed)."""


def proto_files(proto_dir: str) -> List[str]:
    """The .proto files of proto_dir, sorted. Raises StubError when there are none."""
    protos = sorted(glob.glob(os.path.join(proto_dir, "*.proto")))
    if not protos:
        raise StubError(f"no .proto files in {proto_dir!r}")
    return protos


def _generator_command(out_dir: str, proto_dir: str) -> Tuple[str, List[str]]:
    """(name, argv prefix) of the generator to use; raises StubError if there is none."""
    wanted: Optional[str] = os.environ.get(GENERATOR_ENV) or None
    if wanted not in (None, "protoc", "grpc_tools"):
        raise StubError(f"{GENERATOR_ENV} must be 'protoc' or 'grpc_tools', got {wanted!r}")
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if wanted in (None, "protoc") and protoc and plugin:
        return "protoc", [protoc, f"--plugin=protoc-gen-grpc={plugin}",
                          f"--python_out={out_dir}", f"--grpc_out={out_dir}",
                          f"-I{proto_dir}"]
    if wanted == "protoc":
        raise StubError("protoc and grpc_python_plugin must both be on PATH "
                        f"({GENERATOR_ENV}=protoc)")
    try:
        import grpc_tools  # noqa: F401  (only to find it)
    except ImportError as e:
        raise StubError(
            "cannot generate the gRPC stubs: neither protoc with grpc_python_plugin on PATH "
            "(Debian: apt install protobuf-compiler protobuf-compiler-grpc) nor the "
            "grpcio-tools package (pip install grpcio-tools) is available") from e
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    return "grpc_tools", [sys.executable, "-m", "grpc_tools.protoc", f"-I{include}",
                          f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
                          f"-I{proto_dir}"]


def make_relative(path: str) -> int:
    """Rewrites the absolute imports of generated modules in file `path`; returns how many."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    new, count = _ABSOLUTE_IMPORT.subn(r"from . import \1\2", text)
    if count:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return count


def generate(proto_dir: str, out_dir: str) -> str:
    """Generates the modules of proto_dir/*.proto into out_dir (a package: it gets an
    __init__.py), with package-relative imports. Returns the generator's name."""
    protos = proto_files(proto_dir)
    os.makedirs(out_dir, exist_ok=True)
    for old in glob.glob(os.path.join(out_dir, "*_pb2*.py")):
        os.remove(old)
    name, argv = _generator_command(out_dir, proto_dir)
    result = subprocess.run(argv + protos, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            universal_newlines=True)
    if result.returncode != 0:
        raise StubError(f"{name} failed (exit {result.returncode}): {result.stderr.strip()}")
    for proto in protos:
        stem = os.path.splitext(os.path.basename(proto))[0]
        for module in (f"{stem}_pb2.py", f"{stem}_pb2_grpc.py"):
            path = os.path.join(out_dir, module)
            if not os.path.exists(path):
                raise StubError(f"{name} did not write {module}")
            make_relative(path)
    with open(os.path.join(out_dir, "__init__.py"), "w", encoding="utf-8") as f:
        f.write(_INIT.format(generator=name))
    return name


def main(argv: List[str]) -> int:
    """The command line: build_stubs.py PROTO_DIR OUT_DIR."""
    if len(argv) != 3:
        print("usage: build_stubs.py PROTO_DIR OUT_DIR", file=sys.stderr)
        return 2
    try:
        name = generate(argv[1], argv[2])
    except StubError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"generated the stubs of {argv[1]} into {argv[2]} with {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
