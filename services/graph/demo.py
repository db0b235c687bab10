"""`make demo` for graph: a small GaRA generator trained on generated SBM graphs, asked zero-shot
about Zachary's karate club (one generator forward for the graph, then one query per node), and
the karate club's adapter exported in PEFT LoRA format."""

from __future__ import annotations

from pathlib import Path

from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE


def _done(client, job, label: str):
    done = follow(client, job.id, label)
    if PROTO_TO_STATE[done.state] != "SUCCEEDED":
        raise SystemExit(f"{label} ended {PROTO_TO_STATE[done.state]}: {done.error.message}")
    return done


def run(client, out: Path) -> None:
    gen = _done(
        client,
        client.submit("graph", "train_generator", steps=300, train_graphs=256),
        "graph.train_generator",
    )
    console.print(
        f"GaRA generator: validation accuracy {gen.result['validation_accuracy']:.2f} "
        f"(best step {int(gen.result['best_step'])}), norm ratio {gen.result['norm_ratio']:.3f}"
    )
    right = 0
    for node in range(34):
        reply = client.call(
            "graph", "Answer", generator_job_id=gen.id, graph={"bundled": "karate_club"}, node=str(node)
        )
        truth = "core" if node in _officer_faction() else "fringe"
        right += reply.answer == truth
        if node in (0, 33):
            console.print(
                f"karate club node {node}: {reply.prompt!r} -> {reply.answer} "
                f"(p = {max(reply.probabilities):.2f}; truth {truth})"
            )
    console.print(
        f"karate club, zero-shot: {right}/34 nodes answered right "
        "(the hub, node 33, leads the Officer faction: its members are 'core')"
    )
    adapter = _done(
        client,
        client.submit("graph", "generate_adapter", generator_job_id=gen.id, graph={"bundled": "karate_club"}),
        "graph.generate_adapter",
    )
    paths = client.pull_artifacts(adapter.id, out)
    console.print("PEFT adapter: " + ", ".join(p.name for p in paths))


def _officer_faction() -> set[int]:
    import networkx as nx

    g = nx.karate_club_graph()
    return {v for v in g.nodes if g.nodes[v]["club"] != "Mr. Hi"}
