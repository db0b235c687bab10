"""Locations x modalities: the in-memory dataset, and its folder form on disk.

A folder holds:
- `locations.parquet` or `locations.csv`: `id`, `lat`, `lon` (degrees, EPSG:4326) and
  optionally `region`; or a GeoParquet file whose `geometry` column (WKB points or
  shapes, whose centroid is used) replaces lat/lon. Geometry is decoded with Shapely;
  GeoPandas is not needed.
- one `<modality>.parquet` / `<modality>.csv` per tabular modality: `id` + numeric columns;
  a location without a row lacks that modality.
- one `<modality>.npy` (N x C x H x W, loaded without pickle) per raster modality, with
  `<modality>.ids.txt` naming each row's location, one id per line.
- optionally `targets.parquet` / `targets.csv`: `id` + one column per target.

Every problem is reported as InvalidArgument naming the file (and row or column).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from paperworks.services.urban.urbanfusion.model import COORDINATES
from paperworks.shared.errors import InvalidArgument
from paperworks.shared.inputs import archive_root

RESERVED = {"locations", "targets", COORDINATES}


@dataclass
class Modality:
    name: str
    kind: Literal["tabular", "raster"]
    values: np.ndarray  # (N, D) or (N, C, H, W) float32; zeros where absent
    present: np.ndarray  # (N,) bool
    columns: list[str] | None = None  # tabular column names

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape[1:])


@dataclass
class Dataset:
    ids: np.ndarray
    lat: np.ndarray
    lon: np.ndarray
    region: np.ndarray
    modalities: dict[str, Modality]
    targets: pd.DataFrame = field(default_factory=pd.DataFrame)  # aligned rows; NaN = unlabeled

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def regions(self) -> list[str]:
        return sorted(set(self.region.tolist()))

    def take(self, rows: np.ndarray) -> Dataset:
        """The locations at `rows` (indices or a boolean mask)."""
        return Dataset(
            ids=self.ids[rows], lat=self.lat[rows], lon=self.lon[rows], region=self.region[rows],
            modalities={n: Modality(m.name, m.kind, m.values[rows], m.present[rows], m.columns)
                        for n, m in self.modalities.items()},
            targets=self.targets.iloc[np.arange(len(self))[rows]].reset_index(drop=True),
        )

    def select_modalities(self, names: list[str], field_name: str = "modalities") -> Dataset:
        unknown = [n for n in names if n not in self.modalities]
        if unknown:
            raise InvalidArgument(field_name, f"dataset has no modality {unknown[0]!r} "
                                              f"(has: {', '.join(self.modalities)})")
        kept = {n: m for n, m in self.modalities.items() if n in names} if names else self.modalities
        return Dataset(self.ids, self.lat, self.lon, self.region, kept, self.targets)


def _read_table(path: Path) -> pd.DataFrame:
    try:
        return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure is the user's file
        raise InvalidArgument(f"dataset.{path.name}", f"unreadable: {exc}") from None


def _one_of(folder: Path, stem: str, required: bool) -> Path | None:
    found = [p for p in (folder / f"{stem}.parquet", folder / f"{stem}.csv") if p.exists()]
    if len(found) > 1:
        raise InvalidArgument(f"dataset.{stem}", "both .parquet and .csv present; keep one")
    if not found and required:
        raise InvalidArgument(f"dataset.{stem}", f"the dataset folder has no {stem}.parquet or {stem}.csv")
    return found[0] if found else None


def _geometry_lat_lon(path: Path, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow.parquet as pq
    import shapely

    meta = pq.read_schema(path).metadata or {}
    geo = json.loads(meta.get(b"geo", b"{}") or b"{}")
    crs = (geo.get("columns", {}).get("geometry", {}) or {}).get("crs")
    if crs not in (None, "EPSG:4326", "OGC:CRS84") and not (
        isinstance(crs, dict) and (crs.get("id") or {}).get("code") in (4326, "CRS84")
    ):
        raise InvalidArgument(f"dataset.{path.name}.geometry", f"CRS must be EPSG:4326, got {crs}")
    try:
        shapes = shapely.from_wkb(frame["geometry"].to_numpy())
    except Exception as exc:  # noqa: BLE001
        raise InvalidArgument(f"dataset.{path.name}.geometry", f"not WKB geometry: {exc}") from None
    centroids = shapely.centroid(shapes)
    return shapely.get_y(centroids), shapely.get_x(centroids)


def _locations(folder: Path) -> tuple[pd.DataFrame, str]:
    path = _one_of(folder, "locations", required=True)
    frame = _read_table(path)
    where = f"dataset.{path.name}"
    if "id" not in frame:
        raise InvalidArgument(where, "needs an `id` column")
    if "geometry" in frame and path.suffix == ".parquet" and not {"lat", "lon"} <= set(frame):
        frame["lat"], frame["lon"] = _geometry_lat_lon(path, frame)
    for col in ("lat", "lon"):
        if col not in frame:
            raise InvalidArgument(where, f"needs a `{col}` column (or GeoParquet geometry)")
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    frame["id"] = frame["id"].astype(str)
    dup = frame["id"][frame["id"].duplicated()]
    if len(dup):
        raise InvalidArgument(f"{where}.id", f"duplicate id {dup.iloc[0]!r}")
    for col, limit in (("lat", 90.0), ("lon", 180.0)):
        bad = ~frame[col].between(-limit, limit)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise InvalidArgument(f"{where}[{row}].{col}",
                                  f"{frame[col].iloc[row]} is not in [-{limit:g}, {limit:g}]")
    frame["region"] = frame["region"].astype(str) if "region" in frame else "all"
    return frame, where


def _align(ids: pd.Index, frame_ids: pd.Series, where: str) -> np.ndarray:
    """Row index into the locations for each of a file's ids."""
    frame_ids = frame_ids.astype(str)
    dup = frame_ids[frame_ids.duplicated()]
    if len(dup):
        raise InvalidArgument(where, f"duplicate id {dup.iloc[0]!r}")
    rows = ids.get_indexer(frame_ids)
    if (rows < 0).any():
        raise InvalidArgument(where, f"id {frame_ids.iloc[int(np.argmax(rows < 0))]!r} is not in locations")
    return rows


