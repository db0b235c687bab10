"""Converter from the Visual Genome SGG layout of Scene-Graph-Benchmark.pytorch to `scenes.json`.

The benchmark's VG150 split ships as (see its `data/datasets/visual_genome.py`):
- `VG-SGG-with-attri.h5`: per image `split` (0 train, 2 test), `img_to_first_box` /
  `img_to_last_box` and `img_to_first_rel` / `img_to_last_rel` (inclusive row ranges,
  -1 when none); per box `labels` [N, 1] (1-based) and `boxes_1024` [N, 4]
  (centre x, centre y, w, h) at BOX_SCALE = 1024 on the image's longer side; per
  relation `relationships` [R, 2] (global box rows) and `predicates` [R, 1] (1-based);
- `VG-SGG-dicts-with-attri.json`: `idx_to_label`, `idx_to_predicate` ({"1": name});
- `image_data.json`: one record per h5 row (`image_id`, `width`, `height`) once the
  benchmark's four corrupted images are dropped; files are `<image_id>.jpg`.

The predicate split uses `VG_GEOMETRIC`. Images with no boxes are skipped, as
in the benchmark's `load_graphs`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import h5py
import numpy as np
from paperworks.services.scenegraph.data.scenes_json import SCENES_FILE

BOX_SCALE = 1024
CORRUPTED = {1592, 1722, 4616, 4617}
SPLITS = {"train": 0, "test": 2}

# Visual Genome (the 50 predicates of the VG150 split) grouped the way DS-Net describes:
# spatial/positional words are geometric, the rest possessive or semantic.
VG_GEOMETRIC = [
    "above", "across", "against", "along", "at", "behind", "between", "in", "in front of",
    "laying on", "lying on", "mounted on", "near", "on", "on back of", "over", "under",
    "hanging from", "attached to", "covering", "covered in", "sitting on", "standing on",
]


def _names(table: dict[str, str]) -> list[str]:
    return [table[str(i)] for i in range(1, len(table) + 1)]


def convert_visual_genome(h5_path: Path, dicts_path: Path, image_data_path: Path, image_dir: Path,
                          out_dir: Path, split: str = "train", limit: int | None = None) -> Path:
    """Writes `out_dir/scenes.json` pointing at the images in `image_dir`; returns its path."""
    dicts = json.loads(Path(dicts_path).read_text())
    classes, predicates = _names(dicts["idx_to_label"]), _names(dicts["idx_to_predicate"])
    records = [r for r in json.loads(Path(image_data_path).read_text()) if r["image_id"] not in CORRUPTED]
    out_dir.mkdir(parents=True, exist_ok=True)
    images = []
    with h5py.File(h5_path, "r") as f:
        first_box, last_box = f["img_to_first_box"][:], f["img_to_last_box"][:]
        first_rel, last_rel = f["img_to_first_rel"][:], f["img_to_last_rel"][:]
        split_rows = f["split"][:]
        wanted = split_rows == SPLITS[split] if split in SPLITS else np.ones(len(split_rows), bool)
        keep = np.flatnonzero(wanted)
        labels, boxes = f["labels"][:, 0], f["boxes_1024"][:]
        rels, preds = f["relationships"][:], f["predicates"][:, 0]
        if len(records) != len(first_box):
            raise ValueError(f"{image_data_path} has {len(records)} images, the h5 file {len(first_box)}")
        for row in keep:
            if first_box[row] < 0:
                continue
            if limit is not None and len(images) >= limit:
                break
            rec = records[row]
            w, h = rec["width"], rec["height"]
            b = boxes[first_box[row]:last_box[row] + 1].astype(np.float64) / BOX_SCALE * max(w, h)
            xyxy = np.stack([b[:, 0] - b[:, 2] / 2, b[:, 1] - b[:, 3] / 2, b[:, 0] + b[:, 2] / 2,
                             b[:, 1] + b[:, 3] / 2], 1)
            xyxy = np.clip(xyxy, 0, [w, h, w, h])
            xyxy[:, 2:] = np.maximum(xyxy[:, 2:], xyxy[:, :2] + 1)
            xyxy = np.minimum(xyxy, [w, h, w, h])
            relations = []
            if first_rel[row] >= 0:
                for (s, o), p in zip(rels[first_rel[row]:last_rel[row] + 1],
                                     preds[first_rel[row]:last_rel[row] + 1], strict=True):
                    relations.append({"subject": int(s - first_box[row]), "predicate": predicates[p - 1],
                                      "object": int(o - first_box[row])})
            images.append({
                "id": str(rec["image_id"]),
                "file": os.path.relpath(Path(image_dir) / f"{rec['image_id']}.jpg", out_dir),
                "objects": [{"box": [round(float(v), 2) for v in bx], "label": classes[c - 1]}
                            for bx, c in zip(xyxy, labels[first_box[row]:last_box[row] + 1], strict=True)],
                "relations": relations,
            })
    doc = {"classes": classes, "predicates": predicates,
           "geometric": [p for p in predicates if p in VG_GEOMETRIC], "images": images}
    path = out_dir / SCENES_FILE
    path.write_text(json.dumps(doc))
    return path
