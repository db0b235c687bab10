"""The segmenter's inputs: volumes in and out, synthetic phantoms, and where a job's volumes come
from (an nnU-Net folder, generated phantoms, NIfTI files, another job's artifacts). Every file or
folder a request names is an InputRef resolved by `paperworks.shared.inputs.resolve_input`: the
tenant's upload (a folder arrives as a .tar/.tar.gz/.zip and is unpacked after its members are
checked), a finished job's artifact, an s3:// object, or a server path under the data root
(`PAPERWORKS_SEGMENTER_DATA_ROOT`, else `PAPERWORKS_DATA_ROOT`).

**Volumes in and out**: NIfTI bytes/files (nibabel), an nnU-Net-style dataset folder, checks. A
NIfTI volume is read into (array float32, spacing, affine). Every inconsistency raises
InvalidArgument naming the field and saying which check failed: an unreadable header, a
dimension count other than 2 or 3 (a trailing singleton 4th/5th axis is dropped), a shape
with a zero or a huge axis, a non-finite or non-positive spacing (pixdim), non-finite
voxels, and for an image/label pair a shape or spacing mismatch, or non-integer labels.

nnU-Net layout (`dataset.json` with `channel_names`, `labels`, `file_ending`;
`imagesTr/<case>_0000<ending>`, `labelsTr/<case><ending>`, optional `imagesTs/`): one input
channel is supported.

**Synthetic CT-like phantoms**: a body, organs, small low-contrast lesions, partial-volume blur,
noise. Labels: 0 background/body, 1 organ, 2 lesion (lesions sit inside organs). Intensities are in
[0, 1]-ish units: air 0, body 0.3, organs 0.55 / 0.75, lesions `lesion_contrast` above their
organ. The blur (Gaussian, sigma `blur` voxels) is applied before the noise, as partial-volume
averaging happens in the scanner and the noise after it.

**Example inputs** for the README's commands, written with no network:
`python -m paperworks.services.segmenter.data ./seg-example` (see `main`).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import nibabel as nib
import numpy as np
from paperworks.services.segmenter.spec import DatasetParams
from paperworks.shared.errors import FailedPrecondition, InvalidArgument
from paperworks.shared.inputs import InputRefParams, InputScope, archive_root, resolve_input
from paperworks.shared.job_refs import finished_job
from scipy import ndimage

if TYPE_CHECKING:
    from paperworks.shared.db.jobs import JobStore

MANIFEST = "denoise_manifest.json"

# ---------------------------------------------------------------- volumes: NIfTI, nnU-Net folders

MAX_AXIS = 1024
MAX_VOXELS = 512**3


@dataclass
class Volume:
    name: str
    data: np.ndarray  # float32 (image) or int (labels), 2-D or 3-D
    spacing: tuple[float, ...]
    affine: np.ndarray  # 4x4


def read_nifti(raw: bytes, field: str, name: str = "volume") -> Volume:
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InvalidArgument(field, f"header: gzip stream is corrupt ({exc})") from None
    _check_raw_spacing(raw, field)
    try:
        img = nib.Nifti1Image.from_bytes(raw) if len(raw) >= 348 else None
    except Exception as exc:  # nibabel raises a zoo of types for bad headers
        try:
            img = nib.Nifti2Image.from_bytes(raw)
        except Exception:
            raise InvalidArgument(field, f"header: not a readable NIfTI-1/2 file ({exc})") from None
    if img is None:
        raise InvalidArgument(field, f"header: {len(raw)} bytes is shorter than a NIfTI header (348)")
    shape = tuple(int(s) for s in img.header.get_data_shape())
    while len(shape) > 3 and shape[-1] == 1:
        shape = shape[:-1]
    if len(shape) not in (2, 3):
        raise InvalidArgument(field, f"shape: {len(shape)}-D {list(shape)}; a 2-D or 3-D volume is required")
    if min(shape) < 1 or max(shape) > MAX_AXIS or int(np.prod(shape)) > MAX_VOXELS:
        raise InvalidArgument(
            field, f"shape: {list(shape)} outside 1..{MAX_AXIS} per axis / {MAX_VOXELS} voxels"
        )
    zooms = tuple(float(z) for z in img.header.get_zooms()[: len(shape)])
    if not all(np.isfinite(z) and z > 0 for z in zooms):
        raise InvalidArgument(field, f"spacing: pixdim {list(zooms)} must be finite and positive")
    try:
        data = np.asanyarray(img.dataobj).reshape(shape)
    except Exception as exc:
        raise InvalidArgument(field, f"header: data does not match the header ({exc})") from None
    affine = img.affine if img.affine is not None else np.eye(4)
    if not np.isfinite(affine).all():
        raise InvalidArgument(field, "header: the affine (sform/qform) is not finite")
    return Volume(name, data, zooms, np.asarray(affine, np.float64))


def _check_raw_spacing(raw: bytes, field: str) -> None:
    """pixdim as stored (nibabel silently replaces zero spacings by 1 when it loads)."""
    if len(raw) < 348:
        return
    for order in "<>":
        size = int(np.frombuffer(raw[:4], f"{order}i4")[0])
        if size == 348:
            ndim = int(np.frombuffer(raw[40:42], f"{order}i2")[0])
            pixdim = np.frombuffer(raw[76:108], f"{order}f4")
        elif size == 540 and len(raw) >= 540:
            ndim = int(np.frombuffer(raw[16:24], f"{order}i8")[0])
            pixdim = np.frombuffer(raw[104:168], f"{order}f8")
        else:
            continue
        zooms = [float(z) for z in pixdim[1 : 1 + min(max(ndim, 0), 3)]]
        if not all(np.isfinite(z) and z > 0 for z in zooms):
            raise InvalidArgument(field, f"spacing: pixdim {zooms} must be finite and positive")
        return


def as_image(v: Volume, field: str) -> Volume:
    data = np.asarray(v.data, np.float32)
    if not np.isfinite(data).all():
        raise InvalidArgument(field, "data: the volume holds NaN or infinite voxels")
    return Volume(v.name, data, v.spacing, v.affine)


def as_labels(v: Volume, image: Volume, field: str) -> Volume:
    if v.data.shape != image.data.shape:
        raise InvalidArgument(field, f"shape: labels {list(v.data.shape)} != image {list(image.data.shape)}")
    if not np.allclose(v.spacing, image.spacing, rtol=1e-3, atol=1e-5):
        raise InvalidArgument(field, f"spacing: labels {list(v.spacing)} != image {list(image.spacing)}")
    data = np.asarray(v.data)
    if not np.isfinite(data).all() or (data != np.round(data)).any() or data.min() < 0 or data.max() > 255:
        raise InvalidArgument(field, "data: labels must be integers in 0..255")
    return Volume(v.name, data.astype(np.uint8), v.spacing, v.affine)


def write_nifti(data: np.ndarray, spacing=None, affine=None) -> bytes:
    """Gzipped NIfTI-1 bytes."""
    data = np.asarray(data)
    if affine is None:
        affine = np.diag([*(spacing or (1.0,) * data.ndim), *([1.0] * (4 - data.ndim))])
    img = nib.Nifti1Image(data, affine)
    if spacing is not None:
        img.header.set_zooms(tuple(spacing))
    return gzip.compress(img.to_bytes(), compresslevel=1)


def read_file(path: Path, field: str) -> Volume:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidArgument(field, f"cannot read {path}: {exc.strerror}") from None
    return read_nifti(raw, field, path.name.split(".")[0])


def load_dataset(root: Path, field: str = "dataset.path", split: str = "Tr", limit: int = 0):
    """[(image Volume, labels Volume | None)] and the dataset.json labels {value: name}."""
    meta_path = root / "dataset.json"
    try:
        meta = json.loads(meta_path.read_text())
    except OSError:
        raise InvalidArgument(
            field, f"{meta_path} is missing (an nnU-Net dataset folder is required)"
        ) from None
    except json.JSONDecodeError as exc:
        raise InvalidArgument(field, f"dataset.json is not JSON ({exc})") from None
    ending = meta.get("file_ending", ".nii.gz")
    labels = meta.get("labels", {})
    if not isinstance(labels, dict) or not labels:
        raise InvalidArgument(field, "dataset.json: `labels` must map names to values")
    names = {int(v): str(k) for k, v in labels.items() if int(v) != 0}
    if len(meta.get("channel_names", {"0": "image"})) != 1:
        raise InvalidArgument(field, "dataset.json: only one input channel is supported")
    images = sorted((root / f"images{split}").glob(f"*_0000{ending}"))
    if not images:
        raise InvalidArgument(field, f"no images{split}/*_0000{ending} files in {root}")
    if limit:
        images = images[:limit]
    out = []
    for path in images:
        case = path.name[: -len(f"_0000{ending}")]
        image = as_image(
            read_file(path, f"{field}: images{split}/{path.name}"), f"{field}: images{split}/{path.name}"
        )
        image.name = case
        lab_path = root / f"labels{split}" / f"{case}{ending}"
        lab = None
        if lab_path.exists():
            f = f"{field}: labels{split}/{lab_path.name}"
            lab = as_labels(read_file(lab_path, f), image, f)
        elif split == "Tr":
            raise InvalidArgument(field, f"labels{split}/{case}{ending} is missing")
        out.append((image, lab))
    return out, names


def write_dataset(root: Path, cases, names: dict[int, str], spacing=(1.0, 1.0, 1.0)) -> Path:
    """Writes an nnU-Net-style folder from [(image, labels)] arrays."""
    (root / "imagesTr").mkdir(parents=True, exist_ok=True)
    (root / "labelsTr").mkdir(exist_ok=True)
    for k, (image, labels) in enumerate(cases):
        (root / "imagesTr" / f"case_{k:03d}_0000.nii.gz").write_bytes(
            write_nifti(image.astype(np.float32), spacing)
        )
        (root / "labelsTr" / f"case_{k:03d}.nii.gz").write_bytes(
            write_nifti(labels.astype(np.uint8), spacing)
        )
    meta = {
        "channel_names": {"0": "CT"},
        "labels": {"background": 0, **{v: k for k, v in names.items()}},
        "numTraining": len(cases),
        "file_ending": ".nii.gz",
    }
    (root / "dataset.json").write_text(json.dumps(meta, indent=1))
    return root


# ---------------------------------------------------------------- synthetic phantoms

STRUCTURES = {1: "organ", 2: "lesion"}


@dataclass(frozen=True)
class PhantomConfig:
    size: int = 32
    lesions: int = 3
    lesion_radius: float = 2.5
    lesion_contrast: float = 0.12
    noise: float = 0.03
    blur: float = 0.6
    organs: int = 2


def _ellipsoid(grid, center, radii, rot):
    d = np.stack([g - c for g, c in zip(grid, center, strict=False)], axis=-1) @ rot
    return ((d / radii) ** 2).sum(-1) <= 1.0


def _rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def phantom(cfg: PhantomConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(image float32 (S, S, S), labels uint8 (S, S, S)) for one seed."""
    rng = np.random.default_rng(seed)
    s = cfg.size
    grid = np.meshgrid(*(np.arange(s, dtype=np.float32),) * 3, indexing="ij")
    c = (s - 1) / 2
    image = np.zeros((s,) * 3, np.float32)
    labels = np.zeros((s,) * 3, np.uint8)
    body = _ellipsoid(grid, (c, c, c), np.array([0.47, 0.45, 0.42]) * s, _rotation(rng))
    image[body] = 0.3
    organ_masks = []
    for k in range(cfg.organs):
        for _ in range(50):
            center = c + rng.uniform(-0.2, 0.2, 3) * s
            radii = rng.uniform(0.13, 0.22, 3) * s
            mask = _ellipsoid(grid, center, radii, _rotation(rng)) & body
            if not any((mask & m).any() for m in organ_masks):
                break
        organ_masks.append(mask)
        image[mask] = 0.55 if k % 2 == 0 else 0.75
        labels[mask] = 1
    placed = 0
    organ = labels == 1
    inner = ndimage.binary_erosion(organ, iterations=int(np.ceil(cfg.lesion_radius)) + 1)
    candidates = np.argwhere(inner)
    for _ in range(200):
        if placed == cfg.lesions or len(candidates) == 0:
            break
        center = candidates[rng.integers(len(candidates))]
        r = cfg.lesion_radius * rng.uniform(0.85, 1.15)
        mask = _ellipsoid(grid, center, np.full(3, r), np.eye(3)) & organ
        if (labels[mask] == 2).any() or mask.sum() < 2:
            continue
        grown = ndimage.binary_dilation(mask, iterations=2)
        if (labels[grown] == 2).any():
            continue
        image[mask] = image[tuple(center)] + cfg.lesion_contrast
        labels[mask] = 2
        placed += 1
    if cfg.blur > 0:
        image = ndimage.gaussian_filter(image, cfg.blur)
    image = image + rng.normal(0.0, cfg.noise, image.shape).astype(np.float32)
    return image.astype(np.float32), labels


