"""The controllable conflict dataset (modality following, arXiv 2511.02243 §3: visual and textual
reasoning difficulty varied independently on a grid, with unimodal copies).

Each item is (image, text context, question) with a visual answer a_V (the plurality colour of the
image's 16 patches) and a textual answer a_T (the plurality colour among six witness reports). The
visual difficulty d_V thins the plurality and adds pixel noise; the textual difficulty d_T thins the
plurality of the reports. Conflict items have a_V != a_T; the unimodal copies blank the image (text
only) or replace the reports by the neutral `<none>` filler (image only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from paperworks.services.vlm.tinyvlm.vocab import (
    COLORS,
    IMAGE_SIZE,
    INDEX,
    NONE,
    PALETTE,
    PATCH,
    VOCAB,
    encode,
)

LEVELS = 5
TARGET_PATCHES = (12, 9, 7, 5, 4)  # patches of the answer colour among 16, by visual level
PIXEL_NOISE = (0.0, 0.08, 0.16, 0.24, 0.32)
TRUE_REPORTS = (6, 5, 4, 3, 2)  # reports naming the answer among 6, by textual level
REPORTS = 6
QUESTION = encode("; what color is the object ?")
PREFIX = encode("reports :")
TEXT_LENGTH = len(PREFIX) + REPORTS + len(QUESTION)


def _plurality(rng, answers: np.ndarray, top: np.ndarray, slots: int) -> np.ndarray:
    """(N, slots) colour indices, shuffled: `top[i]` slots of `answers[i]`, the others dealt round-robin
    over a random order of the other colours (so none is as frequent as the answer)."""
    n, k = len(answers), len(COLORS)
    order = (answers[:, None] + 1 + np.argsort(rng.random((n, k - 1)), 1)) % k  # the other colours
    j = np.arange(slots)[None, :] - top[:, None]  # slot index among the distractor slots
    out = np.where(j < 0, answers[:, None], np.take_along_axis(order, np.maximum(j, 0) % (k - 1), 1))
    return np.take_along_axis(out, np.argsort(rng.random((n, slots)), 1), 1)


def render_images(rng, colors: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(N, 16, 16, 3) in [0, 1]: `TARGET_PATCHES[level]` patches of the colour, the rest distractor
    colours (none as frequent), Gaussian pixel noise `PIXEL_NOISE[level]`."""
    g = IMAGE_SIZE // PATCH
    patches = _plurality(rng, colors, np.asarray(TARGET_PATCHES)[levels], g * g)
    rgb = np.asarray(PALETTE, np.float32)[patches].reshape(len(colors), g, g, 3)
    images = np.repeat(np.repeat(rgb, PATCH, 1), PATCH, 2)
    noise = (
        rng.normal(0, 1, images.shape).astype(np.float32)
        * np.asarray(PIXEL_NOISE, np.float32)[levels][:, None, None, None]
    )
    return np.clip(images + noise, 0.0, 1.0)


