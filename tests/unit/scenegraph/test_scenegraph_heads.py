"""The frequency prior, the predicate split as configuration, and the DS-Net head's routing."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from paperworks.services.scenegraph.dsnet import CrossFusion, DSNetConfig
from paperworks.services.scenegraph.relation_model import RelationConfig, RelationModel
from paperworks.services.scenegraph.sgg.components import FrequencyPrior, Pairs, predicate_counts
from paperworks.services.scenegraph.sgg.features import UNION_POOL, Features
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary


def _sample(labels, relations) -> Sample:
    n = len(labels)
    return Sample(np.zeros((8, 8, 3), np.uint8), np.zeros((n, 4), np.float32), np.array(labels),
                  np.array(relations).reshape(-1, 3))


def test_predicate_counts_and_frequency_prior_are_log_p_predicate_given_classes():
    samples = [_sample([0, 1], [[0, 1, 2]]), _sample([0, 1, 1], [[0, 1, 2], [0, 2, 1]])]
    counts = predicate_counts(samples, num_classes=2, num_predicates=3)
    assert counts[0, 1].tolist() == [0, 1, 2]  # (class 0 -> class 1): one "1", two "2", no background
    assert counts[1, 0].tolist() == [3, 0, 0]  # unannotated ordered pairs count as background
    assert counts[1, 1].tolist() == [2, 0, 0]
    prior = FrequencyPrior(counts)
    logp = prior(torch.tensor([0, 1]), torch.tensor([1, 0])).detach()  # pairs (0 -> 1), (1 -> 0)
    assert logp.shape == (2, 3)
    assert logp[0].exp().tolist() == pytest.approx([0, 1 / 3, 2 / 3], abs=2e-3)
    assert logp[0].exp().sum() == pytest.approx(1.0)
    assert logp[1].exp().tolist() == pytest.approx([1, 0, 0], abs=2e-3)


def test_the_predicate_split_is_configuration():
    v = Vocabulary(classes=["x"], predicates=["on", "has", "near"], geometric=["near", "on"])
    assert v.geometric_ids == [1, 3] and v.non_geometric_ids == [2]
    assert v.num_predicates == 4 and v.predicate_name(0) == "__background__"
    with pytest.raises(ValueError, match="geometric names predicates that do not exist"):
        Vocabulary(classes=["x"], predicates=["on"], geometric=["under"])


def _random_features(n_img=2, n=4, obj_dim=4 * 16, fine=3, num_classes=3, num_predicates=4):
    g = torch.Generator().manual_seed(0)
    xy = torch.rand(n_img, n, 2, generator=g) * 40
    wh = torch.rand(n_img, n, 2, generator=g) * 15 + 4
    rel = torch.randint(0, num_predicates, (n_img, n, n), generator=g)
    rel[:, torch.arange(n), torch.arange(n)] = -1
    return Features(boxes=torch.cat([xy, xy + wh], -1),
                    labels=torch.randint(0, num_classes, (n_img, n), generator=g),
                    scores=torch.ones(n_img, n), valid=torch.ones(n_img, n, dtype=torch.bool),
                    obj_feats=torch.randn(n_img, n, obj_dim, generator=g).half(),
                    union_feats=torch.randn(n_img, n, n, fine, UNION_POOL, UNION_POOL, generator=g).half(),
                    rel_labels=rel, gt_index=torch.arange(n).repeat(n_img, 1), image_size=64)


VOCAB = Vocabulary(classes=["a", "b", "c"], predicates=["on", "riding", "near"], geometric=["on", "near"])
SMALL_DSNET = RelationConfig(base="motifs", dsnet=DSNetConfig(dim=16, heads=2), hidden=16, union_dim=16)


@pytest.mark.parametrize("base", ["motifs", "penet"])
@pytest.mark.parametrize("head", ["original", "dsnet"])
def test_every_model_gives_a_distribution_and_a_finite_loss(base, head):
    torch.manual_seed(0)
    counts = torch.rand(3, 3, 4) * 5
    model = RelationModel(RelationConfig(base=base, head=head, dsnet=DSNetConfig(dim=16, heads=2), hidden=16,
                                         union_dim=16), VOCAB, counts, coarse_channels=4, fine_channels=3)
    feats = _random_features()
    out = model(feats)
    assert out["logits"].shape == (2 * 4 * 3, 4)  # one row per ordered pair
    loss = model.loss(feats, out)
    loss.backward()
    assert torch.isfinite(loss)
    probs = model.predicate_scores(feats)
    off_diagonal = ~torch.eye(4, dtype=torch.bool).expand(2, 4, 4)
    assert probs.sum(-1)[off_diagonal].allclose(torch.ones(2 * 4 * 3))
    assert (probs.sum(-1)[~off_diagonal] == 0).all()  # no pair: zero


@pytest.mark.parametrize("head", ["original", "dsnet"])
@pytest.mark.parametrize(("base", "frequency_prior", "uses"),
                         [("motifs", None, True), ("penet", None, False), ("penet", True, True),
                          ("motifs", False, False)])
def test_both_heads_on_a_base_get_the_same_frequency_prior(base, head, frequency_prior, uses):
    """Claim 1's fairness: the prior goes where the base's own predictor puts it (MOTIFS' frequency bias;
    PE-Net none, as in the authors' code), on both heads alike, unless `frequency_prior` says otherwise;
    where there is one, the logits move with it."""
    torch.manual_seed(0)
    cfg = RelationConfig(base=base, head=head, frequency_prior=frequency_prior,
                         dsnet=DSNetConfig(dim=16, heads=2), hidden=16, union_dim=16)
    model = RelationModel(cfg, VOCAB, torch.rand(3, 3, 4) * 5, coarse_channels=4, fine_channels=3).eval()
    assert cfg.uses_frequency_prior is uses
    assert sum(isinstance(m, FrequencyPrior) for m in model.modules()) == int(uses)
    if uses:
        feats = _random_features()
        with torch.no_grad():
            before = model(feats)["logits"]
            model.prior.table.weight.add_(torch.randn(model.prior.table.weight.shape))
            assert not torch.allclose(model(feats)["logits"], before, atol=1e-3)


def test_dsnet_takes_geometric_logits_from_the_space_stream_and_the_rest_from_the_vision_stream():
    torch.manual_seed(0)
    model = RelationModel(SMALL_DSNET, VOCAB, torch.rand(3, 3, 4), coarse_channels=4, fine_channels=3)
    head = model.head
    assert head.space_classifier.fc.out_features == 3 and head.vision_classifier.fc.out_features == 2
    feats = _random_features()
    model.eval()
    base = model(feats)
    with torch.no_grad():
        head.vision_classifier.fc.bias[1] += 3.0  # "riding" in the vision stream
    bumped = model(feats)
    change = bumped["logits"] - base["logits"]
    # riding moves up; the geometric predicates move only through the shared log Pv(background)
    assert (change[..., 2] > 0).all()
    assert torch.allclose(change[..., 1], change[..., 3], atol=1e-5)
    with torch.no_grad():
        head.space_classifier.fc.bias[1] += 3.0  # "on" in the space stream
    again = model(feats)["logits"] - bumped["logits"]
    assert torch.allclose(again[..., 2], torch.zeros_like(again[..., 2]), atol=1e-5)  # riding untouched
    assert (again[..., 1] > 0).all()


def test_a_pair_labelled_with_the_other_groups_predicate_is_no_negative_for_a_stream():
    model = RelationModel(SMALL_DSNET, VOCAB, torch.rand(3, 3, 4), coarse_channels=4, fine_channels=3)
    # full ids: 0 background, 1 on, 2 riding, 3 near -> the stream's own {background} + group, -1 elsewhere
    assert model.space_map.tolist() == [0, 1, -1, 2]
    assert model.vision_map.tolist() == [0, -1, 1, -1]


def _dsnet_model(fusion: str) -> RelationModel:
    torch.manual_seed(0)
    cfg = SMALL_DSNET.model_copy(update={"dsnet": DSNetConfig(dim=16, heads=2, fusion=fusion)})
    return RelationModel(cfg, VOCAB, torch.rand(3, 3, 4), coarse_channels=4, fine_channels=3).eval()


@pytest.mark.parametrize("fusion", ["none", "bidirectional"])
def test_the_no_fusion_ablation_has_no_path_between_the_streams(fusion):
    """The no-fusion ablation keeps two streams and their losses but must not let either stream see the
    other: the space stream's logits ignore the vision inputs (RoI and union features) and the vision
    stream's logits ignore the space stream's weights. The bidirectional head is the control: there
    both paths exist, so the same probes must move the other stream's logits."""
    model = _dsnet_model(fusion)
    feats = _random_features()
    g = torch.Generator().manual_seed(1)
    other = dataclasses.replace(
        feats, obj_feats=torch.randn(feats.obj_feats.shape, generator=g).half(),
        union_feats=torch.randn(feats.union_feats.shape, generator=g).half())
    with torch.no_grad():
        base = model(feats)
        vision_changed = model(other)
        for p in model.head.space_mlp.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=g))
        space_changed = model(feats)
    assert not torch.allclose(vision_changed["aux_vision"], base["aux_vision"], atol=1e-3)  # the probes bite
    assert not torch.allclose(space_changed["aux_space"], base["aux_space"], atol=1e-3)
    space_unmoved = torch.allclose(vision_changed["aux_space"], base["aux_space"], atol=1e-5)
    vision_unmoved = torch.allclose(space_changed["aux_vision"], base["aux_vision"], atol=1e-5)
    if fusion == "none":
        assert model.head.space_fusion is None and model.head.vision_fusion is None
        assert space_unmoved and vision_unmoved
    else:
        assert not space_unmoved and not vision_unmoved


