"""SEMIR and WNE claims over three seeds (0, 1, 2; seed 0 is the one CI asserts), every
baseline in the same run, mean and spread per claim; and the minor's and the wrapper's speed.

- claim 1 (lifting exact, minor compact) and claim 2 (learned minor parameters vs the paper-style
  manual vector and vs the old hand-set vector) at the reproduction test's size (32^3, 8 few-shot
  and 6 test volumes per seed, 60 trials, 200 GINE steps);
- claim 3 (SEMIR vs a dense 3D U-Net: binary lesion-vs-rest for both, every training volume in
  each step, pooled lesion Dice at radii 3.0 / 2.5 / 1.5, 5 + 4 volumes per seed), the U-Net's
  budget chosen by `claim3_unet_validation` (a validation curve over three learning rates on
  validation seeds 9000-9004 / 9500-9503, never the asserted ones);
- claim 4 (WNE vs the bare backbone, DnCNN and windowed attention), both trained alike: without
  the gain augmentation (the paper's protocol, what CI asserts) and both with it;
- minor construction speed at 64^3-256^3, Segment wall time, WNE forward-time overhead.

Writes tests/benchmarks/results/segmenter.json; `table` is the benchmark table, `claims` the
service README's table of claims. `BENCH_SEGMENTER_PARTS=validation,claim2,claim3,wne,speed`
(comma-separated) re-measures only those parts and keeps the other committed results;
`BENCH_SEGMENTER_QUICK=1` shrinks everything for a smoke run.
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
ALL_PARTS = ("validation", "claim2", "claim3", "wne", "speed")
PARTS = tuple(x for x in os.environ.get("BENCH_SEGMENTER_PARTS", ",".join(ALL_PARTS)).split(",") if x)
SEEDS = (0, 1, 2)  # CI asserts seed 0 (tests/reproduction/segmenter/conftest.py)
# a subset of SEEDS for claim 3 (one process per seed on a shared machine); the results merge per seed
CLAIM3_SEEDS = tuple(int(x) for x in os.environ.get("BENCH_SEGMENTER_SEEDS", "0,1,2").split(","))
CLAIM3_RADII = tuple(float(x) for x in os.environ.get("BENCH_SEGMENTER_RADII", "3.0,2.5,1.5").split(","))


def train_seeds(seed, n=8):
    return range(seed * 1000, seed * 1000 + n)


def test_seeds(seed, n=6):
    return range(seed * 1000 + 500, seed * 1000 + 500 + n)


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


def part_claim2() -> dict:
    out = {}
    cfg = data.PhantomConfig(lesion_radius=2.0)
    for seed in SEEDS[:1] if QUICK else SEEDS:
        run = experiments.fewshot(
            cfg,
            train_seeds(seed),
            test_seeds(seed),
            trials=20 if QUICK else 60,
            steps=60 if QUICK else 200,
            seed=seed,
        )
        held = range(seed * 1000 + 900, seed * 1000 + 904)
        run["lifting"] = {
            name: experiments.lifting(cfg, held, search.MinorParams(**run[name]))
            for name in ("learned", "manual")
        }
        out[str(seed)] = run
    return out


def part_claim3(budget: dict) -> dict:
    out = {}
    for seed in SEEDS[:1] if QUICK else CLAIM3_SEEDS:
        out[str(seed)] = experiments.semir_vs_unet(
            CLAIM3_RADII,
            train_seeds(seed, 5),
            test_seeds(seed, 4),
            trials=20 if QUICK else 60,
            steps=60 if QUICK else 120,
            seed=seed,
            unet_steps=20 if QUICK else budget["steps"],
            unet_lr=budget["lr"],
        )
    return out


def part_wne() -> dict:
    out = {}
    # the attention backbone without the augmentation only (CPU time); DnCNN both ways
    for backbone, variants in (("dncnn", (False, True)), ("attention", (False,))):
        for augment in variants:
            key = f"{backbone}{'_augmented' if augment else ''}"
            out[key] = {
                str(seed): experiments.wne_claims(
                    backbone, steps=60 if QUICK else 200, seed=seed, augment=augment
                )
                for seed in (SEEDS[:1] if QUICK else SEEDS)
            }
    return out


def main() -> None:
    t0 = time.perf_counter()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    path = RESULTS / "segmenter.json"
    results = json.loads(path.read_text()) if path.exists() and not QUICK else {}
    results.setdefault("measured", {})
    results["setup"] = {
        "machine": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "quick": QUICK,
        "seeds": list(SEEDS),
        "ci_seed": 0,
    }
    stamp = time.strftime("%Y-%m-%d")
    if "speed" in PARTS:
        results["minor_speed"] = minor_speed()
        results["segment_time"] = segment_time(32 if QUICK else 48)
        results["wne_overhead"] = {b: wne_overhead(b) for b in ("dncnn", "attention")}
        results["measured"]["speed"] = stamp
    if "validation" in PARTS:
        results["claim3_unet_validation"] = experiments.unet_validation_curve(
            (3.0, 1.5), max_steps=40 if QUICK else 120, every=20
        )
        results["measured"]["validation"] = stamp
    if "claim2" in PARTS:
        results["claim2_fewshot"] = part_claim2()
        results["measured"]["claim2"] = stamp
    if "claim3" in PARTS:
        budget = {"steps": experiments.UNET_STEPS, "lr": experiments.UNET_LR}
        results["claim3_dense_unet"] = part_claim3(budget)
        results["measured"]["claim3"] = stamp
    if "wne" in PARTS:
        results["claim4_wne"] = part_wne()
        results["measured"]["wne"] = stamp
    results["seconds_last_run"] = time.perf_counter() - t0
    results = json.loads(json.dumps(results))  # keys as the committed file has them (strings)
    if not QUICK:
        # re-read before writing: another run of other parts may have finished meanwhile
        merged = json.loads(path.read_text()) if path.exists() else {}
        keys = {
            "speed": ("minor_speed", "segment_time", "wne_overhead"),
            "validation": ("claim3_unet_validation",),
            "claim2": ("claim2_fewshot",),
            "claim3": ("claim3_dense_unet",),
            "wne": ("claim4_wne",),
        }
        for part in PARTS:
            for key in keys[part]:
                if part == "claim3" and key in merged and "semir" not in next(iter(merged[key].values())):
                    merged[key].update(results[key])  # per seed
                else:
                    merged[key] = results[key]
            merged.setdefault("measured", {})[part] = stamp
        merged["setup"] = results["setup"]
        merged.pop("seconds", None)
        RESULTS.mkdir(exist_ok=True)
        path.write_text(json.dumps(merged, indent=1))
        results = merged
    print(table(results))
    print()
    print(claims(results))


def _ms(values) -> tuple[float, float]:
    v = np.asarray(list(values), np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def _fmt(values, digits=3, kind="f") -> str:
    m, sd = _ms(values)
    return f"{m:.{digits}{kind}} ± {sd:.{digits}{kind}}"


def _verdict(method, baseline, margin=0.0) -> str:
    wins = sum(m > b + margin for m, b in zip(method, baseline, strict=True))
    if wins == len(method):
        return f"holds ({wins}/{len(method)} seeds)"
    return f"mixed ({wins}/{len(method)} seeds)" if wins else f"does not hold (0/{len(method)} seeds)"


def _seeds(runs: dict) -> str:
    return ", ".join(sorted(runs))


def table(r: dict) -> str:
    """The benchmark table (docs/benchmarks.md): speed, and every claim's per-seed mean ± s.d."""
    lines = ["| segmenter measure | SEMIR / WNE | baseline (same run) |", "|---|---|---|"]
    for size, s in r.get("minor_speed", {}).items():
        lines.append(
            f"| minor of a {size}^3 phantom | {s['supernodes']} supernodes in {s['seconds']:.2f} s "
            f"({s['voxels_per_s'] / 1e6:.1f} M voxels/s) | {s['regions_before_deletion']} regions "
            "before node deletion |"
        )
    if "segment_time" in r:
        st = r["segment_time"]
        lines.append(
            f"| Segment wall time per {st['size']}^3 volume | {st['semir_s']:.3f} s | "
            f"U-Net forward {st['unet_s']:.3f} s ({st['semir_over_unet']:.2f}x) |"
        )
    for b, o in r.get("wne_overhead", {}).items():
        lines.append(
            f"| WNE forward time ({b}, 16x64x64, CPU) | {o['wne_ms']:.1f} ms | bare {o['bare_ms']:.1f} ms "
            f"({o['ratio']:.3f}x) |"
        )
    c2 = r.get("claim2_fewshot", {})
    if c2 and "learned_scores" not in c2:
        for key in ("boundary_dice", "lesion_dice", "lesion_oracle_dice"):
            lines.append(
                f"| claim 2: {key.replace('_', ' ')}, learned vs manual [old hand-set], seeds {_seeds(c2)} | "
                f"{_fmt(v['learned_scores'][key] for v in c2.values())} | "
                f"{_fmt(v['manual_scores'][key] for v in c2.values())} "
                f"[{_fmt(v['hand_scores'][key] for v in c2.values())}] |"
            )
    val = r.get("claim3_unet_validation")
    if val:
        b = val["best"]
        lines.append(
            f"| claim 3: U-Net budget by validation curve (seeds {val['train_seeds'][0]}-"
            f"{val['train_seeds'][-1]} / {val['held_out_seeds'][0]}-{val['held_out_seeds'][-1]}) | "
            f"lr {b['lr']:g}, {b['steps']} steps | validation lesion Dice {b['mean_dice']:.3f} |"
        )
    c3 = r.get("claim3_dense_unet", {})
    if c3 and "semir" not in next(iter(c3.values())):
        for radius in next(iter(c3.values())):
            runs = [v[radius] for v in c3.values()]
            lines.append(
                f"| claim 3: pooled lesion Dice, radius {float(radius):.1f}, SEMIR vs U-Net, "
                f"seeds {_seeds(c3)} (minor's oracle {_fmt([x['semir_minor_oracle'] for x in runs], 2)}) | "
                f"{_fmt(x['semir'] for x in runs)} | {_fmt(x['unet'] for x in runs)} |"
            )
    for key, runs in r.get("claim4_wne", {}).items():
        if "psnr" in runs:
            continue
        w = list(runs.values())
        lines.append(
            f"| claim 4 ({key}): NE defect | {_fmt((x['defect']['wne'] for x in w), 1, 'e')} | "
            f"{_fmt((x['defect']['none'] for x in w), 1, 'e')} |"
        )
        for sigma in w[0]["psnr"]:
            lines.append(
                f"| claim 4 ({key}): PSNR at sigma {sigma}, seeds {_seeds(runs)} | "
                f"{_fmt((x['psnr'][sigma]['wne'] for x in w), 2)} | "
                f"{_fmt((x['psnr'][sigma]['none'] for x in w), 2)} |"
            )
    return "\n".join(lines)


