"""The light client's request values: typed by the request's fields, tensors from .npy files and
nested lists (read and written without numpy, checked against numpy here), results' whole numbers
printed as integers, and `describe`'s example a valid request."""
from __future__ import annotations

import base64
import io
import json
import os

import numpy as np
import pytest
from paperworks.ops.v1 import ops_pb2
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.registry import services
from paperworks.shared.rpc.describe import describe
from paperworks.shared.sdk import describe as text
from paperworks.shared.sdk.client import upload_source
from paperworks.shared.sdk.values import (
    bytes_fields,
    integral,
    message_json,
    params_from_sets,
    read_npy,
    tensor_from_lists,
    write_npy,
)
from paperworks.urban.v1 import urban_pb2
from paperworks.v1 import common_pb2, jobs_pb2


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4), np.array([[1, -2]], dtype=np.int64),
    np.array([True, False]), np.zeros((2, 0, 3), dtype=np.float64), np.array(7, dtype=np.uint8),
])
def test_npy_round_trips_through_the_tensor_form(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    tensor = read_npy(buffer.getvalue())
    assert tensor["shape"] == list(array.shape)
    assert base64.b64decode(tensor["data"]) == array.tobytes()
    again = np.load(io.BytesIO(write_npy(tensor)))
    assert again.dtype == array.dtype and np.array_equal(again, array)


def test_nested_lists_become_a_tensor_and_ragged_ones_are_refused():
    tensor = tensor_from_lists([[1, 2, 3], [4, 5, 6]])
    values = np.frombuffer(base64.b64decode(tensor["data"]), dtype=np.float32)
    assert tensor["shape"] == [2, 3] and values.tolist() == [1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="ragged"):
        tensor_from_lists([[1, 2], [3]])


def test_set_values_follow_the_field_types(tmp_path):
    (tmp_path / "v.npy").write_bytes(write_npy(tensor_from_lists([[0.5, 1.5]])))
    (tmp_path / "notes.txt").write_text("from a file")
    embed = urban_pb2.EmbedRequest.DESCRIPTOR
    params = params_from_sets(embed, ["pretrain_job_id=123", "use_modalities=[\"a\"]"])
    assert params == {"pretrain_job_id": "123", "use_modalities": ["a"]}  # a string stays a string
    value = urban_pb2.ModalityValue.DESCRIPTOR
    assert params_from_sets(value, [f"value=@{tmp_path / 'v.npy'}"])["value"]["shape"] == [1, 2]
    assert params_from_sets(value, ["value=[[1, 2]]"])["value"]["dtype"] == "D_TYPE_FLOAT32"
    assert params_from_sets(value, [f"name=@{tmp_path / 'notes.txt'}"])["name"] == "from a file"
    digest = ops_pb2.ComputeDigestRequest.DESCRIPTOR
    assert params_from_sets(digest, ["seed=7", "steps=2"]) == {"seed": 7, "steps": 2}
    with pytest.raises(InvalidArgument) as exc:
        params_from_sets(value, ["value=@/no/such/file.npy"])
    assert exc.value.field == "value"
    with pytest.raises(InvalidArgument):
        params_from_sets(digest, ["no-equals-sign"])


def test_binary_files_reach_bytes_fields_and_replies_print_int64_as_numbers(tmp_path):
    volume = tmp_path / "ct.nii.gz"
    volume.write_bytes(bytes(range(256)))  # not text
    upload = jobs_pb2.UploadArtifactRequest.DESCRIPTOR
    params = params_from_sets(upload, [f"data=@{volume}"])
    assert base64.b64decode(params["data"]) == bytes(range(256))
    with pytest.raises(InvalidArgument, match="not UTF-8"):
        params_from_sets(jobs_pb2.UploadHeader.DESCRIPTOR, [f"name=@{volume}"])
    event = jobs_pb2.JobEvent(seq=2**40, artifact=common_pb2.ArtifactRef(size_bytes=761, name="x"))
    data = message_json(event)
    assert data["seq"] == 2**40 and data["artifact"]["size_bytes"] == 761
    reply = jobs_pb2.UploadArtifactRequest(data=b"\x00\x01")
    [(path, suffix, holder, key)] = bytes_fields(reply.DESCRIPTOR, message_json(reply))
    assert (path, suffix, base64.b64decode(holder[key])) == ("data", ".bin", b"\x00\x01")


def test_a_folder_packs_to_the_same_bytes_every_time(tmp_path):
    """Uploads are content-addressed: the same folder uploaded twice is one upload."""
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "w.bin").write_bytes(b"\x01" * 100)
    with upload_source(folder) as (first, _):
        one = first.read_bytes()
    os.utime(folder / "config.json", (1, 1))
    with upload_source(folder) as (second, name):
        assert second.read_bytes() == one and name == "model.tar.gz"


def test_whole_numbers_print_as_integers():
    assert integral({"repeat": 2.0, "loss": 0.25, "nested": [1.0, {"n": 3.0}], "s": "2.0"}) == \
        {"repeat": 2, "loss": 0.25, "nested": [1, {"n": 3}], "s": "2.0"}
    assert json.dumps(integral(1e300)) == "1e+300"


@pytest.mark.parametrize("service, kind", [
    ("ops", "digest"), ("urban", "pretrain"), ("scenegraph", "train"), ("segmenter", "fit_minor_params"),
    ("segmenter", "train_denoiser"),
])
def test_describe_lists_every_field_and_its_example_validates(service, kind):
    spec = services()[service]
    info = next(k for k in describe(spec).kinds if k.name == kind)
    rendered = text.kind_text(service, info)
    for field in spec.kind(kind).params.model_fields:
        assert f"  {field}: " in rendered, field
    schema = json.loads(info.params_schema_json)
    spec.kind(kind).params.model_validate(text.example(schema, schema))
