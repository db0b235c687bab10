"""Inputs of the graph service: a graph named by `GraphSource` (networkx's bundled graphs, a
generated family member, or a file: networkx node-link JSON, a PyTorch Geometric Data saved as
safetensors, or a folder/archive with nodes.csv + edges.csv or nodes.parquet + edges.parquet; an
upload, another job's artifact, an s3:// object or a server path, through
`paperworks.shared.inputs.resolve_input`), a user's LM folder, and the trained generators named by
job id. The small files the README examples use:

    python -m paperworks.services.graph.data node-link ./graph.json --family barabasi_albert --seed 3
    python -m paperworks.services.graph.data tables ./graph-tables --family watts_strogatz --format parquet
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import networkx as nx
import numpy as np
from paperworks.services.graph import checkpoint, world
from paperworks.services.graph.spec import GraphSource
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import archive_root, resolve_input
from safetensors import SafetensorError
from safetensors.numpy import load as np_load

MAX_NODES = 5_000
MAX_EDGES = 100_000
MAX_BYTES = 64 * 1024**2
MAX_TEXT = 200


def _task_graph(name: str, graph: nx.Graph, texts, features, community, field: str) -> world.TaskGraph:
    n = graph.number_of_nodes()
    if n == 0:
        raise InvalidArgument(field, "the graph has no node")
    if n > MAX_NODES or graph.number_of_edges() > MAX_EDGES:
        raise InvalidArgument(field, f"at most {MAX_NODES} nodes and {MAX_EDGES} edges")
    texts = [str(t)[:MAX_TEXT] if t is not None else "none" for t in texts]
    community = np.asarray(community if community is not None else np.zeros(n), dtype=np.int64)
    if set(np.unique(community).tolist()) - {0, 1}:
        raise InvalidArgument(field, "node attribute 'community' must be 0 or 1")
    return world.TaskGraph(name, "file", graph, community, texts, features)


def from_node_link(data: bytes, field: str) -> world.TaskGraph:
    """networkx node-link JSON; node attributes "text" (string) or "features" (numbers), and
    optionally "community" (0/1)."""
    try:
        doc = json.loads(data)
        graph = nx.node_link_graph(doc, edges="links" if "links" in doc else "edges")
    except (ValueError, KeyError, TypeError, nx.NetworkXError) as exc:
        raise InvalidArgument(field, f"not networkx node-link JSON: {exc}") from None
    graph = nx.Graph(graph)
    nodes = list(graph.nodes)
    attrs = [graph.nodes[v] for v in nodes]
    features = None
    if attrs and all("features" in a for a in attrs):
        try:
            features = np.asarray([a["features"] for a in attrs], dtype=np.float32)
        except (ValueError, TypeError):
            raise InvalidArgument(field, "node 'features' must be equal-length lists of numbers") from None
        if features.ndim != 2 or not np.isfinite(features).all():
            raise InvalidArgument(field, "node 'features' must be equal-length lists of finite numbers")
    texts = [a.get("text") for a in attrs]
    community = [a.get("community", 0) for a in attrs] if any("community" in a for a in attrs) else None
    try:
        mapping = {v: i for i, v in enumerate(nodes)}
        g = nx.relabel_nodes(graph, mapping)
        return _task_graph("node-link", g, texts, features, community, field), [str(v) for v in nodes]
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(field, f"bad node attributes: {exc}") from None


def from_pyg_safetensors(data: bytes, field: str):
    """A PyTorch Geometric Data saved as safetensors: x (n, f) float, edge_index (2, E) integer,
    optionally y / community (n,) 0/1."""
    try:
        t = np_load(data)
        x, edges = t["x"].astype(np.float32), t["edge_index"]
    except (SafetensorError, KeyError, ValueError, OSError) as exc:
        raise InvalidArgument(field, f"not a PyG Data safetensors (x, edge_index): {exc}") from None
    if x.ndim != 2 or edges.ndim != 2 or edges.shape[0] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise InvalidArgument(field, "x must be (n, f) and edge_index (2, E) integers")
    if edges.size and (edges.min() < 0 or edges.max() >= len(x)):
        raise InvalidArgument(field, "edge_index names a node outside x")
    if len(x) > MAX_NODES or edges.shape[1] > 2 * MAX_EDGES:
        raise InvalidArgument(field, f"at most {MAX_NODES} nodes and {MAX_EDGES} edges")
    graph = nx.Graph()
    graph.add_nodes_from(range(len(x)))
    graph.add_edges_from(edges.T.tolist())
    community = t.get("community", t.get("y"))
    tg = _task_graph("pyg", graph, [None] * len(x), x, community, field)
    return tg, [str(i) for i in range(len(x))]


def from_csv_folder(folder: Path, field: str):
    """edges.csv (source,target) and nodes.csv (id,text[,community])."""
    try:
        with open(folder / "nodes.csv", newline="") as f:
            rows = list(csv.DictReader(f))[: MAX_NODES + 1]
        with open(folder / "edges.csv", newline="") as f:
            edges = [(r["source"], r["target"]) for r in list(csv.DictReader(f))[: MAX_EDGES + 1]]
        ids = [r["id"] for r in rows]
    except (OSError, KeyError, csv.Error, UnicodeDecodeError) as exc:
        raise InvalidArgument(
            field,
            "needs nodes.csv (id,text) and edges.csv (source,target), or nodes.parquet and "
            f"edges.parquet: {exc}",
        ) from None
    index = {v: i for i, v in enumerate(ids)}
    if len(index) != len(ids) or any(a not in index or b not in index for a, b in edges):
        raise InvalidArgument(field, "node ids must be unique and every edge must name listed nodes")
    graph = nx.Graph()
    graph.add_nodes_from(range(len(ids)))
    graph.add_edges_from((index[a], index[b]) for a, b in edges)
    community = [int(r.get("community") or 0) for r in rows] if rows and "community" in rows[0] else None
    return _task_graph("csv", graph, [r.get("text") for r in rows], None, community, field), ids


def _parquet_table(path: Path, columns_wanted, max_rows: int, what: str, field: str):
    """One Parquet file read with pyarrow, refused before reading when it is too big (rows from the
    footer, bytes on disk and uncompressed) or lacks a column in `columns_wanted` (a tuple: any
    one of its names will do)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if path.stat().st_size > MAX_BYTES:
            raise InvalidArgument(field, f"{path.name}: at most {MAX_BYTES} bytes")
        parquet = pq.ParquetFile(path)
        meta, names = parquet.metadata, set(parquet.schema_arrow.names)
    except (OSError, pa.ArrowException) as exc:
        raise InvalidArgument(field, f"{path.name} is not a readable Parquet table: {exc}") from None
    if meta.num_rows > max_rows:
        raise InvalidArgument(field, f"{path.name}: at most {max_rows} {what}, not {meta.num_rows}")
    unpacked = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if unpacked > 4 * MAX_BYTES:
        raise InvalidArgument(field, f"{path.name}: at most {4 * MAX_BYTES} bytes uncompressed")
    for need in columns_wanted:
        if not names & set(need):
            raise InvalidArgument(
                field, f"{path.name} needs a column {' or '.join(need)} (it has {', '.join(sorted(names))})"
            )
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise InvalidArgument(field, f"{path.name} is not a readable Parquet table: {exc}") from None


