"""Training, scoring and (de)serialisation of every adapter kind over frozen features.

Data layout (the COCO form): image features (N_i, D), text features (N_t, D) and `labels` (N_t,),
the index of the image each caption describes. A batch draws B captions; its images are the
distinct images they describe; the binary label of a pair is 1 where the caption describes the
image, else 0 (so other captions of the same content are labelled negatives: false negatives).

Every kind gets the same loop: AdamW, the same batches, one pass over the captions per epoch, and
early stopping on the validation RSUM (the best epoch's weights are kept), so that each method is
trained to convergence on validation under the same budget.
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from .baselines import AdapterConfig, PCMEAdapter, ResidualAdapter, ZeroShot
from .metrics import retrieval_metrics
from .model import VACSRAdapter, VACSRConfig

KINDS = ("vacsr", "infonce", "sigmoid", "pcme", "zero_shot")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 40
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    patience: int = 8
    seed: int = 0

    def __post_init__(self):
        if self.epochs < 1 or self.batch_size < 2 or self.patience < 1:
            raise ValueError("epochs and patience must be >= 1, batch_size >= 2")
        if self.learning_rate <= 0 or self.weight_decay < 0:
            raise ValueError("learning_rate must be > 0 and weight_decay >= 0")

    def to_dict(self) -> dict:
        return asdict(self)


def build_adapter(kind: str, feature_dim: int, **options) -> nn.Module:
    """A fresh adapter of `kind`; `options` are the fields of VACSRConfig (vacsr) or
    AdapterConfig (the baselines)."""
    if kind == "vacsr":
        return VACSRAdapter(VACSRConfig(feature_dim=feature_dim, **options))
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    config = AdapterConfig(feature_dim=feature_dim, **options)
    if kind == "zero_shot":
        return ZeroShot(config)
    if kind == "pcme":
        return PCMEAdapter(config)
    return ResidualAdapter(config, kind)


def _check(img: torch.Tensor, txt: torch.Tensor, labels: torch.Tensor) -> None:
    if img.ndim != 2 or txt.ndim != 2 or img.shape[1] != txt.shape[1]:
        raise ValueError(f"features must be (N, D) with one D: images {tuple(img.shape)}, "
                         f"texts {tuple(txt.shape)}")
    if labels.shape != (txt.shape[0],):
        raise ValueError(f"labels must be ({txt.shape[0]},), one image index per caption")
    if len(labels) and (labels.min() < 0 or labels.max() >= img.shape[0]):
        raise ValueError("labels must index the image features")
    if not (torch.isfinite(img).all() and torch.isfinite(txt).all()):
        raise ValueError("features must be finite")


def pair_labels(image_index: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(len(image_index), len(labels)) binary matrix: caption j describes image image_index[i]."""
    return (image_index[:, None] == labels[None, :]).float()


def train_adapter(kind: str, img_feats: torch.Tensor, txt_feats: torch.Tensor, labels: torch.Tensor,
                  *, val: tuple | None = None, config: TrainConfig = TrainConfig(),
                  options: dict | None = None, device: str = "cpu",
                  progress=None) -> tuple[nn.Module, list[dict]]:
    """Train an adapter of `kind` on frozen features; returns (adapter in eval mode, history).

    `val` = (img, txt, labels) in the same layout: the epoch with the best validation RSUM is kept
    and training stops after `patience` epochs without a gain (without `val`, the last epoch).
    `progress(epoch, record)` is called after every epoch when given."""
    img_feats, txt_feats = torch.as_tensor(img_feats).float(), torch.as_tensor(txt_feats).float()
    labels = torch.as_tensor(labels).long()
    _check(img_feats, txt_feats, labels)
    if val is not None:
        val = tuple(torch.as_tensor(x) for x in val)
        _check(val[0].float(), val[1].float(), val[2].long())
    torch.manual_seed(config.seed)
    adapter = build_adapter(kind, img_feats.shape[1], **(options or {})).to(device)
    history: list[dict] = []
    if kind == "zero_shot":
        record = {"epoch": 0, "loss": float("nan")}
        if val is not None:
            record["val_rsum"] = evaluate(adapter, *val, device=device)["rsum"]
        return adapter.eval(), [record]
    img_d, txt_d, lab_d = img_feats.to(device), txt_feats.to(device), labels.to(device)
    optimiser = torch.optim.AdamW(adapter.parameters(), lr=config.learning_rate,
                                  weight_decay=config.weight_decay)
    rng = np.random.default_rng(config.seed)
    generator = torch.Generator(device=device).manual_seed(config.seed)
    best, best_state, stale = -float("inf"), None, 0
    n = len(labels)
    for epoch in range(config.epochs):
        adapter.train()
        order = torch.as_tensor(rng.permutation(n), device=device)
        losses = []
        for start in range(0, n - 1, config.batch_size):
            caps = order[start:start + config.batch_size]
            if len(caps) < 2:
                continue
            images = torch.unique(lab_d[caps])
            y = pair_labels(images, lab_d[caps])
            loss, _ = adapter.loss(img_d[images], txt_d[caps], y, generator=generator)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            losses.append(float(loss.detach()))
        record = {"epoch": epoch + 1, "loss": float(np.mean(losses))}
        if val is not None:
            record["val_rsum"] = evaluate(adapter, *val, device=device)["rsum"]
            if record["val_rsum"] > best:
                best, best_state, stale = record["val_rsum"], copy.deepcopy(adapter.state_dict()), 0
            else:
                stale += 1
        history.append(record)
        if progress is not None:
            progress(epoch + 1, record)
        if val is not None and stale >= config.patience:
            break
    if best_state is not None:
        adapter.load_state_dict(best_state)
    return adapter.eval(), history


