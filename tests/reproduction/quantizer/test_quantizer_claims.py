"""RaBiT's and LC-QAT's claims in miniature (arXiv 2602.05367, 2606.10531), each measured here
against a baseline from the same run, at 2 bits per weight. CI asserts seed 0 (QUANTIZER_REPRO_SEED
picks another); margins were chosen from seeds 0-2, and the benchmark reports all three."""
from __future__ import annotations

import json

import pytest
import torch
from paperworks.services.quantizer import checkpoint
from paperworks.services.quantizer.linears import find_linears
from paperworks.shared.backends.tiny_model import TinyDecoder
from reproduction.quantizer import experiments
from safetensors.torch import load as st_load


def _show(name, d):
    print(name, json.dumps({k: v for k, v in d.items() if k not in ("student", "students", "layers")},
                           default=float))


def test_claim1_coupled_paths_keep_a_residual_hierarchy_and_train_better(coupling):
    rabit, indep, step0 = coupling["rabit"], coupling["independent"], coupling["step0"]
    _show("step0", step0)
    _show("rabit", rabit)
    _show("independent", indep)
    # The sign (Sec. 4.3): RaBiT's path 2 corrects path 1 (negative output correlation); independent
    # latents co-adapt (positive). Both start from the same step-0 model and move apart from it.
    assert rabit["corr_y1_y2"] < -0.005
    assert indep["corr_y1_y2"] > 0.01
    assert rabit["corr_y1_y2"] < step0["corr_y1_y2"] < indep["corr_y1_y2"]
    assert rabit["corr_y1_y2"] <= indep["corr_y1_y2"] - 0.04
    per_layer = [d["corr_y1_y2"] < i["corr_y1_y2"]
                 for d, i in zip(rabit["layers"].values(), indep["layers"].values(), strict=True)]
    assert sum(per_layer) >= 0.75 * len(per_layer)
    # Path 2 tracks what path 1 leaves (positive for both, as path 2 starts on the residual);
    # RaBiT's keeps tracking it, independent latents drift off.
    assert rabit["corr_r1_y2"] > 0.5 and indep["corr_r1_y2"] > 0
    assert rabit["corr_r1_y2"] >= indep["corr_r1_y2"] + 0.01
    # Same step-0 model, same steps: the coupling alone lowers the held-out QAT objective (KL to the
    # teacher + hidden MSE) by a wide margin; the next-token loss is no worse.
    assert rabit["val_distill"] < 0.85 * indep["val_distill"]
    assert rabit["val_kl"] < indep["val_kl"]
    assert rabit["val_loss"] < indep["val_loss"] + 0.002
    assert rabit["val_loss"] < coupling["full_precision"] + 0.1


def test_claim2_lcqat_starts_at_ptq_which_beats_rtn_and_a_tenth_of_the_tokens_gets_most_of_qat(lcqat):
    _show("lcqat", lcqat)
    assert lcqat["step0_max_abs_logit_diff"] <= 1e-5
    assert lcqat["ptq_val_loss"] < lcqat["rtn_val_loss"] - 0.03
    assert lcqat["lcqat_tokens"] * 10 == lcqat["scalar_qat_tokens"]
    # Counting the PTQ's calibration windows too, LC-QAT sees at most a quarter of scalar QAT's tokens.
    assert (lcqat["ptq_calibration_tokens"] + lcqat["lcqat_tokens"]) * 4 <= lcqat["scalar_qat_tokens"]
    # The paper's "a tenth of the tokens is no worse than scalar QAT on all of them". Scalar LSQ+ QAT
    # runs at the lr chosen on the validation seeds 3-5 among three values, as many as LC-QAT's
    # (Setup.scalar_lr = 1e-3): LC-QAT -0.038 / -0.006 / -0.018 nats on seeds 0-2 (benchmark).
    # At the unswept 3e-4 the margins were -0.019 / -0.009 / +0.002: the baseline's lr alone moves
    # it as much as the margin, so this asserts only "no worse" within 0.005 (README), and that
    # LC-QAT on a tenth of the tokens gets nearly all of the gain scalar QAT on all of them makes
    # over their common RTN start.
    assert lcqat["lcqat_val_loss"] <= lcqat["scalar_qat_val_loss"] + 0.005
    rtn = lcqat["rtn_val_loss"]
    gain = (rtn - lcqat["lcqat_val_loss"]) / (rtn - lcqat["scalar_qat_val_loss"])
    assert lcqat["scalar_qat_val_loss"] < rtn and gain >= 0.9, gain


@pytest.mark.parametrize("which", ["rabit", "lcqat", "scalar_qat"])
def test_claim3_packed_logits_equal_fake_quant_and_bits_match_the_manifest(coupling, lcqat, teacher, which):
    student = coupling["rabit"]["student"] if which == "rabit" else lcqat["students"][which]
    packed, diff, scale = experiments.packed_vs_fake(student, teacher.val[:4])
    print(which, "max |packed - fake-quant logit|", diff, "max |logit|", scale)
    assert diff <= 1e-5 * max(scale, 1.0) * 10, (diff, scale)  # fp32 round-off of a 2-layer model
    blob, manifest = checkpoint.save(packed, which, {"kind": "tiny"})
    stored = st_load(blob)
    names = find_linears(teacher.module)
    code_bits = sum(t.numel() * 8 for k, t in stored.items() if k.endswith((".signs", ".codes")))
    weights = sum(teacher.module.get_submodule(n).weight.numel() for n in names)
    assert manifest["quantized_weights"] == weights
    assert manifest["bits_per_weight"] == code_bits / weights == 2.0
    assert all(layer["bits_per_weight"] == 2.0 for layer in manifest["layers"])
    assert {layer["name"] for layer in manifest["layers"]} == set(names)
    assert not any(k.startswith("fp.") and any(k[3:].startswith(n + ".") for n in names) for k in stored)
    reloaded = checkpoint.load(blob, manifest, TinyDecoder(teacher.module.config))
    with torch.no_grad():
        torch.testing.assert_close(experiments.logits(reloaded, teacher.val[:4]),
                                   experiments.logits(packed, teacher.val[:4]))
