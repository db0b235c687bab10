"""Inputs of the clip service: models (a train_clip job's `model.safetensors`, or a user's CLIP
folder in Hugging Face format, safetensors only, through `paperworks.shared.inputs.resolve_input`),
test image sets (the generated world, or an uploaded .npz), adapters (a train_adapter job), and
the small files the README examples start from:

    python -m paperworks.services.clip.data image ./circle.npy --shape circle --colour red
    python -m paperworks.services.clip.data test-set ./test.npz --n 64 --seed 3
"""

from __future__ import annotations

import argparse
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import torch
from paperworks.services.clip import tinyclip, world
from paperworks.services.clip.spec import ModelSourceParams, TestImagesParams
from paperworks.shared.checkpoints import safetensors_metadata
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import InputRefParams, archive_root, resolve_input
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

MODEL = "model.safetensors"
ADAPTER = "adapter.safetensors"
MAX_IMAGES, MAX_SIDE = 5000, 256


def model_from_job(ctx, job_id: str, field: str):
    """(ClipEncoder on ctx.device, info) from the tenant's SUCCEEDED train_clip job."""
    raw, _ = ctx.job_artifact("clip", job_id, MODEL, field, kind="train_clip")
    return model_from_bytes(raw, ctx.device, field)


def model_from_bytes(raw: bytes, device: str, field: str):
    try:
        return tinyclip.from_bytes(raw, device)
    except (ValueError, KeyError, RuntimeError, TypeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(field, f"model.safetensors is not a tiny CLIP checkpoint: {exc}") from None


def load_model(source: ModelSourceParams, ctx, field: str = "model"):
    """(ClipEncoder, info) for a job: a train_clip job's model or a user's checkpoint folder."""
    if source.model_job_id:
        return model_from_job(ctx, source.model_job_id, f"{field}.model_job_id")
    folder = checkpoint_folder(source.checkpoint, ctx, f"{field}.checkpoint")
    return load_checkpoint(folder, ctx.device, f"{field}.checkpoint"), {"source": "checkpoint"}


def checkpoint_folder(ref: InputRefParams, scope, field: str) -> Path:
    """The local folder of a user's CLIP checkpoint (an upload, artifact, s3:// object or server
    path, read for the tenant of `scope`; an archive unpacked, a folder on top of it skipped)."""
    folder = resolve_input(ref, scope, "clip", field, unpack=True)
    folder = archive_root(folder, lambda p: (p / "config.json").is_file())
    if not folder.is_dir():
        raise InvalidArgument(
            field, "must be a folder (or an archive of one) in Hugging Face CLIPModel format"
        )
    return folder


def checkpoint_identity(folder: Path) -> str:
    """What a loaded checkpoint is cached under: its folder (content-addressed for uploads,
    artifacts and s3 objects) and the size and time of each file (a server path edited in place)."""
    files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file())
    return f"{folder}:{files}"


