"""Builds the streamlearn package; the metadata is in pyproject.toml.

The protobuf and gRPC modules (``streamlearn._proto``) are generated here, at build time, from
the repository's proto/*.proto (build_stubs.py says how). Where the .proto files are found, in
this order:

1. ``$STREAMLEARN_PROTO_DIR``;
2. ``proto/`` beside this file (a source distribution carries a copy there);
3. ``../../proto`` (this directory inside the repository).
"""

import os
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_stubs  # noqa: E402  (beside this file)

PACKAGE = "streamlearn"
GENERATED = "_proto"


def find_proto_dir() -> str:
    """The directory of the .proto files (see the module docstring)."""
    candidates = [os.environ.get("STREAMLEARN_PROTO_DIR"), os.path.join(HERE, "proto"),
                  os.path.join(HERE, os.pardir, os.pardir, "proto")]
    for candidate in candidates:
        if candidate and os.path.isdir(candidate):
            try:
                build_stubs.proto_files(candidate)
            except build_stubs.StubError:
                continue
            return os.path.abspath(candidate)
    raise SystemExit("error: cannot find the streamlearn .proto files: set STREAMLEARN_PROTO_DIR "
                     "or build from the repository's client/python directory")


class BuildPyWithStubs(build_py):
    """build_py that also generates streamlearn/_proto from the .proto files.

    A regular build writes them into the build directory only; an editable install
    (``pip install -e``) into the source tree, where the editable package is imported from
    (client/python/.gitignore keeps them out of the repository).
    """

    def run(self) -> None:
        """The usual build_py, then the stubs (see the class docstring)."""
        super().run()
        if getattr(self, "editable_mode", False):
            out = os.path.join(HERE, PACKAGE, GENERATED)
        else:
            out = os.path.join(self.build_lib, PACKAGE, GENERATED)
        proto_dir = find_proto_dir()
        try:
            name = build_stubs.generate(proto_dir, out)
        except build_stubs.StubError as e:
            raise SystemExit(f"error: {e}") from e
        self.announce(f"generated {PACKAGE}.{GENERATED} from {proto_dir} with {name}", level=2)


class SdistWithProtos(sdist):
    """sdist that carries a copy of the .proto files (proto/), so it builds anywhere."""

    def make_release_tree(self, base_dir, files) -> None:
        """The usual tree, plus proto/ with the .proto files."""
        super().make_release_tree(base_dir, files)
        proto_dir = find_proto_dir()
        target = os.path.join(base_dir, "proto")
        os.makedirs(target, exist_ok=True)
        for path in build_stubs.proto_files(proto_dir):
            shutil.copy2(path, target)


# streamlearn._proto is not listed: setup.py generates it into the build.
setup(packages=[PACKAGE], package_data={PACKAGE: ["py.typed"]},
      cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProtos})
