"""Two runs of the DS-Net experiments on the synthetic scenes, shared by the claims.

Claims 1 and 2: one detector (600 training scenes, 64x64, 10 epochs) is trained and frozen; each
relation model trains on its SGDet output (10 epochs) and is scored in SGDet on 200 held-out scenes.
Claim 3: the same in the occlusion world (`experiments.OCCLUSION_WORLD`: overlapping pairs whose order
only the pixels show, the detector's depth-order estimates as object attributes, 600 held-out scenes).
The occlusion world is measured in a second process (`experiments.BackgroundWorld`), started with the
first test of this folder when any occlusion test is selected, so it trains while the first world's
tests run. CI asserts seed 0 only; `SCENEGRAPH_REPRO_SEED` picks another (the margins were chosen
from seeds 0, 1 and 2, measured at this scale: docs/reproductions/scenegraph.md). These are `Setup`'s
defaults: 400 training scenes at 15 epochs, the same CPU time, lost margins on some seed. Every claim
averages three relation-training seeds.
"""
from __future__ import annotations

import os

import pytest
from reproduction.scenegraph import experiments

SEED = int(os.environ.get("SCENEGRAPH_REPRO_SEED", "0"))
# what the occlusion-world tests read, each on `experiments.TRAINING_SEEDS` relation-training seeds
OCCLUSION_VARIANTS = ("penet", "penet+dsnet", "penet+dsnet/space-to-vision-only",
                      "penet+dsnet/vision-to-space-only", "penet+dsnet/vision-stream-only",
                      "penet+dsnet/single-stream")


@pytest.fixture(scope="session")
def sgg_run():
    return experiments.prepare(experiments.Setup(seed=SEED))


@pytest.fixture(scope="session", autouse=True)
def _occlusion_world(request):
    """The occlusion world's background process, when a selected test needs it; stopped at the end."""
    if not any("occlusion_run" in item.fixturenames for item in request.session.items):
        yield None
        return
    world = experiments.BackgroundWorld(experiments.Setup(seed=SEED, **experiments.OCCLUSION_WORLD),
                                        OCCLUSION_VARIANTS, experiments.TRAINING_SEEDS)
    yield world
    world.stop()


@pytest.fixture(scope="session")
def occlusion_run(_occlusion_world):
    return _occlusion_world.result()
