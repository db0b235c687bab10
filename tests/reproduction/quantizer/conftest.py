"""One tiny Llama-style teacher trained on the stdlib sources, and one run of each method and its
baseline on it, shared by the claims. CI asserts seed 0 only; `QUANTIZER_REPRO_SEED` picks
another seed (the margins were checked on seeds 0, 1 and 2; the benchmark runs all three and
reports mean and spread, scalar QAT's lr was chosen on seeds 3-5)."""
from __future__ import annotations

import os

import pytest
from reproduction.quantizer import experiments

SEED = int(os.environ.get("QUANTIZER_REPRO_SEED", "0"))


@pytest.fixture(scope="session")
def setup():
    return experiments.Setup(seed=SEED)


@pytest.fixture(scope="session")
def teacher(setup):
    return experiments.train_teacher(setup)


@pytest.fixture(scope="session")
def coupling(teacher, setup):
    return experiments.coupling(teacher, setup)


@pytest.fixture(scope="session")
def lcqat(teacher, setup):
    return experiments.lcqat_vs_scalar(teacher, setup)
