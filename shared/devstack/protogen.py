"""Generates the Python stubs from protos/ with grpcio-tools.

The stubs are committed beside their .proto files (so `paperworks.v1.jobs_pb2`
imports without a build step); a test regenerates them into a temporary folder
and fails when they differ from what is committed.
"""
from __future__ import annotations

import sys
from pathlib import Path

import grpc_tools
from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parents[2] / "protos"


def proto_files(root: Path = PROTO_ROOT) -> list[Path]:
    return sorted(root.rglob("*.proto"))


def generate(out_dir: Path = PROTO_ROOT, root: Path = PROTO_ROOT) -> None:
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    files = [str(p.relative_to(root)) for p in proto_files(root)]
    args = [
        "grpc_tools.protoc",
        f"-I{root}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *files,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed; see the messages above")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_ROOT)
