"""The scenegraph service over real gRPC on the embedded stack: train from a dataset folder that a
client in another working directory uploaded (then deleted: nothing is shared but the upload),
evaluate from a server path, predict a batch, the sync Predict RPC (image bytes or an uploaded
image) with its field-naming errors, and references to other jobs checked at submit."""
from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
from pathlib import Path

import grpc
import numpy as np
import pytest
from paperworks.scenegraph.v1 import scenegraph_pb2
from paperworks.services.scenegraph.data.scenes import generate_scenes, synthetic_vocabulary
from paperworks.services.scenegraph.data.scenes_json import write_json
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.errors import field_violations
from PIL import Image
from support import TOKENS, announced_models, finished, service_fixtures

SMALL = {"detector_epochs": 2, "relation_epochs": 2, "max_objects": 6}


stack, client = service_fixtures("scenegraph")


@pytest.fixture(scope="module")
def scenes():
    return generate_scenes(32, seed=11)


@pytest.fixture(scope="module")
def dataset_path(tmp_path_factory, scenes):
    return str(write_json(scenes, synthetic_vocabulary(), tmp_path_factory.mktemp("scenegraph-data")))


@pytest.fixture(scope="module")
def uploaded(client, tmp_path_factory, scenes):
    """{"upload": sha256} of the dataset folder (scenes.json + images/), uploaded from a client's own
    working directory by a relative path; the folder is gone before any job runs."""
    here = tmp_path_factory.mktemp("client-elsewhere")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(here)
        write_json(scenes, synthetic_vocabulary(), Path("scenes"))
        reply = client.upload(Path("scenes"))
        shutil.rmtree("scenes")
    assert reply.artifact.name == "scenes.tar.gz"
    return {"upload": reply.artifact.sha256}


@pytest.fixture(scope="module")
def trained(client, uploaded):
    return finished(client, client.submit("scenegraph", "train", dataset={"source": uploaded}, base="penet",
                                          **SMALL))


def test_train_stores_the_generator_and_its_history(trained, client, tmp_path):
    r = trained.result
    assert r["images"] == 32 and r["base"] == "penet" and r["head"] == "dsnet"
    assert r["relation_loss"] < r["first_relation_loss"]
    assert {a.name for a in trained.artifacts} == {"model.safetensors", "training.json"}
    assert announced_models(client, trained) == ["model.safetensors"]
    paths = {p.name: p for p in client.pull_artifacts(trained.id, tmp_path)}
    assert {name: hashlib.sha256(p.read_bytes()).hexdigest() for name, p in paths.items()} == {
        a.name: a.sha256 for a in trained.artifacts}
    history = json.loads(paths["training.json"].read_text())
    assert len(history["losses"]["detector"]) == 2 and history["vocabulary"]["geometric"][0] == "near"


def test_evaluate_reports_the_benchmark_metrics_per_mode(client, trained, dataset_path):
    # a server path (under the stack's data root) still names a dataset
    job = client.submit("scenegraph", "evaluate", train_job_id=trained.id, dataset={"path": dataset_path},
                        modes=["predcls", "sgdet"])
    result = finished(client, job).result
    assert set(result["modes"]) == {"predcls", "sgdet"}
    for metrics in result["modes"].values():
        assert set(metrics) == {f"{m}@{k}" for m in ("R", "ngR", "mR") for k in (20, 50, 100)}
        assert 0 <= metrics["R@20"] <= metrics["R@100"] <= metrics["ngR@100"] <= 1


def test_predict_batch_writes_scene_graphs_and_drawings(client, trained, tmp_path):
    job = client.submit("scenegraph", "predict", train_job_id=trained.id,
                        dataset={"synthetic": {"seed": 5, "images": 4}}, top_k=5, max_drawings=2)
    final = finished(client, job)
    assert final.result["images"] == 4 and final.result["drawn"] == 2
    paths = {p.name: p for p in client.pull_artifacts(final.id, tmp_path)}
    graphs = json.loads(paths["scene_graphs.json"].read_text())["images"]
    assert len(graphs) == 4 and all(len(g["triplets"]) <= 5 for g in graphs)
    pngs = [p for name, p in paths.items() if name.endswith(".png")]
    assert len(pngs) == 2 and pngs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def test_predict_rpc_returns_objects_and_ranked_triplets(client, trained, scenes):
    stub = client.stub("scenegraph")
    s = scenes[0]
    vocab = synthetic_vocabulary()
    boxes = [scenegraph_pb2.Box(x1=b[0], y1=b[1], x2=b[2], y2=b[3], label=vocab.classes[c])
             for b, c in zip(s.boxes.tolist(), s.labels.tolist(), strict=True)]
    request = scenegraph_pb2.PredictRequest(train_job_id=trained.id, image=_png(s.image), boxes=boxes,
                                            top_k=4)
    reply = stub.Predict(request, metadata=client.metadata, timeout=60)
    assert reply.mode == "predcls" and [o.box.label for o in reply.objects] == [b.label for b in boxes]
    scores = [t.score for t in reply.triplets]
    assert len(scores) == min(4, len(boxes) * (len(boxes) - 1)) and scores == sorted(scores, reverse=True)
    detected = stub.Predict(scenegraph_pb2.PredictRequest(train_job_id=trained.id, image=_png(s.image)),
                            metadata=client.metadata, timeout=60)
    assert detected.mode == "sgdet"


