"""The bias service's reproductions at larger budgets, each against its baseline in the same run,
plus judged-question throughput against the local OpenAI-compatible server.

- CAB search: planted-cell hits (distinct questions in a planted cell judged fitness >= 4) of the
  adaptive mutation-selection loop vs uniform random generation, same target-call budget, per
  budget and seed; asymmetric-refusal precision/recall against a refusal-only planted target.
- M&D: the tiny word-level transformer that knows some answers and has a lettered label
  shortcut for the others, 48 questions (half knowable) × all 24 permutations: accuracy variance
  standard / M&D, the mean accuracies and the accuracy on known / unknown questions; NonsenseQA
  under the all-"A" attack: share of answers at the demos' label (chance 0.25).
- Throughput: judged questions per minute over HTTP (planted target + lexicon judge served by
  the local server with a fixed 50 ms answer latency per request, as a remote model's), with
  8 concurrent questions vs 1.

Writes tests/benchmarks/results/bias.json; prints a markdown table. BENCH_BIAS_QUICK=1 shrinks it;
`bench_bias.py md` (any of search, asymmetric_refusals, md, throughput) reruns only those parts.
"""

from __future__ import annotations

import json
import os
import platform
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from paperworks.services.bias.builtin.lexicon_judge import LexiconJudge  # noqa: E402
from paperworks.services.bias.builtin.options import LexiconJudgeOptions, PlantedTargetOptions  # noqa: E402
from paperworks.services.bias.builtin.planted_target import PlantedTarget  # noqa: E402
from paperworks.services.bias.builtin.template_generator import TemplateGenerator  # noqa: E402
from paperworks.services.bias.cab.evaluate import EvalSettings, evaluate_questions  # noqa: E402
from paperworks.services.bias.cab.placeholders import parse_template  # noqa: E402
from paperworks.services.bias.cab.question import Question, question_id  # noqa: E402
from paperworks.services.bias.cab.search import SearchConfig, run_search  # noqa: E402
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY  # noqa: E402
from paperworks.services.bias.data import open_model  # noqa: E402
from paperworks.services.bias.embedder import get_embedder  # noqa: E402
from paperworks.services.bias.mcq.audit import evaluate_mcq  # noqa: E402
from paperworks.services.bias.mcq.evaluate import MCQSettings  # noqa: E402
from paperworks.services.bias.mcq.nonsenseqa import nonsense_qa  # noqa: E402
from paperworks.services.bias.spec import ModelSpec  # noqa: E402
from reproduction.bias.openai_server import LocalOpenAIServer  # noqa: E402
from reproduction.bias.shortcut_model import (  # noqa: E402
    FactWorld,
    accuracy_by_kind,
    evaluation_set,
    train_shortcut_model,
)

QUICK = os.environ.get("BENCH_BIAS_QUICK") == "1"
BUDGETS = [300] if QUICK else [300, 800]
SEEDS = [0] if QUICK else [0, 1, 2]
STEPS = 900 if QUICK else 1200  # training steps of the M&D shortcut model
GATE = 3


def cab_arm(strategy: str, budget: int, seed: int, **planted) -> tuple[PlantedTarget, object]:
    embedder = get_embedder()
    target = PlantedTarget(DEFAULT_TAXONOMY, PlantedTargetOptions(seed=seed, **planted))
    judge = LexiconJudge(LexiconJudgeOptions(), get_embedder)
    outcome = run_search(
        SearchConfig(budget=budget, strategy=strategy, seed=seed, relevance_gate=GATE),
        DEFAULT_TAXONOMY,
        target,
        judge,
        TemplateGenerator(DEFAULT_TAXONOMY),
        embedder,
        EvalSettings(),
    )
    return target, outcome


def hits(target: PlantedTarget, outcome) -> tuple[int, int]:
    cells = {(c.attribute, c.topic) for c in target.cells}
    found = [
        (r.question.attribute, r.question.topic_path[2])
        for r in outcome.archive
        if r.verdict
        and r.verdict.fitness(GATE) >= 4
        and (r.question.attribute, r.question.topic_path[2]) in cells
    ]
    return len(found), len(set(found))


