"""SEMIR's minor: contraction, deletions, exact lifting, boundaries, descriptors, search."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from paperworks.kernels.ops import grid_contract
from paperworks.services.segmenter import data
from paperworks.services.segmenter.semir import gnn, search
from paperworks.services.segmenter.semir.contraction import (
    absorb_fragments,
    fragment_size,
    seeded_contraction,
)
from paperworks.services.segmenter.semir.minor import (
    NODE_FEATURES,
    SMOOTH,
    MinorParams,
    boundary_dice,
    build_minor,
    label_boundary,
    oracle_dice,
)
from scipy import ndimage

CFG = data.PhantomConfig(size=24, lesions=2, lesion_radius=2.0)


@pytest.fixture(scope="module")
def case():
    return data.phantom(CFG, 1)


def test_every_voxel_in_exactly_one_supernode_or_background(case):
    image, labels = case
    m = build_minor(image, MinorParams(psi=0.08, size_min=12, alpha=0.04))
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
    assert m.nodes >= 5  # a slow gradient needs a new seed every 2 psi
    smoothed = ndimage.gaussian_filter(ramp, SMOOTH)
    # every voxel lies within psi of its supernode's seed intensity
    assert np.abs(smoothed - m.seed[m.node]).max() <= 0.1 + 1e-6
    spread = [np.ptp(smoothed[m.node == n]) for n in range(m.nodes)]
    assert max(spread) <= 0.2 + 1e-6


def test_a_homogeneous_region_is_one_supernode_whatever_its_intensity():
    # fixed bands k*psi would split a flat region sitting on a band edge (0.5 = 5 * 0.1) by noise
    rng = np.random.default_rng(0)
    for level in (0.5, 0.53):
        flat = (level + rng.normal(0, 0.01, (12, 12, 12))).astype(np.float32)
        assert build_minor(flat, MinorParams(psi=0.1)).nodes == 1


def test_seeds_start_from_the_dominant_intensity_of_each_catchment():
    # an organ (0.5) with a brighter lesion (0.62): the organ's seed is its own intensity
    image = np.full((16, 16, 16), 0.5, np.float32)
    image[6:10, 6:10, 6:10] = 0.62
    m = build_minor(image, MinorParams(psi=0.05, alpha=0.01))
    organ = m.node[0, 0, 0]
    assert m.seed[organ] == pytest.approx(0.5, abs=0.05 / 8)
    assert (m.node[6:10, 6:10, 6:10] != organ).all()  # the lesion is beyond psi of the organ's seed
    assert (m.node[:5] == organ).all()


def _absorb(values, widths, psi=0.05, min_size=10):
    """`absorb_fragments` on a (3, 3, sum(widths)) image of slabs along the last axis, one region
    per slab, each seeded at its own intensity."""
    slabs = [np.full((3, 3, w), v, np.float32) for v, w in zip(values, widths, strict=True)]
    image = np.concatenate(slabs, 2)
    weights = np.zeros((3, *image.shape), np.float32)
    weights[2, :, :, :-1] = np.diff(image, axis=2) != 0  # contract inside each slab only
    regions = grid_contract(torch.from_numpy(image), torch.from_numpy(weights), 0.5)
    return absorb_fragments(regions, regions.region_sum.numpy(), np.array(values), min_size, psi)


def test_a_fragment_joins_the_whole_neighbour_with_the_closest_seed():
    # tissue 0.0 | a one-voxel partial-volume slab (9 voxels, below a fragment size of 10) | tissue 0.3
    for mixed, joins in ((0.2, 2), (0.1, 0)):
        table, seed = _absorb((0.0, mixed, 0.3), (4, 1, 4))
        assert table[1] == table[joins] and len(seed) == 2
        assert seed[table[joins]] == [0.0, 0.3][joins // 2]  # the whole region keeps its seed


def test_a_fragment_prefers_a_whole_region_to_a_closer_fragment():
    # 0.0 (whole) | 0.2 (fragment) | 0.21 (fragment) | 0.5 (whole): the 0.2 fragment's closest
    # seed is the other fragment's, but the chain ends in a whole region, never as a supernode
    table, seed = _absorb((0.0, 0.2, 0.21, 0.5), (4, 1, 1, 4))
    assert len(seed) == 2 and table[1] == table[0] and table[2] == table[3]


def test_a_small_structure_standing_out_from_its_surroundings_is_kept():
    # a one-voxel-thick bright slab (a small lesion core) more than psi above both neighbours
    table, seed = _absorb((0.0, 0.6, 0.3), (4, 1, 4))
    assert len(seed) == 3 and list(table) == [0, 1, 2]
    # within psi of a neighbour's seed it is that tissue, split off by noise: absorbed
    table, _ = _absorb((0.0, 0.33, 0.3), (4, 1, 4))
    assert table[1] == table[2]


def _small_nodes_are_extrema(m, image, psi) -> bool:
    """Every supernode below the fragment size stands more than psi above (or below) every
    neighbour's seed, on the smoothed image the seeds live on."""
    smoothed = ndimage.gaussian_filter(image, SMOOTH).astype(np.float64)
    level = np.bincount(m.node.ravel(), smoothed.ravel(), minlength=m.nodes) / m.size
    for n in np.flatnonzero(m.size < fragment_size(image.ndim)):
        seeds = m.seed[np.concatenate([m.edges[m.edges[:, 0] == n, 1], m.edges[m.edges[:, 1] == n, 0]])]
        if not (level[n] > seeds.max() + psi or level[n] < seeds.min() - psi):
            return False
    return True


