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
the service README's claims table (run_all.py --tables-only): what CI asserts on seed 0 beside the
benchmark's mean ± s.d. over its seeds.
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
BASE_NAMES = {"motifs": "MOTIFS (both with its frequency bias)",
              "penet": "PE-Net (neither with a prior, as PE-Net)",
              "penet/frequency-prior": "PE-Net, both heads given the frequency prior"}
ABLATIONS = {"space-to-vision-only": "one-way fusion, space → vision only",
             "vision-to-space-only": "one-way fusion, vision → space only",
             "single-stream": "one stream over both inputs", "vision-stream-only": "the vision stream alone"}
# what tests/reproduction/scenegraph asserts on seed 0 (CI); keep in step with test_scenegraph_claims.py
CLAIM2 = ("non-geometric gain ≥ 0.05 and ≥ geometric gain + 0.05; tail gain ≥ head gain + 0.03; interactions "
          "predicted geometric fall ≥ 0.05; geometric share of top-1 falls")
CI = {
    ("1", "motifs"): "mR@100 gain ≥ 0.02, R@100 drop ≤ 0.04",
    ("1", "penet"): "mR@100 gain ≥ 0.02, R@100 drop ≤ 0.04",
    ("2", "motifs"): CLAIM2,
    ("2", "penet"): CLAIM2,
    ("3occ", "vision-stream-only"): "full ≥ ablation + 0.03; geometric mR@100 ≥ ablation's + 0.05",
    ("3occ", "single-stream"): "not asserted (ablation ≥ original head + 0.02 is)",
    ("3occ", "space-to-vision-only"): "not asserted (ablation ≥ original head + 0.02 is)",
    ("3occ", "vision-to-space-only"): "not asserted (ablation ≥ original head + 0.02 is)",
    "3order": "each ≥ 0.6 and ≥ space → vision only + 0.2; R@100 of the two predicates ≥ its + 0.1",
}


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


def claims(r: dict) -> str:
    """The service README's claims table: what CI asserts on seed 0 and the benchmark's mean ± s.d. over
    its seeds (method, baseline), with whether the claim holds on each benchmark seed."""
    std, seeds = r["per_seed"], [str(s) for s in r["seeds"]]

    def per_seed(world, name, key):
        return [world[s][name][key] for s in seeds]

    scale = f"seeds {', '.join(seeds)}"
    lines = ["| claim | CI asserts (seed 0 only) | benchmark: method, mean ± s.d. | benchmark: baseline, "
             "mean ± s.d. | holds? |", "|---|---|---|---|---|"]
    for base, dsnet in HEADS.items():
        m, b = per_seed(std, dsnet, "mR@100"), per_seed(std, base, "mR@100")
        rm, rb = per_seed(std, dsnet, "R@100"), per_seed(std, base, "R@100")
        kept = all(x >= y - 0.04 for x, y in zip(rm, rb, strict=True))
        lines.append(f"| 1. the DS-Net head raises mR@100, R@100 kept: {BASE_NAMES[base]} | "
                     f"{CI.get(('1', base), 'not run in CI')} | mR@100 {_fmt(m)} (R@100 {_fmt(rm)}), "
                     f"{scale} | {_fmt(b)} ({_fmt(rb)}) | {_verdict(m, b)}; R@100 within 0.04 on "
                     f"{'every seed' if kept else 'not every seed'} |")
    for base in ("motifs", "penet"):
        dsnet, name = HEADS[base], BASE_NAMES[base].split(" (")[0]
        cells, verdicts = [], []
        for key, label, lower in (("mR@100_non_geometric", "non-geometric mR@100", False),
                                  ("mR@100_tail", "tail mR@100", False),
                                  ("ng_as_geo_rate", "interactions predicted geometric", True)):
            m, b = per_seed(std, dsnet, key), per_seed(std, base, key)
            cells.append((f"{label} {_fmt(m)}", _fmt(b)))
            verdicts.append(f"{label.split()[0]}: {_verdict(m, b, lower=lower)}")
        lines.append(f"| 2. the gain lands on non-geometric and tail predicates, geometric over-prediction "
                     f"falls ({name}) | {CI[('2', base)]} | {'; '.join(c[0] for c in cells)}, {scale} | "
                     f"{'; '.join(c[1] for c in cells)} | {'; '.join(verdicts)} |")
    full = per_seed(std, "penet+dsnet", "mR@100")
    for ablation in ("space-to-vision-only", "vision-to-space-only"):
        label, b = ABLATIONS[ablation], per_seed(std, f"penet+dsnet/{ablation}", "mR@100")
        lines.append(f"| 3. first world (PE-Net): the full head beats {label}, mR@100 | not run in CI | "
                     f"{_fmt(full)}, {scale}, one training seed | {_fmt(b)} | {_verdict(full, b)} |")
    if "occlusion_world" in r:
        occ, occ_seeds = r["occlusion_world"]["per_seed"], r["occlusion_world"]["seeds"]
        assert [str(s) for s in occ_seeds] == seeds, "both worlds are reported on the same seeds"
        scale3 = f"{scale} × {r['occlusion_world']['training_seeds']} training seeds"
        full = per_seed(occ, "penet+dsnet", "mR@100")
        for ablation, label in ABLATIONS.items():  # no fusion: in docs/benchmarks.md's table
            b = per_seed(occ, f"penet+dsnet/{ablation}", "mR@100")
            lines.append(f"| 3. occlusion world (PE-Net): the full head beats {label}, mR@100 | "
                         f"{CI[('3occ', ablation)]} | {_fmt(full)}, {scale3} | "
                         f"{_fmt(b)} | {_verdict(full, b)} |")
        one_way = per_seed(occ, "penet+dsnet/space-to-vision-only", "depth_order_accuracy")
        m = [per_seed(occ, name, "depth_order_accuracy")
             for name in ("penet+dsnet", "penet+dsnet/vision-to-space-only")]
        lines.append(f"| 3. occlusion world: vision → space fusion carries the depth order (pairs ordered "
                     f"right): full head; vision → space only vs space → vision only | {CI['3order']} | "
                     f"{_fmt(m[0])}; "
                     f"{_fmt(m[1])}, {scale3} | {_fmt(one_way)} | by > 0.2: "
                     f"{_verdict(m[0], one_way, margin=0.2)}; {_verdict(m[1], one_way, margin=0.2)} |")
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
