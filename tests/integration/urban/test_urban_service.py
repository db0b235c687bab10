"""The urban service over real gRPC on the embedded stack: pretrain from a dataset folder, fit a
task, evaluate, and the sync Embed/Predict RPCs with their field-naming errors."""
from __future__ import annotations

import grpc
import numpy as np
import pandas as pd
import pytest
from paperworks.services.urban.data import world, write_folder
from paperworks.shared.rpc.tensors import from_numpy, to_numpy
from paperworks.shared.sdk.client import Client
from paperworks.shared.sdk.errors import field_violations
from paperworks.urban.v1 import urban_pb2
from support import TOKENS, announced_models, finished, service_fixtures

WORLD = world.WorldConfig(seed=5, cities=2, locations_per_city=80)
SMALL = {"embed_dim": 16, "heads": 2, "layers": 1, "steps": 30, "batch_size": 64}


stack, client = service_fixtures("urban")


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    return str(write_folder(world.generate(WORLD), tmp_path_factory.mktemp("urban-data")))


@pytest.fixture(scope="module")
def pretrained(client, dataset_dir):
    return finished(client, client.submit("urban", "pretrain", dataset={"path": dataset_dir}, **SMALL))


@pytest.fixture(scope="module")
def fitted(client, dataset_dir, pretrained):
    job = client.submit("urban", "fit_task", pretrain_job_id=pretrained.id, dataset={"path": dataset_dir},
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
    job = client.submit("urban", "evaluate", pretrain_job_id=pretrained.id, dataset={"path": dataset_dir},
                        tasks=[{"target": "house_price"}, {"target": "land_use"}],
                        subsets=[{"modalities": ["coordinates"]}, {"modalities": ["street_view", "poi"]}],
                        leave_one_region_out=True)
    tasks = finished(client, job).result["tasks"]
    assert tasks["house_price"]["metric"] == "r2" and tasks["land_use"]["metric"] == "macro_f1"
    assert set(tasks["land_use"]["held_out_region_mean"]) == {"embedding", "concatenated",
                                                              "concatenated+coordinates"}


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
