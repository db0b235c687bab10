"""Volumes in and out: NIfTI bytes/files (nibabel), an nnU-Net-style dataset folder, checks.

A NIfTI volume is read into (array float32, spacing, affine). Every inconsistency raises
InvalidArgument naming the field and saying which check failed: an unreadable header, a
dimension count other than 2 or 3 (a trailing singleton 4th/5th axis is dropped), a shape
with a zero or a huge axis, a non-finite or non-positive spacing (pixdim), non-finite
voxels, and for an image/label pair a shape or spacing mismatch, or non-integer labels.

nnU-Net layout (`dataset.json` with `channel_names`, `labels`, `file_ending`;
`imagesTr/<case>_0000<ending>`, `labelsTr/<case><ending>`, optional `imagesTs/`): one input
channel is supported.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import nibabel as nib
import numpy as np
from paperworks.shared.errors import InvalidArgument

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
