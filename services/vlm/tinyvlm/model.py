"""TinyVLM: a patch-embedding vision encoder + a small causal decoder LM, LLaVA-shaped.

Image (16 x 16 x 3) -> 16 patches of 4 x 4 -> linear patch embedding + positions -> bidirectional
transformer blocks -> projector -> the LM's first 16 tokens; the text's word embeddings follow; causal
pre-norm transformer blocks; final norm; unembedding over the vocabulary. The answer is read at the
last position (the question's `?`) over a closed answer set (the colour words).

Two hooks the papers need, both in plain code:
- `hidden=True` returns the last position's residual stream after every LM block, so the logit lens
  (final norm + unembedding on an intermediate layer; modality following, arXiv 2511.02243 §4) is
  `lens(h)`;
- `counterfactual=Intervention(...)` applies CFPO's cross-modal value intervention in every LM
  attention (arXiv 2606.23206; the authors' `qwen2_vl_cmve.py`): with A = softmax(QK^T/sqrt(d) + mask)
  (eager), the text-query -> image-key entries above mu + lambda*sigma of that sample's valid entries
  form the saliency mask M, and Z_cf = A V + (A . M)(1 v_bar^T - V) replaces the salient image values by
  the image-mean prior v_bar (a scalar per sample and head, the mean over image tokens and head
  dimensions, as in the released code; `prior="per_dim"` is the per-dimension ablation).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from paperworks.services.vlm.tinyvlm.vocab import COLOR_IDS, IMAGE_SIZE, PATCH, VOCAB
from torch import nn
from torch.nn import functional as F

N_PATCHES = (IMAGE_SIZE // PATCH) ** 2


@dataclass(frozen=True)
class VLMConfig:
    d_model: int = 48
    heads: int = 4
    vision_layers: int = 2
    lm_layers: int = 4
    max_text: int = 24
    vocab_size: int = len(VOCAB)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Intervention:
    """CFPO's do(Z = Z_cf): saliency threshold mu + `threshold` * sigma (2 = the paper's "high")."""

    threshold: float = 2.0
    prior: str = "scalar"  # "scalar" (released code) or "per_dim" (ablation)


def value_intervention(a: torch.Tensor, v: torch.Tensor, n_img: int, iv: Intervention) -> torch.Tensor:
    """(A . M)(1 v_bar^T - V) for the text queries (positions >= n_img) over the image keys:
    added to A V it gives Z_cf. `a` (B, h, T, T) attention, `v` (B, h, T, dh) values."""
    a_ti = a[:, :, n_img:, :n_img]  # text queries -> image keys
    valid = a_ti > 1e-8
    count = valid.sum(dim=(1, 2, 3)).clamp(min=1)
    mu = (a_ti * valid).sum(dim=(1, 2, 3)) / count
    var = (((a_ti - mu.view(-1, 1, 1, 1)) ** 2) * valid).sum(dim=(1, 2, 3)) / count
    thresh = (mu + iv.threshold * var.sqrt()).view(-1, 1, 1, 1)
    m = (a_ti > thresh) & valid
    v_img = v[:, :, :n_img]
    if iv.prior == "scalar":
        v_bar = v_img.mean(dim=(2, 3), keepdim=True).expand_as(v_img)
    else:
        v_bar = v_img.mean(dim=2, keepdim=True).expand_as(v_img)
    delta = (a_ti * m) @ (v_bar - v_img)  # (B, h, T_text, dh)
    return F.pad(delta, (0, 0, n_img, 0))


class Attention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, causal: bool, n_img: int = 0, counterfactual: Intervention | None = None):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        if causal:
            scores = scores.masked_fill(
                torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf")
            )
        a = scores.softmax(-1)
        z = a @ v
        if counterfactual is not None:
            z = z + value_intervention(a, v, n_img, counterfactual)
        return self.out(z.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, causal: bool, n_img: int = 0, counterfactual: Intervention | None = None):
        x = x + self.attn(self.ln1(x), causal, n_img, counterfactual)
        return x + self.mlp(self.ln2(x))


class TinyVLM(nn.Module):
    def __init__(self, config: VLMConfig):
        super().__init__()
        c = self.config = config
        self.patch_embed = nn.Linear(PATCH * PATCH * 3, c.d_model)
        self.vision_pos = nn.Parameter(torch.randn(N_PATCHES, c.d_model) * 0.02)
        self.vision = nn.ModuleList(Block(c.d_model, c.heads) for _ in range(c.vision_layers))
        self.projector = nn.Sequential(nn.LayerNorm(c.d_model), nn.Linear(c.d_model, c.d_model))
        self.tok_embed = nn.Embedding(c.vocab_size, c.d_model)
        self.lm_pos = nn.Parameter(torch.randn(N_PATCHES + c.max_text, c.d_model) * 0.02)
        self.lm = nn.ModuleList(Block(c.d_model, c.heads) for _ in range(c.lm_layers))
        self.final_norm = nn.LayerNorm(c.d_model)
        self.unembed = nn.Linear(c.d_model, c.vocab_size, bias=False)

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        b = images.shape[0]
        g = IMAGE_SIZE // PATCH
        patches = images.reshape(b, g, PATCH, g, PATCH, 3).permute(0, 1, 3, 2, 4, 5).reshape(b, N_PATCHES, -1)
        x = self.patch_embed(patches) + self.vision_pos
        for block in self.vision:
            x = block(x, causal=False)
        return self.projector(x)

    def forward(
        self,
        images: torch.Tensor,
        tokens: torch.Tensor,
        hidden: bool = False,
        counterfactual: Intervention | None = None,
    ):
        """Vocabulary logits at the last position (B, V); with `hidden`, also the last position's
        residual after each LM block (list of (B, d))."""
        x = torch.cat([self.encode_image(images), self.tok_embed(tokens)], dim=1)
        x = x + self.lm_pos[: x.shape[1]]
        states = []
        for block in self.lm:
            x = block(x, causal=True, n_img=N_PATCHES, counterfactual=counterfactual)
            states.append(x[:, -1])
        logits = self.lens(x[:, -1])
        return (logits, states) if hidden else logits

    def lens(self, h: torch.Tensor) -> torch.Tensor:
        """The logit lens: final norm and unembedding applied to a residual-stream state."""
        return self.unembed(self.final_norm(h))


def answer_logprobs(logits: torch.Tensor, answer_ids=COLOR_IDS) -> torch.Tensor:
    """log p over the closed answer set (the colour words by default): (B, |A|)."""
    return F.log_softmax(logits[:, list(answer_ids)].float(), dim=-1)
