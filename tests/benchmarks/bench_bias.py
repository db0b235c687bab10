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

import numpy as np  # noqa: E402
from paperworks.services.bias.builtin.lexicon_judge import LexiconJudge  # noqa: E402
from paperworks.services.bias.builtin.options import LexiconJudgeOptions, PlantedTargetOptions  # noqa: E402
from paperworks.services.bias.builtin.planted_target import PlantedTarget  # noqa: E402
from paperworks.services.bias.builtin.template_generator import TemplateGenerator  # noqa: E402
from paperworks.services.bias.cab.evaluate import EvalSettings, evaluate_questions  # noqa: E402
from paperworks.services.bias.cab.placeholders import parse_template  # noqa: E402
from paperworks.services.bias.cab.question import Question, question_id  # noqa: E402
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY  # noqa: E402
from paperworks.services.bias.data import open_model  # noqa: E402
from paperworks.services.bias.embedder import get_embedder  # noqa: E402
from paperworks.services.bias.mcq.audit import evaluate_mcq  # noqa: E402
from paperworks.services.bias.mcq.evaluate import MCQSettings  # noqa: E402
from paperworks.services.bias.mcq.nonsenseqa import nonsense_qa  # noqa: E402
from paperworks.services.bias.spec import ModelSpec  # noqa: E402
from reproduction.bias.cab_experiment import cab_arm, found  # noqa: E402
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


def stats(values: list[float]) -> dict:
    """Mean and spread (population std, min, max) over seeds."""
    arr = np.asarray(values, dtype=float)
    return {"mean": float(arr.mean()), "std": float(arr.std()), "min": float(arr.min()),
            "max": float(arr.max()), "n": len(values)}


def search_runs(budgets: list[int], seeds: list[int], arms: dict[str, tuple[str, dict]]) -> list[dict]:
    """Every arm at every budget and seed: hits and coverage (cab_experiment.found)."""
    embedder = get_embedder()
    rows = []
    for budget in budgets:
        for seed in seeds:
            row: dict = {"budget": budget, "seed": seed}
            for name, (strategy, overrides) in arms.items():
                start = time.perf_counter()
                target, outcome = cab_arm(strategy, budget, seed, embedder, overrides)
                row[name] = {**found(target, outcome).row(), "seconds": time.perf_counter() - start}
            rows.append(row)
            print(
                f"search budget {budget} seed {seed}: "
                + ", ".join(f"{n} {row[n]['hits']} hits / {row[n]['coverage']} cells" for n in arms),
                flush=True,
            )
    return rows


def summarize(rows: list[dict], arms: list[str]) -> dict:
    """Per budget and arm: mean ± spread of hits and coverage over the seeds."""
    out: dict = {}
    for budget in sorted({r["budget"] for r in rows}):
        at = [r for r in rows if r["budget"] == budget]
        out[str(budget)] = {
            arm: {m: stats([r[arm][m] for r in at]) for m in ("hits", "coverage")} for arm in arms
        }
    return out


# The validation sweep: exploration settings of the adaptive search (max_per_cell,
# fresh_per_generation), on seeds the tests never assert; the defaults in SearchConfig come from it.
VALIDATION_SEEDS = [10, 11, 12]
VALIDATION_BUDGETS = [300]
VALIDATION_ARMS = {
    "random": ("random", {}),
    "no_exploration": ("adaptive", {"max_per_cell": 0, "fresh_per_generation": 0}),
    "cap4_fresh2": ("adaptive", {"max_per_cell": 4, "fresh_per_generation": 2}),
    "cap1_fresh4": ("adaptive", {"max_per_cell": 1, "fresh_per_generation": 4}),
    "cap2_fresh4": ("adaptive", {"max_per_cell": 2, "fresh_per_generation": 4}),
    "cap1_fresh6": ("adaptive", {"max_per_cell": 1, "fresh_per_generation": 6}),
    "cap2_fresh6": ("adaptive", {"max_per_cell": 2, "fresh_per_generation": 6}),
}


def bench_validation() -> dict:
    rows = search_runs(VALIDATION_BUDGETS, VALIDATION_SEEDS, VALIDATION_ARMS)
    return {
        "seeds": VALIDATION_SEEDS,
        "budgets": VALIDATION_BUDGETS,
        "runs": rows,
        "summary": summarize(rows, list(VALIDATION_ARMS)),
    }


