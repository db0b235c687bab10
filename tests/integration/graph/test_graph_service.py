"""The graph service over real gRPC on the embedded stack: every job kind through Kafka and Celery
(train_generator for GaRA and a static-LoRA baseline, generate_adapter on a bundled graph and on an
uploaded node-link JSON, evaluate), the PEFT adapter pulled and loaded with `peft` onto the job's
base LM, the Answer RPC with its per-graph cache (on an uploaded folder of Parquet tables too), and
field-naming refusals."""

from __future__ import annotations

import json

import grpc
import networkx as nx
import numpy as np
import pytest
import torch
from paperworks.services.graph import checkpoint, world
from paperworks.shared.sdk.errors import field_violations
from support import announced_models, finished, service_fixtures

stack, client = service_fixtures("graph")
SMALL = {"steps": 20, "train_graphs": 16, "validation_graphs": 4, "lm_steps": 10, "hidden": 16, "seed": 5}


@pytest.fixture(scope="module")
def gara(client):
    return finished(client, client.submit("graph", "train_generator", **SMALL))


@pytest.fixture(scope="module")
def static(client):
    return finished(client, client.submit("graph", "train_generator", arm="static_lora", **SMALL))


def test_train_generator_announces_the_generator(client, gara):
    r = gara.result
    assert r["arm"] == "gara" and 0.0 <= r["validation_accuracy"] <= 1.0 and r["trainable_parameters"] > 0
    assert abs(r["norm_ratio"] - 1.0) < 1e-3  # the norm constraint holds by construction
    assert {a.name for a in gara.artifacts} == {
        "generator.safetensors",
        "base_lm.safetensors",
        "history.json",
    }
    assert announced_models(client, gara) == ["generator.safetensors"]


def test_generated_adapter_loads_with_peft(client, gara, tmp_path):
    from peft import PeftModel

    job = finished(
        client,
        client.submit(
            "graph", "generate_adapter", generator_job_id=gara.id, graph={"bundled": "karate_club"}
        ),
    )
    assert job.result["nodes"] == 34 and job.result["modules"] == 4 and len(job.result["graph_digest"]) == 64
    adapter = tmp_path / "adapter"
    client.pull_artifacts(job.id, adapter)
    base_dir = tmp_path / "base"
    client.pull_artifacts(gara.id, base_dir)
    base = checkpoint.lm_from_bytes((base_dir / "base_lm.safetensors").read_bytes(), "cpu", "x")
    served = PeftModel.from_pretrained(base, adapter).eval()
    ids = torch.tensor([world.WordTokenizer().encode("node c1 nbr c1 c1 c2 ; role ?")])
    logits = served(input_ids=ids).logits
    assert (
        torch.isfinite(logits).all() and json.loads((adapter / "adapter_config.json").read_text())["r"] == 4
    )


def test_adapter_for_an_uploaded_node_link_graph(client, gara, tmp_path):
    g = world.generate("barabasi_albert", np.random.default_rng(3))
    for v in g.graph.nodes:
        g.graph.nodes[v]["text"] = g.texts[v]
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(nx.node_link_data(g.graph, edges="links")))
    upload = client.upload(path, "graph")
    job = finished(
        client,
        client.submit(
            "graph",
            "generate_adapter",
            generator_job_id=gara.id,
            graph={"file": {"upload": upload.artifact.sha256}},
        ),
    )
    assert job.result["nodes"] == g.n and job.result["graph_digest"] == g.digest()


def test_evaluate_tables_every_arm(client, gara, static):
    job = client.submit(
        "graph",
        "evaluate",
        generator_job_ids=[gara.id, static.id],
        families=["barabasi_albert", "bundled"],
        graphs_per_family=3,
        queries_per_graph=4,
    )
    table = finished(client, job).result["accuracy"]
    assert set(table) == {"frozen", "gara", "static_lora"}
    assert all(
        set(row) == {"barabasi_albert", "bundled"} and all(0 <= a <= 1 for a in row.values())
        for row in table.values()
    )


def test_answer_about_the_karate_club(client, gara):
    first = client.call(
        "graph", "Answer", generator_job_id=gara.id, graph={"bundled": "karate_club"}, node="33"
    )
    again = client.call(
        "graph", "Answer", generator_job_id=gara.id, graph={"bundled": "karate_club"}, node="33"
    )
    assert list(first.options) == ["core", "fringe"] and abs(sum(first.probabilities) - 1) < 1e-6
    assert (
        first.answer in first.options and first.prompt.startswith("node ") and first.prompt.endswith("role ?")
    )
    assert list(again.probabilities) == list(first.probabilities) and first.graph_digest == again.graph_digest


def _refused(call) -> list[tuple[str, str]]:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    assert exc.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    return field_violations(exc.value)


def test_bad_requests_name_the_field(client, gara):
    fields = _refused(
        lambda: client.call(
            "graph", "Answer", generator_job_id=gara.id, graph={"bundled": "karate_club"}, node="99"
        )
    )
    assert fields[0][0] == "node"
    fields = _refused(lambda: client.call("graph", "Answer", generator_job_id=gara.id, graph={}, node="1"))
    assert "exactly one of bundled, synthetic and file" in fields[0][1]
    fields = _refused(
        lambda: client.submit(
            "graph", "generate_adapter", generator_job_id="graph-nope", graph={"bundled": "karate_club"}
        )
    )
    assert fields[0][0] == "generator_job_id"
    fields = _refused(lambda: client.submit("graph", "train_generator", arm="lora_xl"))
    assert fields[0][0] == "arm"


def test_answer_on_uploaded_parquet_tables_and_their_refusal(client, gara, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    g = world.generate("watts_strogatz", np.random.default_rng(2))
    ids = [f"v{v}" for v in g.graph.nodes]
    folder = tmp_path / "tables"
    folder.mkdir()
    pq.write_table(pa.table({"id": ids, "text": list(g.texts)}), folder / "nodes.parquet")
    pairs = list(g.graph.edges)
    pq.write_table(
        pa.table({"source": [ids[a] for a, _ in pairs], "target": [ids[b] for _, b in pairs]}),
        folder / "edges.parquet",
    )
    upload = client.upload(folder, "graph")
    reply = client.call(
        "graph",
        "Answer",
        generator_job_id=gara.id,
        graph={"file": {"upload": upload.artifact.sha256}},
        node="v3",
    )
    assert reply.answer in ("core", "fringe") and reply.graph_digest == g.digest()
    pq.write_table(pa.table({"id": ids}), folder / "nodes.parquet")
    bad = client.upload(folder, "graph")
    fields = _refused(
        lambda: client.call(
            "graph",
            "Answer",
            generator_job_id=gara.id,
            graph={"file": {"upload": bad.artifact.sha256}},
            node="v3",
        )
    )
    assert fields[0][0] == "graph.file"
    assert "text or features" in fields[0][1]
