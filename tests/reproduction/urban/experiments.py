"""UrbanFusion's three claims, measured on the synthetic world against baselines trained in the same run.

Shared by the reproduction tests (small) and the benchmark (larger). City_00 is kept out of
the probe fitting of claims 1-3a (label-free pretraining sees its modalities unless
`Setup.pretrain_on_held_out` is False). On the other cities:
1. fusion with reconstruction (lambda = 0.0625) vs the same model trained contrastive-only
   (lambda = 0), MLP probes on the all-modality embedding, per target (`world.INFORMATION`
   says which are redundant, unique or synergistic);
2. any-subset inference: a linear probe per non-empty modality subset (the subset's own
   embedding), and a probe fitted on all-modality embeddings applied unchanged to each
   subset's embedding beside the same transfer for concatenated features;
3. the coordinates-only embedding vs a SatCLIP-style coordinates <-> imagery encoder (linear
   probes, random split of the training cities' locations), and held-out cities predicted by
   probes fitted on the other cities' labels, UrbanFusion embedding vs concatenated features,
   under the Evaluate job's leave-one-region-out protocol: every city is held out in turn and
   the scores are averaged (`held_out_cities`). A single held-out city is one noisy draw: on
   seed 0 city_00 alone favoured concatenated features on two tasks that the mean over all
   cities gives to UrbanFusion.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from paperworks.services.urban.baselines import (
    SatCLIP,
    concatenated_features,
    coordinate_features,
    train_satclip,
)
from paperworks.services.urban.data import world
from paperworks.services.urban.evaluation import (
    Target,
    all_subsets,
    make_target,
    random_split,
    score,
)
from paperworks.services.urban.probes import Probe
from paperworks.services.urban.urbanfusion.encoder import FeatureSet, UrbanEncoder
from paperworks.services.urban.urbanfusion.model import COORDINATES, DEFAULT_RECONSTRUCTION_WEIGHT
from paperworks.services.urban.urbanfusion.train import PretrainConfig, pretrain

# Validation seed 10 (6 cities x 500), mean linear-probe score of the coordinates-only SatCLIP-style
# embedding over the 5 tasks, per (learning rate, steps): more steps than 600 hurt it at every rate,
# and 1e-3 beat UrbanFusion's 2e-3 (which it used before).
SATCLIP_VALIDATION = {
    (5e-4, 150): 0.354, (5e-4, 300): 0.363, (1e-3, 150): 0.355, (1e-3, 300): 0.364,
    (1e-3, 600): 0.368, (1e-3, 1200): 0.335, (1e-3, 2400): 0.307,
    (2e-3, 600): 0.341, (2e-3, 1200): 0.316, (2e-3, 2400): 0.308,
    (5e-3, 600): 0.346, (5e-3, 1200): 0.325, (5e-3, 2400): 0.318,
}
SATCLIP_STEPS, SATCLIP_LEARNING_RATE = 600, 1e-3


@dataclass(frozen=True)
class Setup:
    world: world.WorldConfig
    dim: int = 32
    layers: int = 2
    heads: int = 4
    steps: int = 600
    batch_size: int = 256
    test_fraction: float = 0.3
    pretrain_on_held_out: bool = True  # label-free pretraining sees the held-out city's modalities
    # The SatCLIP-style baseline's own budget, chosen on validation seed 10 (`SATCLIP_VALIDATION`);
    # None = the same steps as UrbanFusion (what it had before).
    satclip_steps: int | None = SATCLIP_STEPS
    satclip_learning_rate: float = SATCLIP_LEARNING_RATE

    @property
    def held_out(self) -> str:
        return "city_00"


@dataclass
class Run:
    setup: Setup
    fusion: UrbanEncoder
    contrastive: UrbanEncoder
    satclip: SatCLIP
    train_fs: FeatureSet  # the pretraining cities (UrbanFusion's features)
    contrastive_fs: FeatureSet  # the same locations under the contrastive-only encoder's normalization
    held_fs: FeatureSet  # the held-out city
    targets: dict[str, Target]  # over train_fs
    held_targets: dict[str, Target]  # over held_fs
    train_rows: np.ndarray
    test_rows: np.ndarray


def train_models(setup: Setup) -> Run:
    data = world.generate(setup.world)
    inside = data.region == setup.held_out
    train_data, held_data = data.take(~inside), data.take(inside)
    seed = setup.world.seed
    pretrain_data = data if setup.pretrain_on_held_out else train_data
    encoders = {}
    for name, weight in (("fusion", DEFAULT_RECONSTRUCTION_WEIGHT), ("contrastive", 0.0)):
        encoder = UrbanEncoder.create(pretrain_data, {}, setup.dim, setup.layers, setup.heads, seed)
        config = PretrainConfig(steps=setup.steps, batch_size=setup.batch_size,
                                reconstruction_weight=weight, seed=seed)
        pretrain(encoder, encoder.features(pretrain_data), config)
        encoders[name] = encoder
    fusion = encoders["fusion"]
    train_fs = fusion.features(train_data)
    satclip_config = PretrainConfig(steps=setup.satclip_steps or setup.steps, batch_size=setup.batch_size,
                                    learning_rate=setup.satclip_learning_rate, seed=seed)
    satclip = train_satclip(fusion.features(pretrain_data), setup.dim, satclip_config)
    targets = {n: make_target(n, train_data.targets, t, n) for n, t in world.TARGETS.items()}
    held = {n: make_target(n, held_data.targets, t, n, targets[n].classes) for n, t in world.TARGETS.items()}
    train_rows, test_rows = random_split(np.arange(len(train_fs)), setup.test_fraction, seed)
    return Run(setup, fusion, encoders["contrastive"], satclip, train_fs,
               encoders["contrastive"].features(train_data), fusion.features(held_data),
               targets, held, train_rows, test_rows)


def _score(run: Run, x: np.ndarray, target: Target, kind: str) -> float:
    return score(x, target, run.train_rows, run.test_rows, kind, run.setup.world.seed)


def fusion_vs_contrastive(run: Run, kind: str = "mlp") -> dict[str, dict[str, float]]:
    """Claim 1: per target, the probe score on each model's all-modality embedding."""
    fusion_emb = run.fusion.embed(run.train_fs)
    contrastive_emb = run.contrastive.embed(run.contrastive_fs)
    return {name: {"information": world.INFORMATION[name],
                   "fusion": _score(run, fusion_emb, t, kind),
                   "contrastive_only": _score(run, contrastive_emb, t, kind)}
            for name, t in run.targets.items()}


