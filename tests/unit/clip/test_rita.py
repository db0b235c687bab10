"""RITA's pieces, the world and the tiny CLIP, without services: OT through the kernel op against
POT, the Procrustes alignment's optimality, the cache's entropy-priority replacement and state,
views, the PGD budget, every method's output shape and the episodic prompt reset."""

from __future__ import annotations

import numpy as np
import ot
import pytest
import torch
from paperworks.services.clip import tinyclip, world
from paperworks.services.clip.rita import (
    METHODS,
    ClassCache,
    Stream,
    TTAConfig,
    align_to_prototype,
    augment,
    ot_distances,
    pgd,
    procrustes,
)
from paperworks.services.clip.rita.ot import cosine_cost, ot_loss

SMALL = {
    "vision": {"patch_size": 8, "num_hidden_layers": 1, "hidden_size": 16, "intermediate_size": 32},
    "text": {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1},
    "projection_dim": 16,
}


@pytest.fixture(scope="module")
def encoder():
    return tinyclip.build_tiny(0, **SMALL)


def test_world_is_deterministic_and_its_similarity_counts_shared_attributes():
    a, b = world.make_world(6, 3, drop_captions=True), world.make_world(6, 3, drop_captions=True)
    assert torch.equal(a.images, b.images) and a.captions == b.captions
    assert a.images.shape == (6, 3, 32, 32) and a.images.min() >= 0 and a.images.max() <= 1
    assert (a.labels == a.attrs[:, 0]).all()
    s = world.similarity(np.array([[0, 1, 2, 3]]), np.array([[0, 1, 2, 3], [0, 1, 0, 0], [1, 0, 0, 0]]))
    assert s.tolist() == [[1.0, 0.5, 0.0]]
    assert all(w in world.VOCAB for c in a.captions + world.class_prompts("striped") for w in c.split())


def test_text_features_from_embeddings_match_transformers(encoder):
    ids = encoder.tokenize(["a photo of a circle", "a photo of a striped red bar on the top left"])
    mine = encoder.encode_text_embeddings(encoder.token_embeddings(ids), ids)
    ref = torch.nn.functional.normalize(encoder.model.get_text_features(input_ids=ids).pooler_output, dim=-1)
    assert torch.allclose(mine, ref, atol=1e-5)
    with pytest.raises(ValueError, match="zebra"):
        encoder.tokenize(["a photo of a zebra"])


def test_checkpoint_round_trip_and_training_lowers_the_loss():
    enc = tinyclip.build_tiny(1, **SMALL)
    w = world.make_world(32, 0)
    with torch.no_grad():
        before = float(
            tinyclip.contrastive_loss(
                enc.encode_image(w.images), enc.encode_text(w.captions), enc.logit_scale, w.captions
            )
        )
    tinyclip.train_clip(enc, 12, 0, batch=32, lr=3e-3)
    with torch.no_grad():
        after = float(
            tinyclip.contrastive_loss(
                enc.encode_image(w.images), enc.encode_text(w.captions), enc.logit_scale, w.captions
            )
        )
    assert after < before - 0.1
    back, info = tinyclip.from_bytes(tinyclip.to_bytes(enc, {"k": 1}))
    assert info == {"k": 1}
    assert torch.allclose(back.encode_image(w.images[:2]), enc.encode_image(w.images[:2]), atol=1e-6)
    with pytest.raises(ValueError):
        tinyclip.from_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")


def test_sinkhorn_distance_matches_pot():
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.normalize(torch.randn(12, 5, generator=g), dim=-1)
    z = torch.nn.functional.normalize(torch.randn(4, 5, generator=g), dim=-1)
    cost = cosine_cost(x, z).double()
    ours = float(ot_distances(cost[None], epsilon=0.05, iters=2000)[0])
    plan = ot.sinkhorn(
        np.full(12, 1 / 12), np.full(4, 1 / 4), cost.numpy(), 0.05, numItermax=5000, stopThr=1e-10
    )
    assert ours == pytest.approx(float((plan * cost.numpy()).sum()), abs=1e-5)
    # the envelope gradient: d<T*, C>/dC = T* (the plan)
    c = cost.clone().requires_grad_(True)
    ot_loss(c[None], 0.05, 2000).sum().backward()
    assert np.allclose(c.grad.numpy(), plan, atol=1e-5)


