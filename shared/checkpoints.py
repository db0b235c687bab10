"""The JSON metadata of a safetensors checkpoint, read from its header without loading a tensor.

Every service saves its models as safetensors with their configuration as string metadata
(nothing is unpickled), and reads that metadata first to know what to build. A file is laid out
as an 8-byte little-endian header length, the header (a JSON object whose `__metadata__` maps
strings to strings), then the tensors' bytes; `safetensors` itself parses the header only to
load tensors, hence this reader. Anything else (an upload of the wrong file, a truncated one) is
a ValueError that says what is wrong, which each service turns into its own field error.
"""
from __future__ import annotations

import json

HEADER_LENGTH_BYTES = 8


def safetensors_metadata(data: bytes) -> dict[str, str]:
    """The `__metadata__` map of a safetensors file's bytes ({} when it has none)."""
    if len(data) < HEADER_LENGTH_BYTES:
        raise ValueError(f"not a safetensors file: {len(data)} bytes, no header")
    size = int.from_bytes(data[:HEADER_LENGTH_BYTES], "little")
    if size <= 0 or size > len(data) - HEADER_LENGTH_BYTES:
        raise ValueError(f"not a safetensors file: a header of {size} bytes in "
                         f"{len(data)} bytes")
    try:
        header = json.loads(data[HEADER_LENGTH_BYTES:HEADER_LENGTH_BYTES + size])
    except ValueError as exc:  # JSON and UTF-8 decoding errors alike
        raise ValueError(f"not a safetensors file: its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ValueError("not a safetensors file: its header is not a JSON object")
    metadata = header.get("__metadata__")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise ValueError("not a safetensors file: its __metadata__ is not a map")
    return metadata
