"""The moe service's edges without a stack: the parameter models' refusals (each names its field),
the checkpoint round trip and its refusals, the router-term translation and the Act query checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.moe.v1 import moe_pb2
from paperworks.services.moe import checkpoint, skills, tasks
from paperworks.services.moe.dpsl.model import ModelConfig, TokenClassifier, upcycle
from paperworks.services.moe.spec import TrainMoEParams, UpcycleParams
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.rpc.tensors import from_numpy
from pydantic import ValidationError


def test_parameter_refusals():
    with pytest.raises(ValidationError, match="top_k"):
        UpcycleParams(experts=2, top_k=3)
    with pytest.raises(ValidationError, match="per_modality applies to dpsl"):
        TrainMoEParams(
            model_job_id="j", router_losses=[{"type": "z_loss", "per_modality": [{"alpha": [1, 1]}] * 2}]
        )
    with pytest.raises(ValidationError, match="alpha"):
        TrainMoEParams(model_job_id="j", router_losses=[{"type": "dpsl", "alpha": [0.0]}])
    with pytest.raises(ValidationError, match="type"):
        TrainMoEParams(model_job_id="j", router_losses=[{"type": "kl_mean"}])
    assert TrainMoEParams(model_job_id="j", router_losses=[{"type": "dpsl", "alpha": []}]).router_losses[
        0
    ].alpha == [1.0]


def test_router_terms_name_the_mismatched_field():
    params = TrainMoEParams(model_job_id="j", router_losses=[{"type": "dpsl", "alpha": [1, 1, 1]}])
    with pytest.raises(InvalidArgument) as exc:
        tasks.router_terms(params, 4)
    assert "router_losses[0].alpha" in str(exc.value)
    ok = TrainMoEParams(
        model_job_id="j", router_losses=[{"type": "dpsl", "per_modality": [{"alpha": [1, 1]}] * 2}]
    )
    assert tasks.router_terms(ok, 2)[0].per_modality == [[1.0, 1.0], [1.0, 1.0]]


def test_checkpoint_round_trip_and_refusal():
    torch.manual_seed(0)
    moe = upcycle(TokenClassifier(ModelConfig(d_model=16, heads=2, d_ff=16)), 4, 2).eval()
    moe.moe_layers()[0].bias += 0.5
    raw = checkpoint.to_bytes(moe, {"world": {"seed": 3}})
    back, info = checkpoint.from_bytes(raw, "cpu", "model_job_id")
    x = torch.randn(2, 8, 16)
    torch.testing.assert_close(back(x), moe(x))
    assert info == {"world": {"seed": 3}} and float(back.moe_layers()[0].bias[0]) == 0.5
    with pytest.raises(InvalidArgument, match="dense"):
        checkpoint.from_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ", "cpu", "dense")


def test_act_query_checks():
    good = moe_pb2.ActRequest(
        observation=from_numpy(np.zeros(26, np.float32)), instruction="open drawer, then place block"
    )
    obs, text = skills.check_query(good)
    assert obs.shape == (26,) and text == "open drawer, then place block"
    for request, field in (
        (
            moe_pb2.ActRequest(observation=from_numpy(np.zeros(5, np.float32)), instruction="x"),
            "observation.shape",
        ),
        (
            moe_pb2.ActRequest(observation=from_numpy(np.zeros(26, np.float32)), instruction="dance"),
            "instruction",
        ),
        (
            moe_pb2.ActRequest(observation=from_numpy(np.full(26, np.nan, np.float32)), instruction="x"),
            "observation.data",
        ),
    ):
        with pytest.raises(InvalidArgument) as exc:
            skills.check_query(request)
        assert field in str(exc.value)
