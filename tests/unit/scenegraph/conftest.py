"""A few synthetic scenes and a generator trained for one epoch on them, shared by the unit tests."""
from __future__ import annotations

import pytest
from paperworks.services.scenegraph.data.scenes import generate_scenes, synthetic_vocabulary
from paperworks.services.scenegraph.dsnet import DSNetConfig
from paperworks.services.scenegraph.generator import SceneGraphGenerator, TrainConfig
from paperworks.services.scenegraph.relation_model import RelationConfig


@pytest.fixture(scope="session")
def vocab():
    return synthetic_vocabulary()


@pytest.fixture(scope="session")
def scenes():
    return generate_scenes(24, seed=3)


@pytest.fixture(scope="session")
def tiny_generator(scenes, vocab):
    cfg = TrainConfig(relation=RelationConfig(base="penet", dsnet=DSNetConfig(dim=16, heads=2)),
                      detector_epochs=1, classifier_epochs=1, relation_epochs=1, max_objects=6)
    return SceneGraphGenerator.train(scenes, vocab, cfg)