def _id_strings(column, name: str, field: str) -> list[str]:
    """A column of node ids (strings or integers) as the strings users name nodes by."""
    import pyarrow as pa

    if column.null_count:
        raise InvalidArgument(field, f"column {name} has empty ids")
    if not (
        pa.types.is_integer(column.type)
        or pa.types.is_string(column.type)
        or pa.types.is_large_string(column.type)
    ):
        raise InvalidArgument(field, f"column {name} must hold strings or integers, not {column.type}")
    return [str(v) for v in column.to_pylist()]


def _parquet_features(table, field: str) -> np.ndarray | None:
    """Numeric node features: a `features` column of equal-length lists, or scalar columns
    feature_0, feature_1, ... (in index order); None when neither is there."""
    import pyarrow as pa

    names = table.column_names
    scalar = sorted(
        (n for n in names if n.startswith("feature_") and n[8:].isdigit()), key=lambda n: int(n[8:])
    )
    if "features" not in names and not scalar:
        return None
    try:
        if "features" in names:
            rows = table.column("features").to_pylist()
            if any(r is None for r in rows):
                raise ValueError("a node has no features")
            features = np.asarray(rows, dtype=np.float32)
        else:
            if [int(n[8:]) for n in scalar] != list(range(len(scalar))):
                raise ValueError("feature columns must be feature_0 .. feature_{f-1}, none missing")
            features = np.stack([table.column(n).to_numpy(zero_copy_only=False) for n in scalar], 1)
            features = features.astype(np.float32)
    except (ValueError, TypeError, pa.ArrowException) as exc:
        raise InvalidArgument(field, f"node features must be equal-length lists of numbers: {exc}") from None
    if features.ndim != 2 or not features.shape[1] or not np.isfinite(features).all():
        raise InvalidArgument(field, "node features must be equal-length lists of finite numbers")
    return features


