"""Experiment drivers for the RITA reproduction (tests/reproduction/clip/test_rita_claims.py) and
the clip benchmark: a tiny CLIP trained on the world from a seed (cached per process), and the
attack x method table on a held-out world stream.

    PYTHONSAFEPATH=1 .venv/bin/python tests/reproduction/clip/rita_experiments.py --seeds 1 2
runs the validation sweep (alpha, empty-class rule, TTA loss) the CI settings were chosen from."""

from __future__ import annotations

import argparse
import functools
import json

import torch
from paperworks.services.clip import tinyclip, world
from paperworks.services.clip.rita import TTAConfig, evaluate_robustness, table

CI_MODEL = {"steps": 300, "batch": 128, "seed": 0}
CONFIG = {
    "vision": {"patch_size": 8, "num_hidden_layers": 2, "hidden_size": 48, "intermediate_size": 96},
    "text": {"hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 1},
    "projection_dim": 48,
}
WORLD_OFFSET = 5000  # test streams: world seed WORLD_OFFSET + seed


@functools.lru_cache(maxsize=4)
def trained_clip(steps: int = CI_MODEL["steps"], batch: int = CI_MODEL["batch"], seed: int = 0):
    encoder = tinyclip.build_tiny(seed, **CONFIG)
    tinyclip.train_clip(encoder, steps, seed, batch=batch, lr=3e-3)
    return encoder


def rita_table(encoder, seed: int, n: int, eps_255=(0.0, 4.0), methods=None, clean_methods=None, **cfg):
    """({(eps_255, method): accuracy}, rows) on the world stream of `seed`; `clean_methods` (default:
    `methods`) are the ones run at eps 0."""
    w = world.make_world(n, WORLD_OFFSET + seed)
    methods = methods or ["zero_shot", "ensemble", "tpt", "rtpt", "rita", "rita_no_cache"]
    rows = []
    for eps in eps_255:
        run = (clean_methods or methods) if eps == 0 else methods
        res = evaluate_robustness(
            encoder,
            w.images,
            w.labels,
            list(world.SHAPES),
            list(world.TEXTURES),
            [eps / 255],
            run,
            TTAConfig(**cfg),
            seed,
        )
        rows += res["rows"]
    return {(r["eps_255"], r["method"]): r["accuracy"] for r in rows}, rows


def _main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--n", type=int, default=60)
    p.add_argument("--views", type=int, default=32)
    p.add_argument("--steps", type=int, default=CI_MODEL["steps"])
    a = p.parse_args()
    torch.set_num_threads(1)
    enc = trained_clip(a.steps, CI_MODEL["batch"], 0)
    w = world.make_world(500, 99)
    print("zero-shot clean", tinyclip.zero_shot_accuracy(enc, w.images, w.labels, world.class_prompts()))
    variants = [
        dict(alpha=0.1),
        dict(alpha=1.0),
        dict(alpha=3.0),
        dict(alpha=1.0, empty="zero"),
        dict(alpha=1.0, loss="ot"),
        dict(alpha=1.0, capacity=32),
    ]
    for seed in a.seeds:
        _, rows = rita_table(enc, seed, a.n, views=a.views)
        print(f"seed {seed}\n" + table(rows), flush=True)
        for v in variants:
            acc, _ = rita_table(enc, seed, a.n, methods=["rita"], views=a.views, **v)
            print(seed, json.dumps(v), {f"{k[0]:g}": round(x, 3) for k, x in acc.items()}, flush=True)


if __name__ == "__main__":
    _main()