def test_the_fusion_attends_to_the_same_pair_in_the_other_stream():
    """Token t of both streams is the same pair; with every query-key score equal (in-projection zeroed),
    the same-pair bonus gives that key the weight of all the image's other pairs together, and a padded
    key gets none."""
    torch.manual_seed(0)
    fusion = CrossFusion(dim=8, heads=2, gated=True)
    with torch.no_grad():
        fusion.attn.in_proj_weight.zero_()
        fusion.attn.in_proj_bias.zero_()
    x, y = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    _, weights = fusion.attn(x, y, y, attn_mask=fusion.scores_bias(padding), need_weights=True)
    own = torch.diagonal(weights, dim1=1, dim2=2)
    assert torch.allclose(own[0], torch.full((5,), 0.5))
    assert torch.allclose(own[1, :3], torch.full((3,), 0.5))
    assert torch.all(weights[1, :, 3:] == 0)


def test_pairs_pack_the_present_ordered_pairs_and_scatter_back():
    feats = _random_features(n=3)
    feats.valid[1, 2] = False
    feats.rel_labels[1, 2, :] = -1
    feats.rel_labels[1, :, 2] = -1
    pairs = Pairs.of(feats)
    assert len(pairs) == 6 + 2
    assert pairs.select(feats.rel_labels).tolist() == feats.rel_labels[feats.rel_labels >= 0].tolist()
    s, o = pairs.rows(feats.labels)
    assert (s[6:] == feats.labels[1, :2]).all() and (o[6:] == feats.labels[1, [1, 0]]).all()
    grid = pairs.grid(torch.arange(1.0, 9.0)[:, None]).view(2, 3, 3)
    assert grid[1].tolist() == [[0, 7, 0], [8, 0, 0], [0, 0, 0]]
    assert pairs.padding[1].tolist() == [True, False, True, False, True, True, True, True, True]
    feats.valid[0, 2] = False
    feats.rel_labels[0, 2, :] = -1
    feats.rel_labels[0, :, 2] = -1
    assert Pairs.of(feats).objects == 2  # the token grid is as wide as the most crowded image


@pytest.mark.parametrize("base", ["motifs", "penet"])
@pytest.mark.parametrize("head", ["original", "dsnet"])
def test_a_pair_scores_the_same_whatever_other_images_share_its_batch(base, head):
    """Heads compute on packed pair rows: an image scored alone and beside another (with more objects)
    gets the same predicate scores, and slots without a pair score zero."""
    torch.manual_seed(0)
    model = RelationModel(RelationConfig(base=base, head=head, dsnet=DSNetConfig(dim=16, heads=2), hidden=16,
                                         union_dim=16), VOCAB, torch.rand(3, 3, 4) * 5, coarse_channels=4,
                          fine_channels=3).eval()
    feats = _random_features()
    feats.valid[0, 3] = False
    feats.rel_labels[0, 3, :] = -1
    feats.rel_labels[0, :, 3] = -1
    both = model.predicate_scores(feats)
    alone = model.predicate_scores(feats.take(torch.tensor([0])))
    torch.testing.assert_close(both[:1], alone, atol=1e-5, rtol=1e-5)
    assert both[0, 3].abs().sum() == 0 and both[0, :, 3].abs().sum() == 0
