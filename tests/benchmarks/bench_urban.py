"""UrbanFusion at a larger scale than the reproduction tests, with every baseline trained in the
same run, plus Embed throughput and latency.

- claims 1-3 (see tests/reproduction/urban/experiments.py) on 8 cities x 800 locations, 1200 steps;
- claim 3b leave-one-city-out over all 8 cities (the Evaluate job's protocol), and city_00 also
  with an encoder that never saw it (pretrained on the other cities);
- Embed: the servicer's path without the transport (request Locations -> validation -> frozen
  extractors -> fusion), for 1 and 64 locations per call (latency p50/p99) and 1000 per call
  (throughput, locations/s).

Writes tests/benchmarks/results/urban.json and urban_embedding_map.png; prints a markdown table.
`BENCH_URBAN_STEPS`, `BENCH_URBAN_LOCATIONS` shrink it for a smoke run.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: the experiment drivers live in tests/reproduction

from paperworks.services.urban import figures  # noqa: E402
from paperworks.services.urban.data import feature_set, world  # noqa: E402
from paperworks.shared.rpc.tensors import from_numpy  # noqa: E402
from paperworks.urban.v1 import urban_pb2  # noqa: E402
from reproduction.urban import experiments  # noqa: E402

RESULTS = HERE / "results"
STEPS = int(os.environ.get("BENCH_URBAN_STEPS", "1200"))
PER_CITY = int(os.environ.get("BENCH_URBAN_LOCATIONS", "800"))


def _locations(data, rows):
    out = []
    for i in rows:
        mods = [
            urban_pb2.ModalityValue(name=n, value=from_numpy(m.values[i]))
            for n, m in data.modalities.items()
            if m.present[i]
        ]
        out.append(urban_pb2.Location(id=data.ids[i], lat=data.lat[i], lon=data.lon[i], modalities=mods))
    return out


def embed_timings(encoder, data) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for size, calls in ((1, 200), (64, 50)):
        requests = [_locations(data, rng.choice(len(data), size)) for _ in range(calls)]
        lat = []
        for locations in requests:
            t = time.perf_counter()
            encoder.embed(feature_set(encoder, locations))
            lat.append(time.perf_counter() - t)
        out[f"batch_{size}"] = {
            "p50_ms": 1e3 * float(np.percentile(lat, 50)),
            "p99_ms": 1e3 * float(np.percentile(lat, 99)),
        }
    locations = _locations(data, np.arange(min(1000, len(data))))
    t = time.perf_counter()
    for _ in range(5):
        encoder.embed(feature_set(encoder, locations))
    out["throughput_locations_per_s"] = 5 * len(locations) / (time.perf_counter() - t)
    return out


def mean(scores: dict, key: str) -> float:
    return float(np.mean([s[key] for s in scores.values()]))


def table(results: dict) -> str:
    """The README table (`make bench` → run_all.py), rebuilt from the committed results."""
    c1, c2 = results["claim1_fusion_vs_contrastive_mlp"], results["claim2_any_subset_linear"]
    rows = ["| claim | target | UrbanFusion | baseline (same run) |", "|---|---|---|---|"]
    for name, s in c1.items():
        rows.append(
            f"| 1 vs contrastive-only (MLP R²) | {name} ({s['information']}) | {s['fusion']:.3f} | "
            f"{s['contrastive_only']:.3f} |"
        )
    for name, s in results["claim3a_coordinates_only_linear"].items():
        rows.append(
            f"| 3a coordinates-only vs SatCLIP-style | {name} | {s['fusion_coordinates']:.3f} | "
            f"{s['satclip']:.3f} |"
        )
    # results written before the leave-one-city-out protocol hold city_00 alone
    held, label = (
        (results["claim3b_held_out_cities_mlp"], "3b held-out cities (leave-one-city-out mean)")
        if "claim3b_held_out_cities_mlp" in results
        else (results["claim3b_held_out_city_mlp"], "3b held-out city_00")
    )
    for name, s in held.items():
        rows.append(f"| {label} vs concatenated | {name} | {s['fusion']:.3f} | {s['concatenated']:.3f} |")
    for name, s in results["claim3b_held_out_city_unseen_in_pretraining_mlp"].items():
        rows.append(
            f"| 3b city unseen in pretraining | {name} | {s['fusion']:.3f} | {s['concatenated']:.3f} |"
        )
    rows.append(
        f"| 2 subset transfer (mean of {len(c2)}) | regression mean R² | {mean(c2, 'full_probe'):.3f} | "
        f"{mean(c2, 'concatenated_full_probe'):.3f} |"
    )
    e = results["embed"]
    rows.append(f"| Embed throughput | locations/s | {e['throughput_locations_per_s']:.0f} | |")
    rows.append(
        f"| Embed latency p50 / p99 | 1 per call, ms | {e['batch_1']['p50_ms']:.2f} / "
        f"{e['batch_1']['p99_ms']:.2f} | |"
    )
    rows.append(
        f"| Embed latency p50 / p99 | 64 per call, ms | {e['batch_64']['p50_ms']:.1f} / "
        f"{e['batch_64']['p99_ms']:.1f} | |"
    )
    return "\n".join(rows)


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)  # tiny models; the Embed figures are one thread's (as `setup` says)
    setup = experiments.Setup(world.WorldConfig(seed=0, cities=8, locations_per_city=PER_CITY), steps=STEPS)
    t0 = time.perf_counter()
    run = experiments.train_models(setup)
    c1 = experiments.fusion_vs_contrastive(run)
    c2 = experiments.any_subset(run)
    c3a = experiments.location_encoding(run)
    c3b = experiments.held_out_cities(run, kind="mlp")
    unseen = experiments.held_out_city_unseen(setup)
    timings = embed_timings(run.fusion, world.generate(setup.world))
    full = "+".join(run.train_fs.names)
    results = {
        "setup": {
            "cities": 8,
            "locations_per_city": PER_CITY,
            "steps": STEPS,
            "dim": setup.dim,
            "machine": platform.processor() or platform.machine(),
            "threads": 1,
        },
        "claim1_fusion_vs_contrastive_mlp": c1,
        "claim2_any_subset_linear": c2,
        "claim3a_coordinates_only_linear": c3a,
        "claim3b_held_out_cities_mlp": c3b,
        "claim3b_held_out_city_unseen_in_pretraining_mlp": unseen,
        "embed": timings,
        "ratios": {
            "unique_and_synergistic_fusion_over_contrastive": float(
                np.mean(
                    [c1[n]["fusion"] - c1[n]["contrastive_only"] for n in ("house_price", "health_index")]
                )
            ),
            "coordinates_only_fusion_minus_satclip": mean(c3a, "fusion_coordinates") - mean(c3a, "satclip"),
            "held_out_city_fusion_minus_concatenated": mean(c3b, "fusion") - mean(c3b, "concatenated"),
            "held_out_unseen_fusion_minus_concatenated": (
                mean(unseen, "fusion") - mean(unseen, "concatenated")
            ),
            "subset_transfer_fusion_minus_concatenated": float(
                np.mean([s["full_probe"] - s["concatenated_full_probe"] for s in c2.values()])
            ),
            "all_modalities_r2": c2[full]["own_probe"],
        },
        "seconds": time.perf_counter() - t0,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "urban.json").write_text(json.dumps(results, indent=1))
    emb = run.fusion.embed(run.train_fs)
    (RESULTS / "urban_embedding_map.png").write_bytes(
        figures.embedding_map(run.train_fs.lat, run.train_fs.lon, run.train_fs.region, emb)
    )
    print(table(results))


if __name__ == "__main__":
    main()