def from_parquet_folder(folder: Path, field: str):
    """nodes.parquet (id, and text and/or numeric features: a `features` list column or
    feature_0..feature_{f-1}; optional community 0/1) and edges.parquet (source, target): the
    CSV form's tables as Parquet, read with pyarrow, under the same limits and refusals."""
    nodes = _parquet_table(
        folder / "nodes.parquet", [("id",), ("text", "features", "feature_0")], MAX_NODES, "nodes", field
    )
    edges = _parquet_table(
        folder / "edges.parquet", [("source",), ("target",)], 2 * MAX_EDGES, "edges", field
    )
    ids = _id_strings(nodes.column("id"), "id", field)
    index = {v: i for i, v in enumerate(ids)}
    if len(index) != len(ids):
        raise InvalidArgument(field, "node ids must be unique")
    pairs = zip(
        _id_strings(edges.column("source"), "source", field),
        _id_strings(edges.column("target"), "target", field),
        strict=True,
    )
    try:
        pairs = [(index[a], index[b]) for a, b in pairs]
    except KeyError as exc:
        raise InvalidArgument(
            field, f"every edge must name listed nodes; {exc.args[0]!r} is not one"
        ) from None
    graph = nx.Graph()
    graph.add_nodes_from(range(len(ids)))
    graph.add_edges_from(pairs)
    texts = nodes.column("text").to_pylist() if "text" in nodes.column_names else [None] * len(ids)
    community = None
    if "community" in nodes.column_names:
        column = nodes.column("community").fill_null(0)
        try:
            community = column.to_numpy(zero_copy_only=False).astype(np.int64)
        except (ValueError, TypeError) as exc:
            raise InvalidArgument(field, f"node column 'community' must be 0 or 1: {exc}") from None
    features = _parquet_features(nodes, field)
    return _task_graph("parquet", graph, texts, features, community, field), ids


def _graph_folder(folder: Path, field: str):
    """A folder (or an unpacked archive, maybe with the folder on top) of CSV or Parquet tables."""
    folder = archive_root(folder, lambda p: any((p / f).is_file() for f in ("nodes.csv", "nodes.parquet")))
    if (folder / "nodes.parquet").is_file():
        return from_parquet_folder(folder, field)
    return from_csv_folder(folder, field)


