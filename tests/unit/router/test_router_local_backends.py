"""SDR with its local model read from a directory through the shared backends (`tiny` and `hf`),
rather than trained in the job: the policy records the directory, Route reopens it, and the
local answer Route returns is exactly the backend's own greedy answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from paperworks.services.router.checkpoint import dump_policy, load_policy
from paperworks.services.router.data import TaskSuite
from paperworks.services.router.routing import load_router, route
from paperworks.services.router.sdr.local_lm import DEFAULT_TINY
from paperworks.services.router.spec import TrainDeciderParams
from paperworks.services.router.tasks import train_decider
from paperworks.shared.backends import load_backend
from paperworks.shared.backends.ref import ModelRef
from paperworks.shared.backends.tiny_model import TinyDecoder, save_tiny
from unit.backends.hf_models import save_llama


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    return save_tiny(tmp_path_factory.mktemp("tiny"), TinyDecoder(DEFAULT_TINY))


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    return save_llama(tmp_path_factory.mktemp("llama"))


@pytest.mark.parametrize("kind", ["tiny", "hf"])
def test_sdr_with_a_local_model_directory_routes_with_that_models_answer(kind, request):
    directory = request.getfixturevalue(f"{kind}_dir")
    params = TrainDeciderParams(
        local={"model": {"kind": kind, "path": str(directory)}},
        remotes=[{"name": "remote", "price": 1.0, "accuracy": [0.9, 0.9, 0.9]}],
        n_train=40,
        n_validation=30,
        n_test=30,
        steps=20,
        max_new_tokens=4,
        query_router_baseline=False,
    )
    trained = train_decider(params, lambda *_: None)
    assert trained.meta["local"]["model"]["path"] == str(directory)
    router = load_router(load_policy(dump_policy(trained.meta, trained.tensors)))

    prompt = TaskSuite().generate(1, seed=5, part=2)[0].prompt
    backend = load_backend(ModelRef(kind=kind, path=str(directory)))
    own = backend.generate([prompt], max_new_tokens=4, temperature=0.0)[0].text
    accepted = route(router, text=prompt, cost_lambda=10.0)  # the remote is never worth it
    assert accepted.accepted_local and accepted.local_answer == own == accepted.answer
    deferred = route(router, text=prompt, cost_lambda=0.0)  # quality alone decides
    assert deferred.local_answer == own
    assert len(deferred.scores) == 2 and all(0 <= s <= 1 for s in deferred.scores)
