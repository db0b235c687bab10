"""Every service README's "Examples" run as written, against a stack started by `paperworks up`.

A README's `## Examples` section holds ```sh blocks: the commands a user copies, on inputs the
section tells how to make. Each README's blocks run in order in one bash (`set -euo pipefail`, so
a failed job, whose `--watch` exits non-zero, fails the test), in a fresh folder that is not the
stack's: every input reaches the service as an upload, as it would from another machine.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from paperworks.shared.registry import services
from support import clean_environ

REPO = Path(__file__).resolve().parents[2]
SERVICES = sorted(services())
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
EXAMPLES_CALL = {"pipeline": ("clip",)}  # the services a README's examples use besides its own


def examples(service: str) -> str:
    """The shell text of the README's `## Examples` section (its ```sh blocks, in order)."""
    text = (REPO / "services" / service / "README.md").read_text()
    section = re.search(r"^## Examples\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, f"services/{service}/README.md has no '## Examples' section"
    blocks = BLOCK.findall(section.group(1))
    assert blocks, f"services/{service}/README.md's Examples hold no ```sh block"
    return "\n".join(blocks)


@pytest.fixture(scope="module")
def environ(request, tmp_path_factory):
    """One stack of the services whose examples this run selected, up from a folder of its own
    (`paperworks up`, dev mode): one start for all of them."""
    chosen = {item.callspec.params["service"] for item in request.session.items
              if item.module is request.module and hasattr(item, "callspec")}
    selected = sorted(chosen.union(*(EXAMPLES_CALL.get(name, ()) for name in chosen)))
    state = tmp_path_factory.mktemp("readme-stack")
    bin_dir = str(Path(sys.executable).parent)
    env = {**clean_environ(), "PAPERWORKS_STATE_DIR": str(state), "COLUMNS": "160",
           "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}", "PAPERWORKS_KAFKA_SESSION_TIMEOUT_MS": "3000"}
    home = tmp_path_factory.mktemp("server-home")
    args = [arg for name in selected for arg in ("--service", name)]
    subprocess.run([sys.executable, "-m", "paperworks.shared.sdk.cli", "up", *args], env=env, cwd=home,
                   check=True, capture_output=True, timeout=300)
    yield env
    subprocess.run([sys.executable, "-m", "paperworks.shared.sdk.cli", "down"], env=env, cwd=home,
                   capture_output=True, timeout=120)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("service", SERVICES)
def test_readme_examples_run(environ, service, tmp_path):
    script = "set -euo pipefail\n" + examples(service)
    proc = subprocess.run(["bash", "-c", script], env=environ, cwd=tmp_path, capture_output=True,
                          text=True, timeout=840)
    assert proc.returncode == 0, (
        f"services/{service}/README.md examples failed (exit {proc.returncode}):\n"
        f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
