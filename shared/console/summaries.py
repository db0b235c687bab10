"""What the job page shows of an artifact it does not display as a picture: NIfTI volumes and
tensors summarised (shape, dtype, value range) from their bytes, never executed (no pickle)."""
from __future__ import annotations

import gzip
import io
import json
import struct

IMAGE_TYPES = {"image/png": ".png", "image/gif": ".gif", "image/jpeg": ".jpg", "image/webp": ".webp"}
NIFTI = (".nii", ".nii.gz")
TENSOR = (".npy", ".npz", ".safetensors")
SUMMARY_MAX_BYTES = 64 * 1024 * 1024  # larger artifacts are listed, not opened


def image_type(name: str, media_type: str) -> str | None:
    """The picture type a browser may show inline (PNG, GIF, JPEG, WebP; never SVG), or None."""
    if media_type in IMAGE_TYPES:
        return media_type
    lower = name.lower()
    return next((t for t, ext in IMAGE_TYPES.items() if lower.endswith(ext)),
                "image/jpeg" if lower.endswith(".jpeg") else None)


def is_image(name: str, media_type: str) -> bool:
    return image_type(name, media_type) is not None


def summarisable(name: str) -> bool:
    return name.lower().endswith(NIFTI + TENSOR)


def _stats(array) -> str:
    import numpy as np

    text = f"shape {tuple(array.shape)}, {array.dtype}"
    if array.size and (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        values = array.astype(np.float64)
        text += (f", min {values.min():.4g}, max {values.max():.4g}, mean {values.mean():.4g}"
                 f", {np.count_nonzero(values)} non-zero")
    return text


def summarise(name: str, data: bytes) -> list[str]:
    """One line per array in the file; a line saying why when it cannot be read."""
    lower = name.lower()
    try:
        if lower.endswith(NIFTI):
            import nibabel as nib

            raw = gzip.decompress(data) if lower.endswith(".gz") else data
            image = nib.Nifti1Image.from_bytes(raw)
            zooms = ", ".join(f"{z:.3g}" for z in image.header.get_zooms())
            return [f"volume {_stats(image.get_fdata(dtype='float32'))}", f"voxel size ({zooms})"]
        if lower.endswith(".npy"):
            import numpy as np

            return [_stats(np.load(io.BytesIO(data), allow_pickle=False))]
        if lower.endswith(".npz"):
            import numpy as np

            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                return [f"{key}: {_stats(archive[key])}" for key in archive.files]
        if lower.endswith(".safetensors"):
            (length,) = struct.unpack("<Q", data[:8])
            header = json.loads(data[8:8 + length])
            return [f"{key}: shape {tuple(v['shape'])}, {v['dtype']}"
                    for key, v in header.items() if key != "__metadata__"]
    except Exception as exc:  # a summary is a convenience: say why it is missing, keep the page
        return [f"could not be read: {type(exc).__name__}: {exc}"]
    return []
