"""A scene-graph dataset on disk: one JSON file plus the image files it names.

The format (`scenes.json`):

    {"classes": ["person", "horse", ...],
     "predicates": ["on", "riding", ...],            # without the background
     "geometric": ["on", ...],                       # the DS-Net split (optional)
     "depth_order": ["in front of", "behind"],       # optional: predicates naming which object covers
     "images": [
       {"id": "img-0", "file": "images/img-0.png",   # relative to the JSON file
        "objects": [{"box": [x1, y1, x2, y2], "label": "person",
                     "depth": 2}, ...],              # pixels; depth optional (draw order, all or none)
        "relations": [{"subject": 0, "predicate": "riding", "object": 1}, ...]}]}

Images are read with Pillow, converted to RGB and resized to the model's square
side (boxes scaled with them). Every problem is an InvalidArgument naming the
file and the JSON path (`images[3].objects[1].label`). `visual_genome.py`
converts the Visual Genome SGG layout into this format.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from paperworks.shared.errors import InvalidArgument
from PIL import Image
from pydantic import ValidationError

SCENES_FILE = "scenes.json"


def decode_image(data: bytes, field: str) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception as exc:  # Pillow raises many kinds for a bad file
        raise InvalidArgument(field, f"not a readable image ({exc.__class__.__name__})") from None
    return image.convert("RGB")


def resize(image: Image.Image, boxes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The image as uint8 [size, size, 3] and the boxes scaled with it."""
    w, h = image.size
    scale = np.array([size / w, size / h, size / w, size / h], np.float32)
    pixels = np.asarray(image.resize((size, size), Image.BILINEAR), dtype=np.uint8)
    return pixels, (boxes * scale).astype(np.float32).reshape(-1, 4)


def check_box(box, width: float, height: float, field: str) -> np.ndarray:
    b = np.asarray(box, dtype=np.float64)
    if b.shape != (4,) or not np.isfinite(b).all():
        raise InvalidArgument(field, "must be four finite numbers x1, y1, x2, y2")
    if b[0] < 0 or b[1] < 0 or b[2] > width or b[3] > height:
        raise InvalidArgument(field, f"box {b.tolist()} lies outside the {width:g}x{height:g} image")
    if b[2] <= b[0] or b[3] <= b[1]:
        raise InvalidArgument(field, f"box {b.tolist()} is empty (needs x2 > x1 and y2 > y1)")
    return b.astype(np.float32)


