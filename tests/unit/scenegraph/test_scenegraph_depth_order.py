"""The occlusion world, the depth-order estimator's targets, the depth annotation in the dataset format,
and a generator that carries the estimator through training, prediction and its checkpoint."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from paperworks.services.scenegraph import checkpoint
from paperworks.services.scenegraph.data.scenes import SceneConfig, generate_scenes
from paperworks.services.scenegraph.data.scenes_json import load_json, write_json
from paperworks.services.scenegraph.dsnet import DSNetConfig
from paperworks.services.scenegraph.generator import SceneGraphGenerator, TrainConfig
from paperworks.services.scenegraph.relation_model import RelationConfig
from paperworks.services.scenegraph.sgg.depth_order import ordered_pairs
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from paperworks.shared.errors import InvalidArgument


def _depth_labels(scenes, vocab):
    ids = [vocab.predicate_index(p) for p in vocab.depth_order]
    return sum(int(np.isin(s.relations[:, 2], ids).sum()) for s in scenes)


def test_the_occlusion_world_makes_depth_order_frequent_and_every_object_its_own_colour(vocab):
    plain, occluded = generate_scenes(200, 0), generate_scenes(200, 0, SceneConfig(overlap_pair_rate=0.7))
    assert _depth_labels(occluded, vocab) > 3 * _depth_labels(plain, vocab)
    # the default world is unchanged by the option: same seed, same pixels
    assert all((a.image == b.image).all() for a, b in zip(plain[:5], generate_scenes(5, 0), strict=True))
    for s in occluded[:40]:
        # the renderer's depth annotation agrees with the in front of / behind it labels
        for a, b, p in s.true_relations.tolist():
            if vocab.predicate_name(p) == "in front of":
                assert s.depth[a] > s.depth[b]


def test_targets_come_from_the_depth_annotation_else_from_the_depth_order_predicates(vocab):
    boxes = np.array([[0, 0, 10, 10], [6, 0, 16, 10], [30, 30, 40, 40], [2, 2, 4, 4]], np.float32)
    front, behind = (vocab.predicate_index(p) for p in vocab.depth_order)
    relations = np.array([[1, 0, behind], [2, 0, front]], np.int64)
    sample = Sample(np.zeros((64, 64, 3), np.uint8), boxes, np.zeros(4, np.int64), relations,
                    depth=np.array([2.0, 1.0, 3.0, 5.0], np.float32))
    # overlapping pairs only (object 2 overlaps nothing), and not a box inside another (3 lies in 0)
    assert ordered_pairs(sample, front, behind) == [(0, 1)]
    sample.depth = None
    assert ordered_pairs(sample, front, behind) == [(0, 1), (2, 0)]


def test_the_depth_annotation_round_trips_through_the_dataset_format(tmp_path, vocab):
    scenes = generate_scenes(3, 0, SceneConfig(overlap_pair_rate=1.0))
    path = write_json(scenes, vocab, tmp_path)
    loaded_vocab, loaded = load_json(path, image_size=64)
    assert loaded_vocab.depth_order == ["in front of", "behind"]
    assert all(np.allclose(a.depth, b.depth) for a, b in zip(scenes, loaded, strict=True))
    doc = json.loads(path.read_text())
    del doc["images"][1]["objects"][2]["depth"]
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidArgument) as exc:
        load_json(path, image_size=64)
    assert exc.value.field == "dataset.path: images[1].objects[2].depth"


@pytest.fixture(scope="module")
def depth_generator(vocab):
    scenes = generate_scenes(24, 3, SceneConfig(overlap_pair_rate=0.7))
    cfg = TrainConfig(relation=RelationConfig(base="penet", dsnet=DSNetConfig(dim=16, heads=2)),
                      detector_epochs=1, classifier_epochs=1, relation_epochs=1, max_objects=6,
                      depth_order=True)
    return SceneGraphGenerator.train(scenes, vocab, cfg), scenes


def test_the_relation_model_sees_the_estimates_and_the_checkpoint_keeps_the_estimator(depth_generator):
    gen, scenes = depth_generator
    feats = gen.features(scenes[:4], "predcls")  # given boxes: a one-epoch detector finds little
    assert feats.attributes.shape == (4, 6, 2)
    assert feats.attributes[feats.valid].abs().sum() > 0 and feats.attributes[~feats.valid].abs().sum() == 0
    assert gen.relation.cfg.attributes == 2
    again = checkpoint.load(checkpoint.save(gen))
    assert again.depth is not None
    assert torch.equal(again.features(scenes[:4], "predcls").attributes, feats.attributes)
    a, b = gen.predict(scenes[:4], "predcls", 5), again.predict(scenes[:4], "predcls", 5)
    assert any(g.triplets for g in a)
    assert [[t.score for t in g.triplets] for g in a] == [[t.score for t in g.triplets] for g in b]


@pytest.mark.parametrize("depth_order", [["in front of"], ["in front of", "in front of"],
                                         ["in front of", "atop"]])
def test_depth_order_must_name_two_distinct_known_predicates(vocab, depth_order):
    with pytest.raises(ValueError, match="depth_order"):
        Vocabulary(classes=vocab.classes, predicates=vocab.predicates, depth_order=depth_order)
