"""Synthetic scenes for scene-graph generation, rendered in code.

Objects are shapes with a texture and a random colour (the class is shape +
texture + size, never colour). Relations come in two kinds:

- geometric predicates follow from box rules alone (`geometric_predicate`):
  in, on, above, under, in front of / behind (which box is drawn over the other:
  the boxes alone cannot tell, the pixels can), near;
- non-geometric predicates are planted interactions with a visual cue drawn
  between the two objects: "riding" (legs over the mount), "holding" (an arm),
  "wearing" (a brim), "pulling" (a rope). Every interaction is planted in a
  layout that also satisfies a geometric predicate (riding -> on, holding -> near,
  wearing -> under, pulling -> near), and with probability `decoy_rate` the same
  layout is drawn without the cue, so layout alone cannot decide "riding" vs "on".

Labels are sparse and ambiguous the way Visual Genome's are: each relation that
holds is annotated with probability `annotation_rate` (one direction per pair),
and an interaction is labelled with its non-geometric predicate only with
probability `informative_label_rate`, otherwise with the geometric one it also
satisfies. Interactions are planted at the low `*_rate`s, so their predicates
form the long tail; every relation that holds is kept in `true_relations`, and
each object's draw order in `Sample.depth`.

`overlap_pair_rate` > 0 gives claim 3's occlusion world: that share of scenes
also plants two side-by-side objects, one partly covering the other, every
object of the scene in its own colour, so "in front of" / "behind" (which only
the pixels decide) become frequent on pairs a detector finds. At 0 (the
default) the scenes are exactly those of the first world.
"""
from __future__ import annotations

import numpy as np
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from pydantic import BaseModel, Field

# The synthetic world's vocabulary (how each is drawn and labelled: below).
SYNTHETIC_CLASSES = ["person", "horse", "wheel", "hat", "table", "cup", "dog", "ball"]
SYNTHETIC_GEOMETRIC = ["near", "above", "under", "on", "in front of", "behind", "in"]
SYNTHETIC_NON_GEOMETRIC = ["riding", "holding", "wearing", "pulling"]

# class -> (shape, texture, (min_w, max_w), (min_h, max_h)); circles use w for both sides.
CLASS_LOOKS = {
    "person": ("rect", "solid", (7, 10), (14, 19)),
    "horse": ("ellipse", "hstripes", (18, 24), (10, 13)),
    "wheel": ("circle", "ring", (12, 15), (12, 15)),
    "hat": ("triangle", "solid", (8, 11), (5, 7)),
    "table": ("rect", "checker", (18, 26), (6, 8)),
    "cup": ("rect", "vstripes", (6, 8), (6, 8)),
    "dog": ("ellipse", "dots", (11, 14), (7, 9)),
    "ball": ("circle", "solid", (6, 8), (6, 8)),
}
PALETTE = np.array(
    [[220, 60, 50], [60, 170, 70], [60, 90, 220], [230, 190, 40], [170, 70, 200],
     [40, 190, 200], [240, 130, 40], [230, 110, 170]], dtype=np.float32)
CUE_COLOUR = np.array([25, 25, 25], dtype=np.float32)

# interaction -> (subject classes, object classes, geometric predicate its layout satisfies)
INTERACTIONS = {
    "riding": (("person",), ("horse", "wheel"), "on"),
    "holding": (("person",), ("cup", "ball"), "near"),
    "wearing": (("person",), ("hat",), "under"),
    "pulling": (("horse", "dog"), ("wheel",), "near"),
}
CONTAINED, CONTAINERS = ("ball", "cup"), ("horse", "wheel")
TOUCH = 2.5  # px: boxes this close vertically count as touching ("on")
NEAR = 6.0  # px: gap under which unrelated boxes are "near"


class SceneConfig(BaseModel):
    image_size: int = Field(default=64, ge=48, le=256)
    min_objects: int = Field(default=3, ge=2, le=12)
    max_objects: int = Field(default=6, ge=2, le=12)
    riding_rate: float = Field(default=0.40, ge=0, le=1)
    holding_rate: float = Field(default=0.35, ge=0, le=1)
    wearing_rate: float = Field(default=0.30, ge=0, le=1)
    pulling_rate: float = Field(default=0.25, ge=0, le=1)
    decoy_rate: float = Field(default=0.4, ge=0, le=1, description="planted layout drawn without its cue")
    informative_label_rate: float = Field(default=0.5, ge=0, le=1)
    annotation_rate: float = Field(default=0.7, gt=0, le=1)
    overlap_rate: float = Field(default=0.35, ge=0, le=1, description="a filler may overlap others")
    contain_rate: float = Field(default=0.3, ge=0, le=1, description="a small object placed in a big one")
    overlap_pair_rate: float = Field(default=0.0, ge=0, le=1,
                                     description="two objects side by side, one partly covering the other")

    def rate(self, interaction: str) -> float:
        return getattr(self, f"{interaction}_rate")


