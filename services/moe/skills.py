"""The SkillNet side of the service (the method is `skillnet/`, written against its API): skill
policies as job artifacts (`policy.safetensors` + `policy.json`, no pickles), training on scripted
demonstrations of every task, seeded rollout evaluation with a rendered strip, and the Act query."""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import numpy as np
from paperworks.services.moe import skillnet
from paperworks.shared.errors import InvalidArgument
from PIL import Image

POLICY, CONFIG = "policy.safetensors", "policy.json"
MAX_INSTRUCTION = 200


def policy_files(policy) -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as tmp:
        skillnet.save(policy, tmp)
        return {name: (Path(tmp) / name).read_bytes() for name in (POLICY, CONFIG)}


def load_policy(weights: bytes, config: bytes, device: str, field: str):
    try:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / POLICY).write_bytes(weights)
            (Path(tmp) / CONFIG).write_bytes(config)
            return skillnet.load(tmp, device)
    except (ValueError, KeyError, RuntimeError, TypeError, OSError, json.JSONDecodeError) as exc:
        raise InvalidArgument(field, f"not a SkillNet policy: {exc}") from None


def strip(frames: list[bytes], every: int = 1, limit: int = 10) -> bytes:
    """The frames side by side in one PNG."""
    images = [Image.open(io.BytesIO(f)).convert("RGB") for f in frames[::every][:limit]]
    w, h = images[0].size
    out = Image.new("RGB", (w * len(images), h), "white")
    for i, im in enumerate(images):
        out.paste(im, (i * w, 0))
    buf = io.BytesIO()
    out.save(buf, format="PNG")
    return buf.getvalue()


def check_query(request) -> tuple[np.ndarray, str]:
    """An Act request's observation (OBS_DIM,) float32 and instruction, checked before any load."""
    from paperworks.shared.rpc.tensors import to_numpy

    obs = to_numpy(request.observation, "observation")
    if obs.shape != (skillnet.OBS_DIM,):
        raise InvalidArgument("observation.shape", f"must be [{skillnet.OBS_DIM}], not {list(obs.shape)}")
    if obs.dtype not in (np.float16, np.float32, np.float64):
        raise InvalidArgument("observation.dtype", "must be float32")
    obs = obs.astype(np.float32)
    if not np.isfinite(obs).all():
        raise InvalidArgument("observation.data", "must be finite")
    text = request.instruction.strip()
    if not text or len(text) > MAX_INSTRUCTION:
        raise InvalidArgument("instruction", f"two skills in order, 1..{MAX_INSTRUCTION} characters")
    try:
        task = skillnet.parse_task(text)
    except (ValueError, KeyError) as exc:
        raise InvalidArgument("instruction", f"not a task: {exc}") from None
    if task not in skillnet.valid_tasks(True):
        raise InvalidArgument("instruction", f"{text!r} is not a valid composition of two skills")
    return obs, text
