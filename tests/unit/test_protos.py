"""The committed stubs are exactly what `make proto` generates; the protos follow buf's style."""
from __future__ import annotations

import re

from paperworks.shared.devstack.protogen import PROTO_ROOT, generate, proto_files

STEP = "services/README.md step 1"


def test_committed_stubs_match_the_protos(tmp_path):
    generate(tmp_path)
    stubs = ("*_pb2*.py", "*_pb2*.pyi")  # not bytecode caches
    generated = sorted(p.relative_to(tmp_path) for g in stubs for p in tmp_path.rglob(g))
    committed = sorted(p.relative_to(PROTO_ROOT) for g in stubs for p in PROTO_ROOT.rglob(g))
    assert generated == committed, f"stale or extra stubs: run `make proto` ({STEP})"
    for rel in generated:
        assert (tmp_path / rel).read_bytes() == (PROTO_ROOT / rel).read_bytes(), (
            f"{rel} differs from what the protos generate: run `make proto` ({STEP})"
        )


def test_protos_are_versioned_and_have_request_response_per_rpc():
    for path in proto_files():
        text = path.read_text()
        rel = path.relative_to(PROTO_ROOT).parent.as_posix().replace("/", ".")
        found = re.search(r"^package ([\w.]+);", text, re.MULTILINE)
        assert found, f"{path}: no `package {rel};` line ({STEP})"
        package = found.group(1)
        assert package == rel, f"{path}: package {package} must match its folder {rel} ({STEP})"
        assert re.search(r"\.v\d+$", package), f"{path}: package must end in a version ({STEP})"
        for name, req, resp in re.findall(
            r"rpc (\w+)\((?:stream )?([\w.]+)\) returns \((?:stream )?([\w.]+)\)", text
        ):
            assert req == f"{name}Request" and resp == f"{name}Response", (
                f"{path}: rpc {name} must take {name}Request and return {name}Response ({STEP})")
