"""Request values from the command line, typed by the request's own message descriptor.

`--set key=value` means what the field is: a string field takes the text as is (`text=123` stays
"123"); `@path` reads a file (its text for a string field, its array for a Tensor field); a
`paperworks.v1.Tensor` field takes a `.npy` file or nested JSON lists; anything else is JSON,
falling back to the raw text. `.npy` is read and written here without numpy, so the light client
stays light (little-endian, C-order arrays of the dtypes `paperworks.v1.DType` names).
"""
from __future__ import annotations

import ast
import base64
import json
import struct
from pathlib import Path
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from paperworks.shared.errors import InvalidArgument

TENSOR = "paperworks.v1.Tensor"
# DType name -> (numpy descr, struct format)
DTYPES = {
    "D_TYPE_FLOAT32": ("<f4", "f"), "D_TYPE_FLOAT64": ("<f8", "d"), "D_TYPE_FLOAT16": ("<f2", "e"),
    "D_TYPE_INT64": ("<i8", "q"), "D_TYPE_INT32": ("<i4", "i"), "D_TYPE_INT8": ("|i1", "b"),
    "D_TYPE_UINT8": ("|u1", "B"), "D_TYPE_BOOL": ("|b1", "?"),
}
BY_DESCR = {descr: name for name, (descr, _) in DTYPES.items()}
MAGIC = b"\x93NUMPY"


def _flatten(value, shape: list[int], depth: int = 0) -> list:
    if isinstance(value, list):
        if len(shape) <= depth:
            shape.append(len(value))
        elif shape[depth] != len(value):
            raise ValueError(f"ragged nested list at depth {depth}: {shape[depth]} vs {len(value)}")
        return [x for item in value for x in _flatten(item, shape, depth + 1)]
    if len(shape) != depth:
        raise ValueError("ragged nested list: a number where a list was expected")
    return [value]


def tensor_from_lists(value: list, dtype: str = "D_TYPE_FLOAT32") -> dict:
    """Nested lists -> the Tensor message's JSON form."""
    shape: list[int] = []
    flat = _flatten(value, shape)
    fmt = DTYPES[dtype][1]
    data = struct.pack(f"<{len(flat)}{fmt}", *flat)
    return {"dtype": dtype, "shape": shape, "data": base64.b64encode(data).decode()}


def read_npy(data: bytes) -> dict:
    """A .npy file's bytes -> the Tensor message's JSON form."""
    if not data.startswith(MAGIC):
        raise ValueError("not a .npy file")
    major = data[6]
    size_bytes = 2 if major == 1 else 4
    header_len = int.from_bytes(data[8:8 + size_bytes], "little")
    start = 8 + size_bytes
    header = ast.literal_eval(data[start:start + header_len].decode("latin1"))
    if header.get("fortran_order"):
        raise ValueError("Fortran-order arrays are not supported: save with np.ascontiguousarray")
    descr = header["descr"].replace("=", "<")
    if descr not in BY_DESCR:
        raise ValueError(f"dtype {header['descr']} is not one of {', '.join(sorted(BY_DESCR))}")
    body = data[start + header_len:]
    return {"dtype": BY_DESCR[descr], "shape": list(header["shape"]), "data": base64.b64encode(body).decode()}


def write_npy(tensor: dict) -> bytes:
    """The Tensor message's JSON form -> a .npy file's bytes."""
    descr = DTYPES[tensor["dtype"]][0]
    shape = tuple(int(s) for s in tensor.get("shape", []))
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape!r}, }}"
    pad = 64 - (10 + len(header) + 1) % 64
    header_bytes = (header + " " * pad + "\n").encode("latin1")
    return MAGIC + bytes([1, 0]) + len(header_bytes).to_bytes(2, "little") + header_bytes + \
        base64.b64decode(tensor.get("data", ""))


