"""Sync-RPC locations -> the encoder's inputs, every problem named by its field path
(`locations[3].lat`, `locations[0].modalities[1].value`, `use_modalities[0]`)."""
from __future__ import annotations

import math

import numpy as np
from paperworks.services.urban.urbanfusion.encoder import FeatureSet, UrbanEncoder
from paperworks.services.urban.urbanfusion.model import COORDINATES
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.rpc.tensors import to_numpy

MAX_LOCATIONS = 10_000


def _check_use(encoder: UrbanEncoder, use_modalities) -> set[str] | None:
    for k, name in enumerate(use_modalities):
        if name not in encoder.names:
            raise InvalidArgument(f"use_modalities[{k}]", f"unknown modality {name!r} "
                                                          f"(known: {', '.join(encoder.names)})")
    return set(use_modalities) or None


def feature_set(encoder: UrbanEncoder, locations, use_modalities=()) -> FeatureSet:
    """Validates the request's locations and computes their normalized frozen features."""
    n = len(locations)
    if n == 0:
        raise InvalidArgument("locations", "at least one location is needed")
    if n > MAX_LOCATIONS:
        raise InvalidArgument("locations", f"{n} locations; at most {MAX_LOCATIONS} per call")
    use = _check_use(encoder, use_modalities)
    lat, lon = np.empty(n), np.empty(n)
    raw = {name: np.zeros((n, *spec.shape), np.float32) for name, spec in encoder.specs.items()}
    given = {name: np.zeros(n, bool) for name in encoder.specs}
    for i, loc in enumerate(locations):
        for name, value, limit in (("lat", loc.lat, 90.0), ("lon", loc.lon, 180.0)):
            if not math.isfinite(value) or abs(value) > limit:
                raise InvalidArgument(f"locations[{i}].{name}", f"{value} is not in [-{limit:g}, {limit:g}]")
        lat[i], lon[i] = loc.lat, loc.lon
        for j, modality in enumerate(loc.modalities):
            where = f"locations[{i}].modalities[{j}]"
            spec = encoder.specs.get(modality.name)
            if spec is None:
                hint = " (coordinates come from lat/lon)" if modality.name == COORDINATES else ""
                raise InvalidArgument(f"{where}.name", f"unknown modality {modality.name!r}{hint}; "
                                                       f"known: {', '.join(encoder.specs)}")
            if given[spec.name][i]:
                raise InvalidArgument(f"{where}.name", f"modality {spec.name!r} given twice")
            value = to_numpy(modality.value, f"{where}.value")
            if tuple(value.shape) != spec.shape:
                raise InvalidArgument(f"{where}.value", f"{spec.name} must be shaped {list(spec.shape)}, "
                                                        f"got {list(value.shape)}")
            if not np.issubdtype(value.dtype, np.number) or not np.isfinite(value).all():
                raise InvalidArgument(f"{where}.value", "must hold finite numbers")
            raw[spec.name][i] = value
            given[spec.name][i] = True
    present = np.zeros((n, len(encoder.names)), bool)
    present[:, 0] = True
    features = {}
    for j, name in enumerate(encoder.names[1:], start=1):
        features[name] = encoder.extract(name, raw[name], given[name])
        present[:, j] = given[name]
    ids = np.array([loc.id or str(i) for i, loc in enumerate(locations)])
    fs = FeatureSet(encoder.names, ids, lat, lon, np.full(n, ""), features, present)
    return fs.restricted(use) if use else fs


def used_modalities(fs: FeatureSet) -> list[str]:
    return ["+".join(n for n, p in zip(fs.names, row, strict=True) if p) for row in fs.present]
