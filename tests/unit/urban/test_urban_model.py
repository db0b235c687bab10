"""UrbanFusion's pieces: stochastic views, the two loss terms, masking, any-subset inference,
the location encoder, the checkpoint."""
from __future__ import annotations

import numpy as np
import torch
from paperworks.services.urban.checkpoint import encoder_from_bytes, encoder_to_bytes
from paperworks.services.urban.urbanfusion.encoder import UrbanEncoder
from paperworks.services.urban.urbanfusion.location import LocationEncoder, unit_vectors
from paperworks.services.urban.urbanfusion.model import contrastive_loss, reconstruction_loss, sample_views
from paperworks.services.urban.urbanfusion.train import PretrainConfig, pretrain


def test_views_are_nonempty_subsets_and_disjoint_without_overlap():
    g = torch.Generator().manual_seed(0)
    present = torch.rand(500, 5, generator=g) < 0.6
    present[:, 0] = True
    a, b = sample_views(present, 0.0, g)
    assert a.any(1).all() and b.any(1).all()
    assert not (a & ~present).any() and not (b & ~present).any()
    several = present.sum(1) >= 2
    assert not (a & b)[several].any()
    assert ((a | b) == present)[several].all()
    a, b = sample_views(present, 1.0, g)
    assert (a == present).all() and (b == present).all()


def test_contrastive_loss_rewards_aligned_views():
    z = torch.randn(32, 8)
    aligned = contrastive_loss(z, z + 0.01 * torch.randn(32, 8), torch.tensor(np.log(10.0)))
    shuffled = contrastive_loss(z, z[torch.randperm(32)], torch.tensor(np.log(10.0)))
    assert aligned < shuffled
    assert torch.isclose(contrastive_loss(z, z.flip(1), torch.tensor(1.0)),
                         contrastive_loss(z.flip(1), z, torch.tensor(1.0)))


def _inputs(encoder, fs, rows=slice(0, 40)):
    feats = {k: torch.from_numpy(v[rows]) for k, v in fs.features.items()}
    return torch.from_numpy(fs.xyz[rows]), feats, torch.from_numpy(fs.present[rows])


def test_absent_modalities_change_neither_embedding_nor_reconstruction_loss(tiny_world, tiny_encoder):
    fs = tiny_encoder.features(tiny_world)
    xyz, feats, present = _inputs(tiny_encoder, fs)
    model = tiny_encoder.model.eval()
    with torch.no_grad():
        h = model(xyz, feats, present)
        rec = reconstruction_loss(model, h, feats, present)
        j = model.config.names.index("poi")
        junk = torch.randn_like(feats["poi"])
        noisy = dict(feats, poi=torch.where(present[:, j:j + 1], feats["poi"], junk))
        assert torch.allclose(model(xyz, noisy, present), h, atol=1e-5)
        assert torch.allclose(reconstruction_loss(model, h, noisy, present), rec)


def test_every_subset_embeds_including_coordinates_alone(tiny_world, tiny_encoder):
    fs = tiny_encoder.features(tiny_world)
    coords = tiny_encoder.embed(fs.restricted({"coordinates"}))
    full = tiny_encoder.embed(fs)
    assert coords.shape == full.shape == (len(fs), 16) and np.isfinite(coords).all()
    assert not np.allclose(coords, full)


def test_location_encoder_is_continuous_across_the_date_line():
    enc = LocationEncoder(8, seed=0)
    xyz = torch.from_numpy(unit_vectors(np.array([10.0, 10.0]), np.array([180.0, -180.0])))
    f = enc.fourier(xyz)
    assert torch.allclose(f[0], f[1], atol=1e-4)
    assert np.allclose(np.linalg.norm(unit_vectors(np.array([45.0]), np.array([30.0])), axis=1), 1.0)


def test_pretraining_lowers_the_loss_and_the_checkpoint_round_trips(tiny_world):
    encoder = UrbanEncoder.create(tiny_world, {"imagery": "channel_stats"}, 16, 1, 2, seed=1)
    fs = encoder.features(tiny_world)
    history = pretrain(encoder, fs, PretrainConfig(steps=40, batch_size=64, seed=1))
    first = np.mean([h["loss"] for h in history[:5]])
    last = np.mean([h["loss"] for h in history[-5:]])
    assert last < first
    loaded = encoder_from_bytes(encoder_to_bytes(encoder))
    assert loaded.specs["imagery"].extractor == "channel_stats"
    assert np.allclose(loaded.embed(loaded.features(tiny_world)), encoder.embed(fs), atol=1e-5)