@torch.no_grad()
def similarity(adapter: nn.Module, img: torch.Tensor, txt: torch.Tensor, device: str = "cpu",
               chunk: int = 64) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(scores, uncertainty) of every image-text pair, (N_i, N_t) on the CPU; uncertainty is the
    decoded variance (vacsr), the summed embedding variances (pcme) or None."""
    adapter.eval()
    img, txt = torch.as_tensor(img).float().to(device), torch.as_tensor(txt).float().to(device)
    scores, unc = [], []
    for start in range(0, img.shape[0], chunk):
        s, u = adapter(img[start:start + chunk], txt)
        scores.append(s.float().cpu())
        unc.append(None if u is None else u.float().cpu())
    if not scores:
        return torch.zeros(0, txt.shape[0]), None
    return torch.cat(scores), (None if unc[0] is None else torch.cat(unc))


@torch.no_grad()
def score_pairs(adapter: nn.Module, img: torch.Tensor, txt: torch.Tensor,
                device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor | None]:
    """(mean, variance) for row-aligned pairs (img[i], txt[i]), each (N,) on the CPU. For VACSR the
    decoded mean and variance at the posterior mean; for the baselines the score and their
    uncertainty (None where the method has none)."""
    adapter.eval()
    img, txt = torch.as_tensor(img).float().to(device), torch.as_tensor(txt).float().to(device)
    if img.shape != txt.shape or img.ndim != 2:
        raise ValueError(f"img and txt must be (N, D) of one shape: {tuple(img.shape)} vs {tuple(txt.shape)}")
    mean, var = adapter.score_paired(img, txt)
    return mean.float().cpu(), (None if var is None else var.float().cpu())


def evaluate(adapter: nn.Module, img, txt, labels, relevance=None, threshold: float = 0.75,
             device: str = "cpu") -> dict:
    """retrieval_metrics of the adapter's scores on one split (positives from `labels`)."""
    labels = torch.as_tensor(labels).long()
    scores, _ = similarity(adapter, img, txt, device)
    positives = pair_labels(torch.arange(scores.shape[0]), labels).bool()
    rel = None if relevance is None else torch.as_tensor(relevance).float()
    return retrieval_metrics(scores, positives, rel, threshold)


def swap_captions(labels: torch.Tensor, fraction: float, seed: int) -> torch.Tensor:
    """Noisy correspondences: a random `fraction` of the captions are reassigned among themselves
    (a cyclic shift of the chosen captions' images), so each chosen caption is paired with another
    caption's image."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError("fraction must lie in [0, 1]")
    labels = torch.as_tensor(labels).long().clone()
    rng = np.random.default_rng(seed)
    chosen = torch.as_tensor(rng.choice(len(labels), int(round(fraction * len(labels))), replace=False))
    if len(chosen) > 1:
        labels[chosen] = labels[chosen.roll(1)]
    return labels


def adapter_payload(adapter: nn.Module) -> tuple[dict, dict[str, torch.Tensor]]:
    """(meta, state): what a checkpoint stores (meta as JSON, state as safetensors)."""
    meta = {"kind": adapter.kind, "config": adapter.config.to_dict()}
    return meta, {k: v.detach().cpu().contiguous() for k, v in adapter.state_dict().items()}


def load_adapter(meta: dict, state: dict[str, torch.Tensor], device: str = "cpu") -> nn.Module:
    """The adapter `adapter_payload` described, on `device`, in eval mode."""
    config = dict(meta["config"])
    dim = config.pop("feature_dim")
    adapter = build_adapter(meta["kind"], dim, **config)
    adapter.load_state_dict(state)
    return adapter.to(device).eval()