def render_reports(rng, colors: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(N, 6) colour-word ids: `TRUE_REPORTS[level]` name the colour, the rest distractors."""
    words = _plurality(rng, colors, np.asarray(TRUE_REPORTS)[levels], REPORTS)
    return np.asarray([INDEX[c] for c in COLORS], np.int64)[words]


@dataclass
class ConflictSet:
    images: np.ndarray  # (N, 16, 16, 3) float32
    reports: np.ndarray  # (N, 6) int64 word ids
    visual_answer: np.ndarray  # (N,) colour index
    text_answer: np.ndarray  # (N,)
    visual_level: np.ndarray  # (N,) 0..4
    text_level: np.ndarray  # (N,)

    def __len__(self) -> int:
        return len(self.images)

    def subset(self, idx) -> ConflictSet:
        return ConflictSet(*(getattr(self, f)[idx] for f in FIELDS))

    def tokens(self, view: str = "both") -> np.ndarray:
        """(N, TEXT_LENGTH) word ids; the image-only view replaces the reports by `<none>`."""
        reports = self.reports if view != "image" else np.full_like(self.reports, NONE)
        n = len(self)
        return np.concatenate([np.tile(PREFIX, (n, 1)), reports, np.tile(QUESTION, (n, 1))], axis=1)

    def texts(self, view: str = "both") -> list[str]:
        """The items in words, as a Hugging Face VLM's prompt: the reports and the question; the
        image-only view is the question alone (the context is absent, not a filler word the
        model's tokenizer may not know)."""
        if view == "image":
            return [" ".join(VOCAB[i] for i in QUESTION[1:])] * len(self)
        return [" ".join(VOCAB[i] for i in row) for row in self.tokens("both")]

    def pixels(self, view: str = "both") -> np.ndarray:
        """The images; the text-only view blanks them (zeros)."""
        return self.images if view != "text" else np.zeros_like(self.images)

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {f: getattr(self, f) for f in FIELDS}

    @classmethod
    def from_arrays(cls, arrays) -> ConflictSet:
        """Checked: every array present with the shape and range it must have (ValueError names it)."""
        missing = [f for f in FIELDS if f not in arrays]
        if missing:
            raise ValueError(f"missing arrays {missing}")
        out = {f: np.asarray(arrays[f]) for f in FIELDS}
        n = len(out["images"])
        if out["images"].shape != (n, IMAGE_SIZE, IMAGE_SIZE, 3) or not np.issubdtype(
            out["images"].dtype, np.floating
        ):
            raise ValueError(f"images must be float (N, {IMAGE_SIZE}, {IMAGE_SIZE}, 3)")
        if (
            out["reports"].shape != (n, REPORTS)
            or not np.isin(out["reports"], [INDEX[c] for c in COLORS]).all()
        ):
            raise ValueError(f"reports must be (N, {REPORTS}) colour-word ids")
        for f, hi in (
            ("visual_answer", len(COLORS)),
            ("text_answer", len(COLORS)),
            ("visual_level", LEVELS),
            ("text_level", LEVELS),
        ):
            if (
                out[f].shape != (n,)
                or not np.issubdtype(out[f].dtype, np.integer)
                or (n and (out[f].min() < 0 or out[f].max() >= hi))
            ):
                raise ValueError(f"{f} must be (N,) integers in 0..{hi - 1}")
        if n == 0:
            raise ValueError("no items")
        out["images"] = np.clip(out["images"].astype(np.float32), 0.0, 1.0)
        return cls(**{f: out[f].astype(np.int64) if f != "images" else out[f] for f in FIELDS})


FIELDS = ("images", "reports", "visual_answer", "text_answer", "visual_level", "text_level")


def sample(rng, visual_levels, text_levels, conflict: bool) -> ConflictSet:
    """One item per (visual level, text level) pair given; conflict items draw a_T != a_V."""
    visual_levels, text_levels = np.asarray(visual_levels), np.asarray(text_levels)
    n = len(visual_levels)
    a_v = rng.integers(0, len(COLORS), n)
    shift = rng.integers(1, len(COLORS), n) if conflict else np.zeros(n, int)
    a_t = (a_v + shift) % len(COLORS)
    images, reports = render_images(rng, a_v, visual_levels), render_reports(rng, a_t, text_levels)
    return ConflictSet(
        images,
        reports,
        a_v.astype(np.int64),
        a_t.astype(np.int64),
        visual_levels.astype(np.int64),
        text_levels.astype(np.int64),
    )


def build_grid(seed: int, per_cell: int, levels: int = LEVELS) -> ConflictSet:
    """`per_cell` conflict items in each cell of the levels x levels difficulty grid."""
    rng = np.random.default_rng(seed)
    v, t = np.meshgrid(np.arange(levels), np.arange(levels), indexing="ij")
    cells = np.repeat(np.stack([v.ravel(), t.ravel()], 1), per_cell, axis=0)
    return sample(rng, cells[:, 0], cells[:, 1], conflict=True)


def training_batch(rng, batch: int, text_fraction: float, image_fraction: float):
    """(images, tokens, labels) of a pretraining batch: text-only, image-only and consistent
    bimodal items in the given mixture (the skew induces the model's inherent preference)."""
    items = sample(rng, rng.integers(0, LEVELS, batch), rng.integers(0, LEVELS, batch), conflict=False)
    kind = rng.choice(3, batch, p=[text_fraction, image_fraction, 1.0 - text_fraction - image_fraction])
    images = np.where((kind == 0)[:, None, None, None], 0.0, items.images).astype(np.float32)
    tokens = np.where((kind == 1)[:, None], items.tokens("image"), items.tokens("both"))
    return images, tokens, items.visual_answer
