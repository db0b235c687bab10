"""The vlm reproductions over three seeds (1, 2, 3; mean ± sample s.d.), every baseline trained in
the same run: modality following (a)-(d) (tests/reproduction/vlm/experiments.py: two skewed models,
boundary vs easy SFT) and CFPO vs GRPO / DAPO / PAPO on the shortcut VQA task.

Writes tests/benchmarks/results/vlm.json and prints the tables; `claims(results)` is the service
README's claims table (`run_all.py --tables-only` writes it). `BENCH_VLM_SEEDS` (e.g. "1") shrinks it.
SpatioLM's four arms run after them at `spatiolm_experiments.BENCH` (-> results/vlm_spatiolm.json;
`spatiolm_claims(results)` is its README table); `BENCH_VLM_PART=spatiolm` runs only those.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: the experiment drivers live in tests/reproduction

from reproduction.vlm import experiments, spatiolm_experiments  # noqa: E402

RESULTS = HERE / "results"
SEEDS = tuple(int(x) for x in os.environ.get("BENCH_VLM_SEEDS", "1,2,3").split(","))


def scalars(f: dict, r: dict) -> dict[str, tuple[float, float]]:
    """One seed's (method, baseline) pair per claims-table row."""
    t, v, s = f["text_skew"], f["vision_skew"], f["steering"]
    anti = {k: r[k]["anti_prior"]["accuracy"] for k in r if k not in ("seed", "warm")}
    vd = {k: r[k]["in_distribution"]["visual_dependency"] for k in r if k not in ("seed", "warm")}
    return {
        "a_entropy": (t["laws"]["entropy"]["spearman_binned"], 0.0),
        "a_one_minus_max": (t["laws"]["one_minus_max"]["spearman_binned"], 0.0),
        "b": (t["laws"]["entropy"]["balance_point"], v["laws"]["entropy"]["balance_point"]),
        "c": (t["oscillations"]["ambiguous"], t["oscillations"]["clear"]),
        "d_shift": (s["before"]["balance_point"] - s["boundary"]["balance_point"],
                    s["before"]["balance_point"] - s["easy"]["balance_point"]),
        "d_generalize": (s["boundary"]["vision_following"], s["easy"]["vision_following"]),
        "cfpo_g": (anti["cfpo-grpo"], anti["grpo"]),
        "cfpo_d": (anti["cfpo-dapo"], anti["dapo"]),
        "cfpo_papo": ((anti["cfpo-grpo"] + anti["cfpo-dapo"]) / 2,
                      (anti["papo-grpo"] + anti["papo-dapo"]) / 2),
        "cfpo_vd": ((vd["cfpo-grpo"] + vd["cfpo-dapo"]) / 2, (vd["grpo"] + vd["dapo"]) / 2),
    }


# key -> (claim, method vs baseline, what CI asserts on seed 1)
ROWS = {
    "a_entropy": ("(a) P(follow text) falls with ΔH (entropy)", "binned Spearman ρ vs 0",
                  "ρ ≤ −0.6 (−0.8 held on one CPU, −0.75 on another), item p < 1e-6"),
    "a_one_minus_max": ("(a) same, 1 − max p", "binned Spearman ρ vs 0",
                        "ρ ≤ −0.6 (−0.8 held on one CPU, −0.73 on another), item p < 1e-6"),
    "b": ("(b) balance point follows the induced skew", "x* text-skewed vs vision-skewed model",
          "its dU quantile apart (both indices); x* CIs apart not asserted: flips across CPUs"),
    "c": ("(c) oscillations near x*", "ambiguous vs clear band (switches/item)", "greater, p < 0.01"),
    "d_shift": ("(d) boundary SFT moves x* toward vision more", "boundary vs easy SFT (x* shift)", "greater"),
    "d_generalize": ("(d) boundary SFT generalizes across the grid", "boundary vs easy (held-out VFR)",
                     "not asserted (lost on seed 1)"),
    "cfpo_g": ("CFPO-G beats GRPO, anti-prior", "CFPO-G vs GRPO accuracy",
               "not asserted: seed 1 moves with the CPU"),
    "cfpo_d": ("CFPO-D beats DAPO, anti-prior", "CFPO-D vs DAPO accuracy",
               "not asserted: seed 1 moves with the CPU"),
    "cfpo_papo": ("CFPO on par with PAPO-style", "CFPO vs PAPO (mean of G, D)", "≥ PAPO − 0.02"),
    "cfpo_vd": ("CFPO raises visual dependency", "CFPO vs GRPO/DAPO (mean)", "not asserted"),
}


def _ms(values) -> str:
    v = np.asarray(values, float)
    return f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.3f}"


def summarize(per_seed: dict) -> dict:
    pairs = [scalars(p["following"], p["cfpo"]) for p in per_seed.values()]
    return {k: {"method": [p[k][0] for p in pairs], "baseline": [p[k][1] for p in pairs]} for k in ROWS}


