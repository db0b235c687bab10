"""The reproduction experiments, shared by tests/reproduction/segmenter and the benchmark.

Every comparison trains its baseline in the same run on the same synthetic volumes.
1. lifting: the minor's partition is exact; oracle (node-majority) Dice per structure.
2. few-shot: learned minor parameters vs the hand-set vector, boundary Dice and lesion Dice
   (the minor's oracle and the trained GINE pipeline's) on held-out volumes.
3. SEMIR vs a small dense 3D U-Net, same training volumes, same optimizer-step budget,
   lesion Dice per lesion radius.
4. WNE vs the bare backbone: NE defect, PSNR at the training noise level and far from it.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import torch
from paperworks.services.segmenter import gnn, search, synthetic, unet, wne
from paperworks.services.segmenter.minor import MinorParams, build_minor, dice, oracle_dice


def lifting(cfg: synthetic.PhantomConfig, seeds, params: MinorParams) -> dict:
    out = {"exact": True, "oracle": {1: [], 2: []}, "supernodes": [], "voxels": 0}
    for s in seeds:
        image, labels = synthetic.phantom(cfg, s)
        m = build_minor(image, params)
        counted = int((m.node == -1).sum() + m.size.sum())
        partition = np.array_equal(m.lift(np.arange(m.nodes), background=-1), m.node)
        sizes = np.array_equal(np.bincount(m.node[m.node >= 0], minlength=m.nodes), m.size)
        out["exact"] &= counted == image.size and partition and sizes
        maj = m.node_majority(labels, 3)
        lifted = m.lift(maj)
        # lifting the node-majority labels reproduces the partition: constant on every node
        pure = np.all(lifted[m.node >= 0] == maj[m.node[m.node >= 0]])
        out["exact"] &= bool(pure)
        for k, v in oracle_dice(m, labels, (1, 2)).items():
            out["oracle"][k].append(v)
        out["supernodes"].append(m.nodes)
        out["voxels"] += image.size
    out["oracle"] = {k: float(np.mean(v)) for k, v in out["oracle"].items()}
    out["supernodes"] = float(np.mean(out["supernodes"]))
    return out


def _pipeline_dice(params, train, test, steps, seed, structure=2) -> tuple[float, float]:
    minors = [build_minor(i, params) for i, _ in train]
    model = gnn.train_structure(minors, [lab == structure for _, lab in train], steps=steps, seed=seed)
    scores, oracle = [], []
    for image, lab in test:
        m = build_minor(image, params)
        scores.append(dice(m.lift(gnn.predict(model, m) > 0.5, False), lab == structure))
        oracle.append(oracle_dice(m, lab, (structure,))[structure])
    return float(np.mean(scores)), float(np.mean(oracle))


def fewshot(cfg, train_seeds, test_seeds, trials=60, steps=200, seed=0, method="tpe") -> dict:
    torch.set_num_threads(1)
    train = synthetic.cohort(cfg, train_seeds)
    test = synthetic.cohort(cfg, test_seeds)
    hand = search.hand_set([v[0] for v in train])
    learned, _ = search.search(train, trials, method, seed)
    out = {"hand": hand.as_dict(), "learned": learned.as_dict()}
    for name, p in (("hand", hand), ("learned", learned)):
        lesion, oracle = _pipeline_dice(p, train, test, steps, seed)
        out[name + "_scores"] = {
            "boundary_dice": search.objective(p, test),
            "lesion_dice": lesion,
            "lesion_oracle_dice": oracle,
        }
    return out


def semir_vs_unet(radii, train_seeds, test_seeds, trials=60, steps=150, unet_base=4, seed=0, size=32) -> dict:
    """Lesion Dice of SEMIR (learned minor + GINE) and the dense U-Net, per lesion radius. Both get
    the same training volumes and `steps` optimizer steps."""
    out = {}
    for r in radii:
        cfg = synthetic.PhantomConfig(size=size, lesion_radius=float(r))
        train = synthetic.cohort(cfg, train_seeds)
        test = synthetic.cohort(cfg, test_seeds)
        torch.set_num_threads(1)
        t = time.perf_counter()
        params, _ = search.search(train, trials, "tpe", seed)
        semir, _ = _pipeline_dice(params, train, test, steps, seed)
        t_semir = time.perf_counter() - t
        torch.set_num_threads(max(1, torch.get_num_threads()))
        t = time.perf_counter()
        net = unet.train_unet(train, 3, steps=steps, base=unet_base, seed=seed)
        dense = float(np.mean([dice(unet.predict_unet(net, i) == 2, lab == 2) for i, lab in test]))
        t_unet = time.perf_counter() - t
        out[float(r)] = {
            "semir": semir,
            "unet": dense,
            "gap": semir - dense,
            "train_s": {"semir": t_semir, "unet": t_unet},
        }
    return out


def wne_claims(
    backbone="dncnn",
    sigma=0.1,
    steps=300,
    size=32,
    train_images=64,
    test_images=24,
    sigmas=(0.02, 0.1, 0.3),
    seed=0,
) -> dict:
    clean, _ = synthetic.noisy_images(size, train_images, sigma, seed)
    test, _ = synthetic.noisy_images(size, test_images, sigma, seed + 1)
    models = {
        w: wne.train_denoiser(clean, sigma, backbone, w, steps=steps, seed=seed) for w in ("wne", "none")
    }
    rng = np.random.default_rng(seed + 2)
    y = torch.from_numpy(test[:8, None] + rng.normal(0, sigma, test[:8, None].shape).astype(np.float32))
    out = {
        "defect": {
            w: float(np.mean([wne.ne_defect(m, y, a, b) for a, b in ((2.0, 0.3), (0.5, -0.2), (7.0, 3.0))]))
            for w, m in models.items()
        },
        "psnr": {},
    }
    for s in sigmas:
        noisy = test + rng.normal(0, s, test.shape).astype(np.float32)
        pairs = list(zip(noisy, test, strict=True))
        out["psnr"][float(s)] = {
            w: float(np.mean([wne.psnr(wne.denoise_volume(m, n), c) for n, c in pairs]))
            for w, m in models.items()
        }
        out["psnr"][float(s)]["noisy"] = wne.psnr(noisy, test)
    return out


def hand_variant(params: MinorParams, **kw) -> MinorParams:
    return replace(params, **kw)
