"""Real Hugging Face VLMs in the vlm service, without services: tiny LLaVA and Qwen2-VL folders
built from configs and saved as a user's folder is (safetensors, tokenizer, image processor),
loaded back through `hf_vlm`; the adapter's option probabilities, its logit lens against the
model's own logits, the unimodal copies, the prompts, the modality-following audit end to end on
it, and the refusals (other architectures, pickles, unknown or ambiguous options, model and
model_job_id together)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from paperworks.services.vlm import hf_vlm
from paperworks.services.vlm.following import audit, conflicts
from paperworks.services.vlm.spec import AnswerHFParams, AuditParams
from paperworks.services.vlm.tinyvlm.vocab import COLORS
from paperworks.shared.errors import InvalidArgument
from pydantic import ValidationError
from unit.backends.hf_models import save_llama
from unit.vlm.hf_vlm_models import save_llava, save_qwen2_vl

FAMILIES = {"llava": save_llava, "qwen2_vl": save_qwen2_vl}
TEXTS = [
    "reports : red red blue ; what color is the object ?",
    "what color is the object ?",
    "reports : green ; what color is the object ? which shape",
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hf-vlms")
    return {name: save(root / name) for name, save in FAMILIES.items()}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def vlm(request, folders) -> hf_vlm.HFVLM:
    folder = folders[request.param]
    return hf_vlm.load(folder, "cpu", "model.source.path", str(folder))


def _images(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.random((16, 16, 3)).astype(np.float32) for _ in range(n)]


def test_the_saved_folder_is_the_real_format(folders):
    for family, folder in folders.items():
        names = {p.name for p in folder.iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
        assert not any(n.endswith((".bin", ".pt")) for n in names)
        assert hf_vlm.check_folder(folder, "model", str(folder))["model_type"] == family


def test_options_sum_to_one_and_the_lens_ends_at_the_models_own_logits(vlm):
    images = _images(3)
    p, lens = vlm.run(images, TEXTS, COLORS)  # texts of different lengths: one right-padded batch
    assert p.shape == (3, len(COLORS)) and np.allclose(p.sum(1), 1.0, atol=1e-9)
    assert lens.shape == (3, len(vlm.layers), len(COLORS)) and len(vlm.layers) == 2
    assert np.allclose(lens.sum(-1), 1.0, atol=1e-9)
    ids = vlm.option_ids(COLORS)
    for i in range(3):  # each item alone, through the model's own forward and lm_head
        with torch.no_grad():
            logits = vlm.model(**vlm.inputs(images[i : i + 1], TEXTS[i : i + 1])).logits[0, -1]
        own = logits[ids].double().softmax(-1).numpy()
        np.testing.assert_allclose(lens[i, -1], own, atol=1e-5)
        np.testing.assert_allclose(p[i], own, atol=1e-5)
    assert not np.allclose(lens[:, 0], lens[:, -1], atol=1e-4)  # the first layer reads differently


def test_unimodal_copies_differ_from_the_bimodal_input(vlm):
    images, cs = _images(4, 1), conflicts.build_grid(0, 1).subset(np.arange(4))
    both, question = cs.texts("both"), cs.texts("image")
    assert all(t.startswith("reports :") for t in both) and question[0] == "what color is the object ?"
    text_only = vlm.inputs(None, both)
    assert "pixel_values" not in text_only and not (text_only["input_ids"] == vlm.image_token_id).any()
    bimodal = vlm.inputs(images, both)
    assert (bimodal["input_ids"] == vlm.image_token_id).sum() > 0 and "pixel_values" in bimodal
    p_both = vlm.probabilities(images, both, COLORS)
    p_text = vlm.probabilities(None, both, COLORS)
    p_image = vlm.probabilities(images, question, COLORS)
    assert np.abs(p_both - p_text).max() > 1e-4 and np.abs(p_both - p_image).max() > 1e-4


def test_prompts_use_the_chat_template_where_the_folder_has_one(folders):
    llava = hf_vlm.load(folders["llava"], "cpu", "model", "llava")
    assert llava.prompt("what color ?", True) == "USER: <image> what color ? ASSISTANT:"
    assert llava.prompt("what color ?", False) == "USER: what color ? ASSISTANT:"
    qwen = hf_vlm.load(folders["qwen2_vl"], "cpu", "model", "qwen")
    assert qwen.prompt("what color ?", True) == "<|vision_start|><|image_pad|><|vision_end|>\nwhat color ?"
    assert qwen.prompt("what color ?", False) == "what color ?"


def test_the_audit_runs_end_to_end_on_the_adapter(vlm):
    cs = conflicts.build_grid(3, 4)  # 100 conflict items over the 5 x 5 grid
    records = audit.run_adapter(vlm, cs)
    assert records.p_both.shape == records.p_text.shape == records.p_vision.shape == (100, len(COLORS))
    assert records.lens.shape == (100, 2, len(COLORS))
    np.testing.assert_allclose(records.lens[:, -1], records.p_both, atol=1e-9)
    assert np.abs(records.p_text - records.p_both).max() > 1e-4
    out = audit.audit(records, ("entropy", "one_minus_max"), bins=5, n_boot=10)
    assert out["layers"] == 2 and set(out["laws"]) == {"entropy", "one_minus_max"}
    r = out["ratios"]
    assert r["tfr"] + r["vfr"] + r["other"] == pytest.approx(1.0)
    assert records.oscillations().max() <= 1  # two layers: at most one switch


def test_other_architectures_and_pickles_are_refused(tmp_path):
    llama = save_llama(tmp_path / "llama")
    with pytest.raises(InvalidArgument) as exc:
        hf_vlm.load(llama, "cpu", "model.source.path", "my-llama")
    assert exc.value.violations[0][0] == "model.source.path"
    message = exc.value.violations[0][1]
    assert "model_type 'llama'" in message and "LlavaForConditionalGeneration" in message
    assert "Qwen2VLForConditionalGeneration" in message and str(tmp_path) not in message
    pickled = save_llava(tmp_path / "pickled")
    (pickled / "model.safetensors").rename(pickled / "pytorch_model.bin")
    with pytest.raises(InvalidArgument, match="pickle weights"):
        hf_vlm.check_folder(pickled, "model.source.upload", "the upload")


def test_options_the_tokenizer_cannot_tell_apart_are_refused(vlm):
    with pytest.raises(InvalidArgument) as exc:
        vlm.option_ids(["red", "zebra"])
    assert exc.value.violations == [("options", "option 'zebra' is not a word this model's tokenizer knows")]
    with pytest.raises(InvalidArgument, match="different tokens"):
        vlm.option_ids(["red", "red"])
    assert vlm.option_ids(["circle", "square"]) != vlm.option_ids(["square", "circle"])


def test_exactly_one_of_model_and_model_job_id():
    hf = {"kind": "hf", "path": "/models/llava"}
    for given in ({"model_job_id": "job-1", "model": hf}, {}):
        with pytest.raises(ValidationError) as exc:
            AuditParams.model_validate({"synthetic": {}} | given)
        assert exc.value.errors()[0]["loc"] == ("model",)
    assert AuditParams.model_validate({"synthetic": {}, "model": hf}).model.path == "/models/llava"
    with pytest.raises(ValidationError) as exc:
        AuditParams.model_validate({"synthetic": {}, "model": {"kind": "tiny", "path": "/m"}})
    assert exc.value.errors()[0]["loc"] == ("model", "kind")
    assert AnswerHFParams.model_validate({"model": hf}).options == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU on this machine")
def test_the_adapter_runs_on_the_jobs_gpu(folders):
    images = _images(3, 2)
    for family, folder in folders.items():
        on_cpu = hf_vlm.load(folder, "cpu", "model", family).run(images, TEXTS, COLORS)
        gpu = hf_vlm.load(folder, "cuda", "model", family)
        assert gpu.device.type == "cuda" and gpu.inputs(images, TEXTS)["input_ids"].is_cuda
        on_gpu = gpu.run(images, TEXTS, COLORS)
        np.testing.assert_allclose(on_gpu[0], on_cpu[0], atol=1e-3)
        np.testing.assert_allclose(on_gpu[1], on_cpu[1], atol=1e-3)
