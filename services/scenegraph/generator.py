"""A trained scene-graph generator: detector + box classifier + relation model, end to end.

Training follows Scene-Graph-Benchmark.pytorch's two stages: the detector is
trained first and frozen (with the SGCls box classifier on its features), then
the relation model trains on the frozen detector's SGDet output (detected boxes
matched to the annotation at IoU >= 0.5, `sgg.features.extract`). Evaluation runs
any of PredCls, SGCls and SGDet with the benchmark's metrics (`sgg.metrics`).
The whole generator round-trips through one safetensors file (`checkpoint.py`).

Devices: `train(..., device=)` and `to(device, autocast)` put every trained part and every batch
handed to them on one device (the job's, or the server's for the Predict RPC); the metrics and
the ranking of triplets read the scores back on the CPU. `autocast` (a device -> context manager,
e.g. `paperworks.shared.devices.autocast`) wraps the detector's inference pass only: training
stays float32.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from paperworks.services.scenegraph.relation_model import RelationConfig, RelationModel, train_relation_model
from paperworks.services.scenegraph.sgg.components import predicate_counts
from paperworks.services.scenegraph.sgg.depth_order import DepthOrderEstimator, train_depth_order
from paperworks.services.scenegraph.sgg.detector import (
    BoxClassifier,
    Detector,
    image_tensor,
    train_box_classifier,
    train_detector,
)
from paperworks.services.scenegraph.sgg.features import MODES, Features, extract
from paperworks.services.scenegraph.sgg.metrics import evaluate, ranked_triplets
from paperworks.services.scenegraph.sgg.sample import Sample
from paperworks.services.scenegraph.sgg.vocab import Vocabulary
from pydantic import BaseModel, Field

Progress = Callable[[str, int, int, float], None]  # (stage, step, total, loss)
Autocast = Callable[[torch.device], contextlib.AbstractContextManager]


class TrainConfig(BaseModel):
    relation: RelationConfig = Field(default_factory=RelationConfig)
    image_size: int = Field(default=64, ge=48, le=256)
    detector_epochs: int = Field(default=15, ge=1, le=500)
    classifier_epochs: int = Field(default=10, ge=1, le=500)
    relation_epochs: int = Field(default=15, ge=1, le=500)
    max_objects: int = Field(default=8, ge=2, le=32)
    depth_order: bool = False  # fit the depth-order estimator; the relation model gets its estimates
    seed: int = 0


@dataclass
class Triplet:
    subject: int
    predicate: str
    object: int
    score: float
    geometric: bool


@dataclass
class SceneGraph:
    mode: str
    boxes: np.ndarray  # [n, 4] in the model's image pixels
    labels: list[str]
    scores: np.ndarray  # [n]
    triplets: list[Triplet]


def predicate_frequencies(samples: list[Sample], num_predicates: int) -> np.ndarray:
    """Annotated triplets per predicate id (index 0, the background, stays 0)."""
    ids = np.concatenate([s.relations[:, 2] for s in samples]) if samples else np.zeros(0, np.int64)
    return np.bincount(ids, minlength=num_predicates).astype(np.float64)


def features_on(feats: Features, device: torch.device | str) -> Features:
    """The batch with every tensor on `device`."""
    return dataclasses.replace(feats, **{f.name: value.to(device) for f in dataclasses.fields(feats)
                                         if isinstance(value := getattr(feats, f.name), torch.Tensor)})


def _float32(device: torch.device) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


class SceneGraphGenerator:
    def __init__(self, vocab: Vocabulary, cfg: TrainConfig, counts: torch.Tensor,
                 train_frequencies: np.ndarray):
        self.vocab, self.cfg = vocab, cfg
        self.counts, self.train_frequencies = counts, train_frequencies
        self.detector = Detector(vocab.num_classes)
        self.classifier = BoxClassifier(self.detector.backbone.coarse_channels, vocab.num_classes)
        self.depth = DepthOrderEstimator(self.detector.backbone.fine_channels) if cfg.depth_order else None
        self.relation = self._relation_model()
        self.device, self.autocast = torch.device("cpu"), _float32

    def to(self, device: torch.device | str, autocast: Autocast | None = None) -> SceneGraphGenerator:
        """Every trained part on `device`; inference forward passes under `autocast(device)`."""
        self.device, self.autocast = torch.device(device), autocast or _float32
        for _, module in self.modules():
            module.to(self.device)
        return self

    def modules(self) -> list[tuple[str, torch.nn.Module]]:
        """The trained parts by checkpoint prefix (the depth-order estimator where there is one)."""
        named = [("detector", self.detector), ("classifier", self.classifier), ("relation", self.relation)]
        return named + ([("depth", self.depth)] if self.depth is not None else [])

    def _relation_model(self) -> RelationModel:
        relation = self.cfg.relation.model_copy(update={"attributes": self.depth.width if self.depth else 0})
        return RelationModel(relation, self.vocab, self.counts, self.detector.backbone.coarse_channels,
                             self.detector.backbone.fine_channels)

    # ------------------------------------------------------------------ training

    @classmethod
    def train(cls, samples: list[Sample], vocab: Vocabulary, cfg: TrainConfig,
              progress: Progress | None = None, detector: Detector | None = None,
              classifier: BoxClassifier | None = None, device: torch.device | str = "cpu"
              ) -> SceneGraphGenerator:
        """`detector`/`classifier`: reuse frozen ones (several heads on one detector, as in the benchmark).
        Each stage's model and batches are on `device` (training in float32)."""
        counts = predicate_counts(samples, vocab.num_classes, vocab.num_predicates)
        gen = cls(vocab, cfg, counts, predicate_frequencies(samples, vocab.num_predicates)).to(device)
        report = progress or (lambda *_: None)
        gen.detector = (detector or train_detector(
            samples, vocab.num_classes, cfg.detector_epochs, cfg.seed,
            on_epoch=lambda e, loss: report("detector", e, cfg.detector_epochs, loss),
            device=gen.device)).to(gen.device)
        gen.detector.eval()
        if classifier is None:
            with torch.no_grad():
                coarse = torch.cat([gen.detector(gen.images(samples[i:i + 64]))["coarse"]
                                    for i in range(0, len(samples), 64)])
            classifier = train_box_classifier(coarse, samples, vocab.num_classes, cfg.classifier_epochs,
                                              cfg.seed)
        gen.classifier = classifier.to(gen.device)
        if cfg.depth_order:
            gen.depth = train_depth_order(gen.detector, samples, vocab, cfg.seed).to(gen.device)
        feats = gen.features(samples, "sgdet")
        gen.relation = gen._relation_model().to(gen.device)
        train_relation_model(gen.relation, feats, cfg.relation_epochs, cfg.seed,
                             on_epoch=lambda e, loss: report("relation", e, cfg.relation_epochs, loss))
        return gen

    # ------------------------------------------------------------------ inference

    def images(self, samples: list[Sample]) -> torch.Tensor:
        """The samples' pixels as the detector's input batch, on the generator's device."""
        return image_tensor([s.image for s in samples], self.device)

    def features(self, samples: list[Sample], mode: str) -> Features:
        """The frozen detector's output for `mode`, computed and kept on the generator's device."""
        feats = extract(self.detector, self.classifier, samples, mode, self.cfg.max_objects,
                        attributes=self.depth)
        return features_on(feats, self.device)

    def _scores(self, samples: list[Sample], mode: str) -> tuple[Features, torch.Tensor]:
        """(features, predicate scores) read back on the CPU, for the metrics and the ranking. Only the
        detector's pass runs under `autocast` (measured on the CPU's bf16, 240 scenes x 10 epochs, 60
        held out: R@K, ngR@K and mR@K equal to 4 decimals in all three modes); the relation model's
        `predicate_scores` writes float32 scores and does not take a bf16 forward."""
        with self.autocast(self.device):
            feats = self.features(samples, mode)
        scores = self.relation.predicate_scores(feats)
        return features_on(feats, "cpu"), scores.cpu()

    def evaluate(self, samples: list[Sample], modes: tuple[str, ...] = MODES) -> dict[str, dict]:
        out = {}
        for mode in modes:
            feats, scores = self._scores(samples, mode)
            out[mode] = evaluate(samples, feats, scores, self.vocab, self.train_frequencies)
        return out

    def predict(self, samples: list[Sample], mode: str, top_k: int) -> list[SceneGraph]:
        """Scene graphs (ranked with the graph constraint); the samples' relations are not used, their
        boxes only in PredCls/SGCls and their labels only in PredCls."""
        feats, scores = self._scores(samples, mode)
        geometric = set(self.vocab.geometric_ids)
        graphs = []
        for b in range(len(samples)):
            m = int(feats.valid[b].sum())
            triplets = []
            if m > 1:
                trip, tscores = ranked_triplets(m, feats.scores[b], scores[b], graph_constraint=True)
                ranked = zip(trip[:top_k].tolist(), tscores[:top_k].tolist(), strict=True)
                triplets = [Triplet(s, self.vocab.predicate_name(r), o, v, r in geometric)
                            for (s, o, r), v in ranked]
            graphs.append(SceneGraph(mode, feats.boxes[b, :m].numpy().copy(),
                                     [self.vocab.classes[int(c)] for c in feats.labels[b, :m]],
                                     feats.scores[b, :m].numpy().copy(), triplets))
        return graphs
