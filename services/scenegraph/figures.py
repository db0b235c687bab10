"""A scene graph drawn for a person: the image enlarged, numbered boxes, the top triplets listed."""
from __future__ import annotations

import io

import numpy as np
from paperworks.services.scenegraph.generator import SceneGraph
from PIL import Image, ImageDraw

COLOURS = [(230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180),
           (70, 240, 240), (240, 50, 230), (128, 128, 0)]
SIDE, LINE = 256, 12


def draw_graph(image: np.ndarray, graph: SceneGraph, max_triplets: int = 8) -> bytes:
    """PNG bytes: boxes as `index:label`, geometric triplets in grey, the others in black."""
    scale = SIDE / image.shape[1]
    shown = graph.triplets[:max_triplets]
    canvas = Image.new("RGB", (SIDE, round(image.shape[0] * scale) + LINE * (len(shown) + 1)), "white")
    canvas.paste(Image.fromarray(image).resize((SIDE, round(image.shape[0] * scale)), Image.NEAREST))
    pen = ImageDraw.Draw(canvas)
    for i, (box, label) in enumerate(zip(graph.boxes, graph.labels, strict=True)):
        colour = COLOURS[i % len(COLOURS)]
        pen.rectangle([float(v) * scale for v in box], outline=colour, width=2)
        pen.text((float(box[0]) * scale + 2, float(box[1]) * scale + 1), f"{i}:{label}", fill=colour)
    y = round(image.shape[0] * scale) + 2
    for t in shown:
        text = (f"{t.subject}:{graph.labels[t.subject]} {t.predicate} "
                f"{t.object}:{graph.labels[t.object]}  {t.score:.2f}")
        pen.text((4, y), text, fill=(110, 110, 110) if t.geometric else (0, 0, 0))
        y += LINE
    buf = io.BytesIO()
    canvas.save(buf, format="PNG")
    return buf.getvalue()
