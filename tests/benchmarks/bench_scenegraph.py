"""DS-Net at a larger scale than the reproduction tests, every baseline trained in the same run,
plus the latency of the sync Predict path.

- claims 1-3 (see tests/reproduction/scenegraph/experiments.py) on 600 training and 600 test
  scenes, 20 detector and 20 relation epochs, one relation-training seed per variant, for each
  seed in BENCH_SCENEGRAPH_SEEDS (0, 1 and 2); every ablation of claim 3, both one-way fusion
  directions included, and PE-Net's two heads with the frequency prior as well as without;
- claim 3 in the occlusion world (`experiments.OCCLUSION_WORLD`), same scale: the full head and its
  ablations on PE-Net, three relation-training seeds each, with the depth-order accuracy and the
  R@100 of "in front of" / "behind";
- Predict: `servicer.predict_one` (PNG decode -> resize -> detector -> RoIAlign -> relation model
  -> ranked triplets) for one image per call, SGDet and PredCls, p50/p99 over 100 calls.

Writes tests/benchmarks/results/scenegraph.json; prints a markdown table. `claims(results)` renders
the service README's claims table (run_all.py --tables-only): the reproduction tests' comparisons
(`experiments.COMPARISONS`), which CI asserts on seed 0 and which it only prints, each with its lead on
every benchmark seed and whether it holds over the seed noise.
`BENCH_SCENEGRAPH_IMAGES` (training), `BENCH_SCENEGRAPH_TEST_IMAGES`, `BENCH_SCENEGRAPH_EPOCHS`,
`BENCH_SCENEGRAPH_SEEDS` resize it (a smoke run, or a larger one). `BENCH_SCENEGRAPH_PARTS`
(`standard,occlusion` by default) runs a part alone; the other part's results in the file are kept
(read when the run ends, so the two parts can run side by side: about 30 minutes on a quiet 2-core
machine), and the occlusion world's seeds measured earlier (same variants) join the ones run now.
"""
from __future__ import annotations

import fcntl
import io
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: the experiment drivers live in tests/reproduction

from paperworks.scenegraph.v1 import scenegraph_pb2  # noqa: E402
from paperworks.services.scenegraph.generator import SceneGraphGenerator, TrainConfig  # noqa: E402
from paperworks.services.scenegraph.servicer import predict_one  # noqa: E402
from PIL import Image  # noqa: E402
from reproduction.scenegraph import experiments  # noqa: E402

RESULTS = HERE / "results"
IMAGES = int(os.environ.get("BENCH_SCENEGRAPH_IMAGES", "600"))
TEST_IMAGES = int(os.environ.get("BENCH_SCENEGRAPH_TEST_IMAGES", "600"))
EPOCHS = int(os.environ.get("BENCH_SCENEGRAPH_EPOCHS", "20"))
SEEDS = [int(s) for s in os.environ.get("BENCH_SCENEGRAPH_SEEDS", "0,1,2").split(",")]
PARTS = os.environ.get("BENCH_SCENEGRAPH_PARTS", "standard,occlusion").split(",")
OCCLUSION_VARIANTS = ("penet", "penet+dsnet", "penet+dsnet/single-stream", "penet+dsnet/space-to-vision-only",
                      "penet+dsnet/vision-to-space-only", "penet+dsnet/no-fusion",
                      "penet+dsnet/vision-stream-only")
OCCLUSION_KEYS = ("R@100", "mR@100", "mR@100_geometric", "mR@100_non_geometric", "mR@100_depth_order",
                  "depth_order_accuracy")
KEYS = ("R@100", "ngR@100", "mR@100", "mR@100_geometric", "mR@100_non_geometric", "mR@100_head",
        "mR@100_tail", "ng_as_geo_rate", "geo_share_predicted", "geo_share_annotated")