def load_graph(source: GraphSource, scope, field: str = "graph") -> tuple[world.TaskGraph, list[str]]:
    """(the graph, node ids as users name them) for a validated GraphSource."""
    if source.bundled:
        g = world.bundled(source.bundled)
        return g, [str(v) for v in g.graph.nodes]
    if source.synthetic is not None:
        g = world.generate(source.synthetic.family, np.random.default_rng(source.synthetic.seed))
        return g, [str(v) for v in g.graph.nodes]
    where = f"{field}.file"
    path = resolve_input(source.file, scope, "graph", where, unpack=True)
    if path.is_dir():
        return _graph_folder(path, where)
    if path.stat().st_size > MAX_BYTES:
        raise InvalidArgument(where, f"at most {MAX_BYTES} bytes")
    raw = path.read_bytes()
    if raw[:1] in (b"{", b"["):
        return from_node_link(raw, where)
    return from_pyg_safetensors(raw, where)


def base_lm(ctx_or_scope, settings: dict, lm_bytes: bytes | None, device: str, field: str):
    """(frozen base LM, tokenizer) a generator was trained on."""
    if settings.get("lm", "tiny") == "tiny":
        return checkpoint.lm_from_bytes(lm_bytes, device, field), world.WordTokenizer()
    from paperworks.shared.inputs import InputRefParams

    ref = InputRefParams.model_validate(settings["lm"])
    path = resolve_input(ref, ctx_or_scope, "graph", f"{field}.lm", unpack=True)
    return checkpoint.load_user_lm(path, device, f"{field}.lm")


def check_texts(graph: world.TaskGraph, tokenizer, width: int, field: str = "graph") -> None:
    """Refuses node texts the LM's tokenizer cannot read and numeric features of the wrong width."""
    if graph.features is not None:
        if graph.features.shape[1] != width:
            raise InvalidArgument(
                field,
                f"node features must be {width} wide (the LM's hidden size), not {graph.features.shape[1]}",
            )
        return
    for text in set(graph.texts):
        try:
            if not tokenizer.encode(text, bos=False):
                raise KeyError(text)
        except KeyError:
            raise InvalidArgument(
                field, f"node text {text!r} has a word outside the LM's vocabulary"
            ) from None


def _main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m paperworks.services.graph.data")
    sub = p.add_subparsers(dest="what", required=True)
    n = sub.add_parser(
        "node-link", help="a generated graph as networkx node-link JSON (node text + community)"
    )
    n.add_argument("out", type=Path)
    n.add_argument("--family", choices=("sbm", "barabasi_albert", "watts_strogatz"), default="sbm")
    n.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("tables", help="a generated graph as a folder of nodes + edges tables")
    t.add_argument("out", type=Path)
    t.add_argument("--family", choices=("sbm", "barabasi_albert", "watts_strogatz"), default="sbm")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    a = p.parse_args(argv)
    g = world.generate(a.family, np.random.default_rng(a.seed))
    if a.what == "tables":
        write_tables(g, a.out, a.format)
        print(a.out)
        return
    for v in g.graph.nodes:
        g.graph.nodes[v]["text"] = g.texts[v]
        g.graph.nodes[v]["community"] = int(g.community[v])
    a.out.write_text(json.dumps(nx.node_link_data(g.graph, edges="links")))
    print(a.out)


def write_tables(g: world.TaskGraph, folder: Path, fmt: str = "parquet") -> None:
    """nodes (id, text, community) and edges (source, target) of `g` as Parquet or CSV files."""
    folder.mkdir(parents=True, exist_ok=True)
    nodes = {"id": [str(v) for v in g.graph.nodes], "text": list(g.texts), "community": g.community.tolist()}
    edges = {"source": [str(a) for a, _ in g.graph.edges], "target": [str(b) for _, b in g.graph.edges]}
    for name, columns in (("nodes", nodes), ("edges", edges)):
        if fmt == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table(columns), folder / f"{name}.parquet")
            continue
        with open(folder / f"{name}.csv", "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(columns)
            out.writerows(zip(*columns.values(), strict=True))


if __name__ == "__main__":
    _main()
