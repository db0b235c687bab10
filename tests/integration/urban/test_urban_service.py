"""The urban service over real gRPC on the embedded stack: pretrain from a dataset folder that a
client in another working directory uploaded (then deleted: nothing is shared but the upload), fit
a task on it, evaluate from a server path, the sync Embed/Predict RPCs with their field-naming
errors, and references to other jobs and uploads checked at submit."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import grpc
import numpy as np
import pandas as pd
import pytest
from paperworks.services.urban.data import world, write_folder
from paperworks.shared.rpc.tensors import from_numpy, to_numpy
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.errors import field_violations
from paperworks.urban.v1 import urban_pb2
from paperworks.v1 import jobs_pb2
from support import TOKENS, announced_models, finished, service_fixtures

WORLD = world.WorldConfig(seed=5, cities=2, locations_per_city=80)
SMALL = {"embed_dim": 16, "heads": 2, "layers": 1, "steps": 30, "batch_size": 64}


stack, client = service_fixtures("urban")


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    return str(write_folder(world.generate(WORLD), tmp_path_factory.mktemp("urban-data")))


@pytest.fixture(scope="module")
def uploaded(client, tmp_path_factory):
    """{"upload": sha256} of the dataset folder (CSVs), uploaded from a client's own working
    directory by a relative path; the folder is gone before any job runs."""
    here = tmp_path_factory.mktemp("client-elsewhere")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(here)
        write_folder(world.generate(WORLD), Path("city"), fmt="csv")
        reply = client.upload(Path("city"))
        shutil.rmtree("city")
    assert reply.artifact.name == "city.tar.gz"
    return {"upload": reply.artifact.sha256}


@pytest.fixture(scope="module")
def pretrained(client, uploaded):
    return finished(client, client.submit("urban", "pretrain", dataset={"source": uploaded}, **SMALL))


@pytest.fixture(scope="module")
def fitted(client, uploaded, pretrained):
    job = client.submit("urban", "fit_task", pretrain_job_id=pretrained.id, dataset={"source": uploaded},
                        target="house_price", task_type="regression", append_coordinates=True)
    return finished(client, job)


def test_pretrain_stores_encoder_embeddings_and_map(client, pretrained, tmp_path):
    result = pretrained.result
    assert result["locations"] == 160 and result["steps"] == 30 and result["embed_dim"] == 16
    assert list(result["modalities"]) == ["coordinates", "imagery", "map", "poi", "street_view"]
    names = {a.name for a in pretrained.artifacts}
    assert names == {"model.safetensors", "embeddings.parquet", "embedding_map.png"}
    assert announced_models(client, pretrained) == ["model.safetensors"]
    paths = {p.name: p for p in client.pull_artifacts(pretrained.id, tmp_path)}
    assert {name: hashlib.sha256(p.read_bytes()).hexdigest() for name, p in paths.items()} == {
        a.name: a.sha256 for a in pretrained.artifacts}
    frame = pd.read_parquet(paths["embeddings.parquet"])
    assert len(frame) == 160 and [f"e{i}" for i in range(16)] == list(frame.columns[4:])
    assert paths["embedding_map.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fit_task_reports_both_probe_variants(fitted):
    test = fitted.result["test"]
    assert set(test) == {"with_coordinates", "without_coordinates"}
    assert fitted.result["served"] == "with_coordinates" and fitted.result["metric"] == "r2"
    assert {a.name for a in fitted.artifacts} == {"probe.safetensors", "predictions.parquet",
                                                  "prediction_map.png"}


def _location(lat, lon, **modalities):
    return urban_pb2.Location(id=f"{lat:.3f}", lat=lat, lon=lon, modalities=[
        urban_pb2.ModalityValue(name=k, value=from_numpy(np.asarray(v, np.float32)))
        for k, v in modalities.items()])


def test_embed_and_predict_with_any_modalities(client, pretrained, fitted):
    data = world.generate(WORLD)
    i, j = np.flatnonzero(data.modalities["street_view"].present)[0], np.flatnonzero(
        data.modalities["imagery"].present)[0]
    locations = [_location(data.lat[i], data.lon[i], street_view=data.modalities["street_view"].values[i]),
                 _location(data.lat[j], data.lon[j], imagery=data.modalities["imagery"].values[j]),
                 _location(data.lat[0], data.lon[0])]
    stub = client.stub("urban")
    reply = stub.Embed(urban_pb2.EmbedRequest(pretrain_job_id=pretrained.id, locations=locations),
                       metadata=client.metadata, timeout=30)
    emb = to_numpy(reply.embeddings)
    assert emb.shape == (3, 16) and np.isfinite(emb).all()
    assert list(reply.used_modalities) == ["coordinates+street_view", "coordinates+imagery", "coordinates"]
    predicted = stub.Predict(urban_pb2.PredictRequest(task_job_id=fitted.id, locations=locations),
                             metadata=client.metadata, timeout=30)
    assert predicted.target == "house_price" and len(predicted.values) == 3
    assert np.isfinite(predicted.values).all()


def test_evaluate_scores_tasks_subsets_and_regions(client, dataset_dir, pretrained):
    # a server path (under the stack's data root) still names a dataset folder
    job = client.submit("urban", "evaluate", pretrain_job_id=pretrained.id, dataset={"path": dataset_dir},
                        tasks=[{"target": "house_price"}, {"target": "land_use"}],
                        subsets=[{"modalities": ["coordinates"]}, {"modalities": ["street_view", "poi"]}],
                        leave_one_region_out=True)
    tasks = finished(client, job).result["tasks"]
    assert tasks["house_price"]["metric"] == "r2" and tasks["land_use"]["metric"] == "macro_f1"
    assert set(tasks["land_use"]["held_out_region_mean"]) == {"embedding", "concatenated",
                                                              "concatenated+coordinates"}
    # the embedding carries coordinates, so the baseline is reported with them too
    assert {"embedding", "concatenated", "concatenated+coordinates"} <= set(tasks["house_price"])


def _refused(call, code: grpc.StatusCode, field: str, text: str = "") -> None:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    assert exc.value.code() == code, exc.value.details()
    named = [f for f, _ in field_violations(exc.value)] or [exc.value.details().partition(":")[0]]
    assert named == [field] and text in exc.value.details()


def test_job_and_upload_references_are_checked_at_submit(stack, client, uploaded, pretrained, fitted):
    before = len(client.list("urban", page_size=500)[0])
    task = {"dataset": {"source": uploaded}, "target": "house_price", "task_type": "regression"}
    _refused(lambda: client.submit("urban", "fit_task", pretrain_job_id=fitted.id, **task),
             grpc.StatusCode.INVALID_ARGUMENT, "pretrain_job_id", "is a fit_task job, not pretrain")
    _refused(lambda: client.submit("urban", "evaluate", pretrain_job_id="urban-missing",
                                   dataset={"source": uploaded}),
             grpc.StatusCode.NOT_FOUND, "pretrain_job_id")
    _refused(lambda: client.submit("urban", "pretrain", dataset={"source": {"upload": "0" * 64}}),
             grpc.StatusCode.NOT_FOUND, "dataset.source.upload")
    assert len(client.list("urban", page_size=500)[0]) == before
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:  # alice's job and upload
        _refused(lambda: bob.submit("urban", "fit_task", pretrain_job_id=pretrained.id, **task),
                 grpc.StatusCode.NOT_FOUND, "pretrain_job_id")
        _refused(lambda: bob.submit("urban", "pretrain", dataset={"source": uploaded}),
                 grpc.StatusCode.NOT_FOUND, "dataset.source.upload")
        assert bob.list("urban", page_size=500)[0] == []


def test_an_uploaded_file_that_is_not_a_folder_fails_naming_the_source(client, tmp_path):
    (tmp_path / "locations.csv").write_text("id,lat,lon\na,1.0,2.0\n")
    sha = client.upload(tmp_path / "locations.csv").artifact.sha256
    job = client.submit("urban", "pretrain", dataset={"source": {"upload": sha}})
    final = client.wait(job.id, timeout=60)
    assert final.state == jobs_pb2.JOB_STATE_FAILED
    assert [v.field for v in final.error.field_violations] == ["dataset.source"]


def test_bad_inputs_are_invalid_argument_naming_the_field(client, pretrained):
    stub = client.stub("urban")
    cases = [
        ([_location(10.0, 20.0), _location(95.0, 20.0)], "locations[1].lat"),
        ([_location(10.0, 20.0, street_view=np.zeros(5))], "locations[0].modalities[0].value"),
    ]
    for locations, field in cases:
        with pytest.raises(grpc.RpcError) as exc:
            stub.Embed(urban_pb2.EmbedRequest(pretrain_job_id=pretrained.id, locations=locations),
                       metadata=client.metadata, timeout=30)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert [f for f, _ in field_violations(exc.value)] == [field]
    before = len(client.list("urban", page_size=500)[0])
    with pytest.raises(grpc.RpcError) as exc:
        client.submit("urban", "pretrain", dataset={"synthetic": {"seed": 1}}, embed_dim=8)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(exc.value)] == ["embed_dim"]
    # `steps` is optional in the proto: unset means 400, an explicit 0 is out of range
    with pytest.raises(grpc.RpcError) as exc:
        client.submit("urban", "pretrain", dataset={"synthetic": {"seed": 1}}, steps=0)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [f for f, _ in field_violations(exc.value)] == ["steps"]
    assert len(client.list("urban", page_size=500)[0]) == before
    with pytest.raises(grpc.RpcError) as exc:
        stub.Embed(urban_pb2.EmbedRequest(pretrain_job_id="urban-missing", locations=[_location(1.0, 2.0)]),
                   metadata=client.metadata, timeout=30)
    assert exc.value.code() == grpc.StatusCode.NOT_FOUND


def test_another_tenant_cannot_use_the_encoder(stack, pretrained):
    with Client(endpoints=stack.endpoints, token=TOKENS["bob"]) as bob:
        with pytest.raises(grpc.RpcError) as exc:
            bob.stub("urban").Embed(urban_pb2.EmbedRequest(pretrain_job_id=pretrained.id,
                                                           locations=[_location(1.0, 2.0)]),
                                    metadata=bob.metadata, timeout=30)
        assert exc.value.code() == grpc.StatusCode.NOT_FOUND