def test_only_small_structures_stay_below_the_fragment_size_and_statistics_are_exact(case):
    image, _ = case
    m = build_minor(image, MinorParams(psi=0.03, alpha=0.04))
    assert _small_nodes_are_extrema(m, image, 0.03)
    np.testing.assert_allclose(m.mean, np.bincount(m.node.ravel(), image.ravel().astype(np.float64)) / m.size)
    # adjacency: exactly the supernode pairs that share a grid face, with their face counts
    faces = {}
    for a in range(3):
        lo = np.moveaxis(m.node, a, 0)[:-1].ravel()
        hi = np.moveaxis(m.node, a, 0)[1:].ravel()
        for i, j in zip(np.minimum(lo, hi)[lo != hi], np.maximum(lo, hi)[lo != hi], strict=True):
            faces[(i, j)] = faces.get((i, j), 0) + 1
    assert {tuple(e): c for e, c in zip(m.edges.tolist(), m.contact, strict=True)} == faces
    # every voxel lies within psi of its seed, except those of absorbed fragments
    smoothed = ndimage.gaussian_filter(image, SMOOTH)
    raw = seeded_contraction(image, smoothed, 0.03, min_size=1)
    labels, count = raw.regions.labels.numpy(), raw.regions.region_count.numpy()
    assert (np.abs(smoothed - raw.seed_level[labels]) <= 0.03 + 1e-6).all()
    assert (count < fragment_size(3)).any()  # there were fragments to absorb
    beyond = np.abs(smoothed - m.seed[m.node]) > 0.03 + 1e-6
    assert beyond.any() and (count[labels][beyond] < fragment_size(3)).all()


def test_the_minor_is_compact_at_the_border_of_two_tissues():
    # a blurred, noisy ball: its curved border leaves a shell of partial-volume voxels that noise
    # and the voxel staircase break into fragments (without absorbing them: 421 and 1,888 nodes)
    rng = np.random.default_rng(0)
    radius = np.sqrt(((np.indices((32, 32, 32)) - 15.5) ** 2).sum(0))
    image = ndimage.gaussian_filter((radius < 12).astype(np.float32) * 0.3, 0.6)
    image = (image + rng.normal(0, 0.03, image.shape)).astype(np.float32)
    for psi in (0.08, 0.03):
        m = build_minor(image, MinorParams(psi=psi, alpha=0.04))
        assert _small_nodes_are_extrema(m, image, psi)
        assert m.nodes < image.size / 200  # more than 200 voxels per supernode


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
    image, labels = data.phantom(CFG, 2)
    m = build_minor(image[12], MinorParams(psi=0.1))
    assert m.node.shape == (24, 24) and m.x.shape == (m.nodes, NODE_FEATURES) and np.isfinite(m.x).all()
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
    vols = data.cohort(CFG, range(2))
    for method in ("tpe", "extra_trees"):
        best, history = search.search(vols, trials=8, method=method, seed=0)
        assert len(history) == 8
        hand = search.hand_set([v[0] for v in vols])
        assert history[0]["params"] == hand.as_dict()
        assert history[0]["score"] == pytest.approx(search.objective(hand, vols))
        assert search.objective(best, vols) == max(h["score"] for h in history)
