"""Inputs of the moe service: the synthetic two-modality token stream (`dpsl.world`, rebuilt from
the parameters an MoE's checkpoint records), dense models (an earlier upcycle job's
dense.safetensors, an upload, an s3:// object or a server path, through
`paperworks.shared.inputs.resolve_input`), MoEs named by job id, and the small files the README
examples start from:

    python -m paperworks.services.moe.data tokens ./tokens.npy --batch 2 --seed 0
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from paperworks.services.moe import checkpoint
from paperworks.services.moe.dpsl.world import World
from paperworks.services.moe.spec import MOE_KINDS, WorldParams
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import resolve_input


def world(params: WorldParams | dict) -> World:
    p = params if isinstance(params, WorldParams) else WorldParams.model_validate(params)
    return World(p.seed, p.d_in, p.classes, p.length, p.noise)


def dense_model(ref, ctx):
    """A dense TokenClassifier from an InputRef (refusals name `dense`)."""
    path = resolve_input(ref, ctx, "moe", "dense")
    if not path.is_file():
        raise InvalidArgument("dense", "must name a dense.safetensors file, not a folder")
    if path.stat().st_size > checkpoint.MAX_BYTES:
        raise InvalidArgument("dense", f"larger than {checkpoint.MAX_BYTES} bytes")
    model, info = checkpoint.from_bytes(path.read_bytes(), ctx.device, "dense")
    if model.config.experts:
        raise InvalidArgument("dense", "is already a mixture of experts; upcycle a dense model")
    return model, info


def moe_of(ctx, job_id: str, field: str = "model_job_id"):
    """(MoE on the job's device, its info) from a tenant's finished upcycle or train_moe job."""
    job = ctx.finished_job("moe", job_id, field)
    if job.kind not in MOE_KINDS:
        raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not one of {', '.join(MOE_KINDS)}")
    raw, _ = ctx.job_artifact("moe", job_id, checkpoint.MODEL, field)
    return checkpoint.from_bytes(raw, ctx.device, field)


def _main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m paperworks.services.moe.data")
    sub = p.add_subparsers(dest="what", required=True)
    t = sub.add_parser("tokens", help="a (batch, 8, 16) float32 .npy of the default world's sequences")
    t.add_argument("out", type=Path)
    t.add_argument("--batch", type=int, default=2)
    t.add_argument("--world-seed", type=int, default=0)
    t.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    batch = world(WorldParams(seed=a.world_seed)).sample(np.random.default_rng(a.seed), a.batch)
    np.save(a.out, batch.x.numpy())
    print(a.out)


if __name__ == "__main__":
    _main()