def cohort(cfg: PhantomConfig, seeds) -> list[tuple[np.ndarray, np.ndarray]]:
    return [phantom(cfg, int(s)) for s in seeds]


def noisy_images(size: int, count: int, sigma: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(clean, noisy) stacks of 2D slices (count, size, size) from phantoms, for denoising."""
    rng = np.random.default_rng(seed)
    clean = []
    cfg = PhantomConfig(size=size, noise=0.0, lesion_radius=2.0)
    k = 0
    while len(clean) < count:
        image, _ = phantom(cfg, seed * 1000 + k)
        k += 1
        for z in rng.choice(np.arange(size // 4, 3 * size // 4), 4, replace=False):
            clean.append(image[z])
    clean = np.stack(clean[:count]).astype(np.float32)
    noisy = clean + rng.normal(0.0, sigma, clean.shape).astype(np.float32)
    return clean, noisy


# ---------------------------------------------------------------- a job's volumes


def load_cases(
    params: DatasetParams, scope: InputScope, field: str = "dataset"
) -> tuple[list[tuple[Volume, Volume | None]], dict]:
    """[(image, labels | None)] and {label value: name} of a dataset: phantoms, or the nnU-Net
    folder its `source` names (`scope`: the job's context, whose tenant's inputs it may read)."""
    if params.synthetic is not None:
        s = params.synthetic
        cfg = PhantomConfig(
            size=s.size,
            lesions=s.lesions,
            lesion_radius=s.lesion_radius,
            lesion_contrast=s.lesion_contrast,
            noise=s.noise,
            blur=s.blur,
        )
        cases = []
        for k in range(params.limit or s.count):
            image, labels = phantom(cfg, s.seed * 100_003 + k)
            sp, aff = (1.0, 1.0, 1.0), np.eye(4)
            cases.append((Volume(f"case_{k:03d}", image, sp, aff), Volume(f"case_{k:03d}", labels, sp, aff)))
        return cases, dict(STRUCTURES)
    # `path` is the shorthand the user typed: refusals name it; else they name the source
    where = field if params.path else f"{field}.source"
    folder = resolve_input(params.source, scope, "segmenter", where, unpack=True)
    named = f"{where}.path" if params.source.path else where
    return load_dataset(dataset_root(folder, named), named, limit=params.limit)


def dataset_root(folder: Path, field: str) -> Path:
    """The nnU-Net folder: `folder` itself, or the one folder an archive of it wraps
    (`tar czf ds.tar.gz Dataset001/` holds `Dataset001/dataset.json`)."""
    if not folder.is_dir():
        raise InvalidArgument(field, "an nnU-Net dataset folder is required, not a file: upload the "
                              "folder (sent as .tar.gz) or a .tar/.tar.gz/.zip of it")
    return archive_root(folder, lambda f: (f / "dataset.json").exists())


def _case_name(path: Path) -> str:
    return path.name.removesuffix(".gz").removesuffix(".nii").removesuffix("_0000")


def load_images(refs: list[InputRefParams], scope: InputScope, field: str = "images") -> list[Volume]:
    """One volume per reference (each a NIfTI file); refusals name `images[k]`."""
    out = []
    for k, ref in enumerate(refs):
        where = f"{field}[{k}]"
        p = resolve_input(ref, scope, "segmenter", where)
        v = as_image(read_file(p, where), where)
        v.name = _case_name(p)
        out.append(v)
    return out


def load_volumes(ref: InputRefParams, scope: InputScope, field: str = "image") -> list[Volume]:
    """The volume a NIfTI file holds, or one per .nii/.nii.gz file of a folder sent as an archive
    (sorted by path; cases named after their files)."""
    p = resolve_input(ref, scope, "segmenter", field, unpack=True)
    if not p.is_dir():
        v = as_image(read_file(p, field), field)
        v.name = _case_name(p)
        return [v]
    files = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith((".nii", ".nii.gz")))
    if not files:
        raise InvalidArgument(field, "the folder holds no .nii or .nii.gz file")
    names = [_case_name(f) for f in files]
    if len(set(names)) != len(names):
        raise InvalidArgument(field, "two files give one case name (their names without _0000.nii.gz)")
    out = []
    for f, name in zip(files, names, strict=True):
        where = f"{field}: {f.relative_to(p).as_posix()}"
        v = as_image(read_file(f, where), where)
        v.name = name
        out.append(v)
    return out


def denoise_outputs(store: JobStore, tenant: str, job_id: str, field: str) -> dict[str, str]:
    """{artifact name: sha256} of this tenant's denoise job: SUCCEEDED, or still RUNNING once its
    manifest (written after every volume) is attached, which is when it submits its chained
    segment job. Checked at submit and again by the segment job."""
    job = finished_job(store, tenant, "segmenter", job_id, field, kind="denoise",
                       states=("SUCCEEDED", "RUNNING"))
    found = {a.name: a.sha256 for a in store.artifacts(job_id)}
    if MANIFEST not in found:
        raise FailedPrecondition(f"job {job_id} is {job.state} and has not stored its outputs", field)
    return found


def denoised_volumes(scope: InputScope, job_id: str, field: str) -> list[Volume]:
    """The volumes a denoise job wrote (`denoise_outputs`), in its manifest's order."""
    found = denoise_outputs(scope.store, scope.tenant, job_id, field)
    names = json.loads(scope.artifacts.path(found[MANIFEST]).read_bytes())["volumes"]
    out = []
    for name in names:
        raw = scope.artifacts.path(found[f"{name}_denoised.nii.gz"]).read_bytes()
        out.append(as_image(read_nifti(raw, field, name), field))
    return out


# ---------------------------------------------------------------- example inputs


def main(argv: list[str] | None = None) -> None:
    """Writes small example inputs for the README's commands: `dataset/` (an nnU-Net folder of
    labelled phantoms), `ct.nii.gz` (one more phantom to segment) and `ct.npy` (the same volume as
    an array, for the sync RPCs' tensor input)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m paperworks.services.segmenter.data",
                                     description=main.__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--cases", type=int, default=4, help="labelled volumes (default 4)")
    parser.add_argument("--size", type=int, default=24, help="edge length in voxels (default 24)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    cfg = PhantomConfig(size=args.size, lesions=2, lesion_radius=2.0)
    seeds = [args.seed * 1000 + k for k in range(args.cases + 1)]
    *cases, (image, _) = cohort(cfg, seeds)
    write_dataset(args.out / "dataset", cases, STRUCTURES)
    (args.out / "ct.nii.gz").write_bytes(write_nifti(image, (1.0, 1.0, 1.0)))
    np.save(args.out / "ct.npy", image)
    print(f"wrote {args.out}/dataset ({args.cases} cases), {args.out}/ct.nii.gz, {args.out}/ct.npy")


if __name__ == "__main__":
    main()
