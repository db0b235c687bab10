"""The vlm method code alone: the conflict grid's construction, CFPO's value intervention against
its formula, the logistic balance point on data with a known one, oscillation counts, the RL
objectives' pieces, checkpoint round trip and the parameter models' refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.services.vlm import checkpoint
from paperworks.services.vlm.cfpo import rl
from paperworks.services.vlm.cfpo import task as vqa
from paperworks.services.vlm.following import audit, conflicts, steer
from paperworks.services.vlm.spec import AuditParams, PretrainParams
from paperworks.services.vlm.tinyvlm import VLMConfig, train
from paperworks.services.vlm.tinyvlm.model import Intervention, value_intervention
from paperworks.services.vlm.tinyvlm.vocab import COLOR_IDS
from paperworks.shared.errors import InvalidArgument
from pydantic import ValidationError

TINY = VLMConfig(d_model=16, heads=2, vision_layers=1, lm_layers=2)


def test_conflict_grid_has_the_answers_as_strict_pluralities():
    cs = conflicts.build_grid(0, 6)
    assert len(cs) == 150 and (cs.visual_answer != cs.text_answer).all()
    for i in range(len(cs)):
        counts = np.bincount(cs.reports[i], minlength=max(COLOR_IDS) + 1)[list(COLOR_IDS)]
        assert counts[cs.text_answer[i]] == conflicts.TRUE_REPORTS[cs.text_level[i]]
        assert counts[cs.text_answer[i]] > np.delete(counts, cs.text_answer[i]).max()
    assert (cs.tokens("image")[:, 2:8] == 1).all() and not cs.pixels("text").any()
    with pytest.raises(ValueError, match="reports"):
        conflicts.ConflictSet.from_arrays(cs.to_arrays() | {"reports": cs.reports[:, :3]})


def test_value_intervention_is_the_formula():
    torch.manual_seed(0)
    a = torch.softmax(torch.randn(2, 3, 7, 7), -1)
    v = torch.randn(2, 3, 7, 4)
    n_img = 4
    delta = value_intervention(a, v, n_img, Intervention(threshold=0.5))
    assert not delta[:, :, :n_img].any()
    a_ti = a[:, :, n_img:, :n_img]
    for b in range(2):
        mu, sd = a_ti[b].mean(), a_ti[b].std(unbiased=False)
        m = (a_ti[b] > mu + 0.5 * sd).float()
        v_bar = v[b, :, :n_img].mean(dim=(1, 2))[:, None, None]
        expected = (a_ti[b] * m) @ (v_bar - v[b, :, :n_img])
        torch.testing.assert_close(delta[b, :, n_img:], expected)
    assert not value_intervention(a, v, n_img, Intervention(threshold=100.0)).any()


def test_balance_point_recovers_a_known_crossing():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 20_000)
    y = (rng.random(len(x)) < 1 / (1 + np.exp(-(1.5 - 6.0 * x)))).astype(float)
    assert audit.balance_point(x, y) == pytest.approx(0.25, abs=0.02)
    lo, hi = audit.bootstrap_ci(x, y, 50, 0)
    assert lo < 0.25 < hi


def test_oscillations_count_state_switches():
    lens = np.zeros((2, 4, 6))
    lens[0, :, 0] = [0.6, 0.2, 0.7, 0.1]  # a_T = 0 vs a_V = 1 at 0.4: T, V, T, V
    lens[0, :, 1] = 0.4
    lens[1, :, 0] = 0.9
    records = audit.Records(
        *(np.zeros((2, 6)),) * 3, lens, np.array([1, 1]), np.array([0, 0]), np.zeros(2, int), np.zeros(2, int)
    )
    assert records.oscillations().tolist() == [3, 0]


def test_boundary_and_easy_selection():
    rel = np.array([-0.5, 0.05, 0.4, -0.02, 0.9])
    assert steer.select_cases(rel, 0.0, 2, "boundary", "vision").tolist() == [3, 1]
    assert steer.select_cases(rel, 0.0, 2, "easy", "vision").tolist() == [4, 2]
    assert steer.select_cases(rel, 0.0, 1, "easy", "text").tolist() == [0]


def test_every_rl_algorithm_steps_and_dapo_drops_uniform_groups():
    assert float(rl.k3(torch.tensor(0.0))) == 0.0 and (rl.k3(torch.linspace(-3, 3, 13)) >= 0).all()
    for algorithm, base in (("grpo", "grpo"), ("dapo", "dapo"), ("cfpo", "grpo"), ("papo", "dapo")):
        model = train.build(TINY, 0, "cpu")
        before = [p.detach().clone() for p in model.parameters()]
        trainer = rl.Trainer(model, rl.RLConfig.preset(algorithm, base, prompts=6, steps=1), "cpu")
        record = trainer.step()
        assert record["groups"] <= 6
        if record["groups"]:
            assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
        if algorithm in ("cfpo", "papo") and record["groups"]:
            assert record["discrepancy"] >= 0.0
    dapo = rl.Trainer(train.build(TINY, 0, "cpu"), rl.RLConfig.preset("dapo", prompts=8), "cpu")
    (_, _, _, rewards, *_), _ = dapo.rollout()
    assert (rewards.std(1) > 0).all()


def test_shortcut_task_splits():
    rng = np.random.default_rng(0)
    anti = vqa.sample(rng, 300, "anti_prior")
    assert (anti.answers != np.asarray(vqa.PRIOR)[anti.shapes]).all()
    train_split = vqa.sample(rng, 3000, "train", prior_strength=0.8)
    prior = np.asarray(vqa.PRIOR)[train_split.shapes]
    assert (train_split.answers == prior).mean() == pytest.approx(0.8, abs=0.03)


def test_checkpoint_round_trip_and_refusal():
    model = train.build(TINY, 0, "cpu")
    loaded, info = checkpoint.from_bytes(checkpoint.to_bytes(model, {"task": "x"}), "cpu")
    assert info == {"task": "x"} and loaded.config == TINY
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(InvalidArgument, match="model_job_id"):
        checkpoint.from_bytes(b"\x08" + b"\x00" * 7 + b"{}", "cpu")


def test_parameter_models_refuse_what_cannot_run():
    with pytest.raises(ValidationError, match="text_fraction"):
        PretrainParams(text_fraction=0.7, image_fraction=0.5)
    with pytest.raises(ValidationError, match="exactly one"):
        AuditParams(model_job_id="vlm-1")
    assert AuditParams(model_job_id="vlm-1", synthetic={}, indices=[]).indices == ["entropy", "one_minus_max"]
