"""Policies end to end without the stack: train small ones, save, load, route, call remotes."""

from __future__ import annotations

import numpy as np
import pytest
from paperworks.services.router.checkpoint import dump_policy, load_policy
from paperworks.services.router.routing import RemoteCallFailed, load_router, route
from paperworks.services.router.sdr.decider import lambda_for_budget
from paperworks.services.router.spec import TrainDeciderParams, TrainRejectorParams
from paperworks.services.router.tasks import train_decider, train_rejector
from paperworks.shared.errors import FailedPrecondition, InvalidArgument, violations_from_pydantic
from pydantic import ValidationError


def quiet(*_):
    pass


@pytest.fixture(scope="module")
def rejector_policy():
    params = TrainRejectorParams(
        synthetic={"imbalance": 20, "dim": 4},
        loss="LOSS_MILD",
        n_train=300,
        n_validation=200,
        n_test=200,
        steps=40,
        margin_scales=[0.0, 2.0],
    )
    return train_rejector(params, quiet)


@pytest.fixture(scope="module")
def sdr_policy(server):
    params = TrainDeciderParams(
        local={"train_tiny": {"steps": 30}},
        remotes=[
            {
                "name": "real",
                "price": 1.0,
                "model": {"kind": "openai", "url": server.url, "model": "remote-model", "timeout_s": 5},
            },
            {"name": "sim", "price": 10.0, "accuracy": [0.9, 0.9, 0.9]},
        ],
        n_train=60,
        n_validation=40,
        n_test=60,
        steps=30,
        query_router_baseline=False,
    )
    return train_decider(params, quiet)


def loaded(trained):
    return load_router(load_policy(dump_policy(trained.meta, trained.tensors)))


def test_rejector_policy_round_trips_and_routes_feature_vectors(rejector_policy):
    router = loaded(rejector_policy)
    x = np.ones(4, dtype=np.float32)
    decision = route(router, features=x)
    assert decision.agent == rejector_policy.meta["agents"][decision.index]["name"]
    assert sum(decision.scores) == pytest.approx(1.0, abs=1e-5)
    assert decision.index == int(np.argmax(decision.scores)) and decision.decision_ms >= 0
    assert route(router, features=x[None, :]).index == decision.index
    report = rejector_policy.report
    assert set(report["runs"]) == {"mild", "two_stage_ce", "logit_adjusted_ce"}
    assert report["policy_loss"] == "mild" and "tau" in report["runs"]["logit_adjusted_ce"]
    assert rejector_policy.png.startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"features": np.ones(3, np.float32)}, "features.shape"),
        ({"features": np.full(4, np.nan, np.float32)}, "features.data"),
        ({"text": "hello"}, "features"),
        ({"features": np.ones(4, np.float32), "cost_lambda": 0.5}, "cost_lambda"),
        ({"features": np.ones(4, np.float32), "budget": -1.0}, "budget"),
    ],
)
def test_rejector_route_rejects_bad_input_naming_the_field(rejector_policy, kwargs, field):
    with pytest.raises(InvalidArgument) as info:
        route(loaded(rejector_policy), **kwargs)
    assert info.value.field == field


def test_policy_loading_rejects_foreign_bytes(rejector_policy):
    with pytest.raises(FailedPrecondition):
        load_policy(b"not a safetensors file at all")
    from safetensors.torch import save

    with pytest.raises(FailedPrecondition, match="version"):
        load_policy(save(rejector_policy.tensors, metadata={"policy": '{"format": "other", "version": 9}'}))


def test_sdr_traces_score_the_real_remote_by_checking_its_answers(sdr_policy, server):
    by_family = sdr_policy.report["train_quality_by_family"]["real"]
    assert by_family == [1.0, 1.0, 0.0]  # add, upper right; lookups wrong (the scripted solver)
    assert any(p.startswith("get:") for p in server.prompts)
    assert sdr_policy.meta["options"][1]["model"]["url"] == server.url
    assert set(sdr_policy.summary["areas"]) == {"sdr", "always_local", "always_best", "confidence_cascade"}


