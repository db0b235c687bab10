"""Real Hugging Face VLMs through the vlm service on the embedded stack (gRPC, Kafka, Celery): a tiny
LLaVA folder uploaded from elsewhere as an archive answers Answer (the same probabilities the
folder gives when loaded here) and is audited for modality following by a worker; a Qwen2-VL folder
answers from a server path; and the refusals name their fields: an architecture the service does
not load, model and model_job_id together, an option the tokenizer does not know, and
steer_preference on an audit of a Hugging Face model."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import grpc
import numpy as np
import pytest
from paperworks.services.vlm import hf_vlm
from paperworks.services.vlm.spec import BOTH_MODELS
from paperworks.shared.rpc.tensors import from_numpy
from paperworks.shared.sdk.errors import field_violations
from paperworks.v1 import common_pb2
from paperworks.vlm.v1 import vlm_pb2
from support import finished, service_fixtures
from unit.backends.hf_models import save_llama
from unit.vlm.hf_vlm_models import save_llava, save_qwen2_vl

stack, client = service_fixtures("vlm")
QUESTION = "reports : red red blue ; what color is the object ?"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf-vlms")
    return {
        "llava": save_llava(root / "llava"),
        "qwen2_vl": save_qwen2_vl(root / "qwen2_vl"),
        "llama": save_llama(root / "llama"),
    }


@pytest.fixture(scope="module")
def uploaded(client, folders, tmp_path_factory) -> dict:
    """{"upload": sha256} of the LLaVA folder archived with the folder on top, the archive deleted."""
    here = tmp_path_factory.mktemp("client-elsewhere")
    with tarfile.open(here / "llava.tar.gz", "w:gz") as tar:
        tar.add(folders["llava"], arcname="llava")
    reply = client.upload(here / "llava.tar.gz", "vlm")
    shutil.rmtree(here)
    return {"upload": reply.artifact.sha256}


def _answer(client, model: common_pb2.ModelSpec, image, text: str, options=(), job_id: str = ""):
    request = vlm_pb2.AnswerRequest(model=model, text=text, options=list(options), model_job_id=job_id)
    if image is not None:
        request.image.CopyFrom(from_numpy(image))
    return client.stub("vlm").Answer(request, metadata=client.metadata, timeout=120)


def _refused(call) -> list[tuple[str, str]]:
    with pytest.raises(grpc.RpcError) as exc:
        call()
    assert exc.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    return field_violations(exc.value)


def test_an_uploaded_llava_answers_and_is_audited(client, folders, uploaded, tmp_path):
    spec = common_pb2.ModelSpec(kind="hf", source=common_pb2.InputRef(upload=uploaded["upload"]))
    image = np.random.default_rng(0).random((16, 16, 3)).astype(np.float32)
    reply = _answer(client, spec, image, QUESTION, ["red", "blue", "green"])
    assert list(reply.options) == ["red", "blue", "green"] and reply.answer in reply.options
    here = hf_vlm.load(folders["llava"], "cpu", "model", "llava")
    expected = here.probabilities([image], [QUESTION], ["red", "blue", "green"])[0]
    np.testing.assert_allclose(reply.probabilities, expected, atol=1e-5)
    text_only = _answer(client, spec, None, QUESTION)  # no image: the text alone, the colour words
    assert len(text_only.options) == 6 and abs(sum(text_only.probabilities) - 1.0) < 1e-9
    assert not np.allclose(text_only.probabilities[:1], reply.probabilities[:1], atol=1e-6)

    model = {"kind": "hf", "source": uploaded}
    job = client.submit(
        "vlm", "audit_modality_following", model=model, synthetic={"seed": 1, "per_cell": 4}, bootstrap=10
    )
    done = finished(client, job)
    assert done.result["items"] == 100 and set(done.result["balance_points"]) == {"entropy", "one_minus_max"}
    assert 0.0 <= done.result["tfr"] + done.result["vfr"] <= 1.0
    assert {a.name for a in done.artifacts} == {
        "audit.json",
        "records.npz",
        "following_curve.png",
        "layer_trajectories.png",
    }
    pulled = {p.name: p for p in client.pull_artifacts(done.id, tmp_path)}
    report = json.loads(pulled["audit.json"].read_text())
    assert report["model_job_id"] is None and report["model"].startswith("hf:upload:")
    assert report["layers"] == 2

    fields = _refused(lambda: client.submit("vlm", "steer_preference", audit_job_id=done.id))
    assert fields[0][0] == "audit_job_id" and "Hugging Face VLM" in fields[0][1]


def test_a_qwen2_vl_answers_from_a_server_path(client, folders):
    spec = common_pb2.ModelSpec(kind="hf", path=str(folders["qwen2_vl"]))
    image = np.full((20, 12, 3), 200, np.uint8)  # any (H, W, 3): the image processor resizes it
    reply = _answer(client, spec, image, "which shape ?", ["circle", "square"])
    assert list(reply.options) == ["circle", "square"] and abs(sum(reply.probabilities) - 1.0) < 1e-9


def test_refusals_name_the_field(client, folders, uploaded):
    model = {"kind": "hf", "path": str(folders["llama"])}
    fields = _refused(
        lambda: client.submit("vlm", "audit_modality_following", model=model, synthetic={"seed": 1})
    )
    assert fields[0][0] == "model.source.path" and "LlavaForConditionalGeneration" in fields[0][1]
    assert "Qwen2VLForConditionalGeneration" in fields[0][1] and "'llama'" in fields[0][1]
    both = {"kind": "hf", "source": uploaded}
    fields = _refused(
        lambda: client.submit(
            "vlm", "audit_modality_following", model=both, model_job_id="vlm-x", synthetic={"seed": 1}
        )
    )
    assert fields[0] == ("model", BOTH_MODELS)
    spec = common_pb2.ModelSpec(kind="hf", path=str(folders["llava"]))
    image = np.zeros((16, 16, 3), np.float32)
    assert _refused(lambda: _answer(client, spec, image, QUESTION, job_id="vlm-x"))[0][0] == "model"
    fields = _refused(lambda: _answer(client, spec, image, QUESTION, ["red", "zebra"]))
    assert fields == [("options", "option 'zebra' is not a word this model's tokenizer knows")]
    llama = common_pb2.ModelSpec(kind="hf", path=str(folders["llama"]))
    fields = _refused(lambda: _answer(client, llama, image, QUESTION))
    assert fields[0][0] == "model.source.path" and "supported vision-language models" in fields[0][1]