# The asserted comparison: the adaptive search with its defaults (chosen on validation) and uniform
# random. (The search without exploration pressure, as before issue 26, is a validation arm.)
SEARCH_ARMS = {
    "adaptive": ("adaptive", {}),
    "random": ("random", {}),
}


def bench_search() -> dict:
    rows = search_runs(BUDGETS, SEEDS, SEARCH_ARMS)
    for r in rows:
        r["hit_ratio"] = r["adaptive"]["hits"] / max(r["random"]["hits"], 1)
        r["coverage_gain"] = r["adaptive"]["coverage"] - r["random"]["coverage"]
    return {
        "seeds": SEEDS,
        "runs": rows,
        "summary": summarize(rows, list(SEARCH_ARMS)),
        "hit_ratio": stats([r["hit_ratio"] for r in rows]),
        "coverage_wins": sum(r["coverage_gain"] > 0 for r in rows),
        "coverage_ties": sum(r["coverage_gain"] == 0 for r in rows),
        "coverage_losses": sum(r["coverage_gain"] < 0 for r in rows),
    }


def bench_refusals() -> dict:
    rows = []
    for seed in SEEDS:
        target, outcome = cab_arm(
            "adaptive", BUDGETS[-1], seed, get_embedder(), n_flip=0, n_stereotype=0, n_refusal=3
        )
        judged = [r for r in outcome.archive if r.verdict]
        planted = [("refusal" in target.behaviours_of(r.question.variants)) for r in judged]
        flagged = [r.verdict.asymmetric_refusal for r in judged]
        true_pos = sum(f and p for f, p in zip(flagged, planted, strict=True))
        rows.append({
            "seed": seed,
            "questions": len(judged),
            "flagged": sum(flagged),
            "planted": sum(planted),
            "precision": true_pos / max(sum(flagged), 1),
            "recall": true_pos / max(sum(planted), 1),
            "base_rate": sum(planted) / max(len(judged), 1),
        })
        print(f"refusals seed {seed}: {rows[-1]}", flush=True)
    return {
        "budget": BUDGETS[-1],
        "runs": rows,
        **{m: stats([r[m] for r in rows]) for m in ("flagged", "precision", "recall", "base_rate")},
    }


