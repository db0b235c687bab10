"""Small example inputs for the scenegraph service, written locally (no network, no server):

    python -m paperworks.services.scenegraph.data scenes ./scenes --images 40 --seed 0
    python -m paperworks.services.scenegraph.data image ./scene.png --seed 8 --boxes ./boxes.json

`scenes` writes synthetic scenes as a dataset folder (`scenes.json` + `images/*.png`), the form
jobs read (`dataset.source`; `--overlap-pair-rate 0.7` gives the occlusion world, with depth
annotations for `depth_order`). `image` writes one synthetic scene as a PNG for the Predict RPC
and, with `--boxes`, its annotated boxes and labels as Predict's `boxes` (JSON, in the PNG's
pixels: `paperworks call scenegraph Predict --set boxes=@boxes.json` asks for PredCls).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from paperworks.services.scenegraph.data.scenes import SceneConfig, generate_scenes, synthetic_vocabulary
from paperworks.services.scenegraph.data.scenes_json import write_json
from PIL import Image

PROG = "python -m paperworks.services.scenegraph.data"


def write_scenes(folder: Path, images: int, seed: int, overlap_pair_rate: float = 0.0) -> Path:
    """`folder/scenes.json` + `folder/images/<id>.png` of `images` synthetic scenes."""
    samples = generate_scenes(images, seed, SceneConfig(overlap_pair_rate=overlap_pair_rate))
    return write_json(samples, synthetic_vocabulary(), folder)


def write_image(path: Path, seed: int, boxes: Path | None = None) -> list[dict]:
    """One synthetic scene as a PNG; its annotated boxes (Predict `boxes`) written to `boxes`."""
    scene = generate_scenes(1, seed)[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(scene.image).save(path)
    classes = synthetic_vocabulary().classes
    corners = scene.boxes.astype(float).round(2).tolist()
    given = [{"x1": x1, "y1": y1, "x2": x2, "y2": y2, "label": classes[int(c)]}
             for (x1, y1, x2, y2), c in zip(corners, scene.labels, strict=True)]
    if boxes is not None:
        boxes.write_text(json.dumps(given))
    return given


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("scenes", help="synthetic scenes as a dataset folder (scenes.json + images)")
    s.add_argument("folder", type=Path)
    s.add_argument("--images", type=int, default=40)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--overlap-pair-rate", type=float, default=0.0)
    i = commands.add_parser("image", help="write one synthetic scene as a PNG (and its boxes as JSON)")
    i.add_argument("path", type=Path)
    i.add_argument("--seed", type=int, default=0)
    i.add_argument("--boxes", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "scenes":
        path = write_scenes(args.folder, args.images, args.seed, args.overlap_pair_rate)
        print(f"{path}: {args.images} scenes (images in {args.folder / 'images'})")
    else:
        given = write_image(args.path, args.seed, args.boxes)
        boxes = f" (boxes in {args.boxes})" if args.boxes else ""
        print(f"{args.path}: one scene, {len(given)} objects{boxes}")


if __name__ == "__main__":
    main()
