"""Graph tables as Parquet (services/graph/data.py): a folder or archive of nodes.parquet and
edges.parquet reads to the same graph as the CSV form of the same tables, numeric features come
from a list column or feature_i columns, and every bad table is refused naming the field."""

from __future__ import annotations

import csv
import tarfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from paperworks.services.graph import data, world
from paperworks.shared.errors import InvalidArgument

FIELD = "graph.file"


def _tables(g: world.TaskGraph):
    ids = [f"n{v}" for v in g.graph.nodes]
    nodes = {"id": ids, "text": list(g.texts), "community": [int(c) for c in g.community]}
    edges = {"source": [ids[a] for a, _ in g.graph.edges], "target": [ids[b] for _, b in g.graph.edges]}
    return nodes, edges


def _write_csv(folder, name, columns):
    with open(folder / name, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(zip(*columns.values(), strict=True))


def _write_parquet(folder, nodes, edges, **nodes_schema):
    folder.mkdir(exist_ok=True)
    pq.write_table(pa.table(nodes, **nodes_schema), folder / "nodes.parquet")
    pq.write_table(pa.table(edges), folder / "edges.parquet")
    return folder


def _same(a: world.TaskGraph, b: world.TaskGraph):
    assert sorted(a.graph.edges) == sorted(b.graph.edges) and a.n == b.n
    assert a.texts == b.texts and a.community.tolist() == b.community.tolist() and a.core == b.core
    assert a.digest() == b.digest()


def test_parquet_tables_read_as_the_same_graph_as_csv(tmp_path):
    g = world.generate("barabasi_albert", np.random.default_rng(4))
    nodes, edges = _tables(g)
    (tmp_path / "csv").mkdir()
    _write_csv(tmp_path / "csv", "nodes.csv", nodes)
    _write_csv(tmp_path / "csv", "edges.csv", edges)
    from_csv, csv_ids = data.from_csv_folder(tmp_path / "csv", FIELD)
    from_parquet, ids = data.from_parquet_folder(_write_parquet(tmp_path / "pq", nodes, edges), FIELD)
    assert ids == csv_ids == nodes["id"] and from_parquet.features is None
    _same(from_parquet, from_csv)
    # as an archive with the folder on top, through load_graph's folder dispatch
    with tarfile.open(tmp_path / "g.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "pq", arcname="mygraph")
    with tarfile.open(tmp_path / "g.tar.gz") as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    unpacked, _ = data._graph_folder(tmp_path / "unpacked", FIELD)
    _same(unpacked, from_csv)
    # the CLI's writer, both formats
    for fmt in ("parquet", "csv"):
        data.write_tables(g, tmp_path / fmt / "cli", fmt)
        written, cli_ids = data._graph_folder(tmp_path / fmt / "cli", FIELD)
        assert cli_ids == [str(v) for v in g.graph.nodes]
        _same(written, from_csv)


def test_parquet_integer_ids_and_numeric_features(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    edges = {"source": [0, 1, 2], "target": [1, 2, 3]}
    listed, ids = data.from_parquet_folder(
        _write_parquet(tmp_path / "a", {"id": [0, 1, 2, 3], "features": x.tolist()}, edges), FIELD
    )
    assert ids == ["0", "1", "2", "3"] and np.allclose(listed.features, x)
    assert sorted(listed.graph.edges) == [(0, 1), (1, 2), (2, 3)]
    columns = {"id": [0, 1, 2, 3], **{f"feature_{i}": x[:, i] for i in (2, 0, 1)}}
    scalar, _ = data.from_parquet_folder(_write_parquet(tmp_path / "b", columns, edges), FIELD)
    assert np.array_equal(scalar.features, listed.features)


def _refusal(folder) -> str:
    with pytest.raises(InvalidArgument) as err:
        data._graph_folder(folder, FIELD)
    assert err.value.field == FIELD
    return str(err.value)


def test_bad_parquet_tables_are_refused_naming_the_field(tmp_path, monkeypatch):
    nodes = {"id": ["a", "b", "c"], "text": ["c1", "c2", "c1"]}
    edges = {"source": ["a", "b"], "target": ["b", "c"]}
    assert "column id" in _refusal(_write_parquet(tmp_path / "no_id", {"text": nodes["text"]}, edges))
    assert "text or features" in _refusal(_write_parquet(tmp_path / "no_text", {"id": nodes["id"]}, edges))
    missing_target = _write_parquet(tmp_path / "no_target", nodes, {"source": ["a"], "src2": ["b"]})
    assert "column target" in _refusal(missing_target)
    assert "'zzz'" in _refusal(
        _write_parquet(tmp_path / "bad_edge", nodes, {"source": ["a"], "target": ["zzz"]})
    )
    dup = {"id": ["a", "a", "c"], "text": nodes["text"]}
    assert "unique" in _refusal(_write_parquet(tmp_path / "dup", dup, edges))
    null_id = {"id": ["a", None, "c"], "text": nodes["text"]}
    assert "empty ids" in _refusal(_write_parquet(tmp_path / "null", null_id, edges))
    ragged = {"id": nodes["id"], "features": [[1.0, 2.0], [1.0], [3.0, 4.0]]}
    assert "equal-length" in _refusal(_write_parquet(tmp_path / "ragged", ragged, edges))
    bad_community = {**nodes, "community": [0, 2, 1]}
    assert "community" in _refusal(_write_parquet(tmp_path / "community", bad_community, edges))
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "nodes.parquet").write_bytes(b"not parquet at all")
    assert "not a readable Parquet" in _refusal(tmp_path / "garbage")
    monkeypatch.setattr(data, "MAX_NODES", 2)
    assert "at most 2 nodes" in _refusal(_write_parquet(tmp_path / "big", nodes, edges))
