"""Unimodal uncertainty, the following curve, the balance point and concept oscillations
(modality following, arXiv 2511.02243 §3-5; the ICML 2026 version adds robustness across
uncertainty indices and middle-to-late-layer oscillations).

Per conflict item, with the model's probabilities p over the closed answer set A:
- unimodal uncertainty U_m from the image-only run (reports replaced by `<none>`) and the text-only
  run (blank image): normalized entropy H = -sum p log p / log|A|, or 1 - max p, or 1 - (p1 - p2);
- relative uncertainty dU = U_T - U_V (positive: the text is the more uncertain modality);
- the following label from the bimodal run: text (answer = a_T), vision (= a_V), or other;
- the following curve P(follow_T | dU) over text-or-vision items, with the logistic fit
  P = sigma(a - b dU) (maximum likelihood, Newton) and the balance point x* = a / b where P = 0.5,
  with a bootstrap CI over items; monotonicity as Spearman's rho of the binned curve and of the
  items; TFR / VFR (dataset-level following ratios) beside it;
- the logit lens at every LM layer: the state "a_T ranks above a_V" per layer, and the oscillation
  count = the number of state switches across layers; the ambiguous band |dU - x*| < eps against
  the clear band |dU - x*| > 2 eps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from paperworks.services.vlm.following.conflicts import ConflictSet
from paperworks.services.vlm.tinyvlm.train import lens_probabilities, probabilities
from paperworks.services.vlm.tinyvlm.vocab import COLORS
from scipy import stats


def normalized_entropy(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-12, 1.0)
    return -(q * np.log(q)).sum(-1) / np.log(p.shape[-1])


def one_minus_max(p: np.ndarray) -> np.ndarray:
    return 1.0 - p.max(-1)


def one_minus_margin(p: np.ndarray) -> np.ndarray:
    top = np.sort(p, -1)
    return 1.0 - (top[..., -1] - top[..., -2])


INDICES = {
    "entropy": normalized_entropy,
    "one_minus_max": one_minus_max,
    "one_minus_margin": one_minus_margin,
}
FOLLOW_TEXT, FOLLOW_VISION, OTHER = 1, 0, -1


@dataclass
class Records:
    """Per item: the unimodal and bimodal answer distributions and the logit-lens states."""

    p_text: np.ndarray  # (N, |A|) text-only run
    p_vision: np.ndarray  # (N, |A|) image-only run
    p_both: np.ndarray  # (N, |A|)
    lens: np.ndarray  # (N, layers, |A|)
    visual_answer: np.ndarray
    text_answer: np.ndarray
    visual_level: np.ndarray
    text_level: np.ndarray

    def relative(self, index: str = "entropy") -> np.ndarray:
        u = INDICES[index]
        return u(self.p_text) - u(self.p_vision)

    def follow(self) -> np.ndarray:
        pred = self.p_both.argmax(1)
        return np.where(
            pred == self.text_answer, FOLLOW_TEXT, np.where(pred == self.visual_answer, FOLLOW_VISION, OTHER)
        )

    def margins(self) -> np.ndarray:
        """(N, layers) logit-lens p(a_T) - p(a_V) per layer."""
        n = np.arange(len(self.lens))
        return self.lens[n, :, self.text_answer] - self.lens[n, :, self.visual_answer]

    def oscillations(self) -> np.ndarray:
        """Switches between the text-preferred and the vision-preferred state across layers."""
        state = self.margins() > 0
        return (state[:, 1:] != state[:, :-1]).sum(1)

    def subset(self, idx) -> Records:
        return Records(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))


def run_model(model, cs: ConflictSet, device: str) -> Records:
    """The three runs (text only, image only, both) and the logit lens, for every item of `cs`."""
    both_tokens = cs.tokens("both")
    return Records(
        p_text=probabilities(model, cs.pixels("text"), both_tokens, device),
        p_vision=probabilities(model, cs.pixels("both"), cs.tokens("image"), device),
        p_both=probabilities(model, cs.pixels("both"), both_tokens, device),
        lens=lens_probabilities(model, cs.pixels("both"), both_tokens, device),
        visual_answer=cs.visual_answer,
        text_answer=cs.text_answer,
        visual_level=cs.visual_level,
        text_level=cs.text_level,
    )


def run_adapter(model, cs: ConflictSet, where: str = "model") -> Records:
    """The same three runs and the logit lens on a Hugging Face VLM (`services/vlm/hf_vlm.HFVLM`),
    the items rendered as its input: the reports and question in words, the image as a picture;
    the text-only copy has no image at all (an absent modality, not a black picture the vision
    tower would still encode) and the image-only copy asks the question without the reports.
    A tokenizer that cannot tell the colour answers apart is refused on `where`."""
    images, both = list(cs.images), cs.texts("both")
    p_both, lens = model.run(images, both, COLORS, where=where)
    return Records(
        p_text=model.probabilities(None, both, COLORS, where=where),
        p_vision=model.probabilities(images, cs.texts("image"), COLORS, where=where),
        p_both=p_both,
        lens=lens,
        visual_answer=cs.visual_answer,
        text_answer=cs.text_answer,
        visual_level=cs.visual_level,
        text_level=cs.text_level,
    )


def fit_logistic(x: np.ndarray, y: np.ndarray, iters: int = 50, ridge: float = 1e-6) -> tuple[float, float]:
    """Maximum-likelihood (a, b) of P(y = 1 | x) = sigma(a - b x), by Newton's method."""
    design = np.stack([np.ones_like(x), -x], 1)
    w = np.zeros(2)
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(design @ w)))
        grad = design.T @ (y - p) - ridge * w
        hess = (design * (p * (1 - p))[:, None]).T @ design + ridge * np.eye(2)
        step = np.linalg.solve(hess, grad)
        w = w + step
        if np.abs(step).max() < 1e-9:
            break
    return float(w[0]), float(w[1])