def claims(r: dict) -> str:
    """The service README's table of claims: what CI asserts (seed 0) and the benchmark's mean ±
    s.d. over its seeds, method and baseline, and whether the claim holds on every seed."""
    lines = [
        "| claim | CI asserts (seed 0 only) | benchmark: method | benchmark: baseline | holds? |",
        "|---|---|---|---|---|",
    ]
    c2 = r.get("claim2_fewshot", {})
    if c2 and "learned_scores" not in c2:
        seeds = f"seeds {_seeds(c2)}"
        runs = list(c2.values())
        lift = [x["lifting"]["learned"] for x in runs]
        exact = all(x["lifting"][k]["exact"] for x in runs for k in x["lifting"])
        lines.append(
            f"| 1. lifting is exact; the minor is compact | exact; < 1 supernode per 20 voxels | "
            f"{_fmt((x['supernodes'] for x in lift), 1)} supernodes per 32^3 volume (learned), lesion oracle "
            f"Dice {_fmt(x['oracle']['2'] for x in lift)}, {seeds} | 32,768 voxels | "
            f"{'holds (exact on every seed)' if exact else 'does not hold'} |"
        )
        for key, asserted, base in (
            ("boundary_dice", "learned > manual + 0.01", "manual"),
            ("lesion_dice", "not asserted", "manual"),
            ("lesion_dice", "learned > hand-set + 0.2", "hand"),
        ):
            m = [x["learned_scores"][key] for x in runs]
            b = [x[base + "_scores"][key] for x in runs]
            name = (
                "paper-style manual vector"
                if base == "manual"
                else "old hand-set vector (ψ 0.1 R, no deletion)"
            )
            lines.append(
                f"| 2. learned few-shot parameters beat the {name}: {key.replace('_', ' ')} | {asserted} | "
                f"{_fmt(m)}, {seeds} | {_fmt(b)} | {_verdict(m, b)} |"
            )
    c3 = r.get("claim3_dense_unet", {})
    if c3 and "semir" not in next(iter(c3.values())):
        seeds = f"seeds {_seeds(c3)}"
        runs = list(c3.values())
        budget = next(iter(runs[0].values()))["unet_budget"]
        radii = list(runs[0])
        for radius in radii:
            m = [x[radius]["semir"] for x in runs]
            b = [x[radius]["unet"] for x in runs]
            lines.append(
                f"| 3. SEMIR beats a dense 3D U-Net (binary, {budget['volumes_per_step']} volumes per step, "
                f"{budget['steps']} steps at lr {budget['lr']:g}, chosen on validation seeds): "
                f"pooled lesion Dice, radius {float(radius):.1f} | "
                f"{CI_CLAIM3.get(float(radius), 'not run in CI')} | {_fmt(m)}, {seeds} | {_fmt(b)} | "
                f"{_verdict(m, b)} |"
            )
        big, small = radii[0], radii[-1]
        m = [x[small]["gap"] for x in runs]
        b = [x[big]["gap"] for x in runs]
        lines.append(
            f"| 3. ... and the gap widens as lesions shrink: gap at radius {float(small):.1f} vs "
            f"{float(big):.1f} | {CI_CLAIM3['widens']} | {_fmt(m)}, {seeds} | {_fmt(b)} | {_verdict(m, b)} |"
        )
    for key, runs in r.get("claim4_wne", {}).items():
        if "psnr" in runs:
            continue
        w = list(runs.values())
        seeds = f"seeds {_seeds(runs)}"
        aug = "both with the gain augmentation" if key.endswith("_augmented") else "neither augmented"
        backbone = key.removesuffix("_augmented")
        ci = key == "dncnn"
        if ci:
            m = [x["defect"]["wne"] for x in w]
            b = [x["defect"]["none"] for x in w]
            ok = all(x <= 1e-5 for x in m) and all(x > 1e-2 for x in b)
            lines.append(
                f"| 4. WNE is exactly equivariant ({backbone}): NE defect | ≤ 1e-5 vs bare > 1e-2 | "
                f"{_fmt(m, 1, 'e')}, {seeds} | {_fmt(b, 1, 'e')} | {'holds' if ok else 'does not hold'} |"
            )
        train = w[0]["train_sigma"]
        for sigma in w[0]["psnr"]:
            m = [x["psnr"][sigma]["wne"] for x in w]
            b = [x["psnr"][sigma]["none"] for x in w]
            what = "matched noise (paper: WNE slightly worse)" if float(sigma) == train else "off-sigma"
            asserted = CI_CLAIM4.get(float(sigma), "not asserted") if ci else "not run in CI"
            verdict = _verdict(m, b)
            if float(sigma) == train:  # the claim there is parity, not a win
                near = sum(abs(x - y) <= 0.3 for x, y in zip(m, b, strict=True))
                higher = verdict.split("(")[1].rstrip(")")
                verdict = f"within 0.3 dB on {near}/{len(m)} seeds; WNE higher on {higher}"
            lines.append(
                f"| 4. WNE vs bare {backbone}, {aug}: PSNR dB at σ {sigma}, {what} | {asserted} | "
                f"{_fmt(m, 2)}, {seeds} | {_fmt(b, 2)} | {verdict} |"
            )
    return "\n".join(lines)


# what tests/reproduction/segmenter asserts, for the claims table (keep in step with the tests)
CI_CLAIM3 = {
    3.0: "not asserted",
    1.5: "SEMIR > U-Net + 0.02",
    "widens": "gap at 1.5 > gap at 3.0 + 0.1",
}
CI_CLAIM4 = {0.1: "WNE ≥ bare − 0.3 dB", 0.3: "WNE > bare + 1 dB", 0.02: "not asserted"}


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
