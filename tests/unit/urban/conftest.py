"""A tiny synthetic world and an (untrained) encoder on it, shared by the urban unit tests."""
from __future__ import annotations

import pytest
from paperworks.services.urban.data import world
from paperworks.services.urban.urbanfusion.encoder import UrbanEncoder


@pytest.fixture(scope="session")
def tiny_world():
    return world.generate(world.WorldConfig(seed=3, cities=2, locations_per_city=60, raster_size=8))


@pytest.fixture(scope="session")
def tiny_encoder(tiny_world):
    return UrbanEncoder.create(tiny_world, {}, dim=16, layers=1, heads=2, seed=0)
