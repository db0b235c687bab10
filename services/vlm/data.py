"""Inputs of the vlm service: conflict sets (a build_conflict_set job's artifact, an upload, an
s3:// object or a server path, through `paperworks.shared.inputs.resolve_input`), the generated
worlds (the conflict grid and the shortcut VQA task live in the method subpackages), models named
by job id, Hugging Face VLM folders named by a `model` (`hf_vlm`), and the small files the README
examples start from:

    python -m paperworks.services.vlm.data conflict-set ./conflicts.npz --per-cell 8
    python -m paperworks.services.vlm.data image ./image.npy --color red --level 0
    python -m paperworks.services.vlm.data vqa-image ./vqa.npy --shape circle --color blue
    python -m paperworks.services.vlm.data spatial-frames ./frames.npy --frames 1 --seed 0
"""

from __future__ import annotations

import argparse
import io
import zipfile
from pathlib import Path

import numpy as np
from paperworks.services.vlm import checkpoint
from paperworks.services.vlm.following.conflicts import ConflictSet, build_grid, render_images
from paperworks.services.vlm.spec import MODEL_KINDS, AuditParams, VLMModelSpec
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import archive_root, require_folder_archive, resolve_input

MAX_ITEMS = 200_000


def conflict_set_bytes(cs: ConflictSet) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **cs.to_arrays())
    return buf.getvalue()


def read_conflict_set(data: bytes | Path, field: str) -> ConflictSet:
    """A conflict_set.npz (no pickled objects), checked array by array; refusals name `field`."""
    try:
        with np.load(io.BytesIO(data) if isinstance(data, bytes) else data, allow_pickle=False) as npz:
            if len(npz.files) > 16 or any(npz[f].size > MAX_ITEMS * 16 * 16 * 3 for f in npz.files):
                raise ValueError(f"more than {MAX_ITEMS} items")
            return ConflictSet.from_arrays({f: npz[f] for f in npz.files})
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise InvalidArgument(field, f"not a usable conflict_set.npz: {exc}") from None


def conflict_items(params: AuditParams, ctx) -> ConflictSet:
    if params.synthetic is not None:
        return build_grid(params.synthetic.seed, params.synthetic.per_cell)
    path = resolve_input(params.conflict_set, ctx, "vlm", "conflict_set")
    if not path.is_file():
        raise InvalidArgument("conflict_set", "must name a .npz file, not a folder")
    return read_conflict_set(path, "conflict_set")


def model_of(ctx, job_id: str, field: str = "model_job_id"):
    """(TinyVLM on the job's device, its info) from a tenant's finished model-storing vlm job."""
    job = ctx.finished_job("vlm", job_id, field)
    if job.kind not in MODEL_KINDS:
        raise InvalidArgument(field, f"job {job_id} is a {job.kind} job, not one of {', '.join(MODEL_KINDS)}")
    raw, _ = ctx.job_artifact("vlm", job_id, checkpoint.MODEL, field)
    return checkpoint.from_bytes(raw, ctx.device, field)


def hf_where(spec: VLMModelSpec, field: str = "model") -> str:
    """The request field a refusal about the folder names: `model.source.upload`, `model.source.path`."""
    key = next(k for k in ("upload", "artifact", "uri", "path") if getattr(spec.source, k))
    return f"{field}.source.{key}"


def hf_folder(spec: VLMModelSpec, scope, field: str = "model") -> tuple[Path, str, str]:
    """(the local folder, the field refusals name, how refusals show the folder): an upload,
    artifact or s3:// object unpacked (a folder on top of the archive skipped), a server path as is."""
    folder = resolve_input(spec.source, scope, "vlm", f"{field}.source", unpack=True)
    if not spec.source.path:
        folder = archive_root(folder, lambda f: (f / "config.json").exists())
    return folder, hf_where(spec, field), spec.source.path or f"the folder of {spec.label}"


def hf_identity(scope, folder: Path) -> str:
    """What a loaded HF VLM is cached under: the tenant, its folder (content-addressed for uploads,
    artifacts and s3 objects) and each file's size and time (a server path edited in place)."""
    files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file())
    return f"hf:{scope.tenant}:{folder}:{files}"


def hf_model_of(spec: VLMModelSpec, scope, device: str, field: str = "model"):
    """The HF VLM (`hf_vlm.HFVLM`, float32 on `device`) a `model` names, for the scope's tenant."""
    from paperworks.services.vlm import hf_vlm

    folder, where, shown = hf_folder(spec, scope, field)
    return hf_vlm.load(folder, device, where, shown)


def check_hf_model(spec: VLMModelSpec, scope, field: str = "model") -> None:
    """The submission-time check: a server path's folder is looked at (config, files; no weights);
    any other source must name an archive (a folder travels as one), whose content the worker checks."""
    from paperworks.services.vlm import hf_vlm

    if not spec.source.path:
        require_folder_archive(spec.source, scope, hf_where(spec, field))
        return
    folder, where, shown = hf_folder(spec, scope, field)
    hf_vlm.check_folder(folder, where, shown)


def _main(argv=None) -> None:
    from paperworks.services.vlm.cfpo.task import GLYPHS
    from paperworks.services.vlm.tinyvlm.vocab import COLORS, PALETTE, PATCH, SHAPES

    p = argparse.ArgumentParser(prog="python -m paperworks.services.vlm.data")
    sub = p.add_subparsers(dest="what", required=True)
    c = sub.add_parser("conflict-set", help="a conflict_set.npz over the 5 x 5 difficulty grid")
    c.add_argument("out", type=Path)
    c.add_argument("--per-cell", type=int, default=8)
    c.add_argument("--seed", type=int, default=0)
    i = sub.add_parser("image", help="a (16, 16, 3) float32 .npy of colour patches (modality_mix models)")
    i.add_argument("out", type=Path)
    i.add_argument("--color", choices=COLORS, default="red")
    i.add_argument("--level", type=int, choices=range(5), default=0)
    i.add_argument("--seed", type=int, default=0)
    v = sub.add_parser("vqa-image", help="a (16, 16, 3) .npy with one shape (shortcut_vqa models)")
    v.add_argument("out", type=Path)
    v.add_argument("--shape", choices=SHAPES, default="circle")
    v.add_argument("--color", choices=COLORS, default="blue")
    s = sub.add_parser("spatial-frames", help="(frames, 24, 24, 3) renderer frames (train_spatial models)")
    s.add_argument("out", type=Path)
    s.add_argument("--frames", type=int, choices=range(1, 5), default=1)
    s.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.what == "conflict-set":
        a.out.write_bytes(conflict_set_bytes(build_grid(a.seed, a.per_cell)))
    elif a.what == "spatial-frames":
        from paperworks.services.vlm.spatiolm import world

        scene = world.random_scene(np.random.default_rng(a.seed), a.frames)
        np.save(a.out, world.render_all(scene)["image"])
        print(", ".join(f"{world.COLORS[o.color]} {world.SHAPES[o.shape]}" for o in scene.objects))
    elif a.what == "image":
        rng = np.random.default_rng(a.seed)
        np.save(a.out, render_images(rng, np.array([COLORS.index(a.color)]), np.array([a.level]))[0])
    else:
        image = np.zeros((16, 16, 3), np.float32)
        image[4 : 4 + PATCH, 8 : 8 + PATCH] = GLYPHS[SHAPES.index(a.shape)][..., None] * np.asarray(
            PALETTE[COLORS.index(a.color)], np.float32
        )
        np.save(a.out, image)
    print(a.out)


if __name__ == "__main__":
    _main()