def test_predict_rpc_reads_an_uploaded_image(client, trained, scenes, tmp_path):
    (tmp_path / "scene.png").write_bytes(_png(scenes[1].image))
    image = {"upload": client.upload(tmp_path / "scene.png").artifact.sha256}
    reply = client.call("scenegraph", "Predict", timeout=60, train_job_id=trained.id, source=image, top_k=3)
    inline = client.call("scenegraph", "Predict", timeout=60, train_job_id=trained.id,
                         image=base64.b64encode(_png(scenes[1].image)).decode(), top_k=3)
    assert reply.mode == "sgdet" and reply == inline
    for request, field in (({"source": image, "image": base64.b64encode(b"png").decode()}, "image"),
                           ({}, "image"), ({"source": {"upload": "0" * 64}}, "source.upload")):
        with pytest.raises(grpc.RpcError) as exc:
            client.call("scenegraph", "Predict", timeout=60, train_job_id=trained.id, **request)
        assert [f for f, _ in field_violations(exc.value)] == [field], exc.value.details()


def _refused(call, code: grpc.StatusCode, field: str, text: str = "") -> None:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    assert exc.value.code() == code, exc.value.details()
    assert [f for f, _ in field_violations(exc.value)] == [field] and text in exc.value.details()


def test_train_job_references_are_checked_at_submit(stack, client, uploaded, trained):
    before = len(client.list("scenegraph", page_size=500)[0])
    predicted = finished(client, client.submit("scenegraph", "predict", train_job_id=trained.id,
                                               dataset={"synthetic": {"seed": 5, "images": 2}}))
    _refused(lambda: client.submit("scenegraph", "evaluate", train_job_id=predicted.id,
                                   dataset={"source": uploaded}),
             grpc.StatusCode.INVALID_ARGUMENT, "train_job_id", "is a predict job, not train")
    _refused(lambda: client.submit("scenegraph", "predict", train_job_id="scenegraph-missing",
                                   dataset={"source": uploaded}),
             grpc.StatusCode.NOT_FOUND, "train_job_id")
    _refused(lambda: client.submit("scenegraph", "train", dataset={"source": {"upload": "0" * 64}}),
             grpc.StatusCode.NOT_FOUND, "dataset.source.upload")
    assert len(client.list("scenegraph", page_size=500)[0]) == before + 1
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:  # alice's job and upload
        _refused(lambda: bob.submit("scenegraph", "evaluate", train_job_id=trained.id,
                                    dataset={"synthetic": {"seed": 1}}),
                 grpc.StatusCode.NOT_FOUND, "train_job_id")
        _refused(lambda: bob.submit("scenegraph", "train", dataset={"source": uploaded}),
                 grpc.StatusCode.NOT_FOUND, "dataset.source.upload")
        assert bob.list("scenegraph", page_size=500)[0] == []


@pytest.mark.parametrize(("layout", "field", "text"), [
    ("json-only", "dataset.source", "is one file"),
    ("image-outside", "dataset.source: images[0].file", "inside the dataset's folder"),
])
def test_an_upload_that_is_no_dataset_folder_fails_naming_the_source(client, tmp_path, scenes, layout, field,
                                                                     text):
    path = write_json(scenes[:2], synthetic_vocabulary(), tmp_path / "scenes")
    if layout == "image-outside":  # an entry naming a server file must not be read
        doc = json.loads(path.read_text())
        doc["images"][0]["file"] = "../../../../../../../../etc/hostname"
        path.write_text(json.dumps(doc))
    sha = client.upload(path if layout == "json-only" else path.parent).artifact.sha256
    final = client.wait(client.submit("scenegraph", "train", dataset={"source": {"upload": sha}}, **SMALL).id,
                        timeout=120)
    assert PROTO_TO_STATE[final.state] == "FAILED"
    assert [v.field for v in final.error.field_violations] == [field] and text in final.error.message