REGRESSION = [n for n, t in world.TARGETS.items() if t == "regression"]
COORDINATE_ENCODINGS = ("raw", "fourier")
# How the concatenated-features baseline gets coordinates, per claim: the encoding that scored
# better for the baseline on validation seed 10 (6 cities x 500, 600 steps), never on the seeds CI
# asserts (0) or the benchmark reports (0, 1, 2). BASELINE_VALIDATION holds seed 10's scores:
# claim 2, mean R² of the baseline's own probe over the subsets with coordinates and of its
# transfer over all 31; claim 3b, the leave-one-city-out mean of 5 tasks.
BASELINE_COORDINATES = {"claim2": "fourier", "claim3b": "raw"}
BASELINE_VALIDATION = {
    "claim2": {"raw": {"own": 0.367, "transfer": 0.353}, "fourier": {"own": 0.555, "transfer": 0.409}},
    "claim3b": {"raw": 0.655, "fourier": 0.514, "no coordinates": 0.669},
}
VALIDATION_SEEDS = (10,)


def _with_coordinates(concat: np.ndarray, coords: np.ndarray, has: np.ndarray,
                      fill: np.ndarray) -> np.ndarray:
    """Concatenated features + coordinate features; rows without coordinates get `fill` (the
    training mean, as absent modalities get their mean)."""
    return np.hstack([concat, np.where(has[:, None], coords, fill[None, :])]).astype(np.float32)


