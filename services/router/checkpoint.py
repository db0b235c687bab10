"""The versioned policy artifact: one safetensors file a Route call can load without pickle.

Tensors hold the learned modules (`rejector.*` or `decider.*`, and for SDR the local tiny LM as
`local.*` when the job trained it); the safetensors metadata holds one JSON document `policy`
with FORMAT, VERSION, the kind ("rejector" | "sdr") and everything else needed to decide: agent
names and costs, model references for remote calls, the input the policy expects, MILD's margins,
SDR's lambda calibration. A policy is identified by its artifact's sha256.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import torch
from paperworks.shared.checkpoints import safetensors_metadata
from paperworks.shared.errors import FailedPrecondition
from safetensors import SafetensorError
from safetensors.torch import load as load_bytes
from safetensors.torch import save as save_bytes

FORMAT = "paperworks.router.policy"
VERSION = 1
FILE_NAME = "policy.safetensors"


@dataclass
class Policy:
    meta: dict[str, Any]
    tensors: dict[str, torch.Tensor]

    @property
    def kind(self) -> str:
        return self.meta["kind"]

    def state(self, prefix: str) -> dict[str, torch.Tensor]:
        return {k[len(prefix) + 1 :]: v for k, v in self.tensors.items() if k.startswith(prefix + ".")}


def state_with_prefix(prefix: str, module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {f"{prefix}.{k}": v.detach().contiguous().cpu() for k, v in module.state_dict().items()}


def dump_policy(meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> bytes:
    document = {"format": FORMAT, "version": VERSION, **meta}
    return save_bytes(tensors, metadata={"policy": json.dumps(document)})


def load_policy(data: bytes) -> Policy:
    try:
        tensors = load_bytes(data)
        meta = _metadata(data)
    except (SafetensorError, ValueError) as exc:
        raise FailedPrecondition(f"the policy artifact is not a readable safetensors file: {exc}") from exc
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise FailedPrecondition(
            f"the artifact is not a router policy of version {VERSION} "
            f"(format {meta.get('format')!r}, version {meta.get('version')!r})"
        )
    return Policy(meta=meta, tensors=tensors)


def _metadata(data: bytes) -> dict[str, Any]:
    """The policy document kept in the safetensors metadata as `policy`."""
    raw = safetensors_metadata(data).get("policy")
    if raw is None:
        raise FailedPrecondition("the safetensors file carries no router policy metadata")
    return json.loads(raw)
