"""A real-format CLIP checkpoint (Hugging Face CLIPModel folder, built offline by `hf_clip`): the
loader gives the saved model's own logits through its own tokenizer and pixel statistics, RITA's
prompts take one context vector per token of "a photo of a", evaluate_robustness runs every kind
of method on it, and folders that are not loadable checkpoints are refused naming the field."""

from __future__ import annotations

import pytest
import torch
from paperworks.services.clip import data, tinyclip, world
from paperworks.services.clip.rita import Stream, TTAConfig, evaluate_robustness
from paperworks.services.clip.rita.prompts import PromptBank
from paperworks.shared.errors import InvalidArgument
from unit.clip.hf_clip import MEAN, STD, save_tiny_clip

TEXTS = ["a photo of a circle", "a photo of a striped red square", "a photo of a star"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clip-hf")
    model, tok = save_tiny_clip(folder, seed=3)
    return folder, model, tok


def test_loaded_checkpoint_gives_the_in_memory_models_logits(saved):
    folder, model, tok = saved
    enc = tinyclip.load_hf_folder(folder)
    assert enc.kind == "hf" and enc.image_size == 32
    assert torch.allclose(enc.mean.flatten(), torch.tensor(MEAN)) and torch.allclose(
        enc.std.flatten(), torch.tensor(STD)
    )
    images = world.make_world(4, 2).images
    ids = tok(TEXTS, padding="max_length", max_length=16, return_tensors="pt")["input_ids"]
    assert torch.equal(enc.tokenize(TEXTS), ids)
    pixels = (images - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    with torch.no_grad():
        ref = model(input_ids=ids, pixel_values=pixels).logits_per_image
        mine = enc.logit_scale * enc.encode_image(images) @ enc.encode_text(TEXTS).T
    assert ref.shape == (4, 3) and torch.allclose(mine, ref, atol=1e-4)
    # a different model's weights would not match: the comparison can fail
    other = tinyclip.load_hf_folder(folder)
    with torch.no_grad():
        other.model.visual_projection.weight.mul_(-1)
        flipped = other.logit_scale * other.encode_image(images) @ other.encode_text(TEXTS).T
    assert not torch.allclose(flipped, ref, atol=1e-2)


def test_prompt_context_covers_the_tokens_of_a_photo_of_a(saved):
    enc = tinyclip.load_hf_folder(saved[0])
    bank = PromptBank(enc, ["circle", "star"], ["striped", "dotted"])
    assert bank.n_ctx == 4 and bank.features().shape == (2, 2, 16)
    ids = enc.tokenize(["a photo of a"])[0]
    assert torch.equal(bank.init_ctx, enc.token_embeddings(ids[1:5]))


def test_evaluate_robustness_runs_on_the_checkpoint(saved):
    enc = tinyclip.load_hf_folder(saved[0])
    w = world.make_world(3, 7)
    res = evaluate_robustness(
        enc,
        w.images,
        w.labels,
        list(world.SHAPES),
        ["solid", "striped"],
        [2 / 255],
        ["zero_shot", "tpt", "rita"],
        TTAConfig(views=4),
        seed=1,
    )
    rows = res["rows"]
    assert [r["method"] for r in rows] == ["zero_shot", "tpt", "rita"]
    assert all(r["n"] == 3 and 0 <= r["accuracy"] <= 1 and r["seconds_per_image"] > 0 for r in rows)
    # RITA's online stream on the checkpoint: its class cache is real CLIP features
    stream = Stream(enc, list(world.SHAPES), None, TTAConfig(views=4))
    scores = stream.predict("rita", w.images[0], 0)
    assert scores.shape == (8,) and torch.isfinite(scores).all()


def test_folders_that_are_not_checkpoints_are_refused(saved, tmp_path):
    folder = saved[0]
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    for f in folder.iterdir():
        if f.suffix != ".safetensors":
            (pickled / f.name).write_bytes(f.read_bytes())
    (pickled / "pytorch_model.bin").write_bytes(b"\x80\x04not loaded")
    with pytest.raises(InvalidArgument) as err:
        data.load_checkpoint(pickled, "cpu", "checkpoint")
    assert err.value.field == "checkpoint" and "safetensors" in str(err.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidArgument, match="config.json"):
        data.load_checkpoint(empty, "cpu", "model.checkpoint")
    # the servicer's cache key changes when a server-path checkpoint is rewritten in place
    before = data.checkpoint_identity(pickled)
    assert before == data.checkpoint_identity(pickled)
    (pickled / "config.json").write_text((pickled / "config.json").read_text() + "\n")
    assert data.checkpoint_identity(pickled) != before