def any_subset(run: Run, encodings: tuple[str, ...] | None = None) -> dict[str, dict[str, float]]:
    """Claim 2: per subset, mean R² over the regression targets of (a) a probe fitted on that
    subset's embeddings, beside the same for its concatenated features, and (b) the all-modality
    probe applied unchanged to the subset's embeddings, beside the same transfer for concatenated
    features (absent modalities at their mean). The baseline gets coordinates wherever the
    embedding does: in (a) when the subset holds them, in (b) always in the fitted probe's input
    (at their mean where the subset lacks them), encoded as `BASELINE_COORDINATES["claim2"]`
    (chosen on validation seeds; `..._<encoding>` keys for each of `encodings`, by default the
    chosen one only, the benchmark asks for both). Rows carrying none of the subset are left out."""
    fs, seed = run.train_fs, run.setup.world.seed
    chosen = BASELINE_COORDINATES["claim2"]
    encodings = encodings or (chosen,)
    full_emb, full_concat = run.fusion.embed(fs), concatenated_features(fs)
    coords = {e: coordinate_features(fs, e, seed=seed) for e in encodings}
    fill = {e: c[run.train_rows].mean(0) for e, c in coords.items()}
    always = np.ones(len(fs), bool)
    full_probes = {}
    for n in REGRESSION:
        t = run.targets[n]
        full_probes[n] = {"fusion": Probe("regression", "linear", full_emb.shape[1], seed=seed)
                          .fit(full_emb[run.train_rows], t.y[run.train_rows])}
        for e in encodings:
            x = _with_coordinates(full_concat, coords[e], always, fill[e])
            full_probes[n][e] = Probe("regression", "linear", x.shape[1], seed=seed).fit(
                x[run.train_rows], t.y[run.train_rows])
    out = {}
    for subset in all_subsets(fs.names):
        view = fs.restricted(subset)
        usable = view.present.any(axis=1)
        tr, te = run.train_rows[usable[run.train_rows]], run.test_rows[usable[run.test_rows]]
        emb = np.zeros_like(full_emb)
        emb[usable] = run.fusion.embed(view.take(usable))
        concat = concatenated_features(view)
        has = np.full(len(fs), COORDINATES in subset)
        own, transfer = [], []
        concat_own = {e: [] for e in encodings}
        concat_transfer = {e: [] for e in encodings}
        for n in REGRESSION:
            t = run.targets[n]
            own.append(score(emb, t, tr, te, "linear", seed))
            transfer.append(full_probes[n]["fusion"].score(emb[te], t.y[te]))
            for e in encodings:
                x_own = np.hstack([concat, coords[e]]) if COORDINATES in subset else concat
                concat_own[e].append(score(x_own, t, tr, te, "linear", seed))
                x = _with_coordinates(concat, coords[e], has, fill[e])
                concat_transfer[e].append(full_probes[n][e].score(x[te], t.y[te]))
        name = "+".join(n for n in fs.names if n in subset)
        row = {"size": len(subset), "own_probe": float(np.mean(own)),
               "concatenated_own_probe": float(np.mean(concat_own[chosen])),
               "full_probe": float(np.mean(transfer)),
               "concatenated_full_probe": float(np.mean(concat_transfer[chosen]))}
        for e in encodings:
            row[f"concatenated_own_probe_{e}"] = float(np.mean(concat_own[e]))
            row[f"concatenated_full_probe_{e}"] = float(np.mean(concat_transfer[e]))
        out[name] = row
    return out


def location_encoding(run: Run) -> dict[str, dict[str, float]]:
    """Claim 3a: coordinates-only embeddings, UrbanFusion vs SatCLIP-style, linear probes."""
    coords_only = run.fusion.embed(run.train_fs.restricted({COORDINATES}))
    satclip = run.satclip.embed_coordinates(run.train_fs)
    return {name: {"fusion_coordinates": _score(run, coords_only, t, "linear"),
                   "satclip": _score(run, satclip, t, "linear")}
            for name, t in run.targets.items()}


def held_out_city(run: Run, kind: str = "linear", coordinates: bool = True) -> dict[str, dict[str, float]]:
    """Claim 3b: probes fitted on the training cities' labels, scored on the held-out city.
    With `coordinates=False` the embedding uses the other modalities only (what a city the
    encoder never saw offers: its coordinates carry nothing learned), over the locations that
    have at least one of them; the concatenated features never include coordinates."""
    seed = run.setup.world.seed
    use = set(run.train_fs.names) - (set() if coordinates else {COORDINATES})
    train_keep = run.train_fs.restricted(use).present.any(axis=1)
    held_keep = run.held_fs.restricted(use).present.any(axis=1)
    train_fs = run.train_fs.restricted(use).take(train_keep)
    held_fs = run.held_fs.restricted(use).take(held_keep)
    inputs = {"fusion": (run.fusion.embed(train_fs), run.fusion.embed(held_fs)),
              "concatenated": (concatenated_features(train_fs), concatenated_features(held_fs))}
    out = {}
    for name, t in run.targets.items():
        y_train, y_held = t.y[train_keep], run.held_targets[name].y[held_keep]
        row = {}
        for method, (x_train, x_held) in inputs.items():
            probe = Probe(t.task_type, kind, x_train.shape[1], t.classes, seed).fit(x_train, y_train)
            row[method] = probe.score(x_held, y_held)
        out[name] = row
    return out


