"""Tensors on the wire: `paperworks.v1.Tensor` ↔ numpy, with shape and size checked."""
from __future__ import annotations

import numpy as np
from paperworks.shared.errors import InvalidArgument
from paperworks.v1 import common_pb2

DTYPES = {
    common_pb2.D_TYPE_FLOAT32: np.float32,
    common_pb2.D_TYPE_FLOAT64: np.float64,
    common_pb2.D_TYPE_FLOAT16: np.float16,
    common_pb2.D_TYPE_INT64: np.int64,
    common_pb2.D_TYPE_INT32: np.int32,
    common_pb2.D_TYPE_INT8: np.int8,
    common_pb2.D_TYPE_UINT8: np.uint8,
    common_pb2.D_TYPE_BOOL: np.bool_,
}
NP_TO_PROTO = {np.dtype(v): k for k, v in DTYPES.items()}


def to_numpy(t: common_pb2.Tensor, field: str = "tensor") -> np.ndarray:
    if t.dtype not in DTYPES:
        raise InvalidArgument(f"{field}.dtype", f"unsupported dtype {t.dtype}")
    if any(d < 0 for d in t.shape):
        raise InvalidArgument(f"{field}.shape", "dimensions must be non-negative")
    dtype = np.dtype(DTYPES[t.dtype]).newbyteorder("<")
    count = int(np.prod(t.shape)) if len(t.shape) else 1
    if len(t.data) != count * dtype.itemsize:
        raise InvalidArgument(
            f"{field}.data",
            f"holds {len(t.data)} bytes; shape {list(t.shape)} of {dtype.name} needs "
            f"{count * dtype.itemsize}",
        )
    return np.frombuffer(t.data, dtype=dtype).reshape(tuple(t.shape)).astype(dtype.newbyteorder("="))


def from_numpy(a: np.ndarray) -> common_pb2.Tensor:
    a = np.ascontiguousarray(a)
    if a.dtype not in NP_TO_PROTO:
        raise ValueError(f"dtype {a.dtype} has no wire form")
    return common_pb2.Tensor(
        dtype=NP_TO_PROTO[a.dtype], shape=list(a.shape), data=a.astype(a.dtype.newbyteorder("<")).tobytes()
    )
