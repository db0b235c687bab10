"""A synthetic VQA task with a language-prior shortcut (CFPO's failure mode, in miniature).

Each image (16 x 16, black) holds two objects, each a 4 x 4 glyph (circle, square or triangle) in a
colour, at two of the 16 patch positions. The question is "what color is the <shape> ?"; the answer
is the colour of that shape. In the training split the asked shape's colour is its prior colour
(circle -> red, square -> green, triangle -> blue) with probability `prior_strength`, so the text
alone answers most training questions; the anti-prior split never uses the prior colour, so only a
model that looks at the image answers it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from paperworks.services.vlm.tinyvlm.vocab import COLORS, IMAGE_SIZE, PALETTE, PATCH, SHAPES, encode

PRIOR = (0, 1, 2)  # circle -> red, square -> green, triangle -> blue (colour indices)
_Y, _X = np.mgrid[0:PATCH, 0:PATCH]
GLYPHS = np.stack(
    [
        ((_Y - 1.5) ** 2 + (_X - 1.5) ** 2 <= 2.6),  # circle: the corners off
        np.ones((PATCH, PATCH), bool),  # square
        (_X <= _Y),  # triangle: lower left
    ]
).astype(np.float32)
SPLITS = ("train", "in_distribution", "anti_prior")


@dataclass
class VQABatch:
    images: np.ndarray  # (N, 16, 16, 3)
    tokens: np.ndarray  # (N, 6)
    answers: np.ndarray  # (N,) colour index
    shapes: np.ndarray  # (N,) the asked shape


def question(shape: int) -> list[int]:
    return encode(f"what color is the {SHAPES[shape]} ?")


def sample(rng, n: int, split: str, prior_strength: float = 0.8, noise: float = 0.05) -> VQABatch:
    """`n` questions of `split`: train and in_distribution follow the prior with `prior_strength`;
    anti_prior never does."""
    k = len(COLORS)
    shape = rng.integers(0, len(SHAPES), n)
    prior = np.asarray(PRIOR)[shape]
    off_prior = (prior + rng.integers(1, k, n)) % k
    keep = rng.random(n) < (0.0 if split == "anti_prior" else prior_strength)
    color = np.where(keep, prior, off_prior)
    other_shape = (shape + rng.integers(1, len(SHAPES), n)) % len(SHAPES)
    other_color = (color + rng.integers(1, k, n)) % k
    cells = np.argsort(rng.random((n, (IMAGE_SIZE // PATCH) ** 2)), 1)[:, :2]
    images = np.zeros((n, IMAGE_SIZE, IMAGE_SIZE, 3), np.float32)
    palette = np.asarray(PALETTE, np.float32)
    g = IMAGE_SIZE // PATCH
    for obj_shape, obj_color, cell in ((shape, color, cells[:, 0]), (other_shape, other_color, cells[:, 1])):
        glyph = GLYPHS[obj_shape][..., None] * palette[obj_color][:, None, None, :]  # (n, 4, 4, 3)
        for i in range(n):
            y, x = divmod(int(cell[i]), g)
            images[i, y * PATCH : (y + 1) * PATCH, x * PATCH : (x + 1) * PATCH] = glyph[i]
    images = np.clip(images + rng.normal(0, noise, images.shape).astype(np.float32), 0.0, 1.0)
    tokens = np.stack([question(s) for s in shape]).astype(np.int64)
    return VQABatch(images, tokens, color.astype(np.int64), shape.astype(np.int64))