def predict_latency(run: experiments.Run, name: str, calls: int = 100) -> dict:
    cfg = TrainConfig(relation=experiments.VARIANTS[name], max_objects=run.setup.max_objects)
    gen = SceneGraphGenerator(run.vocab, cfg, run.counts, run.frequencies)
    gen.detector, gen.relation = run.detector, run.models[(name, 0)]
    out = {}
    for mode in ("sgdet", "predcls"):
        lat = []
        for s in run.test[:calls]:
            buf = io.BytesIO()
            Image.fromarray(s.image).save(buf, format="PNG")
            boxes = [] if mode == "sgdet" else [
                scenegraph_pb2.Box(x1=b[0], y1=b[1], x2=b[2], y2=b[3], label=run.vocab.classes[c])
                for b, c in zip(s.boxes.tolist(), s.labels.tolist(), strict=True)]
            request = scenegraph_pb2.PredictRequest(image=buf.getvalue(), boxes=boxes, top_k=20)
            t = time.perf_counter()
            predict_one(gen, request)
            lat.append(time.perf_counter() - t)
        out[mode] = {"p50_ms": 1e3 * float(np.percentile(lat, 50)),
                     "p99_ms": 1e3 * float(np.percentile(lat, 99))}
    return out


def table(results: dict) -> str:
    """The README table (`make bench` -> run_all.py), rebuilt from the committed results."""
    mean = results["mean_over_seeds"]
    seeds = results["seeds"]
    rows = [f"| SGDet, mean of {len(seeds)} seeds | R@100 | mR@100 | mR@100 per seed "
            f"({' / '.join(map(str, seeds))}) | mR@100 non-geometric | mR@100 tail | "
            "interactions predicted geometric |", "|---|---|---|---|---|---|---|"]
    for name, m in mean.items():
        per_seed = " / ".join(f"{results['per_seed'][str(s)][name]['mR@100']:.3f}" for s in seeds)
        rows.append(f"| {name} | {m['R@100']:.3f} | {m['mR@100']:.3f} | {per_seed} | "
                    f"{m['mR@100_non_geometric']:.3f} | {m['mR@100_tail']:.3f} | {m['ng_as_geo_rate']:.3f} |")
    lat = results["predict_latency_ms"]
    rows.append(f"| Predict latency p50 / p99 (1 image, ms) | SGDet {lat['sgdet']['p50_ms']:.1f} / "
                f"{lat['sgdet']['p99_ms']:.1f} | PredCls {lat['predcls']['p50_ms']:.1f} / "
                f"{lat['predcls']['p99_ms']:.1f} | | | | |")
    if "occlusion_world" in results:
        rows += ["", occlusion_table(results["occlusion_world"])]
    return "\n".join(rows)


def occlusion_table(world: dict) -> str:
    seeds = world["seeds"]
    rows = [f"| Claim 3, occlusion world, mean of seeds {' / '.join(map(str, seeds))} x "
            f"{world['training_seeds']} training seeds | mR@100 | mR@100 per seed | mR@100 geometric | "
            "mR@100 non-geometric | R@100 in front of / behind | depth order right |",
            "|---|---|---|---|---|---|---|"]
    for name, m in world["mean_over_seeds"].items():
        per_seed = " / ".join(f"{world['per_seed'][str(s)][name]['mR@100']:.3f}" for s in seeds)
        rows.append(f"| {name} | {m['mR@100']:.3f} | {per_seed} | {m['mR@100_geometric']:.3f} | "
                    f"{m['mR@100_non_geometric']:.3f} | {m['mR@100_depth_order']:.3f} | "
                    f"{m['depth_order_accuracy']:.3f} |")
    return "\n".join(rows)


