"""The renderer world of the SpatioLM reproduction (arXiv 2608.01899, §4 data; research note 7b):
a numpy ray caster rendering scenes of 2-3 coloured boxes and spheres on a ground plane (y = 0)
from 1-4 frames with random intrinsics and camera poses. Every frame comes with its ground-truth
z-depth and the per-pixel camera ray map (ray origin and unit direction in the world frame, the
6-channel "ray map" Depth Anything 3 predicts and SpatioLM's head regresses).

Conventions: world y is up; a camera looks along its +z axis, x right, y down in the image
(OpenCV); depth is the hit point's camera-z; rays that miss everything see the sky at `FAR`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

IMAGE = 24  # pixels per side
COLORS = ("red", "green", "blue", "yellow")
PALETTE = np.array([(0.9, 0.1, 0.1), (0.1, 0.8, 0.2), (0.15, 0.25, 0.95), (0.95, 0.9, 0.1)])
SHAPES = ("box", "sphere")
FAR = 16.0
SKY = np.array([0.55, 0.7, 0.9])
LIGHT = np.array([0.4, 0.8, -0.45]) / np.linalg.norm([0.4, 0.8, -0.45])


@dataclass(frozen=True)
class Obj:
    color: int  # index into COLORS
    shape: int  # index into SHAPES
    center: np.ndarray  # (3,) world; resting on the ground: center[1] = size
    size: float  # sphere radius or box half-extent


@dataclass(frozen=True)
class Camera:
    position: np.ndarray  # (3,) world
    rotation: np.ndarray  # (3, 3) camera-to-world (columns: right, down, forward)
    focal: float  # pixels
    cx: float
    cy: float

    def rays(self, size: int = IMAGE) -> tuple[np.ndarray, np.ndarray]:
        """Per-pixel (origins, unit directions) in the world, each (size, size, 3)."""
        v, u = np.mgrid[0:size, 0:size].astype(np.float64) + 0.5
        d_cam = np.stack([(u - self.cx) / self.focal, (v - self.cy) / self.focal, np.ones_like(u)], -1)
        d = d_cam @ self.rotation.T
        d /= np.linalg.norm(d, axis=-1, keepdims=True)
        return np.broadcast_to(self.position, d.shape).copy(), d

    def project(self, point: np.ndarray) -> tuple[float, float, float]:
        """(u, v, z) of a world point in this camera."""
        p = self.rotation.T @ (point - self.position)
        return self.focal * p[0] / p[2] + self.cx, self.focal * p[1] / p[2] + self.cy, float(p[2])


@dataclass(frozen=True)
class Scene:
    objects: tuple[Obj, ...]
    cameras: tuple[Camera, ...]


def look_rotation(forward: np.ndarray) -> np.ndarray:
    f = forward / np.linalg.norm(forward)
    right = np.cross(f, np.array([0.0, 1.0, 0.0]))  # world y is up: right-handed x right, y down, z forward
    right /= np.linalg.norm(right)
    down = np.cross(f, right)
    return np.stack([right, down, f], axis=1)


def random_scene(rng: np.random.Generator, frames: int = 1, n_objects: int | None = None) -> Scene:
    """2-3 objects of distinct colours on the ground in front of the first camera, and `frames`
    cameras (random focal length, height, pitch and yaw; later frames move and turn)."""
    if not 1 <= frames <= 4:
        raise ValueError("frames must be 1..4")
    n = int(rng.integers(2, 4)) if n_objects is None else n_objects
    colors = rng.permutation(len(COLORS))[:n]
    objects: list[Obj] = []
    while len(objects) < n:
        size = float(rng.uniform(0.35, 0.8))
        c = np.array([rng.uniform(-2.2, 2.2), size, rng.uniform(3.0, 9.0)])
        if all(np.linalg.norm((c - o.center)[[0, 2]]) > size + o.size + 0.3 for o in objects):
            objects.append(Obj(int(colors[len(objects)]), int(rng.integers(0, 2)), c, size))
    cams = []
    target = np.array([0.0, 0.3, 6.0])
    for k in range(frames):
        pos = np.array(
            [
                rng.uniform(-0.6, 0.6) + 1.2 * k * rng.choice([-1, 1]),
                rng.uniform(1.2, 2.2),
                rng.uniform(-0.5, 0.5),
            ]
        )
        look = target + np.array([rng.uniform(-0.8, 0.8), 0.0, rng.uniform(-1.0, 1.0)]) - pos
        f = float(rng.uniform(0.9, 1.4) * IMAGE)
        cams.append(
            Camera(
                pos, look_rotation(look), f, IMAGE / 2 + rng.uniform(-1, 1), IMAGE / 2 + rng.uniform(-1, 1)
            )
        )
    return Scene(tuple(objects), tuple(cams))


def _hit_sphere(o, d, center, r):
    oc = o - center
    b = (oc * d).sum(-1)
    c = (oc * oc).sum(-1) - r * r
    disc = b * b - c
    t = -b - np.sqrt(np.maximum(disc, 0.0))
    t = np.where((disc >= 0) & (t > 1e-4), t, np.inf)
    p = o + t[..., None] * d
    return t, (p - center) / r


def _hit_box(o, d, center, h):
    lo, hi = center - h, center + h
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / d
        t1, t2 = (lo - o) * inv, (hi - o) * inv
    tmin, tmax = np.minimum(t1, t2), np.maximum(t1, t2)
    near, far = np.nanmax(tmin, -1), np.nanmin(tmax, -1)
    t = np.where((near <= far) & (near > 1e-4), near, np.inf)
    p = o + np.where(np.isfinite(t), t, 0.0)[..., None] * d
    q = (p - center) / h
    axis = np.abs(q).argmax(-1)
    normal = np.zeros_like(q)
    np.put_along_axis(normal, axis[..., None], np.sign(np.take_along_axis(q, axis[..., None], -1)), -1)
    return t, normal


def render(scene: Scene, k: int, size: int = IMAGE) -> dict[str, np.ndarray]:
    """Frame k: `image` (size, size, 3) in [0, 1], `depth` (size, size) camera-z clipped to FAR,
    `rays` (size, size, 6) origin + unit direction, `mask` (size, size) object index or -1."""
    cam = scene.cameras[k]
    o, d = cam.rays(size)
    t_best = np.full((size, size), np.inf)
    normal = np.zeros((size, size, 3))
    color = np.tile(SKY, (size, size, 1))
    mask = np.full((size, size), -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_ground = np.where(d[..., 1] < -1e-6, -o[..., 1] / d[..., 1], np.inf)
    p = o + np.where(np.isfinite(t_ground), t_ground, 0.0)[..., None] * d
    checker = ((np.floor(p[..., 0]) + np.floor(p[..., 2])) % 2)[..., None]
    ground = np.where(checker > 0, 0.62, 0.45) * np.ones(3)
    hit = t_ground < t_best
    t_best = np.where(hit, t_ground, t_best)
    color = np.where(hit[..., None], ground, color)
    normal = np.where(hit[..., None], np.array([0.0, 1.0, 0.0]), normal)
    for i, ob in enumerate(scene.objects):
        t, n = (_hit_sphere if ob.shape == 1 else _hit_box)(o, d, ob.center, ob.size)
        hit = t < t_best
        t_best = np.where(hit, t, t_best)
        color = np.where(hit[..., None], PALETTE[ob.color], color)
        normal = np.where(hit[..., None], n, normal)
        mask = np.where(hit, i, mask)
    lit = np.isfinite(t_best)
    shade = 0.45 + 0.55 * np.clip((normal * LIGHT).sum(-1), 0.0, 1.0)
    image = np.where(lit[..., None], color * shade[..., None], color)
    z_dir = (d * cam.rotation[:, 2]).sum(-1)
    depth = np.where(lit, np.minimum(t_best * z_dir, FAR), FAR)
    return {
        "image": np.clip(image, 0.0, 1.0).astype(np.float32),
        "depth": depth.astype(np.float32),
        "rays": np.concatenate([o, d], -1).astype(np.float32),
        "mask": mask,
    }


def render_all(scene: Scene, size: int = IMAGE) -> dict[str, np.ndarray]:
    """All frames stacked on a leading axis (F, ...)."""
    frames = [render(scene, k, size) for k in range(len(scene.cameras))]
    return {key: np.stack([f[key] for f in frames]) for key in frames[0]}
