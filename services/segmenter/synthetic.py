"""Synthetic CT-like phantoms: a body, organs, small low-contrast lesions, partial-volume blur, noise.

Labels: 0 background/body, 1 organ, 2 lesion (lesions sit inside organs). Intensities are in
[0, 1]-ish units: air 0, body 0.3, organs 0.55 / 0.75, lesions `lesion_contrast` above their
organ. The blur (Gaussian, sigma `blur` voxels) is applied before the noise, as partial-volume
averaging happens in the scanner and the noise after it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

STRUCTURES = {1: "organ", 2: "lesion"}


@dataclass(frozen=True)
class PhantomConfig:
    size: int = 32
    lesions: int = 3
    lesion_radius: float = 2.5
    lesion_contrast: float = 0.12
    noise: float = 0.03
    blur: float = 0.6
    organs: int = 2


def _ellipsoid(grid, center, radii, rot):
    d = np.stack([g - c for g, c in zip(grid, center, strict=False)], axis=-1) @ rot
    return ((d / radii) ** 2).sum(-1) <= 1.0


def _rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def phantom(cfg: PhantomConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(image float32 (S, S, S), labels uint8 (S, S, S)) for one seed."""
    rng = np.random.default_rng(seed)
    s = cfg.size
    grid = np.meshgrid(*(np.arange(s, dtype=np.float32),) * 3, indexing="ij")
    c = (s - 1) / 2
    image = np.zeros((s,) * 3, np.float32)
    labels = np.zeros((s,) * 3, np.uint8)
    body = _ellipsoid(grid, (c, c, c), np.array([0.47, 0.45, 0.42]) * s, _rotation(rng))
    image[body] = 0.3
    organ_masks = []
    for k in range(cfg.organs):
        for _ in range(50):
            center = c + rng.uniform(-0.2, 0.2, 3) * s
            radii = rng.uniform(0.13, 0.22, 3) * s
            mask = _ellipsoid(grid, center, radii, _rotation(rng)) & body
            if not any((mask & m).any() for m in organ_masks):
                break
        organ_masks.append(mask)
        image[mask] = 0.55 if k % 2 == 0 else 0.75
        labels[mask] = 1
    placed = 0
    organ = labels == 1
    inner = ndimage.binary_erosion(organ, iterations=int(np.ceil(cfg.lesion_radius)) + 1)
    candidates = np.argwhere(inner)
    for _ in range(200):
        if placed == cfg.lesions or len(candidates) == 0:
            break
        center = candidates[rng.integers(len(candidates))]
        r = cfg.lesion_radius * rng.uniform(0.85, 1.15)
        mask = _ellipsoid(grid, center, np.full(3, r), np.eye(3)) & organ
        if (labels[mask] == 2).any() or mask.sum() < 2:
            continue
        grown = ndimage.binary_dilation(mask, iterations=2)
        if (labels[grown] == 2).any():
            continue
        image[mask] = image[tuple(center)] + cfg.lesion_contrast
        labels[mask] = 2
        placed += 1
    if cfg.blur > 0:
        image = ndimage.gaussian_filter(image, cfg.blur)
    image = image + rng.normal(0.0, cfg.noise, image.shape).astype(np.float32)
    return image.astype(np.float32), labels


def cohort(cfg: PhantomConfig, seeds) -> list[tuple[np.ndarray, np.ndarray]]:
    return [phantom(cfg, int(s)) for s in seeds]


def noisy_images(size: int, count: int, sigma: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(clean, noisy) stacks of 2D slices (count, size, size) from phantoms, for denoising."""
    rng = np.random.default_rng(seed)
    clean = []
    cfg = PhantomConfig(size=size, noise=0.0, lesion_radius=2.0)
    k = 0
    while len(clean) < count:
        image, _ = phantom(cfg, seed * 1000 + k)
        k += 1
        for z in rng.choice(np.arange(size // 4, 3 * size // 4), 4, replace=False):
            clean.append(image[z])
    clean = np.stack(clean[:count]).astype(np.float32)
    noisy = clean + rng.normal(0.0, sigma, clean.shape).astype(np.float32)
    return clean, noisy