def claims(results: dict) -> str:
    lines = ["| claim | compared | method | baseline | seeds won | CI (seed 1) |",
             "|---|---|---|---|---|---|"]
    for key, (claim, compared, ci) in ROWS.items():
        s = results["summary"][key]
        lower_wins = key.startswith("a_")
        won = sum((m < b) if lower_wins else (m > b) for m, b in zip(s["method"], s["baseline"], strict=True))
        lines.append(f"| {claim} | {compared} | {_ms(s['method'])} | {_ms(s['baseline'])} | "
                     f"{won}/{len(s['method'])} | {ci} |")
    return "\n".join(lines)


def table(results: dict) -> str:
    return claims(results)


SPATIO_ROWS = {
    "spatial_accuracy": ("(iv) 3-D supervision beats the LM-only branch", "spatio", "lm_only"),
    "spatial_mra": ("(iv) vs (iii), numeric MRA", "spatio", "lm_only"),
    "general_keep": ("(iv) keeps general QA (accuracy)", "spatio", "base"),
    "general_keep_iii": ("(iii) keeps general QA (accuracy)", "lm_only", "base"),
    "general_loss": ("(ii) full fine-tune loses general QA", "finetune", "base"),
    "depth": ("head depth AbsRel (lower wins)", "spatio", "pool mean depth"),
}


def spatiolm_table(per_seed: dict) -> str:
    """SpatioLM rows: method vs baseline per seed (mean ± s.d., seeds won; "keeps" rows count seeds
    within 0.03 of the base, "loses" rows seeds more than 0.03 below it)."""
    lines = ["| claim | method | baseline | seeds won |", "|---|---|---|---|"]
    for key, (claim, arm, base) in SPATIO_ROWS.items():
        if key == "depth":
            m = [r["spatio"]["depth_abs_rel"] for r in per_seed.values()]
            b = [r["depth_baseline_abs_rel"] for r in per_seed.values()]
            won = sum(x < y for x, y in zip(m, b, strict=True))
        else:
            metric = "general_accuracy" if key.startswith("general") else key
            m = [r[arm][metric] for r in per_seed.values()]
            b = [r[base][metric] for r in per_seed.values()]
            won = sum((x > y) if key != "general_loss" else (x < y - 0.03) for x, y in zip(m, b, strict=True))
            if key.startswith("general_keep"):
                won = sum(abs(x - y) <= 0.03 for x, y in zip(m, b, strict=True))
        lines.append(f"| {claim} | {_ms(m)} | {_ms(b)} | {won}/{len(m)} |")
    return "\n".join(lines)


def spatiolm_claims(results: dict) -> str:
    """The SpatioLM claims table of a results/vlm_spatiolm.json (for the service README)."""
    return spatiolm_table(results["per_seed"])


def readme_sections() -> dict[str, str]:
    """The service README's SpatioLM table, from the committed results/vlm_spatiolm.json."""
    path = RESULTS / "vlm_spatiolm.json"
    if not path.exists():
        return {}
    results = json.loads(path.read_text())
    setting = results["settings"]
    head = (f"Benchmark (`BENCH_VLM_PART=spatiolm`), seeds {' / '.join(map(str, results['seeds']))}: "
            f"{setting['pre_steps']} pre-training steps on {setting['pre_items']} items, "
            f"{setting['arm_steps']} arm steps; \"keeps\" = within 0.03 of the base.\n\n")
    return {"spatiolm": head + spatiolm_claims(results)}


def spatiolm_main() -> None:
    """SpatioLM (tests/reproduction/vlm/spatiolm_experiments.py) at `BENCH` scale over SEEDS ->
    results/vlm_spatiolm.json. Seeds run one after another; `BENCH_VLM_SEEDS` picks them."""
    t0 = time.time()
    per_seed = {}
    for seed in SEEDS:
        t = time.time()
        per_seed[str(seed)] = spatiolm_experiments.spatiolm(seed, spatiolm_experiments.BENCH)
        per_seed[str(seed)]["wall_s"] = time.time() - t
        print(f"spatiolm seed {seed} done ({time.time() - t:.0f} s)", flush=True)
    RESULTS.mkdir(exist_ok=True)
    results = {
        "seeds": list(SEEDS),
        "settings": spatiolm_experiments.BENCH,
        "machine": platform.machine(),
        "wall_s": time.time() - t0,
        "per_seed": per_seed,
    }
    (RESULTS / "vlm_spatiolm.json").write_text(json.dumps(results, indent=1, default=float))
    print(spatiolm_claims(results))


def main() -> None:
    if os.environ.get("BENCH_VLM_PART") == "spatiolm":
        return spatiolm_main()
    per_seed = {}
    t0 = time.time()
    for seed in SEEDS:
        per_seed[str(seed)] = {"following": experiments.modality_following(seed),
                               "cfpo": experiments.cfpo(seed)}
        print(f"seed {seed} done ({time.time() - t0:.0f} s)", flush=True)
    results = {"seeds": list(SEEDS), "machine": platform.machine(), "wall_s": time.time() - t0,
               "per_seed": per_seed, "summary": summarize(per_seed)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "vlm.json").write_text(json.dumps(results, indent=1, default=float))
    print(claims(results))
    spatiolm_main()


if __name__ == "__main__":
    main()