def _joined(a: FeatureSet, b: FeatureSet) -> FeatureSet:
    return FeatureSet(a.names, np.concatenate([a.ids, b.ids]), np.concatenate([a.lat, b.lat]),
                      np.concatenate([a.lon, b.lon]), np.concatenate([a.region, b.region]),
                      {k: np.concatenate([a.features[k], b.features[k]]) for k in a.features},
                      np.concatenate([a.present, b.present]))


def held_out_cities(run: Run, kind: str = "mlp", encodings: tuple[str, ...] | None = None,
                    no_coordinates: bool = True) -> dict[str, dict]:
    """Claim 3b, leave-one-region-out over every city (the Evaluate job's protocol): per target,
    probes fitted on the other cities' labels score the held-out city; the mean over cities and
    each city's scores. Both sides get the same inputs, in two regimes:
    - with coordinates: the all-modality UrbanFusion embedding (`fusion`) vs the concatenated
      features plus coordinates (`concatenated+coordinates`, encoded as
      `BASELINE_COORDINATES["claim3b"]`, chosen on validation seeds; `..._<encoding>` for each of
      `encodings`, by default the chosen one only, the benchmark asks for both);
    - without coordinates (`no_coordinates`): the embedding from the other modalities
      (`fusion_no_coordinates`) vs the concatenated features (`concatenated`), over the locations
      that have one of them.
    `concatenated` beside `fusion` is the old, tilted comparison (coordinates on one side only).
    Label-free pretraining saw every city's modalities and coordinates (transductive)."""
    fs, seed = _joined(run.train_fs, run.held_fs), run.setup.world.seed
    ys = {n: np.concatenate([t.y, run.held_targets[n].y]) for n, t in run.targets.items()}
    others = fs.restricted(set(fs.names) - {COORDINATES})
    keep = others.present.any(axis=1)  # rows the no-coordinates regime can embed
    concat = concatenated_features(fs)
    chosen = BASELINE_COORDINATES["claim3b"]
    inputs = {"fusion": (run.fusion.embed(fs), None)}
    for e in encodings or (chosen,):
        inputs[f"concatenated+coordinates_{e}"] = (np.hstack([concat, coordinate_features(fs, e, seed=seed)]),
                                                   None)
    if no_coordinates:
        no_coords = np.zeros_like(inputs["fusion"][0])
        no_coords[keep] = run.fusion.embed(others.take(keep))
        inputs["fusion_no_coordinates"] = (no_coords, keep)
        inputs["concatenated"] = (concat, keep)
    out = {}
    for name, t in run.targets.items():
        y = ys[name]
        cities = {}
        for city in sorted(set(fs.region.tolist())):
            inside = fs.region == city
            row = {}
            for method, (x, rows) in inputs.items():
                rows = np.ones(len(fs), bool) if rows is None else rows
                row[method] = (Probe(t.task_type, kind, x.shape[1], t.classes, seed)
                               .fit(x[~inside & rows], y[~inside & rows])
                               .score(x[inside & rows], y[inside & rows]))
            row["concatenated+coordinates"] = row[f"concatenated+coordinates_{chosen}"]
            cities[city] = row
        out[name] = {method: float(np.mean([c[method] for c in cities.values()])) for method in cities[city]}
        out[name]["cities"] = cities
    return out


def held_out_city_unseen(setup: Setup, kind: str = "mlp") -> dict[str, dict[str, float]]:
    """Claim 3b's stricter variant: a fusion encoder pretrained without the held-out city at all,
    scored from the city's non-coordinate modalities (its coordinates were never seen)."""
    data = world.generate(setup.world)
    train_data = data.take(data.region != setup.held_out)
    encoder = UrbanEncoder.create(train_data, {}, setup.dim, setup.layers, setup.heads, setup.world.seed)
    pretrain(encoder, encoder.features(train_data), PretrainConfig(
        steps=setup.steps, batch_size=setup.batch_size, seed=setup.world.seed))
    held_data = data.take(data.region == setup.held_out)
    targets = {n: make_target(n, train_data.targets, t, n) for n, t in world.TARGETS.items()}
    held = {n: make_target(n, held_data.targets, t, n, targets[n].classes) for n, t in world.TARGETS.items()}
    fs = encoder.features(train_data)
    rows = np.arange(len(fs))
    run = Run(setup, encoder, encoder, None, fs, fs, encoder.features(held_data), targets, held, rows, rows)
    return held_out_city(run, kind, coordinates=False)
