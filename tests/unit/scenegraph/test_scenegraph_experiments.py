"""The reproduction suite's background world: it hands back the world's metrics, and a failure says why.
(That its numbers equal the in-process run's was checked at full size: docs/reproductions/scenegraph.md.)"""
from __future__ import annotations

import pytest
from reproduction.scenegraph import experiments

TINY = experiments.Setup(seed=5, train_images=12, test_images=10, detector_epochs=1, relation_epochs=1,
                         max_objects=6)


def test_a_world_measured_in_another_process_comes_back_as_its_metrics():
    world = experiments.BackgroundWorld(TINY, ("penet",), 1)
    here = experiments.measure_world(TINY, ("penet",), 1)
    there = world.result()
    assert set(there.results) == {("penet", 0)}
    expected = experiments.mean_metrics([here[("penet", 0)]])
    assert there.measure_over_seeds("penet", 1) == pytest.approx(expected, rel=0, abs=0, nan_ok=True)
    with pytest.raises(KeyError, match="penet with training seeds \\[1\\] was not measured"):
        there.measure_over_seeds("penet", 2)
    world.stop()


def test_a_failing_world_reraises_with_the_worker_traceback():
    world = experiments.BackgroundWorld(TINY, ("no-such-variant",), 1)
    with pytest.raises(RuntimeError, match="(?s)failed in its process.*KeyError: 'no-such-variant'"):
        world.result()
    world.stop()
