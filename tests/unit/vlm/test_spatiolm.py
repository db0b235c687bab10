"""SpatioLM's pieces alone (arXiv 2608.01899): the ray caster against analytic geometry, the QA
items' answers against the scene, the branch's exact identity at initialisation and its text-position
invariance, the head's shapes, the losses against their formulas, and that only the branch, head and
condition projection train."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.services.vlm.spatiolm import losses, qa, train, world
from paperworks.services.vlm.spatiolm.model import DPTHead, SpatialConfig, SpatialVLM, SpatioBranch

CFG = SpatialConfig(d_model=16, heads=2, vision_layers=2, lm_layers=3, frames=2)


def _camera():
    return world.Camera(
        np.array([0.0, 1.0, 0.0]), world.look_rotation(np.array([0.0, 0.0, 1.0])), 20.0, 12.0, 12.0
    )


def test_ray_caster_depth_and_rays_are_the_geometry():
    sphere = world.Obj(0, 1, np.array([0.0, 1.0, 5.0]), 0.5)
    r = world.render(world.Scene((sphere,), (_camera(),)), 0)
    o, d = r["rays"][..., :3], r["rays"][..., 3:]
    np.testing.assert_allclose(np.linalg.norm(d, axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(o, np.broadcast_to([0.0, 1.0, 0.0], o.shape), atol=1e-6)
    # the centre pixels see the sphere's front at z = 4.5; the bottom rows see the ground plane
    assert r["mask"][11:13, 11:13].tolist() == [[0, 0], [0, 0]]
    assert r["depth"][11:13, 11:13] == pytest.approx(4.5, abs=0.05)
    v = 23.5
    z_ground = 1.0 / ((v - 12.0) / 20.0)  # camera height 1, looking level
    assert r["depth"][23, 0] == pytest.approx(z_ground, rel=1e-3)
    assert (r["depth"][0] == world.FAR).all() and np.allclose(r["image"][0, 0], world.SKY)


def test_box_is_hit_on_its_front_face_and_occludes():
    box = world.Obj(1, 0, np.array([0.0, 1.0, 4.0]), 0.5)
    behind = world.Obj(2, 1, np.array([0.0, 1.0, 7.0]), 0.5)
    r = world.render(world.Scene((box, behind), (_camera(),)), 0)
    assert r["depth"][12, 12] == pytest.approx(3.5, abs=1e-3) and r["mask"][12, 12] == 0


def test_scenes_frames_and_qa_answers_follow_the_scene():
    rng = np.random.default_rng(0)
    b = qa.sample(rng, 40, qa.SPATIAL + qa.GENERAL, frames=3)
    assert b.images.shape == (40, 3, 24, 24, 3) and b.rays.shape == (40, 3, 24, 24, 6)
    assert b.images.min() >= 0 and b.images.max() <= 1 and (b.depth > 0).all()
    for seed in range(20):
        scene = world.random_scene(np.random.default_rng(seed), 2)
        cam = scene.cameras[0]
        words, ans = qa.question(scene, "closer", np.random.default_rng(seed))
        a, c = (world.COLORS.index(w) for w in (words[2], words[4]))
        za, zc = (
            [cam.project(o.center)[2] for o in scene.objects if o.color == a][0],
            [cam.project(o.center)[2] for o in scene.objects if o.color == c][0],
        )
        assert ans == (words[2] if za < zc else words[4])
        assert qa.question(scene, "count", rng)[1] == str(len(scene.objects))
    with pytest.raises(ValueError, match="frames"):
        world.random_scene(rng, 5)
    with pytest.raises(KeyError):
        qa.encode("how far is mauve ?")


def test_mean_relative_accuracy_is_vsi_bench():
    assert qa.mean_relative_accuracy([4.0], [4.0]) == 1.0
    # |5-4|/4 = 0.25 < 1 - theta for theta in {0.50, ..., 0.70}: 5 of 10 thresholds
    assert qa.mean_relative_accuracy([5.0], [4.0]) == pytest.approx(0.5)
    assert qa.mean_relative_accuracy([9.0], [2.0]) == 0.0


def _inputs(n=3, frames=2):
    b = qa.sample(np.random.default_rng(1), n, qa.SPATIAL, frames)
    return torch.as_tensor(b.images), torch.as_tensor(b.tokens), b


def test_zero_init_branch_leaves_the_vlm_exactly_unchanged():
    torch.manual_seed(0)
    vlm, branch = SpatialVLM(CFG), SpatioBranch(CFG)
    im, tk, _ = _inputs()
    plain = vlm(im, tk)
    with_branch, states = vlm(im, tk, branch)
    assert torch.equal(plain, with_branch)
    assert len(states) == len(CFG.branch_layers) and states[0].shape == (3, 2 * 36, 16)


def test_branch_writes_only_visual_positions_and_frames_attend_locally():
    torch.manual_seed(0)
    vlm, branch = SpatialVLM(CFG), SpatioBranch(CFG)
    for p in branch.parameters():
        torch.nn.init.normal_(p, std=0.2)
    im, tk, _ = _inputs()
    seen = {}
    first = str(CFG.branch_layers[0])
    hook = vlm.lm[int(first) + 1].register_forward_pre_hook(lambda m, a: seen.setdefault("x", a[0]))
    vlm(im, tk, branch)
    hook.remove()
    with_branch = seen.pop("x")
    hook = vlm.lm[int(first) + 1].register_forward_pre_hook(lambda m, a: seen.setdefault("x", a[0]))
    vlm(im, tk)
    hook.remove()
    n_vis = 2 * 36
    assert torch.equal(with_branch[:, n_vis:], seen["x"][:, n_vis:])  # text untouched
    assert not torch.allclose(with_branch[:, :n_vis], seen["x"][:, :n_vis])
    # frame attention: changing frame 1 leaves frame 0's frame-attention output unchanged
    layer = branch.layers[first]
    h = torch.randn(1, n_vis, 16)
    h2 = h.clone()
    h2[:, 36:] += 1.0
    c = torch.zeros_like(h)
    mask = __import__("paperworks.services.vlm.spatiolm.model", fromlist=["frame_mask"]).frame_mask(2, "cpu")
    a, b = layer.frame_attn(h + layer.w_in(c), mask), layer.frame_attn(h2 + layer.w_in(c), mask)
    torch.testing.assert_close(a[:, :36], b[:, :36])


def test_head_predicts_half_resolution_depth_rays_and_confidences():
    head = DPTHead(CFG)
    out = head([torch.randn(2, 72, 16) for _ in CFG.branch_layers])
    assert out["depth"].shape == (2, 2, 12, 12) and out["rays"].shape == (2, 2, 12, 12, 6)
    assert (out["depth"] > 0).all() and (out["depth_conf"] > 1).all() and (out["ray_conf"] > 1).all()


def test_losses_are_their_formulas():
    torch.manual_seed(0)
    pred, target = torch.rand(2, 4, 4) + 1, torch.rand(2, 4, 4) + 1
    conf, tconf = torch.rand(2, 4, 4) + 1, torch.rand(2, 4, 4) + 1.5
    err = (pred - target).abs()
    w = tconf.log()
    reg = (w * err).sum() / w.sum() + (err * conf - 0.2 * conf.log()).mean()
    grad = (pred.diff(dim=-1) - target.diff(dim=-1)).abs().mean() + (
        pred.diff(dim=-2) - target.diff(dim=-2)
    ).abs().mean()
    torch.testing.assert_close(losses.depth_loss(pred, conf, target, tconf), reg + grad)
    # the relational loss ignores scale and the diagonal, and sees a changed relation
    s = torch.randn(1, 5, 8)
    assert losses.token_loss([s], [3 * s]) < 1e-6
    t = s.clone()
    t[0, 0] = -t[0, 0]
    assert losses.token_loss([s], [t]) > 0.1
    parts = {
        "lm": torch.tensor(1.0),
        "token": torch.tensor(1.0),
        "depth": torch.tensor(1.0),
        "ray": torch.tensor(1.0),
    }
    assert float(losses.total(parts)) == pytest.approx(1.0)
    assert losses.WEIGHTS == {"lm": 0.6, "token": 0.2, "depth": 0.1, "ray": 0.1}


def test_only_branch_head_and_condition_projection_train():
    cfg = SpatialConfig(d_model=16, heads=2, vision_layers=1, lm_layers=2, frames=1, branch_layers=(0, 1))
    pool = qa.sample(np.random.default_rng(2), 16, qa.SPATIAL, 1)
    torch.manual_seed(0)
    base = SpatialVLM(cfg).eval()
    before = {k: v.clone() for k, v in base.state_dict().items()}
    model = train.train_arm(base, "spatio", pool, 3, 1e-3, 8, 0, "cpu")
    for k, v in model.vlm.state_dict().items():
        assert torch.equal(v, before[k]), k
    assert model.branch.layers["0"].w_in.weight.abs().sum() > 0 and model.head is not None
    assert model.branch.condition_proj.weight.requires_grad
    tuned = train.train_arm(base, "finetune", pool, 3, 1e-3, 8, 0, "cpu")
    assert any(not torch.equal(v, before[k]) for k, v in tuned.vlm.state_dict().items())
    r = train.evaluate(model, pool, qa.sample(np.random.default_rng(3), 8, qa.GENERAL, 1), "cpu")
    assert 0 <= r["spatial_accuracy"] <= 1 and r["depth_abs_rel"] > 0
    with pytest.raises(ValueError, match="arm"):
        train.train_arm(base, "lora", pool, 1, 1e-3, 8, 0, "cpu")


def test_teacher_is_noisy_ground_truth_with_edge_confidence():
    b = qa.sample(np.random.default_rng(4), 4, qa.SPATIAL, 2)
    t = train.Teacher(0, noise=0.0)(b.depth, b.rays, b.images, np.random.default_rng(0))
    np.testing.assert_allclose(t["depth"].numpy(), train.half(b.depth), rtol=1e-5)
    assert t["tokens"].shape == (4, 72, train.TEACHER_DIM) and (t["depth_conf"] > 1).all()
