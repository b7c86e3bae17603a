#!/usr/bin/python3
"""Installs the streamlearn Python package into a fresh venv, as docs/CLIENT.md says for
Debian without PyPI (ctest python.Install, the fixture of the other python.* tests):

    python3 -m venv --system-site-packages VENV
    VENV/bin/pip install --no-build-isolation client/python

from a copy of client/python and proto/ laid out as in the repository (so the build never
writes into the source tree), then removes the copy and checks that the installed package
imports without it: the stubs were generated at build time.

    /usr/bin/python3 tests/python/install_package.py SOURCE_DIR VENV_DIR
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

_IGNORE = shutil.ignore_patterns("build", "dist", "*.egg-info", "_proto", "__pycache__")


def run(argv, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, **kwargs)
    if result.returncode != 0:
        print(f"FAILED (exit {result.returncode}): {' '.join(argv)}\n{result.stdout}")
        sys.exit(1)
    return result


def main(argv) -> int:
    if len(argv) != 3:
        print("usage: install_package.py SOURCE_DIR VENV_DIR", file=sys.stderr)
        return 2
    source, venv = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    started = time.monotonic()
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    python = os.path.join(venv, "bin", "python")
    with tempfile.TemporaryDirectory(prefix="streamlearn-py-src-") as tree:
        package = os.path.join(tree, "client", "python")
        shutil.copytree(os.path.join(source, "client", "python"), package, ignore=_IGNORE)
        shutil.copytree(os.path.join(source, "proto"), os.path.join(tree, "proto"))
        result = run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                      "--disable-pip-version-check", "--no-cache-dir", package])
        print(result.stdout.strip().splitlines()[-1])
    # The copy is gone: the installed package must import on its own, from anywhere, without
    # protoc on PATH.
    check = ("import os, streamlearn, streamlearn.pb, sys; "
             "assert streamlearn.__file__.startswith(sys.prefix), streamlearn.__file__; "
             "print(os.path.dirname(streamlearn.__file__))")
    result = run([python, "-c", check], cwd="/", env={"PATH": "", "HOME": tree})
    installed = result.stdout.strip()
    generated = sorted(f for f in os.listdir(os.path.join(installed, "_proto"))
                       if f.endswith(".py"))
    print(f"installed {installed} with {len(generated)} generated modules "
          f"in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