def test_bad_inputs_are_invalid_argument_naming_the_field(client, trained, scenes):
    stub = client.stub("scenegraph")
    image = _png(scenes[0].image)
    cases = [
        ([scenegraph_pb2.Box(x1=0, y1=0, x2=10, y2=10, label="person"),
          scenegraph_pb2.Box(x1=50, y1=50, x2=70, y2=60, label="horse")], "boxes[1]"),
        ([scenegraph_pb2.Box(x1=0, y1=0, x2=10, y2=10, label="dragon")], "boxes[0].label"),
    ]
    for boxes, field in cases:
        with pytest.raises(grpc.RpcError) as exc:
            stub.Predict(scenegraph_pb2.PredictRequest(train_job_id=trained.id, image=image, boxes=boxes),
                         metadata=client.metadata, timeout=60)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [f for f, _ in field_violations(exc.value)] == [field]
    before = len(client.list("scenegraph", page_size=500)[0])
    for image_size in (20, 0):  # 0 is a value like any other (unset means 64)
        with pytest.raises(grpc.RpcError) as exc:
            client.submit("scenegraph", "train", dataset={"synthetic": {"seed": 1}}, image_size=image_size)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [f for f, _ in field_violations(exc.value)] == ["image_size"]
    assert len(client.list("scenegraph", page_size=500)[0]) == before
    with pytest.raises(grpc.RpcError) as exc:
        stub.Predict(scenegraph_pb2.PredictRequest(train_job_id="scenegraph-missing", image=image),
                     metadata=client.metadata, timeout=30)
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as exc:
        stub.Predict(scenegraph_pb2.PredictRequest(train_job_id=trained.id, image=image, top_k=0),
                     metadata=client.metadata, timeout=30)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(exc.value)] == ["top_k"]


def test_a_dataset_with_an_unknown_class_fails_the_job_naming_it(client, tmp_path, scenes):
    path = write_json(scenes[:4], synthetic_vocabulary(), tmp_path)
    doc = json.loads(path.read_text())
    doc["images"][2]["objects"][0]["label"] = "dragon"
    path.write_text(json.dumps(doc))
    job = client.submit("scenegraph", "train", dataset={"path": str(path)}, **SMALL)
    final = client.wait(job.id, timeout=120)
    assert PROTO_TO_STATE[final.state] == "FAILED"
    assert [v.field for v in final.error.field_violations] == ["dataset.path: images[2].objects[0].label"]
    assert "dragon" in final.error.message


def test_a_depth_order_model_trains_and_serves_with_its_estimator(client, scenes, tmp_path):
    synthetic = {"seed": 2, "images": 16, "overlap_pair_rate": 0.7}
    job = finished(client, client.submit("scenegraph", "train", dataset={"synthetic": synthetic},
                                         base="penet", depth_order=True, **SMALL))
    paths = {p.name: p for p in client.pull_artifacts(job.id, tmp_path)}
    assert json.loads(paths["training.json"].read_text())["config"]["depth_order"] is True
    s, vocab = scenes[0], synthetic_vocabulary()
    boxes = [scenegraph_pb2.Box(x1=b[0], y1=b[1], x2=b[2], y2=b[3], label=vocab.classes[c])
             for b, c in zip(s.boxes.tolist(), s.labels.tolist(), strict=True)]
    reply = client.stub("scenegraph").Predict(
        scenegraph_pb2.PredictRequest(train_job_id=job.id, image=_png(s.image), boxes=boxes, top_k=3),
        metadata=client.metadata, timeout=60)
    assert reply.mode == "predcls" and len(reply.triplets) == 3


def test_depth_order_without_a_depth_annotation_fails_the_job_naming_the_field(client, tmp_path, scenes):
    path = write_json(scenes[:4], synthetic_vocabulary(), tmp_path)
    doc = json.loads(path.read_text())
    del doc["depth_order"]
    for image in doc["images"]:
        for obj in image["objects"]:
            del obj["depth"]
    path.write_text(json.dumps(doc))
    job = client.submit("scenegraph", "train", dataset={"path": str(path)}, depth_order=True, **SMALL)
    final = client.wait(job.id, timeout=120)
    assert PROTO_TO_STATE[final.state] == "FAILED"
    assert [v.field for v in final.error.field_violations] == ["depth_order"]


def test_another_tenant_cannot_use_the_model(stack, trained, scenes):
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        with pytest.raises(grpc.RpcError) as exc:
            bob.stub("scenegraph").Predict(scenegraph_pb2.PredictRequest(train_job_id=trained.id,
                                                                         image=_png(scenes[0].image)),
                                           metadata=bob.metadata, timeout=30)
        assert exc.value.code() == grpc.StatusCode.NOT_FOUND
