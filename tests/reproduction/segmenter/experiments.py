"""The reproduction experiments, shared by tests/reproduction/segmenter and the benchmark
(imported as `reproduction.segmenter.experiments`).

Every comparison trains its baseline in the same run on the same synthetic volumes.
1. lifting: the minor's partition is exact; oracle (node-majority) Dice per structure.
2. few-shot: learned minor parameters vs the hand-set vector, boundary Dice and lesion Dice
   (the minor's oracle and the trained GINE pipeline's) on held-out volumes.
3. SEMIR vs a small dense 3D U-Net, same training volumes, same optimizer-step budget,
   lesion Dice per lesion radius, pooled over the test volumes (2 Σ|P∩T| / Σ(|P| + |T|)): a
   per-volume mean would score a volume without lesions as 1.0 for any method that predicts
   nothing there, which is how a 24^3 phantom too small to hold a radius-2.5 lesion once made
   both methods "tie". The phantoms are 32^3, where every volume holds lesions at these radii.
4. WNE vs the bare backbone: NE defect, PSNR at the training noise level and far from it.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from paperworks.services.segmenter import baselines, data, wne
from paperworks.services.segmenter.semir import gnn, search
from paperworks.services.segmenter.semir.minor import MinorParams, build_minor, dice, oracle_dice
from scipy import ndimage


def lifting(cfg: data.PhantomConfig, seeds, params: MinorParams) -> dict:
    out = {"exact": True, "oracle": {1: [], 2: []}, "supernodes": [], "voxels": 0}
    for s in seeds:
        image, labels = data.phantom(cfg, s)
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
    train = data.cohort(cfg, train_seeds)
    test = data.cohort(cfg, test_seeds)
    hand = search.hand_set([v[0] for v in train])
    manual = search.manual([v[0] for v in train])
    learned, _ = search.search(train, trials, method, seed)
    out = {"hand": hand.as_dict(), "manual": manual.as_dict(), "learned": learned.as_dict()}
    for name, p in (("hand", hand), ("manual", manual), ("learned", learned)):
        lesion, oracle = _pipeline_dice(p, train, test, steps, seed)
        out[name + "_scores"] = {
            "boundary_dice": search.objective(p, test),
            "lesion_dice": lesion,
            "lesion_oracle_dice": oracle,
        }
    return out


def pooled_dice(preds, targets) -> float:
    """Dice over a whole test set: 2 Σ|P∩T| / Σ(|P| + |T|)."""
    inter = sum(int((p & t).sum()) for p, t in zip(preds, targets, strict=True))
    total = sum(int(p.sum() + t.sum()) for p, t in zip(preds, targets, strict=True))
    return 2 * inter / total if total else 1.0


# The U-Net's budget, chosen by `unet_validation_curve` on the validation seeds (VALIDATION_*),
# never on the seeds a test asserts: the learning rate and step count with the best mean pooled
# lesion Dice over the radii (benchmark `claim3_unet_validation`).
UNET_LR = 1e-2
UNET_STEPS = 80
UNET_LRS = (3e-3, 1e-2, 3e-2)  # three rates: SEMIR's GINE got a four-value weight-decay sweep
VALIDATION_TRAIN = range(9000, 9005)
VALIDATION_HELD_OUT = range(9500, 9504)


def unet_validation_curve(
    radii,
    lrs=UNET_LRS,
    max_steps=200,
    every=20,
    train_seeds=VALIDATION_TRAIN,
    held_out=VALIDATION_HELD_OUT,
    base=8,
    size=32,
    progress=None,
) -> dict:
    """Pooled lesion Dice on held-out validation volumes every `every` steps, per learning rate
    and radius (binary lesion-vs-rest, every training volume in each step); `best` is the
    (lr, steps) with the highest mean over the radii."""
    curves: dict = {}
    for lr in lrs:
        curves[lr] = {}
        for r in radii:
            cfg = data.PhantomConfig(size=size, lesion_radius=float(r))
            train, val = data.cohort(cfg, train_seeds), data.cohort(cfg, held_out)
            targets = [lab == 2 for _, lab in val]
            curve = curves[lr][float(r)] = {}

            def on_eval(step, net, val=val, targets=targets, curve=curve, lr=lr, r=r):
                curve[step] = pooled_dice([baselines.predict_unet(net, i) == 1 for i, _ in val], targets)
                if progress:
                    progress(lr, r, step, curve[step])

            baselines.train_unet(
                train,
                2,
                steps=max_steps,
                base=base,
                lr=lr,
                structure=2,
                batch=None,
                on_eval=on_eval,
                eval_every=every,
            )
    mean = {
        (lr, step): float(np.mean([curves[lr][r][step] for r in curves[lr]]))
        for lr in curves
        for step in next(iter(curves[lr].values()))
    }
    lr, step = max(mean, key=mean.get)
    return {
        "curves": {str(lr): {str(r): c for r, c in v.items()} for lr, v in curves.items()},
        "mean": {f"{lr}@{st}": v for (lr, st), v in mean.items()},
        "best": {"lr": lr, "steps": step, "mean_dice": mean[(lr, step)]},
        "train_seeds": list(train_seeds),
        "held_out_seeds": list(held_out),
    }


def semir_vs_unet(
    radii,
    train_seeds,
    test_seeds,
    trials=60,
    steps=150,
    unet_base=8,
    seed=0,
    size=32,
    unet_steps=UNET_STEPS,
    unet_lr=UNET_LR,
) -> dict:
    """Pooled lesion Dice of SEMIR (learned minor + GINE) and the dense U-Net, per lesion radius.
    The same task (binary lesion-vs-rest), the same training volumes, every one of them in each
    optimizer step; the GINE trains `steps`, the U-Net `unet_steps` at `unet_lr` (its
    validation-chosen budget) and gets every thread."""
    threads = torch.get_num_threads()
    out = {}
    for r in radii:
        cfg = data.PhantomConfig(size=size, lesion_radius=float(r))
        train = data.cohort(cfg, train_seeds)
        test = data.cohort(cfg, test_seeds)
        targets = [lab == 2 for _, lab in test]
        torch.set_num_threads(1)
        t = time.perf_counter()
        params, _ = search.search(train, trials, "tpe", seed)
        model = gnn.train_structure(
            [build_minor(i, params) for i, _ in train], [lab == 2 for _, lab in train], steps=steps, seed=seed
        )
        minors = [build_minor(i, params) for i, _ in test]
        semir = pooled_dice([m.lift(gnn.predict(model, m) > 0.5, False) for m in minors], targets)
        majority = [m.lift(m.node_majority(lab, 3)) == 2 for m, (_, lab) in zip(minors, test, strict=True)]
        oracle = pooled_dice(majority, targets)
        t_semir = time.perf_counter() - t
        torch.set_num_threads(threads)
        t = time.perf_counter()
        net = baselines.train_unet(
            train, 2, steps=unet_steps, base=unet_base, lr=unet_lr, seed=seed, structure=2, batch=None
        )
        dense = pooled_dice([baselines.predict_unet(net, i) == 1 for i, _ in test], targets)
        t_unet = time.perf_counter() - t
        out[float(r)] = {
            "semir": semir,
            "unet": dense,
            "gap": semir - dense,
            "semir_minor_oracle": oracle,
            "supernodes": float(np.mean([m.nodes for m in minors])),
            "test_lesions": int(sum(ndimage.label(t)[1] for t in targets)),
            "test_volumes_without_lesions": int(sum(not t.any() for t in targets)),
            "unet_budget": {"steps": unet_steps, "lr": unet_lr, "volumes_per_step": len(train)},
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
    augment=False,
) -> dict:
    """WNE and the bare backbone trained alike: both with the intensity gain/offset augmentation
    or (`augment=False`, the paper's protocol: one noise level, no gain) neither. The gain spreads
    the noise level only in the wrapped model's normalized units; without it neither model sees a
    spread of noise levels. PSNR at the training sigma (the matched-noise result, where the paper
    has WNE slightly worse) and far from it."""
    clean, _ = data.noisy_images(size, train_images, sigma, seed)
    test, _ = data.noisy_images(size, test_images, sigma, seed + 1)
    models = {
        w: wne.train_denoiser(clean, sigma, backbone, w, steps=steps, seed=seed, augment=augment)
        for w in ("wne", "none")
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
    out["augment"] = augment
    out["train_sigma"] = sigma
    return out
