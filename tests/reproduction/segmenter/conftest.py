"""Shared runs of the segmenter's reproduction experiments (`experiments.py` beside this file).
`SEGMENTER_REPRO_SEED` picks another seed."""

from __future__ import annotations

import os

import pytest
from paperworks.services.segmenter import data
from reproduction.segmenter import experiments

SEED = int(os.environ.get("SEGMENTER_REPRO_SEED", "0"))
TRAIN = range(SEED * 1000, SEED * 1000 + 8)
TEST = range(SEED * 1000 + 500, SEED * 1000 + 506)


@pytest.fixture(scope="session")
def fewshot_run():
    return experiments.fewshot(
        data.PhantomConfig(lesion_radius=2.0), TRAIN, TEST, trials=60, steps=200, seed=SEED
    )


@pytest.fixture(scope="session")
def dense_run():
    return experiments.semir_vs_unet(
        (3.0, 2.5, 1.5), TRAIN[:5], TEST[:4], trials=60, steps=120, unet_base=8, seed=SEED, size=32
    )


@pytest.fixture(scope="session")
def wne_run():
    return experiments.wne_claims(steps=200, seed=SEED)
