"""The clip service over real gRPC on the embedded stack: every job kind through Kafka and Celery
(train_clip, evaluate_robustness on the world and on an uploaded .npz, train_adapter,
evaluate_retrieval), the Classify RPC (zero-shot and RITA online with a stream cache that persists
and resets), ScorePairs, a real-format Hugging Face CLIP checkpoint uploaded as a folder (a
robustness job, Classify, an adapter and ScorePairs on it; another tenant cannot use it), and
field-naming refusals."""

from __future__ import annotations

import grpc
import numpy as np
import pytest
from paperworks.clip.v1 import clip_pb2
from paperworks.services.clip import world
from paperworks.shared.rpc.tensors import from_numpy
from paperworks.shared.sdk.errors import field_violations
from support import TOKENS, announced_models, finished, service_fixtures

stack, client = service_fixtures("clip")
SMALL = {"steps": 40, "batch_size": 32, "width": 16, "vision_layers": 1}


@pytest.fixture(scope="module")
def clip(client):
    return finished(client, client.submit("clip", "train_clip", **SMALL))


@pytest.fixture(scope="module")
def adapter(client, clip):
    job = client.submit(
        "clip",
        "train_adapter",
        model={"model_job_id": clip.id},
        adapter="vacsr",
        train_items=64,
        val_items=32,
        epochs=2,
        batch_size=16,
    )
    return finished(client, job)


def test_train_clip_announces_a_model(client, clip):
    r = clip.result
    assert r["parameters"] > 0 and 0.0 <= r["zero_shot_accuracy"] <= 1.0 and r["final_loss"] > 0
    assert announced_models(client, clip) == ["model.safetensors"]


def test_evaluate_robustness_on_the_world_and_an_upload(client, clip, tmp_path):
    job = client.submit(
        "clip",
        "evaluate_robustness",
        model={"model_job_id": clip.id},
        test={"world": {"seed": 1, "n": 4}},
        eps_255=[0, 1],
        views=4,
        methods=["zero_shot", "rita"],
    )
    done = finished(client, job)
    rows = done.result["rows"]
    assert [(r["eps_255"], r["method"]) for r in rows] == [
        (0, "zero_shot"),
        (0, "rita"),
        (1, "zero_shot"),
        (1, "rita"),
    ]
    assert all(r["n"] == 4 and 0 <= r["accuracy"] <= 1 and r["seconds_per_image"] > 0 for r in rows)
    assert {a.name for a in done.artifacts} == {"robustness.json", "robustness.md"}
    w = world.make_world(3, 5)
    path = tmp_path / "test.npz"
    np.savez(path, images=(w.images.permute(0, 2, 3, 1).numpy() * 255).astype(np.uint8), labels=w.labels)
    upload = client.upload(path, "clip")
    job = client.submit(
        "clip",
        "evaluate_robustness",
        model={"model_job_id": clip.id},
        test={"images": {"upload": upload.artifact.sha256}, "classes": list(world.SHAPES)},
        eps_255=[4],
        views=4,
        methods=["ensemble", "tpt", "rtpt", "tda", "rita_no_cache"],
    )
    assert [r["method"] for r in finished(client, job).result["rows"]] == [
        "ensemble",
        "tpt",
        "rtpt",
        "tda",
        "rita_no_cache",
    ]


def test_adapter_training_retrieval_and_score_pairs(client, adapter):
    assert adapter.result["adapter"] == "vacsr" and adapter.result["epochs"] >= 1
    done = finished(client, client.submit("clip", "evaluate_retrieval", adapter_job_id=adapter.id, items=16))
    assert 0 <= done.result["metrics"]["rsum"] <= 600 and done.result["items"] == 16
    w = world.make_world(2, 9)
    request = clip_pb2.ScorePairsRequest(
        adapter_job_id=adapter.id, images=from_numpy(w.images.permute(0, 2, 3, 1).numpy()), texts=w.captions
    )
    reply = client.stub("clip").ScorePairs(request, metadata=client.metadata, timeout=60)
    assert len(reply.scores) == 2 and len(reply.uncertainties) == 2 and reply.has_uncertainty


def _classify(client, **fields) -> clip_pb2.ClassifyResponse:
    return client.stub("clip").Classify(
        clip_pb2.ClassifyRequest(**fields), metadata=client.metadata, timeout=60
    )


def test_classify_zero_shot_and_rita_stream(client, clip):
    image = from_numpy(world.make_world(1, 3).images[0].permute(1, 2, 0).numpy())
    reply = _classify(client, model_job_id=clip.id, image=image)
    assert reply.method == "zero_shot" and list(reply.classes) == list(world.SHAPES)
    assert reply.label in world.SHAPES and len(reply.scores) == 8 and reply.runtime_s > 0
    sizes = [
        _classify(
            client, model_job_id=clip.id, image=image, method="rita", views=8, stream_id="s1", seed=i
        ).cache_entries
        for i in range(3)
    ]
    assert sizes == sorted(sizes)  # the stream's cache survives across calls (it only grows here)
    fresh = _classify(
        client, model_job_id=clip.id, image=image, method="rita", views=8, stream_id="s1", reset_stream=True
    )
    assert fresh.cache_entries <= sizes[0] or sizes[-1] == 0