def load_checkpoint(folder: Path, device: str, field: str):
    """A ClipEncoder from a user's Hugging Face CLIPModel folder; refusals name `field`."""
    try:
        return tinyclip.load_hf_folder(folder, device)
    except (ValueError, OSError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidArgument(field, f"not a loadable CLIP checkpoint: {exc}") from None


def read_image_set(data: bytes | Path, field: str) -> tuple[torch.Tensor, np.ndarray]:
    """An .npz with `images` (N, H, W, 3) uint8 or float in [0, 1] and `labels` (N,) int, no
    pickles -> ((N, 3, H, W) float32, labels)."""
    try:
        with np.load(io.BytesIO(data) if isinstance(data, bytes) else data, allow_pickle=False) as npz:
            if "images" not in npz.files or "labels" not in npz.files:
                raise ValueError("needs arrays 'images' and 'labels'")
            images, labels = npz["images"], npz["labels"]
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise InvalidArgument(field, f"not a usable image set .npz: {exc}") from None
    return check_images(images, field, MAX_IMAGES), check_labels(labels, len(images), field)


def check_images(images: np.ndarray, field: str, max_n: int) -> torch.Tensor:
    """(N, H, W, 3) uint8 or float [0, 1] -> (N, 3, H, W) float32; refusals name `field`."""
    if images.ndim != 4 or images.shape[-1] != 3:
        raise InvalidArgument(field, f"images must be (N, H, W, 3), not {list(images.shape)}")
    n, h, w, _ = images.shape
    if not 1 <= n <= max_n:
        raise InvalidArgument(field, f"between 1 and {max_n} images, not {n}")
    if not (8 <= h <= MAX_SIDE and 8 <= w <= MAX_SIDE):
        raise InvalidArgument(field, f"image sides must be 8..{MAX_SIDE}, not {h} x {w}")
    if images.dtype == np.uint8:
        out = images.astype(np.float32) / 255.0
    elif images.dtype in (np.float16, np.float32, np.float64):
        out = images.astype(np.float32)
        if not np.isfinite(out).all() or out.min() < 0 or out.max() > 1:
            raise InvalidArgument(field, "float pixels must be finite and in [0, 1]")
    else:
        raise InvalidArgument(field, f"images must be uint8 or float, not {images.dtype}")
    return torch.from_numpy(np.ascontiguousarray(out.transpose(0, 3, 1, 2)))


def check_labels(labels: np.ndarray, n: int, field: str) -> np.ndarray:
    if labels.shape != (n,) or labels.dtype.kind not in "iu":
        raise InvalidArgument(field, f"labels must be ({n},) integers")
    return labels.astype(np.int64)


def test_images(test: TestImagesParams, ctx, field: str = "test"):
    """(images (N,3,H,W), labels, classes, descriptors) of a robustness evaluation."""
    if test.world is not None:
        w = world.make_world(test.world.n, test.world.seed)
        classes = list(test.classes) or list(world.SHAPES)
        if classes != list(world.SHAPES):
            raise InvalidArgument(f"{field}.classes", "the world's classes are its shapes; leave empty")
        return w.images, w.labels, classes, list(test.descriptors) or list(world.TEXTURES)
    path = resolve_input(test.images, ctx, "clip", f"{field}.images")
    if not path.is_file():
        raise InvalidArgument(f"{field}.images", "must name a .npz file, not a folder")
    images, labels = read_image_set(path, f"{field}.images")
    if labels.min() < 0 or labels.max() >= len(test.classes):
        raise InvalidArgument(f"{field}.images", f"labels must be 0..{len(test.classes) - 1} (one per class)")
    return images, labels, list(test.classes), list(test.descriptors) or None


def adapter_to_bytes(meta: dict, state: dict[str, torch.Tensor], info: dict) -> bytes:
    return st_save(state, metadata={"meta": json.dumps(meta), "info": json.dumps(info)})


def adapter_from_bytes(raw: bytes, field: str):
    """(meta, state, info) of a train_adapter job's adapter.safetensors."""
    try:
        meta = safetensors_metadata(raw)
        return json.loads(meta["meta"]), st_load(raw), json.loads(meta.get("info", "{}"))
    except (ValueError, KeyError, json.JSONDecodeError) as exc:
        raise InvalidArgument(field, f"adapter.safetensors is unreadable: {exc}") from None


def _main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m paperworks.services.clip.data")
    sub = p.add_subparsers(dest="what", required=True)
    i = sub.add_parser("image", help="a (32, 32, 3) float32 .npy of one world item")
    i.add_argument("out", type=Path)
    i.add_argument("--shape", choices=world.SHAPES, default="circle")
    i.add_argument("--colour", choices=world.COLOURS, default="red")
    i.add_argument("--texture", choices=world.TEXTURES, default="solid")
    i.add_argument("--position", type=int, choices=range(4), default=0)
    i.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("test-set", help="an .npz test set (images uint8, labels = shape index)")
    t.add_argument("out", type=Path)
    t.add_argument("--n", type=int, default=64)
    t.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.what == "image":
        attrs = np.array(
            [
                [
                    world.SHAPES.index(a.shape),
                    world.COLOURS.index(a.colour),
                    world.TEXTURES.index(a.texture),
                    a.position,
                ]
            ]
        )
        np.save(a.out, world.render(attrs, a.seed)[0].permute(1, 2, 0).numpy())
    else:
        w = world.make_world(a.n, a.seed)
        images = (w.images.permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
        np.savez_compressed(a.out, images=images, labels=w.labels)
    print(a.out)


if __name__ == "__main__":
    _main()