def test_sdr_route_accepts_local_when_remotes_are_dear_and_calls_the_chosen_remote(sdr_policy, server):
    router = loaded(sdr_policy)
    local = route(router, text="3+4=", cost_lambda=1e6)
    assert local.accepted_local and local.answer == local.local_answer and not local.executed
    assert local.utilities[0] == pytest.approx(local.scores[0])
    router.module.heads.bias.data[:] = -20.0
    router.module.heads.bias.data[1] = 20.0  # the real remote predicted best
    remote = route(router, text="3+4=", cost_lambda=0.0, execute=True)
    assert remote.agent == "real" and remote.executed and remote.answer == "7"
    assert server.prompts[-1] == "3+4=" and not remote.accepted_local
    budgeted = route(router, text="up:ab=", budget=0.0)
    assert budgeted.cost_lambda == lambda_for_budget(router.validation_curve, 0.0)


def test_remote_failures_surface_with_the_servers_status_and_message(sdr_policy, server):
    router = loaded(sdr_policy)
    router.module.heads.bias.data[:] = -20.0
    router.module.heads.bias.data[1] = 20.0  # always the real remote
    server.fail_next(404, "no such model on this server", times=1)
    with pytest.raises(RemoteCallFailed) as info:
        route(router, text="1+1=", cost_lambda=0.0, execute=True)
    assert info.value.code == "NOT_FOUND" and "no such model on this server" in info.value.message
    server.fail_next(503, "overloaded", times=5)
    with pytest.raises(RemoteCallFailed) as info:
        route(router, text="1+1=", cost_lambda=0.0, execute=True, timeout_s=2)
    assert info.value.code == "UNAVAILABLE" and "overloaded" in info.value.message
    server.fail_next(0, "", times=0)
    server.delay_s = 1.0
    try:
        with pytest.raises(RemoteCallFailed) as info:
            route(router, text="1+1=", cost_lambda=0.0, execute=True, timeout_s=0.2)
        assert info.value.code == "DEADLINE_EXCEEDED"
    finally:
        server.delay_s = 0.0
    router.module.heads.bias.data[1] = -20.0
    router.module.heads.bias.data[2] = 20.0  # the simulated remote: nothing to call
    with pytest.raises(FailedPrecondition, match="no model"):
        route(router, text="1+1=", cost_lambda=0.0, execute=True)


def test_sdr_route_checks_its_input(sdr_policy):
    router = loaded(sdr_policy)
    for kwargs, field in [
        ({"text": ""}, "text"),
        ({"features": np.ones(3, np.float32)}, "features"),
        ({"text": "x" * 200}, "text"),
        ({"text": "1+1=", "cost_lambda": -1.0}, "cost_lambda"),
        ({"text": "1+1=", "timeout_s": 0.0}, "timeout_s"),
    ]:
        with pytest.raises(InvalidArgument) as info:
            route(router, **kwargs)
        assert info.value.field == field


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"synthetic": {"imbalance": 0.5}, "loss": "LOSS_MILD"}, "synthetic.imbalance"),
        ({"synthetic": {"imbalance": 5}, "loss": "LOSS_UNSPECIFIED"}, "loss"),
        ({"synthetic": {"imbalance": 5}, "loss": "LOSS_MILD", "margin_scales": [-1.0]}, "margin_scales"),
        (
            {
                "logged": {
                    "features": {"dtype": "D_TYPE_FLOAT32", "shape": ["2", "1"], "data": "AAAA"},
                    "errors": {"dtype": "D_TYPE_FLOAT32", "shape": [2, 2], "data": ""},
                    "agents": [{"name": "a"}, {"name": "b"}],
                },
                "loss": "LOSS_MILD",
            },
            "logged.features",
        ),
    ],
)
def test_rejector_parameters_name_the_offending_field(params, field):
    with pytest.raises(ValidationError) as info:
        TrainRejectorParams.model_validate(params)
    assert violations_from_pydantic(info.value).field == field


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"local": {}, "remotes": [{"name": "r", "price": 1, "accuracy": [1, 1, 1]}]}, "local"),
        (
            {
                "local": {"model": {"kind": "openai", "url": "http://x/v1", "model": "m"}},
                "remotes": [{"name": "r", "price": 1, "accuracy": [1, 1, 1]}],
            },
            "local",
        ),
        (
            {"local": {"train_tiny": {}}, "remotes": [{"name": "r", "price": 0, "accuracy": [1, 1, 1]}]},
            "remotes.0.price",
        ),
        (
            {
                "local": {"train_tiny": {"dim": 20}},
                "remotes": [{"name": "r", "price": 1, "accuracy": [1, 1, 1]}],
            },
            "local.train_tiny.dim",
        ),
        (
            {
                "local": {"train_tiny": {}},
                "remotes": [{"name": "r", "price": 1, "model": {"kind": "openai"}}],
            },
            "remotes.0.model.url",  # the shared ModelSpec names the field itself
        ),
    ],
)
def test_decider_parameters_name_the_offending_field(params, field):
    with pytest.raises(ValidationError) as info:
        TrainDeciderParams.model_validate(params)
    assert violations_from_pydantic(info.value).field == field


