"""Every service reads its checkpoints' metadata with one reader: a real safetensors file's map, and
for anything else a ValueError saying what is wrong (which each service turns into a field error)."""
from __future__ import annotations

import json

import pytest
import torch
from paperworks.shared.checkpoints import safetensors_metadata
from safetensors.torch import save


def test_the_metadata_of_a_safetensors_file_and_none_for_one_without():
    assert safetensors_metadata(save({"w": torch.ones(2)}, metadata={"format": "x/1"})) == {
        "format": "x/1"}
    assert safetensors_metadata(save({"w": torch.ones(2)})) == {}


def header_then(header: bytes, rest: bytes = b"") -> bytes:
    return len(header).to_bytes(8, "little") + header + rest


@pytest.mark.parametrize("data, why", [
    (b"", "no header"),
    (b"\x01\x02", "no header"),
    ((10**12).to_bytes(8, "little") + b"{}", "a header of"),  # a length past the end
    ((0).to_bytes(8, "little") + b"{}", "a header of 0"),
    (header_then(b"\xff\xfe{"), "not JSON"),
    (header_then(b"{not json"), "not JSON"),
    (header_then(b"[1, 2]"), "not a JSON object"),
    (header_then(json.dumps({"__metadata__": ["a"]}).encode()), "not a map"),
    (b"PK\x03\x04" + b"\x00" * 60, "a header of"),  # a zip uploaded by mistake
])
def test_anything_else_is_a_value_error_that_says_what_is_wrong(data, why):
    with pytest.raises(ValueError, match=why):
        safetensors_metadata(data)
