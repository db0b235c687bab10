"""Where the router runs (issue 29): both jobs place every model and batch on the job context's
device, and Route's cache loads policies on the server's device (`paperworks.shared.devices`).

No GPU here, so: the handlers run whole on a stand-in context whose device is "cpu", with every
forward recording where its module and its input live; and on a context whose device is "meta"
(shapes only, no data), where the methods run until their first forward or until they hand back a
model, which must be on "meta": placement follows the context, not a hard-coded device."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest
import torch
from paperworks.services.router import data, tasks
from paperworks.services.router.checkpoint import FILE_NAME, dump_policy, load_policy
from paperworks.services.router.data import TaskSuite
from paperworks.services.router.mild import rejector
from paperworks.services.router.routing import load_router
from paperworks.services.router.sdr import decider
from paperworks.services.router.sdr.local_lm import train_local_tiny
from paperworks.services.router.spec import SPEC, TrainDeciderParams, TrainRejectorParams
from paperworks.shared.backends.tiny_model import TinyConfig, TinyDecoder
from paperworks.shared.backends.tiny_train import train_tiny_lm
from paperworks.shared.errors import NotFound

MICRO = TinyConfig(dim=16, n_layers=1, n_heads=2, mlp_hidden=32, max_seq_len=32)


class StandIn:
    """What a handler uses of its JobContext: the device, progress and the artifact calls."""

    def __init__(self, device: str):
        self.device, self.stored, self.announced = device, {}, []
        self.store = self.artifacts = self.tenant = None  # server paths only in these jobs

    def progress(self, *args, **kwargs):
        pass

    def put_artifact(self, name, blob, media_type):
        self.stored[name] = blob
        return {"name": name, "sha256": hashlib.sha256(blob).hexdigest()}

    def put_json(self, name, obj):
        return self.put_artifact(name, json.dumps(obj).encode(), "application/json")

    def announce_model(self, artifact, message):
        self.announced.append(artifact["name"])

    def load_announced_model(self, *args):
        raise AssertionError("no announced model in these jobs")


class Stop(Exception):
    """Ends a "meta" run once the placement it checks has been seen."""


def rejector_params() -> TrainRejectorParams:
    return TrainRejectorParams(synthetic={"imbalance": 10, "dim": 4}, loss="LOSS_MILD", n_train=100,
                               n_validation=60, n_test=60, steps=5, margin_scales=[0.0, 1.0],
                               logit_taus=[0.0])


def decider_params() -> TrainDeciderParams:
    return TrainDeciderParams(local={"train_tiny": {"steps": 3, "dim": 16, "layers": 1}},
                              remotes=[{"name": "r", "price": 1.0, "accuracy": [0.9, 0.9, 0.9]}],
                              n_train=30, n_validation=30, n_test=30, steps=5, max_new_tokens=3,
                              query_router_baseline=False)


def record_placements(monkeypatch, stop_at_first: bool = False) -> list[tuple[str, str, str]]:
    """(what, the module's device, the input's device) of every forward of the router's models."""
    seen = []

    def spy(owner, name: str, what: str, module_device):
        real = getattr(owner, name)

        def forward(module, batch, *args, **kwargs):
            seen.append((what, module_device(module, *args).type, batch.device.type))
            if stop_at_first:
                raise Stop
            return real(module, batch, *args, **kwargs)

        monkeypatch.setattr(owner, name, forward)

    spy(TinyDecoder, "forward", "local LM", lambda m, *_: m.embed.weight.device)
    spy(rejector.Rejector, "forward", "rejector", lambda m: m.mean.device)
    spy(decider.QualityHeads, "project", "decider", lambda m: m.mean.device)
    # training runs the stacked rejectors' layers directly: their scores (and the costs) meet here
    spy(rejector, "deferral_surrogate", "rejector training", lambda scores, *_: scores.device)
    return seen