def test_job_edge_turns_backend_failures_into_retryable_or_final_errors():
    from paperworks.services.router.tasks import _guarded
    from paperworks.shared.backends import BackendTimeout, RemoteError
    from paperworks.shared.errors import TransientError

    def failing(exc):
        def run():
            raise exc

        return run

    with pytest.raises(TransientError, match="overloaded"):
        _guarded(failing(RemoteError(503, "", "POST /completions returned 503: overloaded")))
    with pytest.raises(TransientError):
        _guarded(failing(BackendTimeout("no response within 1s")))
    with pytest.raises(FailedPrecondition, match="does not exist"):
        _guarded(failing(RemoteError(404, "", "POST /completions returned 404: model does not exist")))


def test_unset_optional_fields_take_their_defaults_and_an_explicit_zero_is_checked():
    from paperworks.router.v1 import router_pb2
    from paperworks.shared.rpc.convert import request_params

    request = router_pb2.SubmitTrainRejectorRequest(
        synthetic=router_pb2.SyntheticMixture(imbalance=10), loss=router_pb2.LOSS_MILD
    )
    params = TrainRejectorParams.model_validate(request_params(request))
    assert (params.n_train, params.gamma, params.compare, params.synthetic.dim) == (2000, 0.5, True, 8)
    request.n_train = 0  # set, so sent: a rejector needs at least 20 training inputs
    with pytest.raises(ValidationError) as info:
        TrainRejectorParams.model_validate(request_params(request))
    assert violations_from_pydantic(info.value).field == "n_train"
    endpoint = {"kind": "openai", "url": "http://x/v1", "model": "m"}
    decider = router_pb2.SubmitTrainDeciderRequest(
        local=router_pb2.LocalModel(train_tiny=router_pb2.TrainTiny()),
        remotes=[{"name": "r", "price": 1.0, "model": endpoint}],
    )
    remote = TrainDeciderParams.model_validate(request_params(decider)).remotes[0].model
    assert (remote.timeout_s, remote.max_retries) == (30.0, 1)  # the router's defaults, not the shared ones


def test_a_local_model_directory_outside_the_data_root_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("PAPERWORKS_ROUTER_DATA_ROOT", str(root))
    params = TrainDeciderParams(
        local={"model": {"kind": "tiny", "path": str(tmp_path / "elsewhere")}},
        remotes=[{"name": "r", "price": 1.0, "accuracy": [0.9, 0.9, 0.9]}],
    )
    with pytest.raises(InvalidArgument) as info:
        train_decider(params, quiet)
    assert info.value.field == "local.model.source.path"
