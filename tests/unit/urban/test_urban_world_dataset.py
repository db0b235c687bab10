"""The synthetic world's information structure, and the dataset folder format round trip."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from paperworks.services.urban.data import load_folder, world, write_folder
from paperworks.shared.errors import InvalidArgument


def test_world_is_seeded_and_shaped(tiny_world):
    again = world.generate(world.WorldConfig(seed=3, cities=2, locations_per_city=60, raster_size=8))
    assert np.array_equal(tiny_world.modalities["imagery"].values, again.modalities["imagery"].values)
    assert len(tiny_world) == 120 and tiny_world.regions == ["city_00", "city_01"]
    assert tiny_world.modalities["street_view"].shape == (24,)
    assert tiny_world.modalities["imagery"].shape == (3, 8, 8)
    assert tiny_world.modalities["map"].shape == (6, 8, 8)
    assert set(tiny_world.targets.columns) == set(world.TARGETS)
    for m in tiny_world.modalities.values():
        assert 0 < m.present.sum() < len(tiny_world)
        assert not m.values[~m.present].any()


def test_income_reaches_street_view_only():
    data = world.generate(world.WorldConfig(seed=0, cities=2, locations_per_city=400, missing_rate=0.0))
    price = data.targets["house_price"].to_numpy()

    def best_linear_r2(x):
        x = np.hstack([x.reshape(len(x), -1), np.ones((len(x), 1))])
        coef, *_ = np.linalg.lstsq(x, price, rcond=None)
        return 1 - ((price - x @ coef) ** 2).sum() / ((price - price.mean()) ** 2).sum()

    sv = best_linear_r2(data.modalities["street_view"].values)
    imagery = best_linear_r2(data.modalities["imagery"].values.mean(axis=(2, 3)))
    assert sv > 0.5 and imagery < 0.05


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_folder_round_trip(tiny_world, tmp_path, fmt):
    loaded = load_folder(write_folder(tiny_world, tmp_path / fmt, fmt))
    assert list(loaded.ids) == list(tiny_world.ids) and list(loaded.region) == list(tiny_world.region)
    assert np.allclose(loaded.lat, tiny_world.lat)
    for name, m in tiny_world.modalities.items():
        assert np.array_equal(loaded.modalities[name].present, m.present)
        assert np.allclose(loaded.modalities[name].values, m.values, atol=1e-6)
        assert loaded.modalities[name].kind == m.kind
    assert list(loaded.targets["land_use"]) == list(tiny_world.targets["land_use"])


def test_geoparquet_geometry_gives_lat_lon(tiny_world, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import shapely

    folder = write_folder(tiny_world, tmp_path / "geo")
    points = shapely.points(tiny_world.lon, tiny_world.lat)
    table = pa.table({"id": tiny_world.ids, "region": tiny_world.region,
                      "geometry": shapely.to_wkb(points)})
    geo = {"version": "1.0.0", "primary_column": "geometry",
           "columns": {"geometry": {"encoding": "WKB", "geometry_types": ["Point"]}}}
    table = table.replace_schema_metadata({b"geo": json.dumps(geo).encode()})
    pq.write_table(table, folder / "locations.parquet")
    loaded = load_folder(folder)
    assert np.allclose(loaded.lat, tiny_world.lat) and np.allclose(loaded.lon, tiny_world.lon)


def _break(folder, stem, change):
    frame = pd.read_parquet(folder / f"{stem}.parquet")
    change(frame)
    frame.to_parquet(folder / f"{stem}.parquet", index=False)


@pytest.mark.parametrize("case, field", [
    ("lat", "dataset.locations.parquet[5].lat"),
    ("duplicate", "dataset.locations.parquet.id"),
    ("stranger", "dataset.poi.parquet.id"),
    ("text", "dataset.poi.parquet.poi_0"),
    ("raster_ids", "dataset.imagery.ids.txt"),
])
def test_bad_files_name_the_file_and_field(tiny_world, tmp_path, case, field):
    folder = write_folder(tiny_world, tmp_path / case)
    if case == "lat":
        _break(folder, "locations", lambda f: f.__setitem__("lat", f["lat"].where(f.index != 5, 95.0)))
    elif case == "duplicate":
        _break(folder, "locations", lambda f: f.__setitem__("id", f["id"].where(f.index != 1, f["id"][0])))
    elif case == "stranger":
        _break(folder, "poi", lambda f: f.__setitem__("id", f["id"].where(f.index != 0, "nowhere")))
    elif case == "text":
        _break(folder, "poi", lambda f: f.__setitem__("poi_0", "many"))
    else:
        (folder / "imagery.ids.txt").write_text("loc000000\n")
    with pytest.raises(InvalidArgument) as exc:
        load_folder(folder)
    assert exc.value.field == field


def test_a_folder_archived_with_itself_at_the_top_loads_and_a_file_does_not(tiny_world, tmp_path):
    write_folder(tiny_world, tmp_path / "unpacked" / "city", fmt="csv")  # `tar czf x.tar.gz city/`
    assert len(load_folder(tmp_path / "unpacked")) == len(tiny_world)
    with pytest.raises(InvalidArgument) as exc:
        load_folder(tmp_path / "unpacked" / "city" / "locations.csv")
    assert exc.value.field == "dataset.source"


def test_example_writer_gives_a_dataset_and_request_locations(tmp_path):
    from google.protobuf import json_format
    from paperworks.services.urban.data.__main__ import main
    from paperworks.urban.v1 import urban_pb2

    main(["world", str(tmp_path / "city"), "--cities", "2", "--locations-per-city", "20"])
    main(["locations", str(tmp_path / "city"), str(tmp_path / "locations.json"), "--count", "4"])
    data = load_folder(tmp_path / "city")
    assert len(data) == 40 and (tmp_path / "city" / "street_view.csv").exists()
    request = json_format.ParseDict({"locations": json.loads((tmp_path / "locations.json").read_text())},
                                    urban_pb2.EmbedRequest())
    assert [loc.id for loc in request.locations] == list(data.ids[:4])
    assert [len(loc.modalities) for loc in request.locations] == [
        sum(m.present[i] for m in data.modalities.values()) for i in range(4)]
