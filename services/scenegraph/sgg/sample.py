"""One annotated image as the method code sees it: pixels, boxes, labels, relation triplets."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Sample:
    image: np.ndarray  # [H, W, 3] uint8
    boxes: np.ndarray  # [n, 4] float32, (x1, y1, x2, y2) in pixels
    labels: np.ndarray  # [n] int64 class indices
    relations: np.ndarray  # [m, 3] int64 (subject index, object index, predicate id >= 1)
    image_id: str = ""
    # Synthetic scenes only: every relation that holds, annotated or not (diagnostics).
    true_relations: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    # Optional per-object depth annotation: the draw order (higher is drawn over lower), or None.
    depth: np.ndarray | None = None

    @property
    def size(self) -> tuple[int, int]:
        return self.image.shape[0], self.image.shape[1]
