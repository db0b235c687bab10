"""SEMIR's minor: contraction, deletions, exact lifting, boundaries, descriptors, search."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.services.segmenter import gnn, search, synthetic
from paperworks.services.segmenter.minor import (
    MinorParams,
    boundary_dice,
    build_minor,
    label_boundary,
    oracle_dice,
)

CFG = synthetic.PhantomConfig(size=24, lesions=2, lesion_radius=2.0)


@pytest.fixture(scope="module")
def case():
    return synthetic.phantom(CFG, 1)


def test_every_voxel_in_exactly_one_supernode_or_background(case):
    image, labels = case
    m = build_minor(image, MinorParams(psi=0.08, size_min=3, alpha=0.04))
    assert m.node.shape == image.shape and m.node.min() >= -1
    assert np.array_equal(np.bincount(m.node[m.node >= 0], minlength=m.nodes), m.size)
    assert (m.node == -1).sum() + m.size.sum() == image.size
    assert (m.node == -1).any()  # size_min deleted something
    # lifting the identity labelling reproduces the partition; majority lifting is exact per node
    assert np.array_equal(m.lift(np.arange(m.nodes), background=-1), m.node)
    maj = m.node_majority(labels, 3)
    lifted = m.lift(maj)
    for n in range(0, m.nodes, max(1, m.nodes // 20)):
        assert (lifted[m.node == n] == maj[n]).all()


def test_contraction_is_seed_relative_so_a_gradient_cannot_drift():
    ramp = np.tile(np.linspace(0, 1, 40, dtype=np.float32), (6, 6, 1))
    m = build_minor(ramp, MinorParams(psi=0.1, alpha=1.0))
    assert m.nodes >= 9  # a slow gradient crosses a band every psi
    spread = [np.ptp(ramp[m.node == n]) for n in range(m.nodes)]
    assert max(spread) <= 0.1 + 2 / 39  # within psi of the seed level (+ one voxel of smoothing)


def test_node_and_edge_deletion_follow_their_parameters(case):
    image, _ = case
    base = build_minor(image, MinorParams(psi=0.08))
    ranged = build_minor(image, MinorParams(psi=0.08, intensity_min=0.2, intensity_max=0.7, size_max=400))
    assert ((ranged.mean >= 0.2) & (ranged.mean <= 0.7) & (ranged.size <= 400)).all()
    assert ranged.nodes < base.nodes
    loose = build_minor(image, MinorParams(psi=0.08, alpha=10.0))
    tight = build_minor(image, MinorParams(psi=0.08, alpha=0.0))
    assert not loose.cut.any() and tight.cut.all()
    assert loose.boundary.sum() < tight.boundary.sum()
    assert np.array_equal(tight.boundary, label_boundary(tight.region))


def test_two_dimensional_images_work():
    image, labels = synthetic.phantom(CFG, 2)
    m = build_minor(image[12], MinorParams(psi=0.1))
    assert m.node.shape == (24, 24) and m.x.shape == (m.nodes, 7) and np.isfinite(m.x).all()
    assert set(oracle_dice(m, labels[12], [1])) == {1}


def test_descriptors_are_rotation_invariant(case):
    image, _ = case
    p = MinorParams(psi=0.1, size_min=5)
    a = build_minor(image, p)
    b = build_minor(np.ascontiguousarray(np.rot90(image, 1, (0, 2))), p)
    assert a.nodes == b.nodes
    fa, fb = a.x[np.lexsort(a.x[:, :3].T)], b.x[np.lexsort(b.x[:, :3].T)]
    np.testing.assert_allclose(fa, fb, rtol=1e-4, atol=1e-4)


def test_boundary_dice_tolerance():
    t = np.zeros((10, 10), bool)
    t[5] = True
    shifted = np.roll(t, 1, 0)
    assert boundary_dice(t, t, 0) == 1.0 and boundary_dice(shifted, t, 0) == 0.0
    assert boundary_dice(shifted, t, 1) == 1.0


def test_lifted_loss_is_the_voxel_loss(case):
    image, labels = case
    m = build_minor(image, MinorParams(psi=0.08, size_min=2))
    mask = labels == 1
    logits = torch.randn(m.nodes, dtype=torch.float64)
    size = torch.from_numpy(m.size)
    tc = torch.from_numpy(m.node_fraction(mask) * m.size)
    fast = gnn.lifted_loss(logits, size, tc, float(mask.sum()), float(mask.size))
    vox_logit = torch.from_numpy(m.lift(logits.numpy(), background=-np.inf)).flatten()
    t = torch.from_numpy(mask.flatten()).double()
    keep = torch.isfinite(vox_logit)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(vox_logit[keep], t[keep], reduction="sum")
    bce = bce / t.numel()
    p = torch.sigmoid(vox_logit)
    dice = 1 - (2 * (p * t).sum() + 1) / (p.sum() + t.sum() + 1)
    assert float(fast) == pytest.approx(float(bce + dice), rel=1e-9)


def test_search_starts_from_the_hand_set_vector_and_improves_on_it():
    vols = synthetic.cohort(CFG, range(2))
    for method in ("tpe", "extra_trees"):
        best, history = search.search(vols, trials=8, method=method, seed=0)
        assert len(history) == 8
        hand = search.hand_set([v[0] for v in vols])
        assert history[0]["params"] == hand.as_dict()
        assert history[0]["score"] == pytest.approx(search.objective(hand, vols))
        assert search.objective(best, vols) == max(h["score"] for h in history)