def _tabular(path: Path, ids: pd.Index) -> Modality:
    name, where = path.stem, f"dataset.{path.name}"
    frame = _read_table(path)
    if "id" not in frame:
        raise InvalidArgument(where, "needs an `id` column")
    rows = _align(ids, frame["id"], f"{where}.id")
    columns = [c for c in frame.columns if c != "id"]
    if not columns:
        raise InvalidArgument(where, "has no feature columns")
    for c in columns:
        if not pd.api.types.is_numeric_dtype(frame[c]):
            raise InvalidArgument(f"{where}.{c}", f"must be numeric, is {frame[c].dtype}")
    data = frame[columns].to_numpy(np.float32)
    if not np.isfinite(data).all():
        row = int(np.flatnonzero(~np.isfinite(data).all(axis=1))[0])
        raise InvalidArgument(f"{where}[{row}]", "holds a NaN or infinite value")
    values = np.zeros((len(ids), len(columns)), np.float32)
    values[rows] = data
    present = np.zeros(len(ids), bool)
    present[rows] = True
    return Modality(name, "tabular", values, present, [str(c) for c in columns])


def _raster(path: Path, ids: pd.Index) -> Modality:
    name, where = path.stem, f"dataset.{path.name}"
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001
        raise InvalidArgument(where, f"unreadable (.npy without pickles expected): {exc}") from None
    if data.ndim != 4 or not np.issubdtype(data.dtype, np.number):
        raise InvalidArgument(where, f"must be a numeric N x C x H x W array, is {data.dtype} {data.shape}")
    id_file = path.with_name(f"{name}.ids.txt")
    if not id_file.exists():
        raise InvalidArgument(f"dataset.{id_file.name}", "missing: one location id per raster row")
    raster_ids = pd.Series(id_file.read_text().split())
    if len(raster_ids) != len(data):
        raise InvalidArgument(f"dataset.{id_file.name}", f"names {len(raster_ids)} ids for {len(data)} rows")
    rows = _align(ids, raster_ids, f"dataset.{id_file.name}")
    data = data.astype(np.float32)
    if not np.isfinite(data).all():
        raise InvalidArgument(where, "holds a NaN or infinite value")
    values = np.zeros((len(ids), *data.shape[1:]), np.float32)
    values[rows] = data
    present = np.zeros(len(ids), bool)
    present[rows] = True
    return Modality(name, "raster", values, present)


