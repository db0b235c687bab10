"""DS-Net at a larger scale than the reproduction tests, every baseline trained in the same run,
plus the latency of the sync Predict path.

- claims 1-3 (see paperworks.services.scenegraph.experiments) on 600 training and 600 test
  scenes, 20 detector and 20 relation epochs, for each seed in BENCH_SCENEGRAPH_SEEDS (0 and 1):
  about 10 minutes on one thread of a shared 2-core machine;
- Predict: `servicer.predict_one` (PNG decode -> resize -> detector -> RoIAlign -> relation model
  -> ranked triplets) for one image per call, SGDet and PredCls, p50/p99 over 100 calls.

Writes tests/benchmarks/results/scenegraph.json; prints a markdown table.
`BENCH_SCENEGRAPH_IMAGES` (training), `BENCH_SCENEGRAPH_TEST_IMAGES`, `BENCH_SCENEGRAPH_EPOCHS`,
`BENCH_SCENEGRAPH_SEEDS` resize it (a smoke run, or a larger one).
"""
from __future__ import annotations

import io
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from paperworks.scenegraph.v1 import scenegraph_pb2
from paperworks.services.scenegraph import experiments
from paperworks.services.scenegraph.pipeline import SceneGraphGenerator, TrainConfig
from paperworks.services.scenegraph.servicer import predict_one
from PIL import Image

RESULTS = Path(__file__).resolve().parent / "results"
IMAGES = int(os.environ.get("BENCH_SCENEGRAPH_IMAGES", "600"))
TEST_IMAGES = int(os.environ.get("BENCH_SCENEGRAPH_TEST_IMAGES", "600"))
EPOCHS = int(os.environ.get("BENCH_SCENEGRAPH_EPOCHS", "20"))
SEEDS = [int(s) for s in os.environ.get("BENCH_SCENEGRAPH_SEEDS", "0,1").split(",")]
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
    return "\n".join(rows)


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    per_seed, latency = {}, None
    for seed in SEEDS:
        torch.manual_seed(seed)
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
    gains = {base: {k: mean[f"{base}+dsnet"][k] - mean[base][k] for k in ("R@100", "mR@100",
                                                                          "mR@100_non_geometric",
                                                                          "mR@100_geometric", "mR@100_tail",
                                                                          "ng_as_geo_rate")}
             for base in ("motifs", "penet")}
    results = {
        "setup": {"train_images": IMAGES, "test_images": TEST_IMAGES, "epochs": EPOCHS, "image_size": 64,
                  "machine": platform.processor() or platform.machine(), "threads": 1},
        "seeds": SEEDS,
        "per_seed": per_seed,
        "mean_over_seeds": mean,
        "dsnet_minus_original": gains,
        "predict_latency_ms": latency,
        "seconds": time.perf_counter() - t0,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scenegraph.json").write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
