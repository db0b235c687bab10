"""Unit tests of the SkillNet method subpackage (services/moe/skillnet): the released hierarchy
tokenizer rules, the simulator and its experts, the MoE policy's routing contracts, training,
inference, files and rendering."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.services.moe import skillnet
from paperworks.services.moe.skillnet import hierarchy, sim
from paperworks.services.moe.skillnet.policy import MoEFFN, PolicyConfig, build


def test_motion_code_distance_follows_the_released_rule():
    w = hierarchy.MOTION_CODE_WEIGHTS
    assert hierarchy.motion_code_distance("200200", "200200") == 0.0
    assert hierarchy.motion_code_distance("200200", "200100") == pytest.approx(w[3] / 2)  # both non-zero
    assert hierarchy.motion_code_distance("200200", "200000") == pytest.approx(w[3])       # zero <-> non-zero
    assert hierarchy.motion_code_distance("200200", "201200") == pytest.approx(w[2])       # digit 3: full
    assert hierarchy.motion_code_distance("100000", "200000") == pytest.approx(w[0] / 2)
    for i, c in enumerate(hierarchy.MOTION_CODE_CENTERS):
        assert hierarchy.assign_motion_cluster(c) == i
    with pytest.raises(ValueError, match="six digits"):
        hierarchy.motion_code_distance("300000", "200200")


def test_skill_tokens_and_hierarchy_similarity():
    push, slide, turn = (hierarchy.skill_token(v) for v in ("push", "slide", "turn"))
    assert push[0] == slide[0] and push[1] != slide[1]          # the few-shot verb shares push's cluster
    assert turn[0] != push[0]
    assert hierarchy.hierarchy_similarity("open", "close") == pytest.approx(2 / 3)
    assert hierarchy.hierarchy_similarity("push", "slide") == pytest.approx(1 / 3)
    assert hierarchy.hierarchy_similarity("pick", "turn") == 0.0
    assert hierarchy.hierarchy_similarity("pick", "pick") == 1.0
    with pytest.raises(ValueError, match="verb"):
        hierarchy.skill_token("jump")


def test_scripted_experts_solve_every_task():
    tasks = sim.valid_tasks(include_slide=True)
    _, _, _, w = sim.rollout_expert(np.repeat(np.array(tasks), 4, 0), np.random.default_rng(3), 90, 0.0)
    assert w.done.all()


def test_splits_hold_out_compositions_not_skills():
    train, held = sim.zero_shot_split()
    assert not set(train) & set(held) and len(held) == 8
    for a, b in held:
        assert any(t[0] == a for t in train) and any(t[1] == b for t in train)
    slide = sim.SKILL_IDS["slide block"]
    assert all(slide not in t for t in train) and all(slide in t for t in sim.few_shot_tasks())


def test_instructions_are_parsed_and_bad_ones_refused():
    assert sim.parse_task("open drawer, then place block") == (sim.SKILL_IDS["open drawer"],
                                                                sim.SKILL_IDS["place block"])
    for bad, field in (("open drawer", "two skills"), ("fly kite, then open drawer", "skill"),
                       ("pick block, then open drawer", "valid composition")):
        with pytest.raises(ValueError, match=field):
            sim.parse_task(bad)


def test_step_survives_garbage_actions():
    w = sim.reset(np.array(sim.valid_tasks()[:3]), np.random.default_rng(0))
    sim.step(w, np.array([[np.nan, np.inf, -np.inf, 5.0]] * 3))
    assert np.isfinite(w.observation()).all()


def test_demonstrations_shapes():
    d = skillnet.make_demonstrations(["open drawer, then turn knob"], 3, seed=0)
    assert d.obs.shape[1] == sim.OBS_DIM and d.chunks.shape[1:] == (10, 4) and d.episodes == 3
    assert len(d.obs) == len(d.tasks) == len(d.chunks) > 20
    with pytest.raises(ValueError):
        skillnet.make_demonstrations([], 3, 0)


@pytest.mark.parametrize("arm", skillnet.ARMS)
@pytest.mark.parametrize("head", skillnet.HEADS)
def test_every_arm_trains_and_samples(arm, head):
    d = skillnet.make_demonstrations(["open drawer, then turn knob"], 2, seed=0)
    p = build(PolicyConfig(arm=arm, head=head, d_model=16, heads=2, expert_hidden=16, skill_dim=16), 0)
    o, wd, vb = skillnet.train._tensors(d.obs[:8], d.tasks[:8], "cpu")
    loss, log = p.loss(o, wd, vb, torch.as_tensor(d.chunks[:8]))
    loss.backward()
    assert torch.isfinite(loss) and (log["balance"] > 0) == (arm != "dense")
    assert p.sample(o, wd, vb).shape == (8, 10, 4)


def test_moe_is_top1_plus_shared_and_balance_is_one_when_uniform():
    cfg = PolicyConfig(arm="token_moe", d_model=8, heads=2, expert_hidden=8, experts=4)
    ffn = MoEFFN(cfg, skill_router=False)
    torch.nn.init.zeros_(ffn.router.weight)
    torch.nn.init.zeros_(ffn.router.bias)
    x = torch.randn(2, 3, 8)
    y, bal = ffn(x, None, None)
    h = torch.nn.functional.gelu(x @ ffn.w1[0] + ffn.b1[0])
    expected = ffn.shared(x) + 0.25 * (h @ ffn.w2[0] + ffn.b2[0])  # uniform p: argmax picks expert 0
    assert torch.allclose(y, expected, atol=1e-5)
    assert bal.item() == pytest.approx(1.0)


def test_routing_is_a_function_of_the_skills_only_in_skill_routed_arms():
    d = skillnet.make_demonstrations(["open drawer, then turn knob"], 2, seed=0)
    obs = torch.as_tensor(d.obs[:6])
    for arm, depends in (("skillnet", True), ("random_verb_moe", True), ("token_moe", False)):
        p = build(PolicyConfig(arm=arm), 0)
        probs = []
        for task in ("open drawer, then turn knob", "place block, then turn knob"):
            tasks = np.array([sim.parse_task(task)] * 6)
            o, wd, vb = skillnet.train._tensors(d.obs[:6], tasks, "cpu")
            prefix, skills = p.encode(obs, wd, vb)
            p.velocity(torch.zeros(6, 10, 4), torch.zeros(6), prefix * 0, skills)   # prefix zeroed out
            probs.append(p.moe_layers()[0].last_probs)
        assert (not torch.allclose(probs[0], probs[1])) == depends, arm


def test_skillnet_embeddings_share_the_cluster_component():
    p = build(PolicyConfig(arm="skillnet"), 0)
    emb = p.skill_emb
    v = torch.tensor([hierarchy.VERB_IDS["push"], hierarchy.VERB_IDS["slide"], hierarchy.VERB_IDS["turn"]])
    e = emb(v)
    cluster = emb.cluster(emb.tokens[v, 0])
    assert torch.equal(cluster[0], cluster[1]) and not torch.equal(cluster[0], cluster[2])
    assert e.shape == (3, 32)
    frozen = build(PolicyConfig(arm="random_verb_moe"), 0).skill_emb
    assert not any(p.requires_grad for p in frozen.parameters())


def test_training_lowers_the_loss_and_files_round_trip(tmp_path):
    d = skillnet.make_demonstrations(["open drawer, then turn knob", "turn knob, then push block"], 4, seed=0)
    logs = []
    cfg = PolicyConfig(arm="skillnet", head="mse", d_model=16, heads=2, expert_hidden=16, skill_dim=16)
    p = skillnet.train_policy(cfg, d, 51, "cpu", batch=32, progress=lambda s, log: logs.append(log["action"]))
    assert logs[-1] < logs[0]
    skillnet.save(p, tmp_path)
    q = skillnet.load(tmp_path)
    obs = d.obs[0]
    assert np.allclose(skillnet.act(p, obs, "open drawer, then turn knob", seed=1),
                       skillnet.act(q, obs, "open drawer, then turn knob", seed=1), atol=1e-6)
    with pytest.raises(ValueError, match="observation"):
        skillnet.act(p, obs[:5], "open drawer, then turn knob")
    with pytest.raises(ValueError, match="skill"):
        skillnet.act(p, obs, "open box, then turn knob")
    res = skillnet.evaluate(p, [sim.parse_task("open drawer, then turn knob")], 3, seed=0)
    assert 0.0 <= res["success"] <= res["first_subtask"] <= 1.0 and len(res["per_task"]) == 1
    frames = skillnet.render_rollout(p, "open drawer, then turn knob", seed=0, every=30)
    assert frames and all(f.startswith(b"\x89PNG") for f in frames)


def test_routing_correlation_is_computed_over_verb_pairs():
    routing = {"push block": np.array([[0.9, 0.1]]), "slide block": np.array([[0.8, 0.2]]),
               "open drawer": np.array([[0.7, 0.3]]), "close drawer": np.array([[0.7, 0.3]]),
               "turn knob": np.array([[0.1, 0.9]]), "pick lid": np.array([[0.2, 0.8]])}
    r = skillnet.routing_hierarchy_correlation(routing)
    assert r["pairs"] == 15 and -1.0 <= r["spearman"] <= 1.0