def _dataset_root(folder: Path) -> Path:
    """The folder holding the dataset: `folder`, or its one subfolder where an archive was made
    with the folder itself at the top (`tar czf city.tar.gz city/`)."""
    if not folder.is_dir():
        raise InvalidArgument("dataset.source", "is not a folder: give the dataset folder (uploaded, "
                                                "it travels as a .tar.gz archive)")
    return archive_root(folder, lambda f: _one_of(f, "locations", required=False) is not None)


def load_folder(folder: Path) -> Dataset:
    folder = _dataset_root(Path(folder))
    frame, _ = _locations(folder)
    ids = pd.Index(frame["id"])
    modalities: dict[str, Modality] = {}
    for path in sorted(folder.iterdir()):
        stem = path.name.split(".")[0]
        if stem in RESERVED or path.name.endswith(".ids.txt"):
            continue
        if path.suffix in (".parquet", ".csv"):
            modality = _tabular(path, ids)
        elif path.suffix == ".npy":
            modality = _raster(path, ids)
        else:
            continue
        if modality.name in modalities:
            raise InvalidArgument(f"dataset.{path.name}", f"modality {modality.name!r} given twice")
        modalities[modality.name] = modality
    if not modalities:
        raise InvalidArgument("dataset.source", "the dataset folder holds no modality file "
                                                "(<modality>.parquet, .csv or .npy)")
    targets = pd.DataFrame(index=range(len(ids)))
    if (path := _one_of(folder, "targets", required=False)) is not None:
        table = _read_table(path)
        if "id" not in table:
            raise InvalidArgument(f"dataset.{path.name}", "needs an `id` column")
        _align(ids, table["id"], f"dataset.{path.name}.id")
        table = table.assign(id=table["id"].astype(str)).set_index("id")
        targets = table.reindex(ids).reset_index(drop=True)
        targets.columns = [str(c) for c in targets.columns]
    return Dataset(ids=ids.to_numpy().astype(str), lat=frame["lat"].to_numpy(np.float64),
                   lon=frame["lon"].to_numpy(np.float64), region=frame["region"].to_numpy().astype(str),
                   modalities=modalities, targets=targets)


def write_folder(dataset: Dataset, folder: Path, fmt: Literal["parquet", "csv"] = "parquet") -> Path:
    """Writes the folder form that `load_folder` reads (missing modalities: no row)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)

    def save(frame: pd.DataFrame, stem: str) -> None:
        if fmt == "parquet":
            frame.to_parquet(folder / f"{stem}.parquet", index=False)
        else:
            frame.to_csv(folder / f"{stem}.csv", index=False)

    save(pd.DataFrame({"id": dataset.ids, "lat": dataset.lat, "lon": dataset.lon,
                       "region": dataset.region}), "locations")
    for name, m in dataset.modalities.items():
        ids = dataset.ids[m.present]
        if m.kind == "tabular":
            frame = pd.DataFrame(m.values[m.present], columns=m.columns)
            frame.insert(0, "id", ids)
            save(frame, name)
        else:
            np.save(folder / f"{name}.npy", m.values[m.present])
            (folder / f"{name}.ids.txt").write_text("\n".join(ids) + "\n")
    if len(dataset.targets.columns):
        frame = dataset.targets.copy()
        frame.insert(0, "id", dataset.ids)
        save(frame, "targets")
    return folder