def test_both_jobs_place_models_and_batches_on_the_context_device(monkeypatch):
    seen = record_placements(monkeypatch)
    ctx = StandIn("cpu")
    assert tasks.run_train_rejector(rejector_params(), ctx)["kind"] == "rejector"
    assert tasks.run_train_decider(decider_params(), ctx)["kind"] == "sdr"
    assert {what for what, _, _ in seen} == {"local LM", "rejector", "rejector training", "decider"}
    assert {(m, x) for _, m, x in seen} == {("cpu", "cpu")}
    assert ctx.announced == [FILE_NAME, FILE_NAME]

    # Route's routers are built on the device they are given: every module, and the local LM.
    policy = load_policy(ctx.stored[FILE_NAME])  # the decider's, stored last
    router = load_router(policy, device="meta")
    assert router.module.mean.device.type == "meta" and router.backend.device.type == "meta"
    assert next(router.backend.module.parameters()).device.type == "meta"


def test_placement_follows_the_context_not_a_hard_coded_device(monkeypatch):
    seen = record_placements(monkeypatch, stop_at_first=True)
    with pytest.raises(Stop):
        tasks.run_train_rejector(rejector_params(), StandIn("meta"))
    with pytest.raises(Stop):
        tasks.run_train_decider(decider_params(), StandIn("meta"))
    # the rejectors train on meta; the local tiny LM trains on meta (its first forward)
    assert seen == [("rejector training", "meta", "meta"), ("local LM", "meta", "meta")]


def test_the_decision_module_follows_the_context(monkeypatch):
    """The local LM's traces need real numbers, so here it runs on the CPU; the device the job
    asked for still reaches the decision module, which trains there."""
    asked, trained_on = [], []
    local_model = data.local_model

    def cpu_local_model(local, suite, report, open_announced, device, inputs):
        asked.append(device)
        return local_model(local, suite, report, open_announced, "cpu", inputs)

    def fit_decider(*args, **kwargs):
        module = real_fit(*args, **kwargs)
        trained_on.append(module.mean.device.type)
        raise Stop

    real_fit = decider.fit_decider
    monkeypatch.setattr(data, "local_model", cpu_local_model)
    monkeypatch.setattr(decider, "fit_decider", fit_decider)
    with pytest.raises(Stop):
        tasks.run_train_decider(decider_params(), StandIn("meta"))
    assert asked == ["meta"] and trained_on == ["meta"]


def test_the_tiny_trainer_is_the_shared_recipe_on_any_device():
    suite = TaskSuite()
    ours = train_local_tiny(suite, steps=4, seed=1, n_documents=100, config=MICRO, batch_size=4)
    documents = [t.text for t in suite.generate(100, seed=10_001, known_only=True)]
    shared = train_tiny_lm(documents, MICRO, steps=4, seed=1, batch_size=4, lr=1e-2, seq_len=32).module
    assert all(torch.equal(a, b) for a, b in zip(ours.state_dict().values(), shared.state_dict().values(),
                                                 strict=True))
    on_meta = train_local_tiny(suite, steps=2, seed=1, n_documents=100, config=MICRO, batch_size=4,
                               device="meta")
    assert {p.device.type for p in on_meta.parameters()} == {"meta"}


def test_route_loads_policies_on_the_server_device_for_their_tenant_only(store, tmp_path, monkeypatch):
    import paperworks.shared.devices as devices
    from paperworks.services.router.servicer import RouterServicer
    from paperworks.shared.artifacts import ArtifactStore
    from paperworks.shared.inputs import InputScope

    trained = tasks.train_rejector(rejector_params(), lambda *_: None)
    blob = dump_policy(trained.meta, trained.tensors)
    artifacts = ArtifactStore(tmp_path / "artifacts")
    job, _ = store.submit("t1", "router", "train_rejector", rejector_params().model_dump(mode="json"))
    run = store.acquire(job.id, lease_s=30, max_attempts=1)
    sha = artifacts.put(blob)
    store.attach_artifact(job.id, run.token, FILE_NAME, sha, "application/octet-stream", len(blob))
    store.finish(job.id, run.token, "SUCCEEDED", result={})

    monkeypatch.setattr(devices, "device", lambda: "meta")
    servicer = RouterServicer(SimpleNamespace(store=store, artifacts=artifacts, spec=SPEC))
    loaded_sha, router = servicer._router(InputScope(store, artifacts, "t1"), job.id)
    assert loaded_sha == sha and router.device == "meta" and router.module.mean.device.type == "meta"
    with pytest.raises(NotFound):
        servicer._router(InputScope(store, artifacts, "t2"), job.id)