def bench_search() -> dict:
    rows = []
    for budget in BUDGETS:
        for seed in SEEDS:
            row = {"budget": budget, "seed": seed}
            for strategy in ("adaptive", "random"):
                start = time.perf_counter()
                target, outcome = cab_arm(strategy, budget, seed)
                n, distinct = hits(target, outcome)
                row[strategy] = {
                    "hits": n,
                    "distinct_cells": distinct,
                    "questions": len(outcome.archive),
                    "planted_cells": len(target.cells),
                    "seconds": time.perf_counter() - start,
                }
            row["hit_ratio"] = row["adaptive"]["hits"] / max(row["random"]["hits"], 1)
            rows.append(row)
            print(
                f"search budget {budget} seed {seed}: adaptive {row['adaptive']['hits']} vs random "
                f"{row['random']['hits']} hits",
                flush=True,
            )
    return {"runs": rows, "min_hit_ratio": min(r["hit_ratio"] for r in rows)}


def bench_refusals() -> dict:
    target, outcome = cab_arm("adaptive", BUDGETS[-1], 0, n_flip=0, n_stereotype=0, n_refusal=3)
    judged = [r for r in outcome.archive if r.verdict]
    planted = [("refusal" in target.behaviours_of(r.question.variants)) for r in judged]
    flagged = [r.verdict.asymmetric_refusal for r in judged]
    true_pos = sum(f and p for f, p in zip(flagged, planted, strict=True))
    return {
        "budget": BUDGETS[-1],
        "questions": len(judged),
        "flagged": sum(flagged),
        "planted": sum(planted),
        "precision": true_pos / max(sum(flagged), 1),
        "recall": true_pos / max(sum(planted), 1),
        "base_rate": sum(planted) / max(len(judged), 1),
    }


def bench_md() -> dict:
    torch.set_num_threads(1)
    world = FactWorld(0)
    start = time.perf_counter()
    model = train_shortcut_model(world, steps=STEPS, seed=0)
    train_s = time.perf_counter() - start
    rng = random.Random(1)
    demos = [world.item(rng, True, f"demo-{k}") for k in range(32)]

    def run(items, **settings):
        return evaluate_mcq(
            model,
            items,
            demos,
            ["standard", "md"],
            MCQSettings(seed=0, shots=2, **settings),
            max_permutations=24,
            embedder=get_embedder,
        )

    n = 24 if QUICK else 48
    items = evaluation_set(world, n, 2)
    plain, rows = run(items)
    nonsense = [
        replace(i, question=i.question.rstrip("?"))
        for i in nonsense_qa(n, seed=3, question_words=1, vocabulary=world.fillers)
    ]
    attacked, _ = run(nonsense, attack_label=0)
    std, md = plain["protocols"]["standard"], plain["protocols"]["md"]
    return {
        "train_steps": STEPS,
        "train_seconds": train_s,
        "questions": n,
        "permutations": 24,
        "standard": {"variance": std["variance"], "mean_accuracy": std["mean_accuracy"]},
        "md": {"variance": md["variance"], "mean_accuracy": md["mean_accuracy"]},
        "variance_ratio": std["variance"] / md["variance"] if md["variance"] > 0 else None,
        "accuracy_by_kind": accuracy_by_kind(rows, world, items),
        "attack_demo_label_share": {
            "standard": attacked["protocols"]["standard"]["demo_majority_agreement"],
            "md": attacked["protocols"]["md"]["demo_majority_agreement"],
            "chance": 0.25,
        },
    }


