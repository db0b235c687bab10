"""`make demo` for urban: write a small synthetic world as a dataset folder on the client's side,
upload it (no path is shared with the server), pretrain UrbanFusion on it, fit house prices, then
embed and predict two locations inline (one with street view, one from coordinates alone)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from google.protobuf import json_format
from paperworks.services.urban.data import world, write_folder
from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE
from paperworks.shared.rpc.tensors import from_numpy, to_numpy
from paperworks.urban.v1 import urban_pb2

WORLD = {"seed": 7, "cities": 3, "locations_per_city": 300, "missing_rate": 0.3}


def _done(client, job, title):
    final = follow(client, job.id, title)
    if PROTO_TO_STATE[final.state] != "SUCCEEDED":
        raise SystemExit(f"{job.id} ended {PROTO_TO_STATE[final.state]}: {final.error.message}")
    return final


def run(client, out: Path) -> None:
    data = world.generate(world.WorldConfig(**WORLD))
    with tempfile.TemporaryDirectory(prefix="urban-client-") as here:
        upload = client.upload(write_folder(data, Path(here) / "city", fmt="csv")).artifact
    console.print(f"uploaded the dataset folder as {upload.name} ({upload.size_bytes} bytes)")
    dataset = {"source": {"upload": upload.sha256}}
    job = client.submit("urban", "pretrain", dataset=dataset, embed_dim=32, steps=200)
    console.print(f"submitted [bold]{job.id}[/] (UrbanFusion pretrain: 3 cities x 300 locations, 200 steps)")
    pre = _done(client, job, "urban.pretrain")
    r = pre.result
    console.print(f"loss {r['first_loss']:.2f} -> {r['loss']:.2f} (contrastive {r['contrastive']:.2f}, "
                  f"reconstruction {r['reconstruction']:.2f}); modalities {', '.join(r['modalities'])}")
    fit = _done(client, client.submit("urban", "fit_task", pretrain_job_id=pre.id, dataset=dataset,
                                      target="house_price", task_type="regression"), "urban.fit_task")
    test = fit.result["test"]
    console.print(f"house_price test R2: {test['without_coordinates']:.3f} "
                  f"({test['with_coordinates']:.3f} with raw coordinates appended)")
    i = int(np.flatnonzero(data.modalities["street_view"].present)[0])
    row = data.modalities["street_view"].values[i]
    sv = urban_pb2.ModalityValue(name="street_view", value=from_numpy(row))
    locations = [urban_pb2.Location(id="with-street-view", lat=data.lat[i], lon=data.lon[i], modalities=[sv]),
                 urban_pb2.Location(id="coordinates-only", lat=data.lat[i], lon=data.lon[i])]
    locations = [json_format.MessageToDict(loc, preserving_proto_field_name=True) for loc in locations]
    emb = client.call("urban", "Embed", timeout=30, pretrain_job_id=pre.id, locations=locations)
    pred = client.call("urban", "Predict", timeout=30, task_job_id=fit.id, locations=locations)
    vectors = to_numpy(emb.embeddings)
    cos = float(vectors[0] @ vectors[1] / np.linalg.norm(vectors[0]) / np.linalg.norm(vectors[1]))
    console.print(f"Embed: {vectors.shape} ({', '.join(emb.used_modalities)}); cosine between them {cos:.2f}")
    console.print(f"Predict house_price: {pred.values[0]:.2f} / {pred.values[1]:.2f} "
                  f"(truth {data.targets['house_price'][i]:.2f})")
    paths = client.pull_artifacts(pre.id, out) + client.pull_artifacts(fit.id, out)
    console.print("artifacts: " + ", ".join(p.name for p in paths) + f" in {out}")
