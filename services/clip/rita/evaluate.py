"""RITA's evaluation protocol: attack x method table (clean and robust accuracy, runtime per image).

For each attack budget eps (0 = clean) the test images are attacked once (PGD on the frozen model
with a plain prompt) and every method runs over the same attacked stream, in the same order, with
the same view seeds; stateful caches (TDA, RITA) start empty for every (eps, method) stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
from paperworks.services.clip.rita.attack import pgd
from paperworks.services.clip.rita.methods import METHODS, Stream, TTAConfig


def evaluate_robustness(
    encoder,
    images: torch.Tensor,
    labels,
    classes: list[str],
    descriptors: list[str] | None,
    eps_list: list[float],
    methods: list[str] | None = None,
    cfg: TTAConfig | None = None,
    seed: int = 0,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict:
    """{"rows": [{eps, method, accuracy, correct, n, seconds_per_image}], "predictions": {...}}."""
    cfg = cfg or TTAConfig()
    methods = list(methods or METHODS)
    labels_t = torch.as_tensor(np.asarray(labels), dtype=torch.long)
    plain = Stream(encoder, classes, None, cfg).plain_text
    total = len(eps_list) * len(methods) * len(images)
    done = 0
    rows, preds = [], {}
    for eps in eps_list:
        g = torch.Generator().manual_seed(seed * 7919 + int(round(eps * 255 * 1000)))
        adv = pgd(encoder, images, labels_t, plain, eps, generator=g) if eps > 0 else images
        for method in methods:
            stream = Stream(encoder, classes, descriptors, cfg)
            out = []
            start = time.perf_counter()
            for i in range(len(adv)):
                out.append(int(stream.predict(method, adv[i], seed * 1_000_003 + i).argmax()))
                done += 1
                if progress is not None:
                    progress(done, total, f"eps={eps * 255:g}/255 {method}")
            seconds = (time.perf_counter() - start) / max(1, len(adv))
            pred = np.asarray(out)
            correct = int((pred == labels_t.numpy()).sum())
            rows.append(
                {
                    "eps": eps,
                    "eps_255": round(eps * 255, 3),
                    "method": method,
                    "accuracy": correct / len(adv),
                    "correct": correct,
                    "n": len(adv),
                    "seconds_per_image": seconds,
                }
            )
            preds[f"{eps * 255:g}/{method}"] = pred.tolist()
    return {"rows": rows, "predictions": preds}


def table(rows: list[dict]) -> str:
    """Markdown: one row per method, one column per eps."""
    eps = sorted({r["eps_255"] for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    acc = {(r["method"], r["eps_255"]): r for r in rows}
    head = "| method | " + " | ".join(f"acc eps={e:g}/255" for e in eps) + " | s/img |"
    lines = [head, "|" + "---|" * (len(eps) + 2)]
    for m in methods:
        cells = [f"{acc[(m, e)]['accuracy']:.3f}" for e in eps]
        sec = np.mean([acc[(m, e)]["seconds_per_image"] for e in eps])
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {sec:.4f} |")
    return "\n".join(lines)