def test_procrustes_alignment_is_a_minimiser_closest_to_identity():
    g = torch.Generator().manual_seed(1)
    x = torch.nn.functional.normalize(torch.randn(6, 8, generator=g), dim=-1)
    z = torch.nn.functional.normalize(torch.randn(8, generator=g), dim=0)
    target = z[None].expand(6, -1)
    ours = align_to_prototype(x, z)
    w = procrustes(x, target)
    assert torch.allclose(ours.norm(dim=1), torch.ones(6), atol=1e-5)
    assert float(((ours - target) ** 2).sum()) == pytest.approx(
        float(((x @ w - target) ** 2).sum()), abs=1e-4
    )
    assert torch.allclose(torch.nn.functional.normalize(ours.sum(0), dim=0), z, atol=1e-5)


def test_cache_keeps_the_lowest_entropy_entries_and_round_trips():
    cache = ClassCache(3, 4, capacity=2)
    f = torch.eye(4)
    assert cache.offer(f[0], 1, 0.5) and cache.offer(f[1], 1, 0.3)
    assert not cache.offer(f[2], 1, 0.9)  # full, and worse than the worst kept
    assert cache.offer(f[3], 1, 0.1)  # replaces the 0.5 entry
    assert sorted(cache.ents[1].tolist()) == pytest.approx([0.1, 0.3]) and cache.sizes() == [0, 2, 0]
    probs = torch.tensor([[0.98, 0.01, 0.01], [0.34, 0.33, 0.33]])
    assert cache.update(f[:2], probs, gamma=0.8) == 1 and cache.sizes() == [1, 2, 0]
    back = ClassCache.from_state(cache.state())
    assert back.sizes() == cache.sizes() and torch.equal(back.feats[1], cache.feats[1])


def test_views_and_pgd_budget(encoder):
    image = world.make_world(1, 0).images[0]
    views = augment(image, 8, torch.Generator().manual_seed(0))
    assert views.shape == (8, 3, 32, 32) and torch.equal(views[0], image)
    w = world.make_world(4, 2)
    text = encoder.encode_text(world.class_prompts()).detach()
    eps = 4 / 255
    adv = pgd(
        encoder, w.images, torch.as_tensor(w.labels), text, eps, generator=torch.Generator().manual_seed(0)
    )
    assert (adv - w.images).abs().max() <= eps + 1e-6 and adv.min() >= 0 and adv.max() <= 1
    assert not torch.equal(adv, w.images)


def test_every_method_scores_every_class_and_prompts_reset(encoder):
    stream = Stream(encoder, list(world.SHAPES), list(world.TEXTURES), TTAConfig(views=8, gamma=10.0))
    image = world.make_world(1, 4).images[0]
    for method in METHODS:
        scores = stream.predict(method, image, 0)
        assert scores.shape == (8,) and torch.isfinite(scores).all(), method
    assert len(stream.cache) > 0  # gamma = 10 admits every view
    init = stream.bank.init_ctx.clone()
    stream.predict("rita", image, 1)
    assert not torch.equal(stream.bank.ctx.detach(), init)  # adapted ...
    stream.bank.reset()
    assert torch.equal(stream.bank.ctx.detach(), init)  # ... and reset per sample (episodic)
    with pytest.raises(ValueError):
        stream.predict("magic", image, 0)


def test_stream_caches_are_bounded_and_evict_the_least_recently_used():
    from paperworks.services.clip.servicer import StreamCaches

    streams = StreamCaches(size=2)
    a, b, c = ClassCache(2, 4), ClassCache(2, 4), ClassCache(2, 4)
    streams.put(("t", "a"), a)
    streams.put(("t", "b"), b)
    assert streams.get(("t", "a")) is a  # a is now the most recently used
    streams.put(("t", "c"), c)
    assert len(streams) == 2 and streams.get(("t", "b")) is None and streams.get(("t", "c")) is c
    streams.drop(("t", "a"))
    assert streams.get(("t", "a")) is None and streams.get(("u", "c")) is None  # tenants are apart
