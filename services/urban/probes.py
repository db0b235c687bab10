"""Downstream probes on frozen embeddings (UrbanFusion §4: linear probes and small MLPs, with and
without raw coordinates appended), and the scores the paper reports (R², macro F1).

- `linear`, regression: ridge regression on standardized inputs, the penalty chosen by
  generalized cross-validation over a log grid (closed form through one SVD).
- `linear`, classification: multinomial logistic regression (L-BFGS), the L2 penalty chosen
  on a 20% validation split, then refitted on all rows.
- `mlp`: one hidden layer of 128 GELU units, full-batch AdamW, early stopping on a 15%
  validation split (the best epoch's weights are kept).

A probe is a small torch module plus its standardization, so it saves as safetensors
(`paperworks.services.urban.checkpoint`). It fits and predicts on the `device` it is given (a job's
or a server's): the network and every batch go there; inputs and outputs are numpy on the host.
Probes stay float32 (their scores are what the jobs report).
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

TaskType = Literal["regression", "classification"]
ProbeKind = Literal["linear", "mlp"]
HIDDEN = 128
RIDGE_GRID = np.logspace(-3, 4, 15)
LOGISTIC_GRID = (1e-4, 1e-3, 1e-2, 1e-1)


def r2_score(y: np.ndarray, pred: np.ndarray) -> float:
    ss = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / ss if ss > 0 else 0.0


def macro_f1(y: np.ndarray, pred: np.ndarray, n_classes: int) -> float:
    scores = []
    for c in range(n_classes):
        tp = float(((pred == c) & (y == c)).sum())
        fp, fn = float(((pred == c) & (y != c)).sum()), float(((pred != c) & (y == c)).sum())
        if tp + fp + fn > 0:
            scores.append(2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores)) if scores else 0.0


def _split(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(seed).permutation(n)
    k = max(1, int(round(fraction * n)))
    return order[k:], order[:k]


class Probe:
    def __init__(self, task_type: TaskType, kind: ProbeKind, in_dim: int, classes: list[str] | None = None,
                 seed: int = 0, device: str | torch.device = "cpu"):
        self.task_type, self.kind, self.in_dim, self.seed = task_type, kind, in_dim, seed
        self.device = torch.device(device)
        self.classes = list(classes or [])
        out = len(self.classes) if task_type == "classification" else 1
        torch.manual_seed(seed)
        self.net = (nn.Linear(in_dim, out) if kind == "linear"
                    else nn.Sequential(nn.Linear(in_dim, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, out))
                    ).to(self.device)
        self.x_mean = np.zeros(in_dim, np.float32)
        self.x_std = np.ones(in_dim, np.float32)
        self.y_mean, self.y_std = 0.0, 1.0

    def to(self, device: str | torch.device) -> Probe:
        self.device = torch.device(device)
        self.net.to(self.device)
        return self

    # --- fitting -----------------------------------------------------------------------------------

    def fit(self, x: np.ndarray, y: np.ndarray) -> Probe:
        """`y`: floats (regression) or class indices into `classes` (classification)."""
        from paperworks.shared.threads import single_thread

        with single_thread():
            return self._fit(x, y)

    def _fit(self, x: np.ndarray, y: np.ndarray) -> Probe:
        self.x_mean = x.mean(0).astype(np.float32)
        self.x_std = np.maximum(x.std(0), 1e-6).astype(np.float32)
        xs = torch.from_numpy(((x - self.x_mean) / self.x_std).astype(np.float32)).to(self.device)
        if self.task_type == "regression":
            self.y_mean, self.y_std = float(y.mean()), float(max(y.std(), 1e-9))
            target = torch.from_numpy(((y - self.y_mean) / self.y_std).astype(np.float32)).to(self.device)
        else:
            target = torch.from_numpy(y.astype(np.int64)).to(self.device)
        if self.kind == "mlp":
            self._fit_mlp(xs, target)
        elif self.task_type == "regression":
            self._fit_ridge(xs, target)
        else:
            self._fit_logistic(xs, target)
        return self

    def _fit_ridge(self, x: torch.Tensor, y: torch.Tensor) -> None:
        xd, yd = x.double(), y.double()
        u, s, vt = torch.linalg.svd(xd, full_matrices=False)
        uty = u.T @ yd
        n, best = len(yd), (float("inf"), None)
        for alpha in RIDGE_GRID:
            shrink = s / (s ** 2 + alpha)
            coef = vt.T @ (shrink * uty)
            resid = float(((yd - xd @ coef) ** 2).sum())
            dof = float((s ** 2 / (s ** 2 + alpha)).sum())
            gcv = n * resid / max(n - dof, 1e-9) ** 2
            if gcv < best[0]:
                best = (gcv, coef)
        with torch.no_grad():
            self.net.weight.copy_(best[1].float().unsqueeze(0))
            self.net.bias.zero_()

    def _logistic(self, x: torch.Tensor, y: torch.Tensor, l2: float) -> nn.Linear:
        torch.manual_seed(self.seed)
        net = nn.Linear(x.shape[1], len(self.classes)).to(x.device)
        optimizer = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=150, line_search_fn="strong_wolfe")

        def closure():
            optimizer.zero_grad()
            loss = F.cross_entropy(net(x), y) + l2 * net.weight.pow(2).sum()
            loss.backward()
            return loss

        optimizer.step(closure)
        return net

    def _fit_logistic(self, x: torch.Tensor, y: torch.Tensor) -> None:
        train, val = (torch.from_numpy(i).to(x.device) for i in _split(len(y), 0.2, self.seed))
        scores = []
        for l2 in LOGISTIC_GRID:
            net = self._logistic(x[train], y[train], l2)
            with torch.no_grad():
                pred = net(x[val]).argmax(1).cpu().numpy()
            scores.append(macro_f1(y[val].cpu().numpy(), pred, len(self.classes)))
        self.net = self._logistic(x, y, LOGISTIC_GRID[int(np.argmax(scores))])

    def _fit_mlp(self, x: torch.Tensor, y: torch.Tensor, epochs: int = 600, patience: int = 60) -> None:
        train, val = (torch.from_numpy(i).to(x.device) for i in _split(len(y), 0.15, self.seed))
        optimizer = torch.optim.AdamW(self.net.parameters(), lr=3e-3, weight_decay=1e-3)
        best, best_state, waited = float("inf"), None, 0
        for _ in range(epochs):
            self.net.train()
            optimizer.zero_grad()
            self._loss(self.net(x[train]), y[train]).backward()
            optimizer.step()
            self.net.eval()
            with torch.no_grad():
                val_loss = float(self._loss(self.net(x[val]), y[val]))
            if val_loss < best - 1e-5:
                best, waited = val_loss, 0
                best_state = {k: v.clone() for k, v in self.net.state_dict().items()}
            else:
                waited += 1
                if waited >= patience:
                    break
        self.net.load_state_dict(best_state)

    def _loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.task_type == "regression":
            return F.mse_loss(out.squeeze(-1), y)
        return F.cross_entropy(out, y)

    # --- use ---------------------------------------------------------------------------------------

    @torch.no_grad()
    def raw(self, x: np.ndarray) -> np.ndarray:
        self.net.eval()
        xs = torch.from_numpy(((x - self.x_mean) / self.x_std).astype(np.float32)).to(self.device)
        return self.net(xs).cpu().numpy()

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Regression: values. Classification: class indices."""
        out = self.raw(x)
        if self.task_type == "regression":
            return out[:, 0] * self.y_std + self.y_mean
        return out.argmax(1)

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        return torch.softmax(torch.from_numpy(self.raw(x)), dim=1).numpy()

    def score(self, x: np.ndarray, y: np.ndarray) -> float:
        """R² (regression) or macro F1 (classification) on held-out rows."""
        pred = self.predict(x)
        if self.task_type == "regression":
            return r2_score(y, pred)
        return macro_f1(y, pred, len(self.classes))


def fit_and_score(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray,
                  task_type: TaskType, kind: ProbeKind, classes: list[str] | None = None,
                  seed: int = 0, device: str | torch.device = "cpu") -> float:
    probe = Probe(task_type, kind, x_train.shape[1], classes, seed, device).fit(x_train, y_train)
    return probe.score(x_test, y_test)
