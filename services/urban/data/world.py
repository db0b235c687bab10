"""A synthetic multi-city world whose information structure is known, for UrbanFusion's claims.

UrbanFusion (arXiv 2510.13774) is evaluated on 56 real cities; no such data can be
fetched here, so the project generates a world in which we *know* which modality
carries which information. Per city, six latent factors are fields over space, each
`sqrt(1 - a) * smooth(position) + sqrt(a) * local noise` (the local part is what
coordinates alone cannot know):

| factor      | street_view | imagery | map | poi | target (information)          |
|-------------|:-----------:|:-------:|:---:|:---:|-------------------------------|
| density     | x           | x       |     | x   | population_density (redundant)|
| greenness   |             | x       | x   |     | green_cover (redundant)       |
| income      | x           |         |     |     | house_price (unique)          |
| land use    |             |         | x   | x   | land_use, 4 classes (redundant)|
| walkability |             |         |     | x   | health_index = walkability x  |
| traffic     |             |         | x   |     | traffic (synergistic)         |

Modalities are noisy non-linear functions of their factors: street_view is a
24-dim feature vector (tanh of a random mixing, as a frozen image model's features
would be), poi 12 category counts (Poisson), imagery a 3-band raster patch
(building / vegetation / bare pixels), map a 6-band raster (land-use one-hot,
parks, roads). Each city has its own missing rate per modality; coordinates are
never missing. Every number is drawn from one seeded generator.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from paperworks.services.urban.data.dataset import Dataset, Modality

FACTORS = ("density", "greenness", "income", "walkability", "traffic")
LAND_USES = ("residential", "commercial", "industrial", "park")
TARGETS = {
    "population_density": "regression",
    "green_cover": "regression",
    "house_price": "regression",
    "health_index": "regression",
    "land_use": "classification",
}
INFORMATION = {
    "population_density": "redundant",
    "green_cover": "redundant",
    "land_use": "redundant",
    "house_price": "unique",
    "health_index": "synergistic",
}
KM_PER_DEG_LAT = 110.57


@dataclass(frozen=True)
class WorldConfig:
    seed: int = 0
    cities: int = 6
    locations_per_city: int = 600
    missing_rate: float = 0.3
    city_extent_km: float = 12.0
    length_scale_km: float = 2.5
    local_fraction: float = 0.4  # variance share of each factor that is not spatially smooth
    raster_size: int = 12
    street_view_dim: int = 24
    poi_categories: int = 12


def _smooth_field(rng: np.random.Generator, xy_km: np.ndarray, length_scale: float) -> np.ndarray:
    """A stationary Gaussian-process-like field: random Fourier features with a Gaussian spectrum."""
    components = 24
    omega = rng.normal(0.0, 1.0 / length_scale, size=(components, 2))
    phase = rng.uniform(0.0, 2 * np.pi, size=components)
    return np.sqrt(2.0 / components) * np.cos(xy_km @ omega.T + phase).sum(axis=1)


def _standardize(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() + 1e-9)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _city_centers(rng: np.random.Generator, n: int) -> np.ndarray:
    centers: list[tuple[float, float]] = []
    while len(centers) < n:
        lat, lon = rng.uniform(-50, 60), rng.uniform(-170, 170)
        if all(abs(lat - a) + abs(lon - b) > 5 for a, b in centers):
            centers.append((lat, lon))
    return np.array(centers)


def _imagery(rng: np.random.Generator, density: np.ndarray, greenness: np.ndarray, size: int) -> np.ndarray:
    n = len(density)
    building = rng.random((n, size, size)) < _sigmoid(1.5 * density)[:, None, None]
    vegetation = ~building & (rng.random((n, size, size)) < _sigmoid(1.5 * greenness)[:, None, None])
    colors = np.empty((n, 3, size, size), dtype=np.float32)
    for band, (b, v, bare) in enumerate(((0.8, 0.2, 0.5), (0.7, 0.6, 0.45), (0.75, 0.2, 0.35))):
        colors[:, band] = np.where(building, b, np.where(vegetation, v, bare))
    return colors + rng.normal(0.0, 0.08, colors.shape).astype(np.float32)


def _map_raster(rng: np.random.Generator, land_use: np.ndarray, greenness: np.ndarray,
                traffic: np.ndarray, size: int) -> np.ndarray:
    n = len(land_use)
    raster = np.zeros((n, 6, size, size), dtype=np.float32)
    pixel_class = np.where(rng.random((n, size, size)) < 0.6, land_use[:, None, None],
                           rng.integers(0, len(LAND_USES), (n, size, size)))
    for c in range(len(LAND_USES)):
        raster[:, c] = pixel_class == c
    raster[:, 4] = rng.random((n, size, size)) < _sigmoid(1.5 * greenness)[:, None, None]
    road_p = 0.5 * _sigmoid(1.5 * traffic)[:, None]
    rows = rng.random((n, size)) < road_p
    cols = rng.random((n, size)) < road_p
    raster[:, 5] = rows[:, :, None] | cols[:, None, :]
    return raster


def generate(config: WorldConfig = WorldConfig()) -> Dataset:
    """The world as a Dataset (raw modality values, targets, regions)."""
    rng = np.random.default_rng(config.seed)
    n_per, cities = config.locations_per_city, config.cities
    centers = _city_centers(rng, cities)
    half = config.city_extent_km / 2
    a = config.local_fraction
    lat, lon, region = [], [], []
    factors = {f: [] for f in (*FACTORS, *(f"use_{u}" for u in LAND_USES))}
    for c, (lat0, lon0) in enumerate(centers):
        xy = rng.uniform(-half, half, size=(n_per, 2))
        lat.append(lat0 + xy[:, 1] / KM_PER_DEG_LAT)
        lon.append(lon0 + xy[:, 0] / (KM_PER_DEG_LAT * np.cos(np.radians(lat0))))
        region.append(np.full(n_per, f"city_{c:02d}"))
        for values in factors.values():
            smooth = _standardize(_smooth_field(rng, xy, config.length_scale_km))
            values.append(np.sqrt(1 - a) * smooth + np.sqrt(a) * rng.normal(size=n_per))
    lat, lon, region = np.concatenate(lat), np.concatenate(lon), np.concatenate(region)
    f = {name: np.concatenate(v) for name, v in factors.items()}
    n = len(lat)
    land_use = np.stack([f[f"use_{u}"] for u in LAND_USES], axis=1).argmax(axis=1)

    mixing = rng.normal(0, 1, size=(2, config.street_view_dim))
    bias = rng.normal(0, 0.5, size=config.street_view_dim)
    street_view = np.tanh(np.stack([f["density"], f["income"]], 1) @ mixing + bias)
    street_view += rng.normal(0, 0.25, street_view.shape)

    k = config.poi_categories
    a_d, a_w = rng.normal(0, 0.6, k), rng.normal(0, 0.6, k)
    by_use = rng.normal(0, 0.8, (k, len(LAND_USES)))
    log_rate = 1.0 + np.outer(f["density"], a_d) + np.outer(f["walkability"], a_w) + by_use[:, land_use].T
    poi = rng.poisson(np.exp(log_rate)).astype(np.float32)

    imagery = _imagery(rng, f["density"], f["greenness"], config.raster_size)
    map_raster = _map_raster(rng, land_use, f["greenness"], f["traffic"], config.raster_size)

    rates = np.clip(config.missing_rate + rng.uniform(-0.2, 0.2, size=(cities, 4)), 0.0, 0.9)
    city_index = np.repeat(np.arange(cities), n_per)
    present = rng.random((n, 4)) >= rates[city_index]
    modalities = {}
    for j, (name, values) in enumerate(
        (("street_view", street_view), ("poi", poi), ("imagery", imagery), ("map", map_raster))
    ):
        values = np.where(present[:, j].reshape(-1, *[1] * (values.ndim - 1)), values, 0).astype(np.float32)
        columns = [f"{name}_{i}" for i in range(values.shape[1])] if values.ndim == 2 else None
        modalities[name] = Modality(name, "tabular" if values.ndim == 2 else "raster", values,
                                    present[:, j].copy(), columns)

    noise = lambda: 0.1 * rng.normal(size=n)  # noqa: E731 - one fresh draw per target
    targets = pd.DataFrame({
        "population_density": f["density"] + noise(),
        "green_cover": f["greenness"] + noise(),
        "house_price": f["income"] + noise(),
        "health_index": _standardize(f["walkability"] * f["traffic"]) + noise(),
        "land_use": np.array(LAND_USES)[land_use],
    })
    ids = np.array([f"loc{i:06d}" for i in range(n)])
    return Dataset(ids=ids, lat=lat, lon=lon, region=region, modalities=modalities, targets=targets)
