"""DS-Net's claims measured on the synthetic scenes, shared by the reproduction tests, a unit test and the
benchmark (imported as `reproduction.scenegraph.experiments`: tests/ is on the path).

One detector is trained and frozen per run (as in Scene-Graph-Benchmark.pytorch,
every relation head sits on the same detector); every relation model then trains
on its SGDet output and is scored in SGDet on held-out scenes:

- claim 1: each base model (MOTIFS, PE-Net) with its original head and with the
  DS-Net head: mR@100 and R@100. Both heads on a base get the same frequency prior
  (MOTIFS: its frequency bias; PE-Net: none, as in the authors' code); the `/frequency-prior`
  PE-Net variants give both PE-Net heads the prior, the other fair reading;
- claim 2: where the gain lands (mR@100 over non-geometric vs geometric predicates,
  over tail vs head predicates) and how often an annotated non-geometric triplet's
  pair is predicted with a geometric predicate (`ng_as_geo_rate`);
- claim 3: ablations of the DS-Net head (one stream over both inputs; the vision stream
  alone; one-way fusion, each direction: space -> vision only, where the vision stream attends
  to the space stream, and vision -> space only; no fusion: two streams with their per-stream
  losses and no cross-attention between them).
"""
from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
from paperworks.services.scenegraph.data.scenes import SceneConfig, generate_scenes, synthetic_vocabulary
from paperworks.services.scenegraph.dsnet import DSNetConfig
from paperworks.services.scenegraph.generator import predicate_frequencies
from paperworks.services.scenegraph.relation_model import RelationConfig, RelationModel, train_relation_model
from paperworks.services.scenegraph.sgg.components import predicate_counts
from paperworks.services.scenegraph.sgg.depth_order import DepthOrderEstimator, train_depth_order
from paperworks.services.scenegraph.sgg.detector import Detector, train_detector
from paperworks.services.scenegraph.sgg.features import Features, extract
from paperworks.services.scenegraph.sgg.metrics import evaluate
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from paperworks.shared.threads import single_thread
from pydantic import BaseModel, Field

VARIANTS = {
    "motifs": RelationConfig(base="motifs", head="original"),
    "motifs+dsnet": RelationConfig(base="motifs", head="dsnet"),
    "penet": RelationConfig(base="penet", head="original"),
    "penet+dsnet": RelationConfig(base="penet", head="dsnet"),
    "penet+dsnet/single-stream": RelationConfig(base="penet", head="dsnet",
                                                dsnet=DSNetConfig(streams="single")),
    "penet+dsnet/space-to-vision-only": RelationConfig(base="penet", head="dsnet",
                                                       dsnet=DSNetConfig(fusion="space_to_vision")),
    "penet+dsnet/vision-to-space-only": RelationConfig(base="penet", head="dsnet",
                                                       dsnet=DSNetConfig(fusion="vision_to_space")),
    "penet+dsnet/no-fusion": RelationConfig(base="penet", head="dsnet", dsnet=DSNetConfig(fusion="none")),
    "penet+dsnet/vision-stream-only": RelationConfig(base="penet", head="dsnet",
                                                     dsnet=DSNetConfig(streams="vision")),
    "penet/frequency-prior": RelationConfig(base="penet", head="original", frequency_prior=True),
    "penet+dsnet/frequency-prior": RelationConfig(base="penet", head="dsnet", frequency_prior=True),
}


class Setup(BaseModel):
    """`scenes` and `depth_attributes` switch to claim 3's world (`OCCLUSION_WORLD`).

    The defaults are the reproduction tests' scale: 600 training scenes seen 10 times cost what 400
    seen 15 times did, and the wider sample held margins the smaller one lost on some seed or CPU
    (docs/reproductions/scenegraph.md)."""

    seed: int = 0
    train_images: int = Field(default=600, ge=10)
    test_images: int = Field(default=200, ge=10)
    detector_epochs: int = Field(default=10, ge=1)
    relation_epochs: int = Field(default=10, ge=1)
    max_objects: int = Field(default=8, ge=2)
    scenes: SceneConfig = Field(default_factory=SceneConfig)
    depth_attributes: bool = False  # fit the depth-order estimator; every model gets its estimates


