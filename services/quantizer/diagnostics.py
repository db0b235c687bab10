"""Per-layer diagnostics of a quantized model against its full-precision base, on calibration
activations x of each layer (RaBiT, arXiv 2602.05367, Sec. 4.3 analysis of inter-path adaptation).

For a two-path binary layer with path outputs y_i = W_hat_i x and the full-precision output
y = W x, R_1 = y - y_1 is what path 1 leaves to path 2:

- Corr(y_1, y_2): co-adapted paths learn the same features (positive); a residual hierarchy
  makes path 2 correct path 1 (lower, negative in the paper).
- Corr(R_1, y_2): how well path 2 tracks path 1's residual (high in a residual hierarchy).

Correlations are Pearson over every (token, output channel) entry after removing each output
channel's mean over tokens, so a channel's constant offset (from the activations' mean) does
not count as shared features. They are taken on the path outputs for the layer's real inputs,
not on the weights: with isotropic inputs the two agree, but a trained layer's inputs weight a
few directions, and there the weight-space anti-correlation of the signs (about -0.25 for any
residual binarization) is not what the layer computes. Pearson is centred by definition;
centring per channel rather than globally is our choice. The alternatives (globally centred,
un-centred, per output channel averaged, per token) move the reproduction's layer means by at
most 0.04 and keep RaBiT's below independent latents', but RaBiT's own value is close to zero:
-0.025 as defined here, +0.004 globally centred, +0.010 un-centred (seed 0).

Every quantized layer also reports its relative output error ||y - y_q|| / ||y||. Pure PyTorch.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from .experts import unfuse, unfused_names
from .linears import find_linears, get_module, layer_inputs, linear_weight


def centred_corr(a: torch.Tensor, b: torch.Tensor) -> float:
    """Pearson correlation of two (tokens, channels) outputs, each channel centred over tokens."""
    a, b = a.double(), b.double()
    a, b = a - a.mean(0), b - b.mean(0)
    return float((a * b).sum() / (a.norm() * b.norm()).clamp_min(1e-30))


@torch.no_grad()
def layer_diagnostics(layer: nn.Module, w_fp: torch.Tensor, x: torch.Tensor) -> dict:
    y = x @ w_fp.T
    bias = getattr(layer, "bias", None)
    yq = layer(x) - (0 if bias is None else bias)
    out = {"relative_error": float((y - yq).norm() / y.norm().clamp_min(1e-12))}
    if hasattr(layer, "path_weights"):
        p1, p2 = layer.path_weights()[:2]
        y1, y2 = x @ p1.T, x @ p2.T
        out.update(corr_y1_y2=centred_corr(y1, y2), corr_r1_y2=centred_corr(y - y1, y2))
    return out


def summary(per_layer: dict[str, dict]) -> dict:
    """Mean of every diagnostic over the layers that report it."""
    keys = sorted({k for d in per_layer.values() for k in d})
    return {k: sum(d[k] for d in per_layer.values() if k in d) / sum(k in d for d in per_layer.values())
            for k in keys}


@torch.no_grad()
def layer_report(model: nn.Module, teacher: nn.Module, ids: torch.Tensor,
                 on_layer: Callable[[int, int, str], None] | None = None) -> dict[str, dict]:
    """`layer_diagnostics` of every quantized layer on the teacher's activations (a MoE's split
    experts on a split copy of the teacher; an expert those ids route no token to is left out)."""
    split = unfused_names(model)
    if split:
        teacher = copy.deepcopy(teacher)
        unfuse(teacher, split)
    names = find_linears(teacher)
    inputs = layer_inputs(teacher, names, ids)
    names = [n for n in names if n in inputs]
    out = {}
    for i, n in enumerate(names):
        w = linear_weight(get_module(teacher, n))[0]
        out[n] = layer_diagnostics(get_module(model, n), w, inputs[n])
        if on_layer:
            on_layer(i + 1, len(names), n)
    return out
