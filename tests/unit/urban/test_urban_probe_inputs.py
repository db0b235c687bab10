"""Probes and metrics; extractors; sync-RPC input validation with field paths; job parameters."""
from __future__ import annotations

import numpy as np
import pytest
from paperworks.services.urban.checkpoint import probe_from_bytes, probe_to_bytes
from paperworks.services.urban.data import feature_set
from paperworks.services.urban.probes import Probe, macro_f1, r2_score
from paperworks.services.urban.spec import FitTaskParams, PretrainParams, invalid_arguments
from paperworks.services.urban.urbanfusion import extractors
from paperworks.services.urban.urbanfusion.errors import FieldError
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.rpc.tensors import from_numpy
from paperworks.urban.v1 import urban_pb2
from pydantic import ValidationError


def test_metrics():
    y = np.array([1.0, 2.0, 3.0])
    assert r2_score(y, y) == 1.0 and r2_score(y, np.full(3, 2.0)) == 0.0
    assert macro_f1(np.array([0, 1, 1]), np.array([0, 1, 1]), 2) == 1.0
    assert macro_f1(np.array([0, 1]), np.array([1, 0]), 2) == 0.0


def test_probes_fit_and_round_trip():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 6)).astype(np.float32)
    linear = x @ np.arange(1, 7) + 0.1 * rng.normal(size=600)
    product = x[:, 0] * x[:, 1]
    classes = x[:, 2:5].argmax(axis=1)
    ridge = Probe("regression", "linear", 6).fit(x[:400], linear[:400])
    assert ridge.score(x[400:], linear[400:]) > 0.99
    assert Probe("regression", "linear", 6).fit(x[:400], product[:400]).score(x[400:], product[400:]) < 0.1
    mlp = Probe("regression", "mlp", 6).fit(x[:400], product[:400])
    assert mlp.score(x[400:], product[400:]) > 0.6
    logistic = Probe("classification", "linear", 6, ["a", "b", "c"]).fit(x[:400], classes[:400])
    assert logistic.score(x[400:], classes[400:]) > 0.9
    for probe in (ridge, mlp, logistic):
        loaded, extra = probe_from_bytes(probe_to_bytes(probe, {"k": 1}))
        assert extra == {"k": 1} and np.allclose(loaded.raw(x), probe.raw(x), atol=1e-6)


def test_random_conv_is_frozen_and_seeded():
    values = np.random.default_rng(0).random((5, 3, 8, 8)).astype(np.float32)
    a = extractors.build("random_conv", "raster", (3, 8, 8), 7, "f")
    b = extractors.build("random_conv", "raster", (3, 8, 8), 7, "f")
    assert a.out_dim == 70 and np.allclose(a(values), b(values))
    with pytest.raises(FieldError, match="tabular"):
        extractors.build("identity", "raster", (3, 8, 8), 0, "extractors.imagery")
    with pytest.raises(FieldError) as exc:
        extractors.build("clip", "raster", (3, 8, 8), 0, "extractors.imagery")
    assert exc.value.field == "extractors.imagery"


def _location(lat=47.0, lon=8.0, **modalities):
    return urban_pb2.Location(id="x", lat=lat, lon=lon, modalities=[
        urban_pb2.ModalityValue(name=k, value=from_numpy(np.asarray(v, np.float32)))
        for k, v in modalities.items()])


def test_inputs_build_features_from_any_subset(tiny_encoder):
    locations = [_location(street_view=np.zeros(24)), _location(imagery=np.zeros((3, 8, 8))), _location()]
    fs = feature_set(tiny_encoder, locations)
    assert fs.present[:, 0].all() and fs.present[0, 1] and not fs.present[1, 1]
    assert tiny_encoder.embed(fs).shape == (3, 16)
    with pytest.raises(InvalidArgument) as exc, invalid_arguments():  # the method's FieldError, mapped
        tiny_encoder.embed(feature_set(tiny_encoder, locations, ["street_view"]))
    assert exc.value.field == "locations[1]"


@pytest.mark.parametrize("location, use, field", [
    (_location(lat=91.0), (), "locations[1].lat"),
    (_location(lon=float("nan")), (), "locations[1].lon"),
    (_location(street_view=np.zeros(23)), (), "locations[1].modalities[0].value"),
    (_location(radar=np.zeros(3)), (), "locations[1].modalities[0].name"),
    (_location(coordinates=np.zeros(2)), (), "locations[1].modalities[0].name"),
    (_location(), ("coordinates", "lidar"), "use_modalities[1]"),
])
def test_bad_locations_name_the_field(tiny_encoder, location, use, field):
    with pytest.raises(InvalidArgument) as exc:
        feature_set(tiny_encoder, [_location(), location], use)
    assert exc.value.field == field


def test_job_parameters_check_limits_and_defaults():
    p = PretrainParams.model_validate({"dataset": {"synthetic": {"seed": "3"}}})
    assert (p.embed_dim, p.steps, p.reconstruction_weight, p.dataset.synthetic.cities) == (64, 400, 0.0625, 6)
    assert PretrainParams.model_validate({"dataset": {"path": "/d"}, "reconstruction_weight": 0.0}
                                         ).reconstruction_weight == 0.0
    for bad in ({"dataset": {}}, {"dataset": {"path": "/d", "synthetic": {}}},
                {"dataset": {"path": "/d"}, "embed_dim": 30, "heads": 4},
                {"dataset": {"path": "/d"}, "reconstruction_weight": 2}):
        with pytest.raises(ValidationError):
            PretrainParams.model_validate(bad)
    with pytest.raises(ValidationError):
        FitTaskParams.model_validate({"pretrain_job_id": "urban-1", "dataset": {"path": "/d"},
                                      "target": "y", "task_type": "ranking"})


def test_an_explicit_zero_is_validated_not_taken_for_the_default():
    # unset optional proto fields are absent from the params (the default applies); a 0 is a value
    for field in ("embed_dim", "layers", "heads", "steps", "batch_size", "learning_rate"):
        with pytest.raises(ValidationError) as exc:
            PretrainParams.model_validate({"dataset": {"path": "/d"}, field: 0})
        assert [e["loc"] for e in exc.value.errors()] == [(field,)]
    with pytest.raises(ValidationError) as exc:
        PretrainParams.model_validate({"dataset": {"synthetic": {"cities": 0}}})
    assert [e["loc"] for e in exc.value.errors()] == [("dataset", "synthetic", "cities")]
    with pytest.raises(ValidationError):
        FitTaskParams.model_validate({"pretrain_job_id": "urban-1", "dataset": {"path": "/d"},
                                      "target": "y", "task_type": "regression", "probe": ""})
