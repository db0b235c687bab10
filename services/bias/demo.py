"""`make demo` for bias: a CAB search against the built-in target with planted biases, judged by
the MiniLM+lexicon judge, then the planted cells next to the cells the search found biased."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from paperworks.bias.v1 import bias_pb2
from paperworks.services.bias.builtin.options import PlantedTargetOptions
from paperworks.services.bias.builtin.planted_target import draw_cells
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY
from paperworks.shared.devstack.demo import console, follow
from paperworks.shared.rpc.convert import PROTO_TO_STATE

SEED = 2


def run(client, out: Path) -> None:
    budget = 160
    job = client.submit(
        "bias",
        "generate_benchmark",
        target={"kind": "builtin", "builtin": "planted-target", "options": {"seed": SEED}},
        judge={"kind": "builtin", "builtin": "lexicon-judge"},
        second_judge={"kind": "builtin", "builtin": "lexicon-judge", "options": {"profile": "strict"}},
        generator={"kind": "builtin", "builtin": "template-generator"},
        budget_target_calls=budget,
        benchmark_size=10,
        seed=SEED,
    )
    console.print(
        f"submitted [bold]{job.id}[/] (CAB search: {budget} target calls against a planted-bias target)"
    )
    done = follow(client, job.id, "bias.generate_benchmark")
    if PROTO_TO_STATE[done.state] != "SUCCEEDED":
        raise SystemExit(f"{job.id} ended {PROTO_TO_STATE[done.state]}: {done.error.message}")
    r = done.result
    console.print(
        f"{int(r['questions_evaluated'])} questions over {int(r['generations'])} generations, "
        f"{int(r['target_calls_used'])} target calls; mean bias {r['mean_bias']:.2f}, "
        f"bias rate {r['bias_rate']:.2f}, asymmetric refusals {r['asymmetric_refusal_rate']:.2f}"
    )
    paths = {p.name: p for p in client.pull_artifacts(job.id, out)}
    archive = [json.loads(line) for line in paths["archive.jsonl"].read_text().splitlines()]
    found = Counter(
        (q["attribute"], q["topic"]) for q in archive if q["verdict"] and q["verdict"]["bias"] >= 4
    )
    for cell in draw_cells(DEFAULT_TAXONOMY, PlantedTargetOptions(seed=SEED)):
        hits = found.get((cell.attribute, cell.topic), 0)
        console.print(
            f"  planted {cell.kind:<10} {cell.attribute:<8} {cell.topic!r}: {hits} strongly biased questions"
        )
    agreement = json.loads(paths["report.json"].read_text())["judge_agreement"]
    console.print(
        f"judge agreement on {agreement['sample']}: bias within one {agreement['bias_within_one']:.2f}, "
        f"refusals {agreement['refusal_agreement']:.2f}"
    )
    top = json.loads(paths["benchmark.jsonl"].read_text().splitlines()[0])
    variants = (
        client.stub("bias")
        .ExpandPlaceholders(
            bias_pb2.ExpandPlaceholdersRequest(template=top["template"], attribute=top["attribute"]),
            metadata=client.metadata,
            timeout=30,
        )
        .variants
    )
    console.print(f"top question ({top['attribute']}, {top['topic']}): {top['template']}")
    console.print(f"  -> {len(variants)} variants, e.g. {variants[-1]!r}")
    console.print(f"artifacts in {out}: {', '.join(sorted(paths))}")