def balance_point(x: np.ndarray, y: np.ndarray) -> float:
    a, b = fit_logistic(x, y)
    return a / b if b > 0 else float("nan")


def bootstrap_ci(x: np.ndarray, y: np.ndarray, n: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = [balance_point(x[i], y[i]) for i in (rng.integers(0, len(x), len(x)) for _ in range(n))]
    draws = np.asarray([d for d in draws if np.isfinite(d)])
    return float(np.quantile(draws, (1 - level) / 2)), float(np.quantile(draws, (1 + level) / 2))


def binned_curve(x: np.ndarray, y: np.ndarray, bins: int) -> dict:
    """P(follow_T) in `bins` equal-count bins of dU: centres (bin means), rates, counts."""
    order = np.argsort(x)
    parts = [p for p in np.array_split(order, bins) if len(p)]
    return {
        "centers": [float(x[p].mean()) for p in parts],
        "rates": [float(y[p].mean()) for p in parts],
        "counts": [len(p) for p in parts],
    }


def following_law(records: Records, index: str, bins: int = 10, n_boot: int = 200, seed: int = 0) -> dict:
    """The curve, logistic fit, balance point with bootstrap CI and Spearman monotonicity under
    one uncertainty index (items that followed neither modality are left out, and counted)."""
    follow = records.follow()
    keep = follow != OTHER
    x, y = records.relative(index)[keep], (follow[keep] == FOLLOW_TEXT).astype(float)
    a, b = fit_logistic(x, y)
    curve = binned_curve(x, y, bins)
    rho_bins, p_bins = stats.spearmanr(curve["centers"], curve["rates"])
    rho_items, p_items = stats.spearmanr(x, y)
    lo, hi = bootstrap_ci(x, y, n_boot, seed)
    x_star = a / b if b > 0 else float("nan")
    return {
        "index": index,
        "a": a,
        "b": b,
        "balance_point": x_star,
        "ci": [lo, hi],
        # where x* lies in the distribution of dU: comparable across indices of different scales
        "balance_quantile": float((x < x_star).mean()),
        "spearman_binned": float(rho_bins),
        "spearman_binned_p": float(p_bins),
        "spearman_items": float(rho_items),
        "spearman_items_p": float(p_items),
        "curve": curve,
        "items": int(keep.sum()),
    }


def ratios(records: Records) -> dict:
    f = records.follow()
    return {
        "tfr": float((f == FOLLOW_TEXT).mean()),
        "vfr": float((f == FOLLOW_VISION).mean()),
        "other": float((f == OTHER).mean()),
    }


def oscillation_bands(records: Records, x_star: float, epsilon: float, index: str = "entropy") -> dict:
    """Mean oscillation count in the ambiguous band |dU - x*| < eps and the clear band > 2 eps,
    with a one-sided Mann-Whitney p-value (ambiguous > clear)."""
    d = np.abs(records.relative(index) - x_star)
    osc = records.oscillations()
    amb, clear = osc[d < epsilon], osc[d > 2 * epsilon]
    p = (
        float(stats.mannwhitneyu(amb, clear, alternative="greater").pvalue)
        if len(amb) and len(clear)
        else 1.0
    )
    return {
        "ambiguous": float(amb.mean()) if len(amb) else float("nan"),
        "clear": float(clear.mean()) if len(clear) else float("nan"),
        "ambiguous_items": int(len(amb)),
        "clear_items": int(len(clear)),
        "p_greater": p,
    }


def grid_following(records: Records, target: str) -> np.ndarray:
    """(levels, levels) rate of following `target` ("text" | "vision") per (d_V, d_T) cell."""
    want = FOLLOW_TEXT if target == "text" else FOLLOW_VISION
    f = records.follow() == want
    levels = int(max(records.visual_level.max(), records.text_level.max())) + 1
    grid = np.full((levels, levels), np.nan)
    for v in range(levels):
        for t in range(levels):
            cell = (records.visual_level == v) & (records.text_level == t)
            if cell.any():
                grid[v, t] = f[cell].mean()
    return grid


def audit(
    records: Records,
    indices=("entropy", "one_minus_max"),
    bins: int = 10,
    n_boot: int = 200,
    epsilon: float = 0.1,
    seed: int = 0,
) -> dict:
    """The whole audit: the law under each index, TFR/VFR, oscillations around the entropy balance point."""
    laws = {i: following_law(records, i, bins, n_boot, seed) for i in indices}
    first = laws[indices[0]]
    return {
        "laws": laws,
        "ratios": ratios(records),
        "oscillations": oscillation_bands(records, first["balance_point"], epsilon, indices[0]),
        "layers": int(records.lens.shape[1]),
    }