def md_seed(seed: int) -> dict:
    """One world, one trained model, one evaluation: everything drawn from `seed`."""
    world = FactWorld(seed)
    start = time.perf_counter()
    model = train_shortcut_model(world, steps=STEPS, seed=seed)
    train_s = time.perf_counter() - start
    rng = random.Random(seed + 1)
    demos = [world.item(rng, True, f"demo-{k}") for k in range(32)]

    def run(items, **settings):
        return evaluate_mcq(
            model,
            items,
            demos,
            ["standard", "md"],
            MCQSettings(seed=seed, shots=2, **settings),
            max_permutations=24,
            embedder=get_embedder,
        )

    n = 24 if QUICK else 48
    items = evaluation_set(world, n, seed + 2)
    plain, rows = run(items)
    nonsense = [
        replace(i, question=i.question.rstrip("?"))
        for i in nonsense_qa(n, seed=seed + 3, question_words=1, vocabulary=world.fillers)
    ]
    attacked, _ = run(nonsense, attack_label=0)
    std, md = plain["protocols"]["standard"], plain["protocols"]["md"]
    out = {
        "seed": seed,
        "train_seconds": train_s,
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
    print(f"md seed {seed}: {out}", flush=True)
    return out


def bench_md() -> dict:
    torch.set_num_threads(1)
    runs = [md_seed(seed) for seed in SEEDS]
    pick = {
        "standard_variance": lambda r: r["standard"]["variance"],
        "md_variance": lambda r: r["md"]["variance"],
        "standard_mean_accuracy": lambda r: r["standard"]["mean_accuracy"],
        "md_mean_accuracy": lambda r: r["md"]["mean_accuracy"],
        "standard_knowable": lambda r: r["accuracy_by_kind"]["standard"]["knowable"],
        "md_knowable": lambda r: r["accuracy_by_kind"]["md"]["knowable"],
        "attack_standard": lambda r: r["attack_demo_label_share"]["standard"],
        "attack_md": lambda r: r["attack_demo_label_share"]["md"],
    }
    return {
        "train_steps": STEPS,
        "questions": 24 if QUICK else 48,
        "permutations": 24,
        "seeds": SEEDS,
        "runs": runs,
        "summary": {k: stats([f(r) for r in runs]) for k, f in pick.items()},
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
    "validation": bench_validation,
    "search": bench_search,
    "asymmetric_refusals": bench_refusals,
    "md": bench_md,
    "throughput": bench_throughput,
}


def main(parts: list[str]) -> dict:
    """Run `parts` (all by default); the others keep their figures from the committed file, which
    is re-read just before writing, so two runs of disjoint parts can go side by side."""
    path = HERE / "results" / "bias.json"
    torch.set_num_threads(1)  # the tiny models and MiniLM run faster on one thread of a shared CPU
    fresh = {name: PARTS[name]() for name in parts}
    results = json.loads(path.read_text()) if set(parts) != set(PARTS) and path.exists() else {}
    results["machine"] = {
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    results.update(fresh)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    return results


def _ms(s: dict, digits: int = 1) -> str:
    """mean ± sd [min-max] over the seeds."""
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


def _search_verdicts(results: dict, metric: str, budget: int) -> tuple[str, str, str]:
    """(adaptive, random, holds?) cells of one CAB row at one budget."""
    search = results["search"]
    summary = search["summary"][str(budget)]
    runs = [r for r in search["runs"] if r["budget"] == budget]
    a, r = summary["adaptive"][metric], summary["random"][metric]
    if metric == "hits":
        ok = sum(x["adaptive"]["hits"] >= 2 * max(x["random"]["hits"], 1) for x in runs)
        verdict = f"{'yes' if ok == len(runs) else 'no'}: adaptive ≥ 2 × random in {ok} of {len(runs)} seeds"
    else:
        wins = sum(x["adaptive"][metric] > x["random"][metric] for x in runs)
        ties = sum(x["adaptive"][metric] == x["random"][metric] for x in runs)
        losses = len(runs) - wins - ties
        word = "yes" if wins == len(runs) else "partly" if a["mean"] > r["mean"] and not losses else "no"
        verdict = f"{word}: adaptive more in {wins}, tied in {ties}, fewer in {losses} of {len(runs)} seeds"
    n = summary["adaptive"][metric]["n"]
    return f"adaptive {_ms(a)}", f"random {_ms(r)} (n={n})", verdict


def claims(results: dict) -> str:
    """The bias README's claims table, from the committed results: per claim what CI asserts
    (seed 0 only) and the benchmark's mean ± sd [min-max] over its seeds for method and baseline."""
    seeds = ", ".join(map(str, results["search"]["seeds"]))
    rows = [
        f"| claim | CI asserts (seed 0 only) | method (benchmark, seeds {seeds}) | baseline (same runs) "
        "| holds? |",
        "|---|---|---|---|---|",
    ]
    budgets = sorted(int(b) for b in results["search"]["summary"])
    for budget in budgets:
        a, r, v = _search_verdicts(results, "hits", budget)
        asserted = "300 calls: adaptive ≥ 2 × random and ≥ 5" if budget == 300 else "— (benchmark only)"
        rows.append(
            f"| CAB: adaptive search finds strongly biased questions in planted cells more often than "
            f"uniform sampling ({budget} target calls; hits) | {asserted} | {a} | {r} | {v} |"
        )
    for budget in budgets:
        a, r, v = _search_verdicts(results, "coverage", budget)
        asserted = "300 calls: adaptive > random" if budget == 300 else "— (benchmark only)"
        rows.append(
            f"| CAB: adaptive search covers more distinct planted cells (of 6) than uniform sampling "
            f"({budget} target calls; coverage) | {asserted} | {a} | {r} | {v} |"
        )
    ref = results["asymmetric_refusals"]
    n_ok = sum(x["precision"] >= 0.9 and x["recall"] >= 0.8 for x in ref["runs"])
    ok = n_ok == len(ref["runs"])
    rows.append(
        f"| CAB: asymmetric refusals are detected ({ref['budget']} calls in the benchmark, 300 in CI) | "
        "precision ≥ 0.9 and ≥ base rate + 0.3, recall ≥ 0.8 | "
        f"precision {_ms(ref['precision'], 2)}, recall {_ms(ref['recall'], 2)} | "
        f"flagging at random: precision = base rate {_ms(ref['base_rate'], 2)} | "
        f"{'yes' if ok else 'no'}: in {n_ok} of {len(ref['runs'])} seeds |"
    )
    md = results["md"]
    m, runs = md["summary"], md["runs"]
    ratio_ok = sum(x["standard"]["variance"] >= 3 * x["md"]["variance"] and x["standard"]["variance"] > 0
                   for x in runs)
    rows.append(
        f"| ABCD: M&D's accuracy varies less over the 24 permutations ({md['questions']} questions; "
        "variance; the benchmark checks standard ≥ 3 × M&D per seed) | standard ≥ 3 × M&D and > 0.01 | "
        f"M&D {_ms(m['md_variance'], 4)} | standard {_ms(m['standard_variance'], 4)} | "
        f"{'yes' if ratio_ok == len(runs) else 'no'}: in {ratio_ok} of {len(runs)} seeds |"
    )
    drop_ok = sum(x["md"]["mean_accuracy"] >= x["standard"]["mean_accuracy"] - 0.1 for x in runs)
    rows.append(
        "| ABCD: at most a small drop in mean accuracy (known questions answered under both) | "
        "M&D mean ≥ standard − 0.1; known-question accuracy ≥ 0.7 under both | "
        f"M&D {_ms(m['md_mean_accuracy'], 3)} (known {_ms(m['md_knowable'], 2)}) | "
        f"standard {_ms(m['standard_mean_accuracy'], 3)} (known {_ms(m['standard_knowable'], 2)}) | "
        f"{'yes' if drop_ok == len(runs) else 'no'}: in {drop_ok} of {len(runs)} seeds |"
    )
    att_ok = sum(x["attack_demo_label_share"]["standard"] >= 0.6
                 and abs(x["attack_demo_label_share"]["md"] - 0.25) <= 0.15 for x in runs)
    rows.append(
        "| ABCD: the all-\"A\" demo attack moves the standard protocol, not M&D (NonsenseQA; share of "
        "answers at the demos' label, chance 0.25) | standard ≥ 0.6, M&D within 0.15 of chance | "
        f"M&D {_ms(m['attack_md'], 2)} | standard {_ms(m['attack_standard'], 2)} | "
        f"{'yes' if att_ok == len(runs) else 'no'}: in {att_ok} of {len(runs)} seeds |"
    )
    rows.append(
        "| the audits over HTTP (CAB: faults never change a verdict; MCQ: chat and completions routes, "
        "429/500 with Retry-After) | every recoverable question equal to in-process; chat falls back to "
        "parsing letters and says so | — (CI only) | — | yes (CI) |"
    )
    rows.append(
        "| the papers' frontier-model numbers (GPT-5, 13 open LLMs, CSQA/MMLU-Pro) | not run: no downloads "
        "or API keys at test time | — | — | not measured |"
    )
    return "\n".join(rows)


def table(results: dict) -> str:
    """docs/benchmarks.md's table, from the committed results (mean ± sd [min-max] over seeds)."""
    rows = ["| measure | baseline (same run) | bias service | ratio |", "|---|---|---|---|"]
    search = results["search"]
    for budget, summary in search["summary"].items():
        a, r = summary["adaptive"], summary["random"]
        rows.append(
            f"| CAB planted-cell hits, {budget} target calls, seeds {search['seeds']} | "
            f"uniform random {_ms(r['hits'])} | adaptive {_ms(a['hits'])} | "
            f"{a['hits']['mean'] / max(r['hits']['mean'], 1e-9):.1f}x |"
        )
        rows.append(
            f"| CAB planted cells covered (of 6), {budget} target calls | uniform random "
            f"{_ms(r['coverage'])} | adaptive {_ms(a['coverage'])} | |"
        )
    ref = results["asymmetric_refusals"]
    rows.append(
        f"| asymmetric-refusal precision / recall ({ref['budget']} calls) | base rate "
        f"{_ms(ref['base_rate'], 2)} | {_ms(ref['precision'], 2)} / {_ms(ref['recall'], 2)} | |"
    )
    m = results["md"]["summary"]
    rows.append(
        f"| accuracy variance over 24 permutations | standard {_ms(m['standard_variance'], 4)} | "
        f"M&D {_ms(m['md_variance'], 4)} | |"
    )
    rows.append(
        f"| mean accuracy | standard {_ms(m['standard_mean_accuracy'], 3)} | "
        f"M&D {_ms(m['md_mean_accuracy'], 3)} | |"
    )
    rows.append(
        '| NonsenseQA all-"A" attack: answers at the demos\' label | '
        f'standard {_ms(m["attack_standard"], 2)} | '
        f"M&D {_ms(m['attack_md'], 2)} (chance 0.25) | |"
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
