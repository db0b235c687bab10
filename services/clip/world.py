"""The synthetic image-caption world both clip papers (RITA, VACSR) run on.

Every image shows one glyph described by four attributes: a shape (8), a colour (8), a texture (4)
and a position (4 quadrants of a 32 x 32 image), over a noisy dark background. A caption is built
from the attributes ("a photo of a striped red circle on the top left"); training captions drop
attributes at random so that partial prompts ("a photo of a circle") are in-distribution for
zero-shot classification. The continuous ground-truth similarity of two items is the fraction of
the four attributes they share (`similarity`), so binary "only the paired caption is positive"
labels carry natural false negatives (VACSR), and the shape is the classification label (RITA).

Pure NumPy/PyTorch, no platform import: method subpackages and tests use it directly.

API (stable; services/clip/README.md repeats it):
    ATTRIBUTES: dict[str, tuple[str, ...]]   shape, colour, texture, position value names
    SHAPES, COLOURS, TEXTURES, POSITIONS      the same tuples
    IMAGE_SIZE = 32
    sample_attributes(n, seed) -> np.ndarray (n, 4) int64      columns in ATTRIBUTES order
    render(attrs, seed, noise=0.06) -> torch.Tensor (n, 3, 32, 32) float32 in [0, 1]
    caption(row, keep=None) -> str             keep: which of (texture, colour, position) to say
    captions(attrs, seed=None) -> list[str]    full captions; with a seed, random attribute drops
    similarity(a, b) -> np.ndarray (len(a), len(b)) float   fraction of shared attributes
    class_prompts(descriptor=None) -> list[str]  "a photo of a {shape}" (optionally a texture word)
    make_world(n, seed, drop_captions=False) -> World(images, attrs, captions, labels)
    VOCAB: tuple[str, ...]                     every word a caption or prompt can use
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

IMAGE_SIZE = 32
SHAPES = ("circle", "square", "triangle", "cross", "ring", "diamond", "bar", "arrow")
COLOURS = ("red", "green", "blue", "yellow", "magenta", "cyan", "white", "orange")
TEXTURES = ("solid", "striped", "dotted", "checkered")
POSITIONS = ("top left", "top right", "bottom left", "bottom right")
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "shape": SHAPES,
    "colour": COLOURS,
    "texture": TEXTURES,
    "position": POSITIONS,
}
PALETTE = np.array(
    [
        (0.95, 0.15, 0.15),
        (0.15, 0.85, 0.2),
        (0.2, 0.35, 1.0),
        (0.95, 0.9, 0.15),
        (0.9, 0.2, 0.9),
        (0.15, 0.9, 0.9),
        (0.95, 0.95, 0.95),
        (1.0, 0.55, 0.1),
    ],
    np.float32,
)
TEMPLATE = "a photo of a"
VOCAB: tuple[str, ...] = tuple(
    sorted(
        {w for w in TEMPLATE.split()}
        | set(SHAPES)
        | set(COLOURS)
        | set(TEXTURES)
        | {w for p in POSITIONS for w in p.split()}
        | {"on", "the"}
    )
)
GLYPH = 12


def _glyphs() -> np.ndarray:
    """(8, 12, 12) binary masks, one per shape."""
    y, x = np.mgrid[0:GLYPH, 0:GLYPH].astype(np.float32) - (GLYPH - 1) / 2
    r = np.sqrt(x**2 + y**2)
    half = GLYPH / 2
    masks = [
        r <= half - 0.5,  # circle
        (np.abs(x) <= half - 1.5) & (np.abs(y) <= half - 1.5),  # square
        (y >= -half + 1) & (np.abs(x) <= (y + half - 1) / 2 + 0.5),  # triangle
        (np.abs(x) <= 1.5) | (np.abs(y) <= 1.5),  # cross
        (r <= half - 0.5) & (r >= half - 3.0),  # ring
        np.abs(x) + np.abs(y) <= half - 0.5,  # diamond
        np.abs(y) <= 1.8,  # bar (horizontal)
        ((np.abs(y) <= 1.5) & (x <= 1)) | ((x > 1) & (np.abs(y) <= half - 0.5 - (x - 1))),  # arrow
    ]
    return np.stack([m.astype(np.float32) for m in masks])


def _textures() -> np.ndarray:
    """(4, 12, 12) intensity patterns in [0.3, 1]."""
    y, x = np.mgrid[0:GLYPH, 0:GLYPH]
    solid = np.ones((GLYPH, GLYPH))
    striped = np.where((y // 2) % 2 == 0, 1.0, 0.3)
    dotted = np.where((x % 3 == 1) & (y % 3 == 1), 0.3, 1.0)
    checker = np.where(((x // 3) + (y // 3)) % 2 == 0, 1.0, 0.3)
    return np.stack([solid, striped, dotted, checker]).astype(np.float32)


_GLYPHS = _glyphs()
_TEXTURES = _textures()


def sample_attributes(n: int, seed: int) -> np.ndarray:
    """(n, 4) int64 attribute indices, uniform and independent, columns in ATTRIBUTES order."""
    rng = np.random.default_rng(seed)
    sizes = [len(v) for v in ATTRIBUTES.values()]
    return np.stack([rng.integers(0, s, n) for s in sizes], 1).astype(np.int64)


def render(attrs: np.ndarray, seed: int, noise: float = 0.06) -> torch.Tensor:
    """(n, 3, 32, 32) float32 images in [0, 1]: the glyph (shape mask x texture x colour) in its
    quadrant with a +-2 pixel jitter, over a dark background with Gaussian noise."""
    attrs = np.asarray(attrs, np.int64).reshape(-1, 4)
    rng = np.random.default_rng(seed)
    n = len(attrs)
    out = np.clip(
        0.12
        + 0.05 * rng.standard_normal((n, 1, 1, 1))
        + noise * rng.standard_normal((n, 3, IMAGE_SIZE, IMAGE_SIZE)),
        0,
        1,
    ).astype(np.float32)
    jitter = rng.integers(-2, 3, (n, 2))
    for i, (s, c, t, p) in enumerate(attrs):
        top = 2 + 16 * (p // 2) + jitter[i, 0]
        left = 2 + 16 * (p % 2) + jitter[i, 1]
        top, left = int(np.clip(top, 0, IMAGE_SIZE - GLYPH)), int(np.clip(left, 0, IMAGE_SIZE - GLYPH))
        mask = _GLYPHS[s] * _TEXTURES[t]
        patch = out[i, :, top : top + GLYPH, left : left + GLYPH]
        alpha = _GLYPHS[s][None]
        out[i, :, top : top + GLYPH, left : left + GLYPH] = (1 - alpha) * patch + alpha * (
            mask[None] * PALETTE[c][:, None, None]
        )
    return torch.from_numpy(out)


def caption(row, keep: tuple[bool, bool, bool] | None = None) -> str:
    """The caption of one attribute row; `keep` says which of texture, colour, position to name
    (all by default). The shape is always named."""
    s, c, t, p = (int(v) for v in row)
    kt, kc, kp = keep if keep is not None else (True, True, True)
    words = [TEMPLATE]
    if kt:
        words.append(TEXTURES[t])
    if kc:
        words.append(COLOURS[c])
    words.append(SHAPES[s])
    if kp:
        words.append("on the " + POSITIONS[p])
    return " ".join(words)


def captions(attrs: np.ndarray, seed: int | None = None, p_keep: float = 0.6) -> list[str]:
    """Full captions, or with a seed each optional attribute kept with probability `p_keep`."""
    if seed is None:
        return [caption(r) for r in attrs]
    rng = np.random.default_rng(seed)
    keep = rng.random((len(attrs), 3)) < p_keep
    return [caption(r, tuple(k)) for r, k in zip(attrs, keep, strict=True)]


def similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Ground-truth similarity: the fraction of the 4 attributes two items share, (len(a), len(b))."""
    a, b = np.asarray(a).reshape(-1, 4), np.asarray(b).reshape(-1, 4)
    return (a[:, None, :] == b[None, :, :]).mean(-1)


def class_prompts(descriptor: str | None = None) -> list[str]:
    """One prompt per shape class: "a photo of a {shape}", or "a photo of a {descriptor} {shape}"."""
    mid = f"{descriptor} " if descriptor else ""
    return [f"{TEMPLATE} {mid}{s}" for s in SHAPES]


@dataclass
class World:
    images: torch.Tensor  # (n, 3, 32, 32) float32 in [0, 1]
    attrs: np.ndarray  # (n, 4) int64
    captions: list[str]
    labels: np.ndarray  # (n,) the shape index (classification label)


def make_world(n: int, seed: int, drop_captions: bool = False) -> World:
    """n items of the world from one seed (attributes, images and captions all derive from it)."""
    attrs = sample_attributes(n, seed)
    images = render(attrs, seed + 1_000_003)
    caps = captions(attrs, seed + 2_000_003 if drop_captions else None)
    return World(images, attrs, caps, attrs[:, 0].copy())
