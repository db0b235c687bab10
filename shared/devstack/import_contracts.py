"""`make lint`'s import contracts: import-linter over the one `paperworks` namespace.

The namespace is assembled from four folders (protos/paperworks, shared, kernels, services) by the
editable install's import hook, which import-linter's graph builder cannot follow; so the folders
are copied into one temporary tree, and import-linter runs on it in an interpreter that skips the
site hook (-S) with the virtualenv's packages on the path. The contracts live in pyproject.toml,
[tool.importlinter]. Exit status: import-linter's.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from paperworks.shared.devstack.deploy import ROOT

FOLDERS = {"": ROOT / "protos" / "paperworks", "shared": ROOT / "shared", "kernels": ROOT / "kernels",
           "services": ROOT / "services"}


def assemble(dest: Path) -> Path:
    package = dest / "paperworks"
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc")
    for sub, folder in FOLDERS.items():
        shutil.copytree(folder, package / sub if sub else package, ignore=ignore, dirs_exist_ok=True)
    return package


def lint(tree: Path, extra_args: list[str] | None = None) -> subprocess.CompletedProcess:
    """import-linter over an assembled tree (the folder holding `paperworks/`)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), sysconfig.get_paths()["purelib"]])}
    code = ("import sys; from importlinter.cli import lint_imports_command as run; "
            "sys.argv = ['lint-imports', *sys.argv[1:]]; sys.exit(run())")
    return subprocess.run([sys.executable, "-S", "-c", code, str(ROOT / "pyproject.toml"),
                           *(extra_args or [])], env=env, cwd=tree, capture_output=True, text=True)


def check(extra_args: list[str] | None = None) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="paperworks-imports-") as tmp:
        assemble(Path(tmp))
        return lint(Path(tmp), extra_args)


if __name__ == "__main__":
    result = check(sys.argv[1:])
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.exit(result.returncode)