# ---------------------------------------------------------------- box rules


def geometric_predicate(s: np.ndarray, o: np.ndarray, s_over_o: bool) -> str | None:
    """The geometric predicate of (subject box s, object box o), or None. `s_over_o`: s is drawn
    on top of o (the only thing boxes cannot tell: in front of vs behind)."""
    sw, sh, ow, oh = s[2] - s[0], s[3] - s[1], o[2] - o[0], o[3] - o[1]
    ix = min(s[2], o[2]) - max(s[0], o[0])
    iy = min(s[3], o[3]) - max(s[1], o[1])
    inter = max(ix, 0) * max(iy, 0)
    if inter > 0.85 * sw * sh and sw * sh < 0.7 * ow * oh:
        return "in"
    if ix > 0.3 * min(sw, ow):
        if s[3] <= o[1] + TOUCH:
            return "on" if s[3] >= o[1] - TOUCH else "above"
        if s[1] >= o[3] - TOUCH:
            return "under"
    if inter > 0.1 * min(sw * sh, ow * oh):
        return "in front of" if s_over_o else "behind"
    gap = max(max(s[0], o[0]) - min(s[2], o[2]), max(s[1], o[1]) - min(s[3], o[3]))
    return "near" if gap < NEAR else None


# ---------------------------------------------------------------- layout