# Claim 3's world: a pair of side-by-side objects, one partly covering the other, planted in 70% of the
# scenes, so "in front of" / "behind" (decided by the pixels alone) are frequent and detectable; every
# model gets the detector's depth-order estimates, which reach the space stream only through the fusion.
OCCLUSION_WORLD = {"scenes": SceneConfig(overlap_pair_rate=0.7), "test_images": 600, "depth_attributes": True}
# Relation-training seeds each claim averages over (one detector, one scene set): with one seed, MOTIFS'
# mR@100 gain from the DS-Net head ranged from -0.006 to +0.049 (`Run.measure_over_seeds`).
TRAINING_SEEDS = 3


@dataclass(frozen=True)
class Comparison:
    """One comparison of the claims: `method` minus `baseline` on `key` (minus the same difference on
    `minus_key`; `sign=-1` where lower is better), or `method`'s own `key` when there is no baseline. It
    holds when that lead is >= `margin`. Measured in `world` (claims 1-2: the first, claim 3: the
    occlusion world) on means over `TRAINING_SEEDS` in the tests, and per seed in the benchmark."""

    claim: str
    world: Literal["first", "occlusion"]
    method: str
    baseline: str | None
    key: str
    margin: float
    minus_key: str | None = None
    sign: int = 1

    def lead(self, metrics: Callable[[str], dict]) -> float:
        """`metrics(variant)`: that variant's scalar metrics."""
        m = metrics(self.method)
        if self.baseline is None:
            return self.sign * m[self.key]
        b = metrics(self.baseline)
        lead = m[self.key] - b[self.key]
        if self.minus_key is not None:
            lead -= m[self.minus_key] - b[self.minus_key]
        return self.sign * lead


def _claims_1_2(base: str) -> dict[str, Comparison]:
    name, dsnet = {"motifs": "MOTIFS", "penet": "PE-Net"}[base], f"{base}+dsnet"

    def c(claim, key, margin, **kw):
        return Comparison(f"{claim} ({name})", "first", dsnet, base, key, margin, **kw)

    return {f"1/{base}/mR": c("1. the DS-Net head raises mR@100 by >= 0.02", "mR@100", 0.02),
            f"1/{base}/R": c("1. R@100 kept (falls by <= 0.04)", "R@100", -0.04),
            f"2/{base}/non-geometric": c("2. non-geometric mR@100 rises by >= 0.05", "mR@100_non_geometric",
                                         0.05),
            f"2/{base}/non-geometric-over-geometric": c(
                "2. non-geometric gain >= geometric gain + 0.05", "mR@100_non_geometric", 0.05,
                minus_key="mR@100_geometric"),
            f"2/{base}/tail": c("2. tail gain >= head gain + 0.03", "mR@100_tail", 0.03,
                                minus_key="mR@100_head"),
            f"2/{base}/interactions": c("2. interactions predicted geometric fall by >= 0.05",
                                        "ng_as_geo_rate", 0.05, sign=-1),
            f"2/{base}/geometric-share": c("2. the geometric share of top-1 predictions falls",
                                           "geo_share_predicted", 0.0, sign=-1)}


def _claim_3() -> dict[str, Comparison]:
    full, one_way, v2s = "penet+dsnet", "penet+dsnet/space-to-vision-only", "penet+dsnet/vision-to-space-only"
    vision, single = "penet+dsnet/vision-stream-only", "penet+dsnet/single-stream"
    out = {}
    for kept, label in ((full, "the full head"), (v2s, "vision -> space only")):
        out |= {f"3/order/{kept}": Comparison(f"3. {label} orders >= 0.6 of the depth-order pairs right",
                                              "occlusion", kept, None, "depth_order_accuracy", 0.6),
                f"3/order-vs-one-way/{kept}": Comparison(
                    f"3. {label} orders them >= 0.2 more often right than space -> vision only", "occlusion",
                    kept, one_way, "depth_order_accuracy", 0.2),
                f"3/depth-recall/{kept}": Comparison(
                    f"3. {label}: R@100 of in front of / behind >= space -> vision only's + 0.1", "occlusion",
                    kept, one_way, "mR@100_depth_order", 0.1)}
    for margin in (0.01, 0.03):
        out[f"3/vision-alone/mR/{margin}"] = Comparison(
            f"3. the vision stream alone loses >= {margin} mR@100", "occlusion", full, vision, "mR@100",
            margin)
    for margin in (0.01, 0.05):
        out[f"3/vision-alone/geometric/{margin}"] = Comparison(
            f"3. the vision stream alone loses >= {margin} geometric mR@100", "occlusion", full, vision,
            "mR@100_geometric", margin)
    for ablation, label in ((v2s, "vision -> space only"), (one_way, "space -> vision only"),
                            (single, "one stream over both inputs")):
        out[f"3/keeps-gain/{ablation}"] = Comparison(
            f"3. {label} keeps >= 0.02 mR@100 over the original head", "occlusion", ablation, "penet",
            "mR@100", 0.02)
    return out


