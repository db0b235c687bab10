"""SEMIR and WNE at larger sizes than the reproduction tests, every baseline in the same run.

- minor construction (contraction through `paperworks.kernels.ops.grid_contract`, deletions,
  descriptors) voxels/s and supernodes at 64^3, 128^3 and 256^3;
- claim 2 (learned vs hand-set minor parameters) on 40^3 phantoms, 10 few-shot volumes;
- claim 3 (SEMIR vs a dense 3D U-Net, same volumes and step budget, pooled lesion Dice) at three
  lesion radii, 32^3, 6 training and 6 test volumes;
- Segment wall time per volume (minor + GINE + lifting) vs the U-Net's forward pass;
- claim 4 (WNE vs bare backbone) for DnCNN and the windowed-attention model, and the WNE
  forward-time overhead against the bare backbone.

Writes tests/benchmarks/results/segmenter.json and prints a markdown table (`table`).
`BENCH_SEGMENTER_QUICK=1` shrinks everything for a smoke run; `BENCH_SEGMENTER_MINOR_ONLY=1` re-measures
only the minor's speed and keeps the other committed figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(RESULTS.parent.parent))  # tests/: the reproduction experiments

from paperworks.services.segmenter import baselines, data, wne  # noqa: E402
from paperworks.services.segmenter.checkpoint import Segmenter  # noqa: E402
from paperworks.services.segmenter.semir import gnn, search  # noqa: E402
from paperworks.services.segmenter.semir.minor import build_minor  # noqa: E402
from reproduction.segmenter import experiments  # noqa: E402

QUICK = os.environ.get("BENCH_SEGMENTER_QUICK") == "1"
# re-measure only the minor's speed and keep the other committed figures (the full run takes ~30 min)
MINOR_ONLY = os.environ.get("BENCH_SEGMENTER_MINOR_ONLY") == "1"


def _best(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def minor_speed() -> dict:
    out = {}
    for size in (64, 128) if QUICK else (64, 128, 256):
        image, _ = data.phantom(data.PhantomConfig(size=size, lesions=6, lesion_radius=size / 16), 0)
        params = search.hand_set([image])
        build_minor(image, params)  # warm-up (kernel build, caches)
        seconds, m = _best(
            lambda image=image, params=params: build_minor(image, params), 1 if size == 256 else 3
        )
        out[size] = {
            "seconds": seconds,
            "voxels_per_s": image.size / seconds,
            "supernodes": m.nodes,
            "regions_before_deletion": m.regions,
        }
    return out


def segment_time(size=48) -> dict:
    cfg = data.PhantomConfig(size=size)
    train = data.cohort(cfg, range(4))
    params, _ = search.search(train, 10, "tpe", 0)
    minors = [build_minor(i, params) for i, _ in train]
    seg = Segmenter(
        params,
        dict(data.STRUCTURES),
        {k: gnn.train_structure(minors, [lab == k for _, lab in train], steps=20) for k in (1, 2)},
    )
    net = baselines.train_unet(train, 3, steps=2, base=8)
    image = data.phantom(cfg, 99)[0]
    t_semir, _ = _best(lambda: seg.segment(image))
    t_unet, _ = _best(lambda: baselines.predict_unet(net, image))
    return {"size": size, "semir_s": t_semir, "unet_s": t_unet, "semir_over_unet": t_semir / t_unet}


def wne_overhead(backbone: str) -> dict:
    torch.manual_seed(0)
    g = wne.BACKBONES[backbone]().eval()
    f = wne.Wrapped(g, "wne").eval()
    x = torch.rand(16, 1, 64, 64)
    with torch.no_grad():
        for _ in range(2):
            g(x), f(x)
        rounds = {"bare": [], "wne": []}
        for _ in range(10):
            for name, m in (("bare", g), ("wne", f)):
                t = time.perf_counter()
                m(x)
                rounds[name].append(time.perf_counter() - t)
    bare, wrapped = float(np.median(rounds["bare"])), float(np.median(rounds["wne"]))
    return {"bare_ms": 1e3 * bare, "wne_ms": 1e3 * wrapped, "ratio": wrapped / bare}


def main() -> None:
    t0 = time.perf_counter()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if MINOR_ONLY:
        results = json.loads((RESULTS / "segmenter.json").read_text())
        results["minor_speed"] = minor_speed()
        results["setup"]["minor_speed_measured_separately"] = True
        (RESULTS / "segmenter.json").write_text(json.dumps(results, indent=1))
        print(table(results))
        return
    trials, steps = (20, 60) if QUICK else (80, 200)
    results = {
        "setup": {
            "machine": platform.processor() or platform.machine(),
            "threads": torch.get_num_threads(),
            "quick": QUICK,
        }
    }
    results["minor_speed"] = minor_speed()
    results["claim2_fewshot"] = experiments.fewshot(
        data.PhantomConfig(size=32 if QUICK else 40, lesion_radius=2.0, lesions=4),
        range(6 if QUICK else 10),
        range(500, 504 if QUICK else 506),
        trials=trials,
        steps=steps,
    )
    results["claim3_dense_unet"] = experiments.semir_vs_unet(
        (3.0, 2.5, 1.5),
        range(5 if QUICK else 6),
        range(500, 504 if QUICK else 506),
        trials=trials,
        steps=60 if QUICK else 150,
        unet_base=8,
        size=32,
    )
    results["segment_time"] = segment_time(32 if QUICK else 48)
    results["claim4_wne"] = {
        b: experiments.wne_claims(b, steps=100 if QUICK else 300) for b in ("dncnn", "attention")
    }
    results["wne_overhead"] = {b: wne_overhead(b) for b in ("dncnn", "attention")}
    results["seconds"] = time.perf_counter() - t0
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "segmenter.json").write_text(json.dumps(results, indent=1))
    print(table(results))


def table(r: dict) -> str:
    lines = ["| segmenter measure | SEMIR / WNE | baseline (same run) |", "|---|---|---|"]
    for size, s in r["minor_speed"].items():
        lines.append(
            f"| minor of a {size}^3 phantom | {s['supernodes']} supernodes in {s['seconds']:.2f} s "
            f"({s['voxels_per_s'] / 1e6:.1f} M voxels/s) | {s['regions_before_deletion']} regions "
            "before node deletion |"
        )
    if r["setup"].get("minor_speed_measured_separately"):
        lines.append(
            "| rows above re-measured alone after a change to the minor; rows below: last full run | | |"
        )
    c2 = r["claim2_fewshot"]
    for key in ("boundary_dice", "lesion_dice", "lesion_oracle_dice"):
        lines.append(
            f"| claim 2: {key.replace('_', ' ')} (learned vs hand-set) | "
            f"{c2['learned_scores'][key]:.3f} | {c2['hand_scores'][key]:.3f} |"
        )
    for radius, s in r["claim3_dense_unet"].items():
        lines.append(
            f"| claim 3: pooled lesion Dice, radius {float(radius):.1f} (SEMIR vs 3D U-Net; minor's oracle "
            f"{s['semir_minor_oracle']:.2f}, {s['test_lesions']} test lesions) | {s['semir']:.3f} | "
            f"{s['unet']:.3f} (gap {s['gap']:+.3f}) |"
        )
    st = r["segment_time"]
    lines.append(
        f"| Segment wall time per {st['size']}^3 volume | {st['semir_s']:.3f} s | "
        f"U-Net forward {st['unet_s']:.3f} s ({st['semir_over_unet']:.2f}x) |"
    )
    for b, w in r["claim4_wne"].items():
        p = w["psnr"]
        lines.append(f"| claim 4 ({b}): NE defect | {w['defect']['wne']:.1e} | {w['defect']['none']:.1e} |")
        lines.append(
            f"| claim 4 ({b}): PSNR at sigma 0.02 / 0.1 (train) / 0.3 | "
            + " / ".join(f"{p[s]['wne']:.2f}" for s in p)
            + " | "
            + " / ".join(f"{p[s]['none']:.2f}" for s in p)
            + " |"
        )
    for b, o in r["wne_overhead"].items():
        lines.append(
            f"| WNE forward time ({b}, 16x64x64, CPU) | {o['wne_ms']:.1f} ms | bare {o['bare_ms']:.1f} ms "
            f"({o['ratio']:.3f}x) |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
