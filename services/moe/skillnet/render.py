"""Rendering of SkillNet simulator rollouts to PNG frames (PIL): the drawer (grey, its handle dark),
the bowl (ring), the lid (brown disc), the block (blue square), the knob (disc with its bar at theta)
and the gripper (open: ring; closed: filled), with the task and the phase written on top."""
from __future__ import annotations

import io

import numpy as np

from . import sim


def render_world(w: sim.World, index: int = 0, size: int = 160) -> bytes:
    """One PNG of environment `index` of a world batch."""
    from PIL import Image, ImageDraw
    img = Image.new("RGB", (size, size), (245, 245, 240))
    dr = ImageDraw.Draw(img)

    def px(p):
        return float(p[0]) * (size - 1), (1.0 - float(p[1])) * (size - 1)

    def disc(p, r, fill=None, outline=None, width=1):
        x, y = px(p)
        rr = r * size
        dr.ellipse([x - rr, y - rr, x + rr, y + rr], fill=fill, outline=outline, width=width)

    base = w.drawer_base[index]
    x0, y0 = px(base + np.array([-0.06, 0.04]))
    x1, y1 = px(base + np.array([sim.DRAWER_TRAVEL * w.opening[index], -0.04]))
    dr.rectangle([x0, y0, x1, y1], fill=(190, 190, 190), outline=(90, 90, 90))
    disc(w.handle[index], 0.015, fill=(60, 60, 60))
    disc(w.bowl[index], 0.06, outline=(40, 140, 60), width=2)
    disc(w.lid[index], 0.035, fill=(150, 100, 60))
    bx, by = px(w.block[index])
    half = 0.025 * size
    dr.rectangle([bx - half, by - half, bx + half, by + half], fill=(50, 90, 200))
    disc(w.knob[index], 0.03, fill=(200, 160, 40))
    kx, ky = px(w.knob[index])
    th = float(w.theta[index])
    bar = 0.035 * size
    dr.line([kx, ky, kx + bar * np.cos(th), ky - bar * np.sin(th)], fill=(20, 20, 20), width=2)
    closed = bool(w.closed[index])
    disc(w.grip[index], 0.02, fill=(200, 40, 40) if closed else None, outline=(200, 40, 40), width=2)
    task = sim.task_name(tuple(w.tasks[index]))
    dr.text((3, 2), task, fill=(0, 0, 0))
    dr.text((3, 12), "done" if w.done[index] else f"phase {int(w.phase[index]) + 1}/2", fill=(0, 0, 0))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def render_frames(frames: list[sim.World], index: int = 0, every: int = 1, size: int = 160) -> list[bytes]:
    """PNG bytes of environment `index` at every `every`-th recorded world."""
    if every < 1:
        raise ValueError("every must be >= 1")
    return [render_world(f, index, size) for f in frames[::every]]