# Every comparison the reproduction tests make (seed 0 in CI; docs/reproductions/scenegraph.md). CI asserts
# only those in `ASSERTED`: the ones that also hold at benchmark scale (tests/benchmarks/results/
# scenegraph.json, seeds 0-2) on every seed, with the mean lead at least two standard deviations of the
# per-seed lead above the margin (tests/unit/scenegraph/test_scenegraph_benchmark_agrees.py checks it). The
# rest do not hold at benchmark scale: the tests print them, the service README's table reports them, and
# that unit test measures each on the benchmark's results as a strict xfail (issue 26).
COMPARISONS = _claims_1_2("motifs") | _claims_1_2("penet") | _claim_3()
ASSERTED = ("1/motifs/R", "1/penet/mR", "1/penet/R", "2/penet/non-geometric",
            "2/penet/non-geometric-over-geometric", "2/penet/tail", "2/penet/interactions",
            "3/order/penet+dsnet", "3/order/penet+dsnet/vision-to-space-only",
            "3/order-vs-one-way/penet+dsnet", "3/order-vs-one-way/penet+dsnet/vision-to-space-only",
            "3/depth-recall/penet+dsnet", "3/depth-recall/penet+dsnet/vision-to-space-only",
            "3/vision-alone/mR/0.01", "3/vision-alone/geometric/0.01",
            "3/keeps-gain/penet+dsnet/vision-to-space-only")
REPORTED = tuple(name for name in COMPARISONS if name not in ASSERTED)


@dataclass
class Run:
    setup: Setup
    vocab: Vocabulary
    test: list[Sample]
    detector: Detector
    train_feats: Features
    test_feats: Features
    counts: torch.Tensor
    frequencies: np.ndarray
    estimator: DepthOrderEstimator | None = None
    results: dict[tuple[str, int], dict] = field(default_factory=dict)
    models: dict[tuple[str, int], RelationModel] = field(default_factory=dict)

    def measure(self, name: str, seed_offset: int = 0) -> dict:
        """SGDet metrics of variant `name` trained with seed `setup.seed + seed_offset` (once per run)."""
        key = (name, seed_offset)
        if key not in self.results:
            with single_thread():
                self._train_and_score(name, seed_offset)
        return self.results[key]

    def measure_over_seeds(self, name: str, seeds: int) -> dict:
        """The scalar metrics averaged over `seeds` relation-training seeds (same detector, same scenes).

        One training seed is not enough for some comparisons: MOTIFS' mR@100 gain from the DS-Net head
        was -0.006, +0.049 and +0.036 over training seeds 0-2 on the same detector output."""
        return mean_metrics([self.measure(name, seed_offset=i) for i in range(seeds)])

    def config(self, name: str) -> RelationConfig:
        """Variant `name`, taking the depth-order estimates as object attributes where the run has them."""
        width = self.estimator.width if self.estimator is not None else 0
        return VARIANTS[name].model_copy(update={"attributes": width})

    def _train_and_score(self, name: str, seed_offset: int) -> None:
        seed = self.setup.seed + seed_offset
        torch.manual_seed(seed)
        backbone = self.detector.backbone
        model = RelationModel(self.config(name), self.vocab, self.counts, backbone.coarse_channels,
                              backbone.fine_channels)
        train_relation_model(model, self.train_feats, self.setup.relation_epochs, seed)
        self.models[(name, seed_offset)] = model
        scores = model.predicate_scores(self.test_feats)
        result = evaluate(self.test, self.test_feats, scores, self.vocab, self.frequencies)
        if self.vocab.depth_order:
            result["depth_order_accuracy"] = depth_order_accuracy(self.test_feats, scores, self.vocab)
            result["mR@100_depth_order"] = float(np.mean([result["per_predicate_R@100"].get(p, 0.0)
                                                          for p in self.vocab.depth_order]))
        self.results[(name, seed_offset)] = result