def occlusion_world(t0: float) -> dict:
    per_seed, seconds = {}, {}
    for seed in SEEDS:
        start = time.perf_counter()
        world = experiments.OCCLUSION_WORLD | {"test_images": TEST_IMAGES}
        setup = experiments.Setup(seed=seed, train_images=IMAGES, detector_epochs=EPOCHS,
                                  relation_epochs=EPOCHS, **world)
        run = experiments.prepare(setup)
        measured = {name: run.measure_over_seeds(name, experiments.TRAINING_SEEDS)
                    for name in OCCLUSION_VARIANTS}
        per_seed[str(seed)] = {name: {k: m[k] for k in OCCLUSION_KEYS} for name, m in measured.items()}
        seconds[str(seed)] = time.perf_counter() - start
        print(f"occlusion world, seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    return {"training_seeds": experiments.TRAINING_SEEDS, "per_seed": per_seed, "seconds_per_seed": seconds}


def with_other_seeds(new: dict, old: dict | None) -> dict:
    """The occlusion world's seeds measured now, joined with the seeds the results file holds from a run
    of the same variants: its seeds can run apart, side by side (`BENCH_SCENEGRAPH_SEEDS=2`)."""
    per_seed, seconds = new["per_seed"], new["seconds_per_seed"]
    if (old and old.get("training_seeds") == new["training_seeds"]
            and all(set(v) == set(OCCLUSION_VARIANTS) for v in old["per_seed"].values())):
        per_seed, seconds = old["per_seed"] | per_seed, old.get("seconds_per_seed", {}) | seconds
    seeds = sorted(int(s) for s in per_seed)
    mean = {name: {k: float(np.mean([per_seed[str(s)][name][k] for s in seeds])) for k in OCCLUSION_KEYS}
            for name in OCCLUSION_VARIANTS}
    return {"seeds": seeds, "training_seeds": new["training_seeds"], "per_seed": per_seed,
            "mean_over_seeds": mean, "seconds_per_seed": seconds}


def standard_world(t0: float) -> dict:
    per_seed, latency = {}, None
    for seed in SEEDS:
        setup = experiments.Setup(seed=seed, train_images=IMAGES, test_images=TEST_IMAGES,
                                  detector_epochs=EPOCHS, relation_epochs=EPOCHS)
        run = experiments.prepare(setup)
        per_seed[str(seed)] = {name: {k: run.measure(name)[k] for k in KEYS} for name in experiments.VARIANTS}
        for name in ("penet", "penet+dsnet", "motifs", "motifs+dsnet"):
            per_seed[str(seed)][name]["per_predicate_R@100"] = run.measure(name)["per_predicate_R@100"]
        print(f"seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
        if latency is None:
            latency = predict_latency(run, "penet+dsnet")
    mean = {name: {k: float(np.mean([per_seed[str(s)][name][k] for s in SEEDS])) for k in KEYS}
            for name in experiments.VARIANTS}
    keys = ("R@100", "mR@100", "mR@100_non_geometric", "mR@100_geometric", "mR@100_tail", "ng_as_geo_rate")
    gains = {base: {k: mean[dsnet][k] - mean[base][k] for k in keys} for base, dsnet in HEADS.items()}
    return {"seeds": SEEDS, "per_seed": per_seed, "mean_over_seeds": mean, "dsnet_minus_original": gains,
            "predict_latency_ms": latency}


# each base's original head -> the DS-Net head on it (the same frequency prior on both sides)
HEADS = {"motifs": "motifs+dsnet", "penet": "penet+dsnet",
         "penet/frequency-prior": "penet+dsnet/frequency-prior"}
ABLATIONS = {"space-to-vision-only": "one-way fusion, space → vision only",
             "vision-to-space-only": "one-way fusion, vision → space only",
             "single-stream": "one stream over both inputs", "vision-stream-only": "the vision stream alone"}
# The claims table's rows: the reproduction tests' comparisons (`experiments.COMPARISONS`) grouped as the
# tests group them, so what CI asserts and what it only reports come from the one list the tests use.
GROUPS = (
    ("1. the DS-Net head raises mR@100, R@100 kept: MOTIFS (both with its frequency bias)",
     ("1/motifs/R", "1/motifs/mR")),
    ("1. the DS-Net head raises mR@100, R@100 kept: PE-Net (neither with a prior, as PE-Net)",
     ("1/penet/mR", "1/penet/R")),
    ("2. the gain lands on non-geometric and tail predicates, geometric over-prediction falls: MOTIFS",
     tuple(f"2/motifs/{k}" for k in ("non-geometric", "non-geometric-over-geometric", "tail", "interactions",
                                     "geometric-share"))),
    ("2. the gain lands on non-geometric and tail predicates, geometric over-prediction falls: PE-Net",
     tuple(f"2/penet/{k}" for k in ("non-geometric", "non-geometric-over-geometric", "tail", "interactions",
                                    "geometric-share"))),
    ("3. occlusion world (PE-Net): vision → space fusion carries the depth order",
     tuple(f"3/{k}/penet+dsnet{v}" for v in ("", "/vision-to-space-only")
           for k in ("order", "order-vs-one-way", "depth-recall"))),
    ("3. occlusion world (PE-Net): the vision stream alone loses part of the gain",
     ("3/vision-alone/mR/0.01", "3/vision-alone/geometric/0.01", "3/vision-alone/mR/0.03",
      "3/vision-alone/geometric/0.05")),
    ("3. occlusion world (PE-Net): each ablation keeps the gain over the original head",
     tuple(f"3/keeps-gain/penet+dsnet/{k}" for k in ("vision-to-space-only", "space-to-vision-only",
                                                     "single-stream"))),
)
NOISE_SDS = 2.0  # tests/unit/scenegraph/test_scenegraph_benchmark_agrees.py: the same rule


def _ms(values) -> tuple[float, float]:
    v = np.asarray(list(values), dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def _fmt(values, digits: int = 3) -> str:
    m, sd = _ms(values)
    return f"{m:.{digits}f} ± {sd:.{digits}f}"


def _verdict(method, baseline, margin: float = 0.0, lower: bool = False) -> str:
    """On how many seeds the method beats the baseline by more than `margin` (`lower`: lies below it),
    and the range of its per-seed lead, so a lead inside the seed noise reads as one."""
    lead = [(b - m) if lower else (m - b) for m, b in zip(method, baseline, strict=True)]
    wins, n = sum(x > margin for x in lead), len(lead)
    word = "holds" if wins == n else "mixed" if wins else "does not hold"
    return f"{word} ({wins}/{n} seeds; lead {min(lead):+.3f} to {max(lead):+.3f})"


def _short(claim: str) -> str:
    return claim.split(". ", 1)[1].rsplit(" (", 1)[0] if claim.endswith(")") else claim.split(". ", 1)[1]


def _comparison_cell(r: dict, name: str, letter: str) -> str:
    """A comparison's lead on each benchmark seed, and whether it holds over the seed noise (every seed,
    and the mean lead `NOISE_SDS` standard deviations over the margin)."""
    c = experiments.COMPARISONS[name]
    world = r if c.world == "first" else r["occlusion_world"]
    leads = [c.lead(world["per_seed"][str(s)].__getitem__) for s in world["seeds"]]
    mean, sd = _ms(leads)
    holds = min(leads) >= c.margin and mean - NOISE_SDS * sd >= c.margin
    word = "holds" if holds else "does not hold" if min(leads) < c.margin else "every seed, inside the noise"
    return f"{letter}) {' / '.join(f'{x:+.3f}' for x in leads)} (mean {mean:+.3f} ± {sd:.3f}): **{word}**"


def claims(r: dict) -> str:
    """The service README's claims table: per group of the reproduction tests' comparisons, which CI
    asserts on seed 0 and which it only reports, and each one's lead on every benchmark seed with whether it
    holds over the seed noise; then the benchmark's comparisons that CI does not run."""
    std, seeds = r["per_seed"], [str(s) for s in r["seeds"]]

    def per_seed(world, name, key):
        return [world[s][name][key] for s in seeds]

    lines = ["| claim | CI asserts (seed 0 only) | CI prints, does not assert | benchmark, seeds "
             f"{' / '.join(seeds)}: lead (a value where there is no baseline) per seed, mean ± s.d. |",
             "|---|---|---|---|"]
    for title, names in GROUPS:
        letters = dict(zip(names, "abcdefgh", strict=False))
        asserted = [f"{letters[n]}) {_short(experiments.COMPARISONS[n].claim)}" for n in names
                    if n in experiments.ASSERTED]
        reported = [f"{letters[n]}) {_short(experiments.COMPARISONS[n].claim)}" for n in names
                    if n not in experiments.ASSERTED]
        lines.append(f"| {title} | {'; '.join(asserted) or '—'} | {'; '.join(reported) or '—'} | "
                     f"{'; '.join(_comparison_cell(r, n, letters[n]) for n in names)} |")
    m = per_seed(std, "penet+dsnet/frequency-prior", "mR@100")
    b = per_seed(std, "penet/frequency-prior", "mR@100")
    lines.append(f"| 1. PE-Net, both heads given the frequency prior: mR@100 | not run in CI | | "
                 f"{_fmt(m)} vs {_fmt(b)}: {_verdict(m, b)} |")
    full = per_seed(std, "penet+dsnet", "mR@100")
    cells = [f"{ABLATIONS[a]} {_fmt(per_seed(std, f'penet+dsnet/{a}', 'mR@100'))}: "
             f"{_verdict(full, per_seed(std, f'penet+dsnet/{a}', 'mR@100'))}"
             for a in ("space-to-vision-only", "vision-to-space-only")]
    lines.append(f"| 3. first world (PE-Net, one training seed): the full head ({_fmt(full)}) beats one-way "
                 f"fusion, mR@100 | not run in CI | | {'; '.join(cells)} |")
    if "occlusion_world" in r:
        occ = r["occlusion_world"]["per_seed"]
        assert [str(s) for s in r["occlusion_world"]["seeds"]] == seeds, "both worlds on the same seeds"
        full = per_seed(occ, "penet+dsnet", "mR@100")
        cells = [f"{label} {_fmt(per_seed(occ, f'penet+dsnet/{a}', 'mR@100'))}: "
                 f"{_verdict(full, per_seed(occ, f'penet+dsnet/{a}', 'mR@100'))}"
                 for a, label in ABLATIONS.items()]
        lines.append(f"| 3. occlusion world (PE-Net): the full head ({_fmt(full)}) beats each ablation, "
                     f"mR@100 | not asserted (inside the test scale's training-seed noise) | | "
                     f"{'; '.join(cells)} |")
    return "\n".join(lines)


def main() -> None:
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        return
    torch.set_num_threads(1)
    measured, seconds = {}, {}
    if "standard" in PARTS:
        start = time.perf_counter()
        measured |= standard_world(start)
        seconds["standard"] = time.perf_counter() - start
    if "occlusion" in PARTS:
        measured["occlusion_world"] = occlusion_world(time.perf_counter())
    # read only now (and under a lock), so a part or seed run alone beside another keeps the other's results
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "scenegraph.json", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read()
        results = json.loads(text) if text else {}
        if "occlusion_world" in measured:
            measured["occlusion_world"] = with_other_seeds(measured["occlusion_world"],
                                                           results.get("occlusion_world"))
            seconds["occlusion"] = sum(measured["occlusion_world"]["seconds_per_seed"].values())
        results |= measured
        results["setup"] = {"train_images": IMAGES, "test_images": TEST_IMAGES, "epochs": EPOCHS,
                            "image_size": 64, "machine": platform.processor() or platform.machine(),
                            "threads": 1}
        results["seconds_per_part"] = results.get("seconds_per_part", {}) | seconds
        f.seek(0)
        f.truncate()
        f.write(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