def load_json(path: Path, image_size: int, field: str = "dataset.path",
              images_under: tuple[Path, str] | None = None) -> tuple[Vocabulary, list[Sample]]:
    """`images_under`: (folder, what it is): image files must lie in it, symlinks followed (an
    uploaded dataset's own folder; a server dataset's data root), else the entry is refused, the
    same way whether the file exists or not."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidArgument(field, f"no file {path}") from None
    except (OSError, ValueError) as exc:
        raise InvalidArgument(field, f"{path} is not a JSON file ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("images"), list) or not doc["images"]:
        raise InvalidArgument(field, f"{path}: needs classes, predicates and a non-empty images list")
    try:
        vocab = Vocabulary(classes=doc.get("classes", []), predicates=doc.get("predicates", []),
                           geometric=doc.get("geometric", []), depth_order=doc.get("depth_order", []))
    except ValidationError as exc:
        raise InvalidArgument(field, f"{path}: {exc.errors()[0]['msg']}") from None
    return vocab, [_image(path.parent, entry, k, vocab, image_size, f"{field}: images[{k}]", images_under)
                   for k, entry in enumerate(doc["images"])]


def _image(root: Path, entry: dict, k: int, vocab: Vocabulary, size: int, where: str,
           images_under: tuple[Path, str] | None) -> Sample:
    try:
        file = _image_file(root, entry["file"], f"{where}.file", images_under)
        objects, relations = entry.get("objects", []), entry.get("relations", [])
        image = decode_image(file.read_bytes(), f"{where}.file")
        boxes, labels = [], []
        for i, obj in enumerate(objects):
            boxes.append(check_box(obj["box"], *image.size, f"{where}.objects[{i}].box"))
            if obj["label"] not in vocab.classes:
                raise InvalidArgument(f"{where}.objects[{i}].label", f"unknown class {obj['label']!r}")
            labels.append(vocab.class_index(obj["label"]))
        depth = _depth(objects, where)
        triplets = []
        for i, rel in enumerate(relations):
            s, o, p = rel["subject"], rel["object"], rel["predicate"]
            indices = isinstance(s, int) and isinstance(o, int)
            if not (indices and 0 <= s < len(objects) and 0 <= o < len(objects) and s != o):
                raise InvalidArgument(f"{where}.relations[{i}]", "subject and object must be two distinct "
                                                                 f"object indices below {len(objects)}")
            if p not in vocab.predicates:
                raise InvalidArgument(f"{where}.relations[{i}].predicate", f"unknown predicate {p!r}")
            triplets.append((s, o, vocab.predicate_index(p)))
    except (KeyError, TypeError) as exc:
        raise InvalidArgument(where, f"malformed entry ({exc})") from None
    except FileNotFoundError:
        raise InvalidArgument(f"{where}.file", f"no file {entry['file']}") from None
    except OSError as exc:
        raise InvalidArgument(f"{where}.file", f"cannot read {entry['file']}: {exc.strerror}") from None
    pixels, scaled = resize(image, np.array(boxes, np.float32), size)
    return Sample(pixels, scaled, np.array(labels, np.int64), np.array(triplets, np.int64).reshape(-1, 3),
                  image_id=str(entry.get("id", k)), depth=depth)


def _image_file(root: Path, name, field: str, images_under: tuple[Path, str] | None) -> Path:
    if not isinstance(name, str) or not name:
        raise InvalidArgument(field, "must name an image file, relative to the scenes.json")
    try:
        file = (root / name).resolve()
    except (OSError, ValueError, RuntimeError):
        raise InvalidArgument(field, f"{name[:200]!r} is not a usable file name") from None
    if images_under is not None and not file.is_relative_to(images_under[0]):
        raise InvalidArgument(field, f"must lie inside {images_under[1]}")
    return file


def _depth(objects: list[dict], where: str) -> np.ndarray | None:
    """The objects' optional depth annotation (draw order: higher covers lower): all or none."""
    given = ["depth" in obj for obj in objects]
    if not any(given):
        return None
    for i, obj in enumerate(objects):
        value = obj.get("depth")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidArgument(f"{where}.objects[{i}].depth", "give every object of the image a numeric "
                                                                 "depth, or none")
    return np.array([float(obj["depth"]) for obj in objects], np.float32)


def write_json(samples: list[Sample], vocab: Vocabulary, folder: Path) -> Path:
    """Writes samples as `folder/scenes.json` + `folder/images/<id>.png`."""
    (folder / "images").mkdir(parents=True, exist_ok=True)
    images = []
    for k, s in enumerate(samples):
        name = f"images/{s.image_id or k}.png"
        Image.fromarray(s.image).save(folder / name)
        images.append({
            "id": s.image_id or str(k), "file": name,
            "objects": [{"box": [round(float(v), 2) for v in b], "label": vocab.classes[int(c)]}
                        | ({} if s.depth is None else {"depth": float(s.depth[i])})
                        for i, (b, c) in enumerate(zip(s.boxes, s.labels, strict=True))],
            "relations": [{"subject": int(a), "predicate": vocab.predicate_name(int(p)), "object": int(b)}
                          for a, b, p in s.relations],
        })
    doc = {"classes": vocab.classes, "predicates": vocab.predicates, "geometric": vocab.geometric,
           "depth_order": vocab.depth_order, "images": images}
    path = folder / SCENES_FILE
    path.write_text(json.dumps(doc, indent=1))
    return path