def mean_metrics(runs: list[dict]) -> dict:
    """The scalar metrics of several runs, averaged."""
    return {k: float(np.mean([r[k] for r in runs])) for k, v in runs[0].items() if isinstance(v, float)}


@dataclass
class Measured:
    """A world's metrics measured in another process (`BackgroundWorld`), read the way `Run` is."""

    results: dict[tuple[str, int], dict]

    def measure_over_seeds(self, name: str, seeds: int) -> dict:
        missing = [i for i in range(seeds) if (name, i) not in self.results]
        if missing:
            raise KeyError(f"{name} with training seeds {missing} was not measured in this world")
        return mean_metrics([self.results[(name, i)] for i in range(seeds)])


def measure_world(setup: Setup, names: tuple[str, ...], training_seeds: int) -> dict[tuple[str, int], dict]:
    """Prepare `setup`'s world and measure each variant on `training_seeds` relation-training seeds."""
    run = prepare(setup)
    for name in names:
        run.measure_over_seeds(name, training_seeds)
    return run.results


class BackgroundWorld:
    """`measure_world` in a second process. The reproduction suite's two worlds are independent and
    each trains on one thread, so on this 2-core machine the second world trains while the first
    world's tests run, and the suite takes the longer world's time instead of the sum."""

    def __init__(self, setup: Setup, names: tuple[str, ...], training_seeds: int):
        ctx = multiprocessing.get_context("spawn")  # no fork of a process that holds torch threads
        self._conn, child = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=_measure_into, args=(child, setup, names, training_seeds),
                                    daemon=True, name=f"scenegraph-world-{setup.seed}")
        self._process.start()
        child.close()
        self._measured: Measured | None = None

    def result(self) -> Measured:
        """Wait for the measurements; the worker's traceback if it failed."""
        if self._measured is None:
            try:
                ok, payload = self._conn.recv()
            except EOFError:
                self._process.join()
                raise RuntimeError(f"the world's process died (exit code {self._process.exitcode})") from None
            self._process.join()
            if not ok:
                raise RuntimeError(f"measuring the world failed in its process:\n{payload}")
            self._measured = Measured(payload)
        return self._measured

    def stop(self) -> None:
        if self._process.is_alive():
            self._process.terminate()
        self._process.join()


def _measure_into(conn, setup: Setup, names: tuple[str, ...], training_seeds: int) -> None:
    try:
        conn.send((True, measure_world(setup, names, training_seeds)))
    except BaseException:  # the parent re-raises it with this traceback
        conn.send((False, traceback.format_exc()))
    finally:
        conn.close()


def depth_order_accuracy(feats: Features, scores: torch.Tensor, vocab: Vocabulary) -> float:
    """Share of the detected pairs labelled "in front of" or "behind" (`Vocabulary.depth_order`) whose
    labelled predicate scores above the other one: 0.5 is a coin flip. Only the pixels decide it."""
    front, behind = (vocab.predicate_index(p) for p in vocab.depth_order)
    b, s, o = ((feats.rel_labels == front) | (feats.rel_labels == behind)).nonzero(as_tuple=True)
    if len(b) == 0:
        return float("nan")
    says_front = scores[b, s, o, front] > scores[b, s, o, behind]
    return float((says_front == (feats.rel_labels[b, s, o] == front)).float().mean())


def prepare(setup: Setup) -> Run:
    with single_thread():
        return _prepare(setup)


def _prepare(setup: Setup) -> Run:
    torch.manual_seed(setup.seed)
    vocab = synthetic_vocabulary()
    train = generate_scenes(setup.train_images, setup.seed, setup.scenes)
    test = generate_scenes(setup.test_images, setup.seed + 10_000, setup.scenes)
    detector = train_detector(train, vocab.num_classes, setup.detector_epochs, setup.seed)
    estimator = train_depth_order(detector, train, vocab, setup.seed) if setup.depth_attributes else None
    return Run(setup, vocab, test, detector,
               extract(detector, None, train, "sgdet", setup.max_objects, attributes=estimator),
               extract(detector, None, test, "sgdet", setup.max_objects, attributes=estimator),
               predicate_counts(train, vocab.num_classes, vocab.num_predicates),
               predicate_frequencies(train, vocab.num_predicates), estimator)