class _Layout:
    def __init__(self, rng: np.random.Generator, size: int):
        self.rng, self.size = rng, size
        self.classes: list[str] = []
        self.boxes: list[np.ndarray] = []
        self.z: list[float] = []
        self.planted: set[int] = set()
        self.cues: list[tuple[str, int, int]] = []  # (interaction, subject, object) drawn with a cue
        self.contrasting: list[tuple[int, int]] = []  # pairs drawn in different colours

    def extent(self, cls: str) -> tuple[float, float]:
        _, _, (w0, w1), (h0, h1) = CLASS_LOOKS[cls]
        w = self.rng.uniform(w0, w1)
        return (w, w) if CLASS_LOOKS[cls][0] == "circle" else (w, self.rng.uniform(h0, h1))

    def inside(self, b: np.ndarray) -> bool:
        return b[0] >= 1 and b[1] >= 1 and b[2] <= self.size - 1 and b[3] <= self.size - 1

    def clashes(self, b: np.ndarray, allow_overlap: bool) -> bool:
        for i, other in enumerate(self.boxes):
            pad = 1.5 if (i in self.planted or not allow_overlap) else -1e9
            if (min(b[2], other[2]) - max(b[0], other[0]) > -pad
                    and min(b[3], other[3]) - max(b[1], other[1]) > -pad):
                return True
        return False

    def add(self, cls: str, box: np.ndarray, z: float, planted: bool) -> int:
        self.classes.append(cls)
        self.boxes.append(box.astype(np.float32))
        self.z.append(z)
        if planted:
            self.planted.add(len(self.boxes) - 1)
        return len(self.boxes) - 1

    def plant(self, interaction: str, with_cue: bool) -> bool:
        subjects, objects, _ = INTERACTIONS[interaction]
        rng = self.rng
        for _ in range(20):
            s_cls, o_cls = rng.choice(subjects), rng.choice(objects)
            (sw, sh), (ow, oh) = self.extent(s_cls), self.extent(o_cls)
            s_box, o_box = _interaction_boxes(interaction, rng, self.size, sw, sh, ow, oh)
            if not (self.inside(s_box) and self.inside(o_box)):
                continue
            if self.clashes(s_box, False) or self.clashes(o_box, False):
                continue
            # the subject is drawn over its object (a rider over the mount, a hat over the head)
            o = self.add(o_cls, o_box, 0.0, True)
            s = self.add(s_cls, s_box, 0.5, True)
            if with_cue:
                self.cues.append((interaction, s, o))
            return True
        return False

    def plant_contained(self) -> None:
        """A ball or cup drawn inside a horse or wheel: the geometric "in"."""
        for _ in range(20):
            inner, outer = self.rng.choice(CONTAINED), self.rng.choice(CONTAINERS)
            (iw, ih), (ow, oh) = self.extent(inner), self.extent(outer)
            if iw > ow - 3 or ih > oh - 3:
                continue
            ox, oy = self.rng.uniform(1, self.size - 1 - ow), self.rng.uniform(1, self.size - 1 - oh)
            ix = self.rng.uniform(ox + 1.5, ox + ow - iw - 1.5)
            iy = self.rng.uniform(oy + 1.5, oy + oh - ih - 1.5)
            o_box, i_box = np.array([ox, oy, ox + ow, oy + oh]), np.array([ix, iy, ix + iw, iy + ih])
            if self.inside(o_box) and not self.clashes(o_box, False):
                self.add(outer, o_box, 0.0, True)
                self.add(inner, i_box, 0.5, True)
                return

    def plant_overlapping(self) -> None:
        """Two objects side by side at one height, one partly covering the other (a coin flip decides
        which): "in front of" / "behind", which only the pixels tell, on a pair a detector finds."""
        rng = self.rng
        classes = [c for c in CLASS_LOOKS if c != "hat"]
        for _ in range(20):
            a_cls, b_cls = (str(c) for c in rng.choice(classes, 2))
            (aw, ah), (bw, bh) = self.extent(a_cls), self.extent(b_cls)
            overlap = rng.uniform(0.25, 0.45) * min(aw, bw)
            x = rng.uniform(1, self.size - 1 - (aw + bw - overlap))
            cy = rng.uniform(1 + max(ah, bh) / 2, self.size - 1 - max(ah, bh) / 2)
            a_box = np.array([x, cy - ah / 2, x + aw, cy + ah / 2])
            b_box = np.array([x + aw - overlap, cy - bh / 2, x + aw - overlap + bw, cy + bh / 2])
            a_top = rng.random() < 0.5  # the classes are drawn in random order, so a is left or right
            if not (self.inside(a_box) and self.inside(b_box)) or self.clashes(a_box, False) \
                    or self.clashes(b_box, False):
                continue
            if geometric_predicate(a_box, b_box, a_top) not in ("in front of", "behind"):
                continue
            a = self.add(a_cls, a_box, 0.5 if a_top else 0.0, True)
            b = self.add(b_cls, b_box, 0.0 if a_top else 0.5, True)
            self.contrasting.append((a, b))
            return

    def fill(self, classes: list[str], overlap_rate: float) -> None:
        for _ in range(40):
            cls = str(self.rng.choice(classes))
            w, h = self.extent(cls)
            x, y = self.rng.uniform(1, self.size - 1 - w), self.rng.uniform(1, self.size - 1 - h)
            box = np.array([x, y, x + w, y + h])
            if not self.clashes(box, self.rng.random() < overlap_rate):
                self.add(cls, box, float(self.rng.uniform(-1, 1)), False)
                return


def _interaction_boxes(interaction: str, rng, size: int, sw, sh, ow, oh):
    """Subject and object boxes in the layout the interaction is planted in."""
    ox, oy = rng.uniform(1, size - 1 - ow), rng.uniform(1, size - 1 - oh)
    o = np.array([ox, oy, ox + ow, oy + oh])
    if interaction == "riding":  # subject stands on the object's top edge
        cx = o[0] + ow / 2 + rng.uniform(-0.15, 0.15) * ow
        bottom = o[1] + rng.uniform(-1.5, 1.5)
        s = np.array([cx - sw / 2, bottom - sh, cx + sw / 2, bottom])
    elif interaction == "wearing":  # the object (hat) sits on the subject's top edge
        cx = o[0] + ow / 2 + rng.uniform(-1.0, 1.0)
        top = o[3] + rng.uniform(-0.5, 1.5)
        s = np.array([cx - sw / 2, top, cx + sw / 2, top + sh])
    else:  # holding / pulling: side by side at a small gap
        gap = rng.uniform(1.0, 4.0) if interaction == "holding" else rng.uniform(3.0, 5.5)
        if interaction == "holding":  # the object is held at the subject's mid-height
            cy = o[1] + oh / 2
            top = cy - sh * rng.uniform(0.35, 0.6)
        else:
            top = o[1] + oh / 2 - sh / 2 + rng.uniform(-1.5, 1.5)
        if rng.random() < 0.5:
            s = np.array([o[0] - gap - sw, top, o[0] - gap, top + sh])
        else:
            s = np.array([o[2] + gap, top, o[2] + gap + sw, top + sh])
    return s, o


