"""Small example inputs for the urban service, written locally (no network, no server):

    python -m paperworks.services.urban.data world ./city --cities 2 --locations-per-city 60
    python -m paperworks.services.urban.data locations ./city ./locations.json --count 3

`world` writes the synthetic world as a dataset folder of CSVs (rasters as .npy + .ids.txt), the
folder form jobs read (`dataset.source`); `locations` turns the first rows of any such folder into
the `locations` of an Embed / Predict request (JSON, each location with the modalities it has),
for `paperworks call urban Embed --set locations=@locations.json`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from google.protobuf import json_format
from paperworks.services.urban.data import world
from paperworks.services.urban.data.dataset import load_folder, write_folder
from paperworks.shared.rpc.tensors import from_numpy
from paperworks.urban.v1 import urban_pb2


def write_world(folder: Path, cities: int, locations_per_city: int, seed: int, missing_rate: float) -> Path:
    data = world.generate(world.WorldConfig(seed=seed, cities=cities, locations_per_city=locations_per_city,
                                            missing_rate=missing_rate, raster_size=8))
    return write_folder(data, folder, fmt="csv")


def request_locations(folder: Path, count: int) -> list[dict]:
    """The first `count` locations of a dataset folder as Embed / Predict `locations` (JSON)."""
    data = load_folder(folder)
    out = []
    for i in range(min(count, len(data))):
        modalities = [urban_pb2.ModalityValue(name=name, value=from_numpy(np.ascontiguousarray(m.values[i])))
                      for name, m in data.modalities.items() if m.present[i]]
        location = urban_pb2.Location(id=str(data.ids[i]), lat=float(data.lat[i]), lon=float(data.lon[i]),
                                      modalities=modalities)
        out.append(json_format.MessageToDict(location, preserving_proto_field_name=True))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m paperworks.services.urban.data", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    w = commands.add_parser("world", help="write the synthetic world as a dataset folder of CSVs")
    w.add_argument("folder", type=Path)
    w.add_argument("--cities", type=int, default=2)
    w.add_argument("--locations-per-city", type=int, default=60)
    w.add_argument("--missing-rate", type=float, default=0.3)
    w.add_argument("--seed", type=int, default=0)
    loc = commands.add_parser("locations", help="a dataset folder's first rows as Embed/Predict locations")
    loc.add_argument("folder", type=Path)
    loc.add_argument("out", type=Path)
    loc.add_argument("--count", type=int, default=3)
    args = parser.parse_args(argv)
    if args.command == "world":
        folder = write_world(args.folder, args.cities, args.locations_per_city, args.seed, args.missing_rate)
        print(f"{folder}: {args.cities} cities x {args.locations_per_city} locations "
              f"({', '.join(sorted(p.name for p in folder.iterdir()))})")
    else:
        locations = request_locations(args.folder, args.count)
        args.out.write_text(json.dumps(locations))
        print(f"{args.out}: {len(locations)} locations")


if __name__ == "__main__":
    main()