def bench_throughput() -> dict:
    embedder = get_embedder()
    rng = random.Random(5)
    gen = TemplateGenerator(DEFAULT_TAXONOMY)
    questions = []
    for name, topic in rng.sample(list(DEFAULT_TAXONOMY.cells()), 16 if QUICK else 40):
        attr = DEFAULT_TAXONOMY.attributes[name]
        text = gen.render(attr, gen.fresh(rng, attr, "explicit", topic.topic))
        questions.append(
            Question(question_id(text), name, "explicit", topic.path, parse_template(text, attr))
        )
    models = {
        "target": PlantedTarget(DEFAULT_TAXONOMY, PlantedTargetOptions()),
        "judge": LexiconJudge(LexiconJudgeOptions(), lambda: embedder),
    }
    evaluate_questions(questions, models["target"], models["judge"], EvalSettings())  # warm the caches
    out = {}
    with LocalOpenAIServer(models, latency_s=0.05) as server:
        for concurrency in (1, 8):
            specs = {r: ModelSpec(kind="openai", url=server.url, model=r, max_concurrency=8) for r in models}
            target, judge = (open_model(specs[r], r, DEFAULT_TAXONOMY) for r in ("target", "judge"))
            start = time.perf_counter()
            results = evaluate_questions(questions, target, judge, EvalSettings(), concurrency=concurrency)
            seconds = time.perf_counter() - start
            assert all(r.verdict for r in results)
            out[f"concurrency_{concurrency}"] = {
                "questions": len(results),
                "seconds": seconds,
                "judged_per_minute": 60 * len(results) / seconds,
            }
    out["speedup"] = out["concurrency_8"]["judged_per_minute"] / out["concurrency_1"]["judged_per_minute"]
    out["server_latency_s"] = 0.05
    return out


PARTS = {
    "search": bench_search,
    "asymmetric_refusals": bench_refusals,
    "md": bench_md,
    "throughput": bench_throughput,
}


def main(parts: list[str]) -> dict:
    """Run `parts` (all by default); the others keep their figures from the committed file."""
    path = HERE / "results" / "bias.json"
    results = json.loads(path.read_text()) if set(parts) != set(PARTS) and path.exists() else {}
    results["machine"] = {
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    for name in parts:
        results[name] = PARTS[name]()
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    return results


def table(results: dict) -> str:
    rows = ["| measure | baseline (same run) | bias service | ratio |", "|---|---|---|---|"]
    for r in results["search"]["runs"]:
        rows.append(
            f"| CAB planted-cell hits, {r['budget']} target calls, seed {r['seed']} | "
            f"uniform random {r['random']['hits']} | adaptive {r['adaptive']['hits']} | "
            f"{r['hit_ratio']:.1f}x |"
        )
    a = results["asymmetric_refusals"]
    rows.append(
        f"| asymmetric-refusal precision / recall ({a['flagged']} flagged) | "
        f"base rate {a['base_rate']:.2f} | {a['precision']:.2f} / {a['recall']:.2f} | |"
    )
    m = results["md"]
    ratio = f"{m['variance_ratio']:.0f}x lower" if m["variance_ratio"] else "M&D does not vary"
    rows.append(
        f"| accuracy variance over 24 permutations | standard {m['standard']['variance']:.4f} | "
        f"M&D {m['md']['variance']:.4f} | {ratio} |"
    )
    rows.append(
        f"| mean accuracy | standard {m['standard']['mean_accuracy']:.3f} | "
        f"M&D {m['md']['mean_accuracy']:.3f} | |"
    )
    k = m["accuracy_by_kind"]
    rows.append(
        f"| accuracy on known / unknown questions | standard {k['standard']['knowable']:.2f} / "
        f"{k['standard']['unknowable']:.2f} | M&D {k['md']['knowable']:.2f} / {k['md']['unknowable']:.2f} | |"
    )
    s = m["attack_demo_label_share"]
    rows.append(
        f'| NonsenseQA all-"A" attack: answers at the demos\' label | standard {s["standard"]:.2f} | '
        f"M&D {s['md']:.2f} (chance {s['chance']:.2f}) | |"
    )
    t = results["throughput"]
    rows.append(
        f"| judged questions / min over HTTP (50 ms per answer) | 1 at a time "
        f"{t['concurrency_1']['judged_per_minute']:.0f} | "
        f"8 concurrent {t['concurrency_8']['judged_per_minute']:.0f} | {t['speedup']:.1f}x |"
    )
    return "\n".join(rows)


if __name__ == "__main__":
    unknown = set(sys.argv[1:]) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown parts {sorted(unknown)}; choose from {list(PARTS)}")
    print(table(main(sys.argv[1:] or list(PARTS))))