def _file(path: str, field: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise InvalidArgument(field, f"cannot read {path}: {exc.strerror}") from None


def field_value(field: FieldDescriptor, raw: str) -> Any:
    """One `--set` value for `field`, in the JSON form json_format.ParseDict takes."""
    name = field.name
    if field.type == FieldDescriptor.TYPE_STRING and not field.is_repeated:
        if not raw.startswith("@"):
            return raw
        try:
            return _file(raw[1:], name).decode()
        except UnicodeDecodeError:
            raise InvalidArgument(name, f"{raw[1:]} is not UTF-8 text") from None
    if field.type == FieldDescriptor.TYPE_BYTES and not field.is_repeated:  # JSON form: base64
        data = _file(raw[1:], name) if raw.startswith("@") else raw.encode()
        return base64.b64encode(data).decode()
    if field.message_type is not None and field.message_type.full_name == TENSOR:
        try:
            if raw.startswith("@"):
                data = _file(raw[1:], name)
                return read_npy(data) if data.startswith(MAGIC) else _tensor_json(json.loads(data))
            return _tensor_json(json.loads(raw))
        except (ValueError, KeyError, struct.error) as exc:
            raise InvalidArgument(name, f"not a tensor (.npy, nested lists or Tensor JSON): {exc}") from None
    if raw.startswith("@"):
        try:
            raw = _file(raw[1:], name).decode()
        except UnicodeDecodeError:
            raise InvalidArgument(name, f"{raw[1:]} is not UTF-8 JSON") from None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _tensor_json(value):
    return tensor_from_lists(value) if isinstance(value, list) else value


def params_from_sets(descriptor: Descriptor | None, sets: list[str]) -> dict:
    """`key=value` strings -> request parameters, each typed by its field when the request
    message is known (unknown keys are left for the request's own check to name)."""
    params: dict[str, Any] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidArgument("--set", f"{item!r}: expected key=value")
        field = descriptor.fields_by_name.get(key) if descriptor is not None else None
        if field is not None:
            params[key] = field_value(field, value)
        else:
            try:
                params[key] = json.loads(value)
            except ValueError:
                params[key] = value
    return params


def nested(dotted: str, value) -> dict:
    """`a.b.c`, v -> {"a": {"b": {"c": v}}}: a nested request field named the way errors name it."""
    for key in reversed(dotted.split(".")):
        if not key:
            raise InvalidArgument("--input", f"{dotted!r} is not a field name")
        value = {key: value}
    return value


def merge_params(base: dict, extra: dict) -> dict:
    """`base` with `extra` laid over it, nested dictionaries merged key by key."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_params(merged[key], value)
        else:
            merged[key] = value
    return merged


INT64 = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
         FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64}


def message_json(message) -> dict:
    """A message as JSON-ready data with the names users type, int64 fields as numbers (proto3
    JSON writes them as strings: `"voxels": "761"`), and whole Struct numbers as integers."""
    from google.protobuf import json_format

    data = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return integral(_int64_numbers(message.DESCRIPTOR, data))


def _int64_numbers(descriptor: Descriptor, data: dict) -> dict:
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value, kind = data[field.name], field.message_type
        if field.type in INT64:
            data[field.name] = [int(v) for v in value] if field.is_repeated else int(value)
        elif kind is not None and kind.GetOptions().map_entry:
            inner = kind.fields_by_name["value"]
            for key, item in value.items():
                if inner.type in INT64:
                    value[key] = int(item)
                elif inner.message_type is not None and not _well_known(inner.message_type):
                    _int64_numbers(inner.message_type, item)
        elif kind is not None and not _well_known(kind):
            for item in value if field.is_repeated else [value]:
                _int64_numbers(kind, item)
    return data


def _well_known(descriptor: Descriptor) -> bool:
    return descriptor.full_name.startswith("google.protobuf.")


BYTES_SUFFIXES = {"nifti": ".nii.gz", "png": ".png", "npy": ".npy", "json": ".json", "jsonl": ".jsonl"}


def bytes_fields(descriptor: Descriptor, data: dict, path: str = ""):
    """(dotted path, suffix, the dict holding it, key) for every bytes field in `data`, the JSON form
    of a `descriptor` message (so `call --out` writes them as files)."""
    for field in descriptor.fields:
        if field.name not in data:
            continue
        where = f"{path}.{field.name}" if path else field.name
        if field.type == FieldDescriptor.TYPE_BYTES and not field.is_repeated:
            suffix = BYTES_SUFFIXES.get(field.name.rsplit("_", 1)[-1], ".bin")
            yield where, suffix, data, field.name
        elif field.message_type is not None and not field.message_type.GetOptions().map_entry \
                and not _well_known(field.message_type):
            items = data[field.name] if field.is_repeated else [data[field.name]]
            for i, item in enumerate(items):
                inner = f"{where}.{i}" if field.is_repeated else where
                yield from bytes_fields(field.message_type, item, inner)


def integral(value):
    """Numbers that are whole printed as integers (results travel as google.protobuf.Struct,
    whose numbers are all doubles: `"repeat": 2.0` was `2` when the job wrote it)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral(v) for v in value]
    return value