def _refused(call) -> list[tuple[str, str]]:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    assert exc.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    return field_violations(exc.value)


def test_bad_references_and_inputs_are_refused(client, clip, adapter):
    fields = _refused(lambda: client.submit("clip", "evaluate_retrieval", adapter_job_id=clip.id))
    assert fields[0][0] == "adapter_job_id" and "train_clip" in fields[0][1]
    fields = _refused(
        lambda: client.submit("clip", "evaluate_robustness", model={"model_job_id": adapter.id})
    )
    assert fields[0][0] == "model.model_job_id"
    fields = _refused(
        lambda: client.submit(
            "clip", "evaluate_robustness", model={"model_job_id": clip.id}, methods=["magic"]
        )
    )
    assert fields[0][0].startswith("methods")
    image = from_numpy(np.zeros((32, 32, 3), np.float32))
    fields = _refused(
        lambda: _classify(client, model_job_id=clip.id, image=image, classes=["zebra", "circle"])
    )
    assert fields[0][0] == "classes" and "zebra" in fields[0][1]
    fields = _refused(
        lambda: _classify(client, model_job_id=clip.id, image=from_numpy(np.zeros((4, 4), np.float32)))
    )
    assert fields[0][0] == "image.shape"


@pytest.fixture(scope="module")
def hf_checkpoint(client, tmp_path_factory):
    """(local folder, upload sha) of a tiny CLIP in Hugging Face format, uploaded as a folder."""
    from unit.clip.hf_clip import save_tiny_clip

    folder = tmp_path_factory.mktemp("hf") / "tiny-clip"
    save_tiny_clip(folder, seed=4)
    return folder, client.upload(folder, "clip").artifact.sha256


def test_a_hugging_face_checkpoint_through_a_job_and_classify(client, hf_checkpoint):
    from paperworks.services.clip import tinyclip
    from paperworks.services.clip.rita import Stream, TTAConfig

    folder, sha = hf_checkpoint
    job = client.submit(
        "clip",
        "evaluate_robustness",
        model={"checkpoint": {"upload": sha}},
        test={"world": {"seed": 2, "n": 2}},
        eps_255=[2],
        views=4,
        methods=["zero_shot", "rita"],
    )
    rows = finished(client, job).result["rows"]
    assert [(r["eps_255"], r["method"], r["n"]) for r in rows] == [(2, "zero_shot", 2), (2, "rita", 2)]
    pixels = world.make_world(1, 3).images[0]
    image = from_numpy(pixels.permute(1, 2, 0).numpy())
    reply = _classify(client, checkpoint={"upload": sha}, image=image)
    local = Stream(
        tinyclip.load_hf_folder(folder), list(world.SHAPES), list(world.TEXTURES), TTAConfig(views=64)
    )
    expected = local.predict("zero_shot", pixels, 0).double()
    assert np.allclose(reply.scores, expected.numpy(), atol=1e-4)  # the server ran this checkpoint
    sizes = [
        _classify(
            client, checkpoint={"upload": sha}, image=image, method="rita", views=8, stream_id="hf", seed=i
        ).cache_entries
        for i in range(2)
    ]
    assert sizes == sorted(sizes)


def test_an_adapter_on_a_checkpoint_scores_pairs(client, hf_checkpoint):
    job = client.submit(
        "clip",
        "train_adapter",
        model={"checkpoint": {"upload": hf_checkpoint[1]}},
        adapter="infonce",
        train_items=32,
        val_items=16,
        epochs=1,
        batch_size=16,
    )
    adapter = finished(client, job)
    w = world.make_world(2, 9)
    request = clip_pb2.ScorePairsRequest(
        adapter_job_id=adapter.id, images=from_numpy(w.images.permute(0, 2, 3, 1).numpy()), texts=w.captions
    )
    reply = client.stub("clip").ScorePairs(request, metadata=client.metadata, timeout=60)
    assert len(reply.scores) == 2 and all(np.isfinite(reply.scores)) and not reply.has_uncertainty


def test_checkpoint_refusals_and_another_tenants_upload(client, clip, hf_checkpoint, stack):
    from paperworks.shared.sdk.client import Client

    image = from_numpy(np.zeros((32, 32, 3), np.float32))
    both = _refused(
        lambda: _classify(client, model_job_id=clip.id, checkpoint={"upload": hf_checkpoint[1]}, image=image)
    )
    assert both[0][0] == "model_job_id" and "exactly one" in both[0][1]
    assert _refused(lambda: _classify(client, image=image))[0][0] == "model_job_id"
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        request = clip_pb2.ClassifyRequest(checkpoint={"upload": hf_checkpoint[1]}, image=image)
        fields = _refused(lambda: bob.stub("clip").Classify(request, metadata=bob.metadata, timeout=60))
    assert fields[0][0].startswith("checkpoint")
