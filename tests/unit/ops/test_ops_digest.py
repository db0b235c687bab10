"""ops' method and its job handler, alone: the chain against hashlib, the handler's progress,
artifact and injected transient failure on a stand-in context (no stack, no database)."""
from __future__ import annotations

import hashlib

import pytest
from paperworks.services.ops.digest import digest_chain
from paperworks.services.ops.spec import SPEC, DigestParams
from paperworks.services.ops.tasks import run_digest
from paperworks.shared.errors import TransientError
from pydantic import ValidationError
from support import chain as hashlib_chain  # the chain recomputed with hashlib alone


def test_one_round_is_sha256_of_sha256_of_the_seed_bytes():
    expected = hashlib.sha256(hashlib.sha256(b"\x00" * 8).digest()).hexdigest()
    assert digest_chain(0, 1, 1) == [expected]


@pytest.mark.parametrize("seed, steps, rounds", [(0, 1, 1), (7, 5, 1000), (2**64 - 1, 3, 17)])
def test_chain_matches_hashlib_step_by_step(seed, steps, rounds):
    seen = []
    checkpoints = digest_chain(seed, steps, rounds, on_step=lambda step, state: seen.append((step, state)))
    assert checkpoints == hashlib_chain(seed, steps, rounds)
    assert seen == list(enumerate(checkpoints, start=1))


def test_params_refuse_out_of_range_values():
    for bad in ({"seed": -1, "steps": 1, "rounds_per_step": 1},
                {"seed": 1, "steps": 10_001, "rounds_per_step": 1},
                {"seed": 1, "steps": 1, "rounds_per_step": 0}):
        with pytest.raises(ValidationError):
            DigestParams(**bad)
    assert SPEC.kind("digest").params is DigestParams


class StandIn:
    """The slice of JobContext the handler uses."""

    def __init__(self, attempt: int = 1):
        self.attempt, self.steps, self.stored = attempt, [], {}

    def progress(self, step, total_steps, stage="", message=""):
        self.steps.append((step, total_steps, stage))

    def put_json(self, name, obj):
        self.stored[name] = obj


def test_handler_reports_each_step_and_stores_the_checkpoints():
    ctx = StandIn()
    result = run_digest(DigestParams(seed=3, steps=4, rounds_per_step=10), ctx)
    expected = hashlib_chain(3, 4, 10)
    assert result == {"digest": expected[-1], "steps": 4}
    assert ctx.steps == [(s, 4, "hashing") for s in range(1, 5)]
    assert ctx.stored["checkpoints.json"] == {"seed": 3, "checkpoints": expected}


def test_injected_failure_is_transient_and_only_on_the_first_attempt():
    params = DigestParams(seed=5, steps=4, rounds_per_step=10, fail_once_at_step=2)
    first = StandIn(attempt=1)
    with pytest.raises(TransientError):
        run_digest(params, first)
    assert [s for s, _, _ in first.steps] == [1]
    assert run_digest(params, StandIn(attempt=2))["digest"] == hashlib_chain(5, 4, 10)[-1]