# ---------------------------------------------------------------- drawing


def _shape_mask(shape: str, box: np.ndarray, yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
    x1, y1, x2, y2 = box
    cx, cy, rx, ry = (x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) / 2, (y2 - y1) / 2
    px, py = xx + 0.5, yy + 0.5
    if shape == "rect":
        return (px >= x1) & (px <= x2) & (py >= y1) & (py <= y2)
    if shape in ("ellipse", "circle"):
        return ((px - cx) / rx) ** 2 + ((py - cy) / ry) ** 2 <= 1.0
    # triangle with its apex at the top centre
    t = (py - y1) / max(y2 - y1, 1e-6)
    return (t >= 0) & (t <= 1) & (np.abs(px - cx) <= rx * t)


def _texture(texture: str, box: np.ndarray, yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
    if texture == "hstripes":
        return np.where((yy // 2) % 2 == 0, 1.0, 0.55)
    if texture == "vstripes":
        return np.where((xx // 2) % 2 == 0, 1.0, 0.55)
    if texture == "checker":
        return np.where(((xx // 3) + (yy // 3)) % 2 == 0, 1.0, 0.6)
    if texture == "dots":
        return np.where((xx % 3 == 1) & (yy % 3 == 1), 0.45, 1.0)
    if texture == "ring":
        cx, cy, r = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2, (box[2] - box[0]) / 2
        d = np.hypot(xx + 0.5 - cx, yy + 0.5 - cy)
        return np.where(d >= r - 2.0, 0.45, np.where(d <= r * 0.35, 0.7, 1.0))
    return np.ones_like(xx, dtype=np.float64)


def _line(img: np.ndarray, p0, p1, width: float, dashed: bool = False) -> None:
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    n = max(2, int(np.hypot(*(p1 - p0)) * 4))
    h, w = img.shape[:2]
    for k, t in enumerate(np.linspace(0, 1, n)):
        if dashed and (k // 6) % 2 == 1:
            continue
        x, y = p0 + t * (p1 - p0)
        x0, y0 = int(np.floor(x - width / 2 + 0.5)), int(np.floor(y - width / 2 + 0.5))
        x1 = max(x0 + 1, int(np.floor(x + width / 2 + 0.5)))
        y1 = max(y0 + 1, int(np.floor(y + width / 2 + 0.5)))
        img[max(y0, 0):min(y1, h), max(x0, 0):min(x1, w)] = CUE_COLOUR


def _draw_cue(img: np.ndarray, interaction: str, s: np.ndarray, o: np.ndarray) -> None:
    if interaction == "riding":  # two legs hanging over the mount
        for x in (s[0] + 1.0, s[2] - 1.5):
            _line(img, (x, s[3] - 3), (x + (-1.5 if x < (s[0] + s[2]) / 2 else 1.5), s[3] + 5), 1.5)
    elif interaction == "wearing":  # a brim wider than the hat, at the head line
        _line(img, (o[0] - 2.5, o[3] - 0.5), (o[2] + 2.5, o[3] - 0.5), 1.5)
    elif interaction == "holding":  # an arm from the subject's side into the object
        y = (o[1] + o[3]) / 2
        x_from, x_to = (s[2] - 2, o[0] + 2) if s[2] <= o[0] + 1 else (s[0] + 2, o[2] - 2)
        _line(img, (x_from, y), (x_to, y), 2.0)
    else:  # pulling: a dashed rope from the subject into the object
        y0, y1 = (s[1] + s[3]) / 2, (o[1] + o[3]) / 2
        x_from, x_to = (s[2] - 3, o[0] + 3) if s[2] <= o[0] + 1 else (s[0] + 3, o[2] - 3)
        _line(img, (x_from, y0), (x_to, y1), 1.0, dashed=False)
        _line(img, (x_from, y0 - 2), (x_to, y1 - 2), 1.0, dashed=True)


def render(layout: _Layout, colours: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    size = layout.size
    img = np.full((size, size, 3), rng.uniform(185, 215), dtype=np.float32)
    img += rng.normal(0, 6, size=(size, size, 1)).astype(np.float32)
    yy, xx = np.mgrid[0:size, 0:size]
    for i in np.argsort(layout.z, kind="stable"):
        shape, texture, _, _ = CLASS_LOOKS[layout.classes[i]]
        mask = _shape_mask(shape, layout.boxes[i], yy, xx)
        shade = _texture(texture, layout.boxes[i], yy, xx)
        img[mask] = (colours[i][None, :] * shade[mask][:, None]).astype(np.float32)
    for interaction, s, o in layout.cues:
        _draw_cue(img, interaction, layout.boxes[s], layout.boxes[o])
    return np.clip(img, 0, 255).astype(np.uint8)


# ---------------------------------------------------------------- scenes


def generate_scene(rng: np.random.Generator, cfg: SceneConfig, vocab: Vocabulary, image_id: str) -> Sample:
    layout = _Layout(rng, cfg.image_size)
    n_objects = int(rng.integers(cfg.min_objects, max(cfg.min_objects, cfg.max_objects) + 1))
    if cfg.overlap_pair_rate and len(layout.boxes) + 2 <= n_objects and rng.random() < cfg.overlap_pair_rate:
        layout.plant_overlapping()
    for interaction in rng.permutation(list(INTERACTIONS)):
        if len(layout.boxes) + 2 <= n_objects and rng.random() < cfg.rate(interaction):
            layout.plant(str(interaction), with_cue=rng.random() >= cfg.decoy_rate)
    if len(layout.boxes) + 2 <= n_objects and rng.random() < cfg.contain_rate:
        layout.plant_contained()
    while len(layout.boxes) < n_objects:
        before = len(layout.boxes)
        layout.fill(vocab.classes, cfg.overlap_rate)
        if len(layout.boxes) == before:
            break
    if layout.contrasting:  # every object in its own colour
        colours = list(PALETTE[rng.permutation(len(PALETTE))[:len(layout.boxes)]])
    else:
        colours = [PALETTE[int(rng.integers(len(PALETTE)))] for _ in layout.boxes]
    image = render(layout, colours, rng)
    true_rel, labelled = _relations(layout, cfg, vocab, rng)
    return Sample(
        image=image,
        boxes=np.stack(layout.boxes).astype(np.float32),
        labels=np.array([vocab.class_index(c) for c in layout.classes], dtype=np.int64),
        relations=np.array(labelled, dtype=np.int64).reshape(-1, 3),
        image_id=image_id,
        true_relations=np.array(true_rel, dtype=np.int64).reshape(-1, 3),
        depth=np.array(layout.z, dtype=np.float32),
    )


def _relations(layout: _Layout, cfg: SceneConfig, vocab: Vocabulary, rng):
    cued = {(s, o): name for name, s, o in layout.cues}
    n = len(layout.boxes)
    true_rel, labelled = [], []
    for i in range(n):
        for j in range(i + 1, n):
            options = []  # (subject, object, geometric predicate, interaction or None)
            for s, o in ((i, j), (j, i)):
                geo = geometric_predicate(layout.boxes[s], layout.boxes[o], layout.z[s] > layout.z[o])
                if geo is not None:
                    options.append((s, o, geo, cued.get((s, o))))
                    true_rel.append((s, o, vocab.predicate_index(geo)))
                if (s, o) in cued:
                    true_rel.append((s, o, vocab.predicate_index(cued[(s, o)])))
            if not options or rng.random() >= cfg.annotation_rate:
                continue
            interacting = [opt for opt in options if opt[3] is not None]
            if interacting:
                s, o, geo, name = interacting[0]
                pred = name if rng.random() < cfg.informative_label_rate else geo
            else:
                s, o, geo, _ = options[int(rng.integers(len(options)))]
                pred = geo
            labelled.append((s, o, vocab.predicate_index(pred)))
    return true_rel, labelled


def synthetic_vocabulary() -> Vocabulary:
    return Vocabulary(
        classes=list(SYNTHETIC_CLASSES),
        predicates=SYNTHETIC_GEOMETRIC + SYNTHETIC_NON_GEOMETRIC,
        geometric=list(SYNTHETIC_GEOMETRIC),
        depth_order=["in front of", "behind"],
    )


def generate_scenes(n: int, seed: int, cfg: SceneConfig | None = None,
                    vocab: Vocabulary | None = None) -> list[Sample]:
    cfg = cfg or SceneConfig()
    vocab = vocab or synthetic_vocabulary()
    rng = np.random.default_rng(seed)
    return [generate_scene(rng, cfg, vocab, f"synthetic-{seed}-{k}") for k in range(n)]
