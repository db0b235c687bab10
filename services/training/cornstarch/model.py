"""Multimodal model composition (Cornstarch `MultimodalModel`): modality encoders, each followed by a
projector, whose outputs are scattered into the decoder LM's input embeddings at the modality's
placeholder positions (`merge_encoder_outputs`), with per-module freeze flags.

Every module is a list of *layers*, the pipeline's unit: a layer maps an activation dict (name ->
tensor) and the batch to a new activation dict. Encoder `m`: [PatchEmbed, EncBlock x k, Projector]
writing `acts[m]`; the LLM: [Embed (merges the encoder outputs), DecBlock x L, Head (-> `acts["loss"]`)].
The LLM attends with the multimodal mask of `context.attention_mask`.

Freezing really skips work: a frozen parameter has `requires_grad=False`, so autograd computes and
keeps only what the input gradient needs; a layer with nothing trainable at or before it runs under
`torch.no_grad` (no graph, no saved activations) and no backward reaches it (`needs_grad`).

Hugging Face modules (`hf`): an encoder or the LM may instead come from a Hugging Face folder
(`EncoderConfig.hf_path`, `MLLMConfig.llm_path`); their layers become pipeline layers of the same
interface (HFVisionEmbed / HFVisionLayer; HFTokenEmbed / HFDecoderLayer / HFNormHead), so freezing,
profiling, partitioning and the pipeline treat them like the layers defined here.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import hf
from .context import attention_mask, spans

PATTERNS = ("all_trainable", "frozen_encoder", "projector_only", "frozen_llm_lora")


@dataclass(frozen=True)
class EncoderConfig:
    name: str = "vision"
    tokens: int = 32
    input_dim: int = 48
    d_model: int = 64
    layers: int = 4
    hf_path: str = ""  # a Hugging Face vision encoder folder (tokens, d_model, layers then from its config)
    image_size: int = 0  # > 0: inputs are (channels, image_size, image_size) images, not token features
    channels: int = 3


@dataclass(frozen=True)
class MLLMConfig:
    encoders: tuple[EncoderConfig, ...] = (EncoderConfig(),)
    d_model: int = 64
    llm_layers: int = 6
    heads: int = 4
    vocab: int = 32
    text_tokens: int = 32
    lora_rank: int = 4
    seed: int = 0
    llm_path: str = ""  # a Hugging Face decoder LM folder (d_model, llm_layers, heads from its config)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> MLLMConfig:
        d = dict(d)
        d["encoders"] = tuple(EncoderConfig(**e) for e in d.get("encoders", ()))
        return cls(**d)

    @property
    def seq_len(self) -> int:
        return self.text_tokens + sum(e.tokens for e in self.encoders)

    def placeholder(self, i: int) -> int:
        """Token id at encoder i's positions (overwritten by its features): an extra id past the
        text vocabulary in the model defined here; id 0 of a Hugging Face LM's own vocabulary."""
        return 0 if self.llm_path else self.vocab + i

    def modules(self) -> dict[str, int]:
        """Pipeline layers per module (encoder: embed + blocks [+ projector]; LLM: embed + blocks + head)."""
        return {**{e.name: e.layers + 2 for e in self.encoders}, "llm": self.llm_layers + 2}


@dataclass(frozen=True)
class Freeze:
    """Cornstarch `train(encoders_mode={m: (encoder, projector)}, llm_mode)`; llm: trainable|frozen|lora."""

    encoder: dict = field(default_factory=dict)
    projector: dict = field(default_factory=dict)
    llm: str = "trainable"

    @classmethod
    def pattern(cls, name: str, encoders) -> Freeze:
        names = [e.name for e in encoders]
        if name not in PATTERNS:
            raise ValueError(f"pattern must be one of {PATTERNS}, not {name!r}")
        enc = name == "all_trainable"
        llm = {
            "all_trainable": "trainable",
            "frozen_encoder": "trainable",
            "projector_only": "frozen",
            "frozen_llm_lora": "lora",
        }[name]
        return cls({n: enc for n in names}, {n: True for n in names}, llm)


class LoRALinear(nn.Module):
    """y = W x + (alpha / r) B A x with W frozen, B initialised to zero (Hu et al., 2021)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float = 8.0):
        super().__init__()
        self.base = base
        self.a = nn.Parameter(torch.randn(rank, base.in_features) / base.in_features**0.5)
        self.b = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scale = alpha / rank

    def forward(self, x):
        return self.base(x) + self.scale * F.linear(F.linear(x, self.a), self.b)


class Block(nn.Module):
    """Pre-LN transformer block; `mask` None = bidirectional."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def attend(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x, mask=None):
        x = x + self.attend(x, mask)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def add_lora(self, rank: int):
        for name in ("qkv", "out", "fc1", "fc2"):
            setattr(self, name, LoRALinear(getattr(self, name), rank))


class Layer(nn.Module):
    module: str = ""
    kind: str = ""

    def forward(self, acts: dict, batch: dict) -> dict:  # pragma: no cover - interface
        raise NotImplementedError


class PatchEmbed(Layer):
    kind = "embed"

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.module = cfg.name
        self.proj = nn.Linear(cfg.input_dim, cfg.d_model)
        self.pos = nn.Parameter(torch.randn(cfg.tokens, cfg.d_model) * 0.02)

    def forward(self, acts, batch):
        return {**acts, self.module: self.proj(batch[self.module]) + self.pos}


class EncBlock(Layer):
    kind = "block"

    def __init__(self, cfg: EncoderConfig, heads: int):
        super().__init__()
        self.module = cfg.name
        self.block = Block(cfg.d_model, heads)

    def forward(self, acts, batch):
        return {**acts, self.module: self.block(acts[self.module])}


class Projector(Layer):
    kind = "projector"

    def __init__(self, cfg: EncoderConfig, d_model: int):
        super().__init__()
        self.module = cfg.name
        self.net = nn.Sequential(nn.Linear(cfg.d_model, d_model), nn.GELU(), nn.Linear(d_model, d_model))

    def forward(self, acts, batch):
        return {**acts, self.module: self.net(acts[self.module])}


class Embed(Layer):
    kind = "embed"
    module = "llm"

    def __init__(self, cfg: MLLMConfig, layout: dict, tok: nn.Embedding | None = None):
        super().__init__()
        self.tok = tok if tok is not None else nn.Embedding(cfg.vocab + len(cfg.encoders), cfg.d_model)
        self.names = [e.name for e in cfg.encoders]
        for name in self.names:
            self.register_buffer(f"pos_{name}", torch.as_tensor(layout[name]), persistent=False)

    def forward(self, acts, batch):
        h = self.tok(batch["tokens"])
        for name in self.names:
            feats = acts[name]
            pos = getattr(self, f"pos_{name}")
            if feats.shape[1] != len(pos):
                raise ValueError(f"{name}: {feats.shape[1]} features for {len(pos)} placeholders")
            h = h.index_copy(1, pos, feats.to(h.dtype))
        return {k: v for k, v in acts.items() if k not in self.names} | {"h": h}


class DecBlock(Layer):
    kind = "block"
    module = "llm"

    def __init__(self, cfg: MLLMConfig, mask: torch.Tensor):
        super().__init__()
        self.block = Block(cfg.d_model, cfg.heads)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, acts, batch):
        return {**acts, "h": self.block(acts["h"], self.mask)}


class Head(Layer):
    kind = "head"
    module = "llm"

    def __init__(self, cfg: MLLMConfig):
        super().__init__()
        self.ln, self.lm = nn.LayerNorm(cfg.d_model), nn.Linear(cfg.d_model, cfg.vocab)

    def forward(self, acts, batch):
        logits = self.lm(self.ln(acts["h"]))
        loss = F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
        return {"loss": loss}


class HFVisionEmbed(Layer):
    """A Hugging Face vision tower's patch + position embeddings (and CLIP's pre-layernorm)."""

    kind = "embed"

    def __init__(self, cfg: EncoderConfig, tower: nn.Module):
        super().__init__()
        self.module = cfg.name
        self.embeddings = tower.embeddings
        self.pre = getattr(tower, "pre_layrnorm", None) or nn.Identity()

    def forward(self, acts, batch):
        return {**acts, self.module: self.pre(self.embeddings(batch[self.module]))}


class HFVisionLayer(Layer):
    """One encoder layer of a Hugging Face vision tower (bidirectional: no mask)."""

    kind = "block"

    def __init__(self, cfg: EncoderConfig, layer: nn.Module):
        super().__init__()
        self.module = cfg.name
        self.layer = layer

    def forward(self, acts, batch):
        return {**acts, self.module: self.layer(acts[self.module], None)}


class HFTokenEmbed(Embed):
    """A Hugging Face LM's `embed_tokens`, the encoders' features scattered into their placeholders."""


class HFDecoderLayer(Layer):
    """One decoder layer of a Hugging Face causal LM under the multimodal mask. The rotary embeddings
    arrive in `batch["position_embeddings"]` (computed once per stage, `MLLM.stage_batch`); `rotary`
    (a copy of the LM's `rotary_emb`, no parameters) computes them where a layer runs alone."""

    kind = "block"
    module = "llm"

    def __init__(self, layer: nn.Module, rotary: nn.Module, mask: torch.Tensor):
        super().__init__()
        self.layer, self.rotary = layer, rotary
        self.register_buffer("mask", hf.additive_mask(mask), persistent=False)
        self.lora = False

    def position_embeddings(self, h: torch.Tensor):
        return hf.rope(self.rotary, self.mask, h.shape[1] if h is not None else self.mask.shape[-1])

    def forward(self, acts, batch):
        h = acts["h"]
        pe = batch.get("position_embeddings") or self.position_embeddings(h)
        return {**acts, "h": self.layer(h, attention_mask=self.mask.to(h.dtype), position_embeddings=pe)}

    def add_lora(self, rank: int):
        hf.lora_linears(self.layer, rank, LoRALinear)
        self.lora = True


class HFNormHead(Layer):
    """A Hugging Face LM's final norm and `lm_head` (untied), then the loss."""

    kind = "head"
    module = "llm"

    def __init__(self, norm: nn.Module, lm_head: nn.Linear):
        super().__init__()
        self.ln, self.lm = norm, lm_head

    def forward(self, acts, batch):
        return {"loss": hf.loss(self.lm(self.ln(acts["h"])), batch["labels"])}


def _hf_llm(cfg: MLLMConfig, layout: dict, mask: torch.Tensor, weights: bool) -> list[Layer]:
    lm = hf.load_llm(cfg.llm_path, weights)
    body = lm.model
    head = hf.untied_head(lm.lm_head, body.embed_tokens)
    # each layer its own copy of the rotary module (a buffer, no parameters): a stage can then
    # release the other stages' layers without touching its own
    blocks = [
        HFDecoderLayer(layer, copy.deepcopy(body.rotary_emb), mask) for layer in body.layers[: cfg.llm_layers]
    ]
    return [HFTokenEmbed(cfg, layout, body.embed_tokens), *blocks, HFNormHead(body.norm, head)]


def _hf_encoder(enc: EncoderConfig, weights: bool) -> list[Layer]:
    tower = hf.load_vision(enc.hf_path, weights)
    return [HFVisionEmbed(enc, tower)] + [HFVisionLayer(enc, x) for x in tower.encoder.layers[: enc.layers]]


def layout(cfg: MLLMConfig) -> dict:
    """Fixed token layout: text, then each modality's span, text between, text at the end.
    Returns placeholder positions per modality and `modality` per token (0 text, i+1 encoder i)."""
    n_text = cfg.text_tokens
    pieces = len(cfg.encoders) + 1
    text_parts = [n_text // pieces + (1 if i < n_text % pieces else 0) for i in range(pieces)]
    modality, out, p = [], {}, 0
    for i, enc in enumerate(cfg.encoders):
        modality += [0] * text_parts[i]
        p += text_parts[i]
        out[enc.name] = np.arange(p, p + enc.tokens)
        modality += [i + 1] * enc.tokens
        p += enc.tokens
    modality += [0] * text_parts[-1]
    out["modality"] = np.asarray(modality)
    out["span"] = spans(out["modality"])
    return out


class MLLM(nn.Module):
    """The composed model: `branches[m]` (encoder m's layers) and `llm` (the LM's layers)."""

    def __init__(self, cfg: MLLMConfig, weights: bool = True):
        """`weights=False`: Hugging Face modules built from their configs only, on the meta device
        (shapes and parameter counts, for the analytic cost model; they cannot run)."""
        super().__init__()
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.layout = layout(cfg)
        self.branches = nn.ModuleDict()
        for enc in cfg.encoders:
            if enc.hf_path:
                layers = _hf_encoder(enc, weights)
            else:
                layers = [PatchEmbed(enc)] + [EncBlock(enc, cfg.heads) for _ in range(enc.layers)]
            self.branches[enc.name] = nn.ModuleList(layers + [Projector(enc, cfg.d_model)])
        mask = attention_mask(self.layout["modality"])
        if cfg.llm_path:
            self.llm = nn.ModuleList(_hf_llm(cfg, self.layout, mask, weights))
        else:
            self.llm = nn.ModuleList(
                [Embed(cfg, self.layout)] + [DecBlock(cfg, mask) for _ in range(cfg.llm_layers)] + [Head(cfg)]
            )
        self.freeze = Freeze.pattern("all_trainable", cfg.encoders)

    def layer_ids(self) -> list[tuple[str, int]]:
        """Every layer as (module, index): encoders in order, then the LLM (the chain order)."""
        ids = [(name, i) for name, layers in self.branches.items() for i in range(len(layers))]
        return ids + [("llm", i) for i in range(len(self.llm))]

    def layer(self, lid) -> Layer:
        name, i = lid
        return self.llm[i] if name == "llm" else self.branches[name][i]

    def apply_freeze(self, freeze: Freeze) -> MLLM:
        self.freeze = freeze
        for name, layers in self.branches.items():
            for layer in layers:
                flag = freeze.projector[name] if isinstance(layer, Projector) else freeze.encoder[name]
                layer.requires_grad_(flag)
        if freeze.llm == "lora":
            torch.manual_seed(self.cfg.seed + 1)
            for layer in self.llm:
                layer.requires_grad_(False)
                if isinstance(layer, DecBlock) and not isinstance(layer.block.qkv, LoRALinear):
                    layer.block.add_lora(self.cfg.lora_rank)
                elif isinstance(layer, HFDecoderLayer) and not layer.lora:
                    layer.add_lora(self.cfg.lora_rank)
        else:
            self.llm.requires_grad_(freeze.llm == "trainable")
        return self

    def trainable(self, lid) -> bool:
        return any(p.requires_grad for p in self.layer(lid).parameters())

    def needs_grad(self) -> dict:
        """Per layer: does a gradient flow through its output (it or something upstream trains)?"""
        out = {}
        enc_any = False
        for name, layers in self.branches.items():
            up = False
            for i in range(len(layers)):
                up = up or self.trainable((name, i))
                out[(name, i)] = up
            enc_any = enc_any or up
        up = enc_any
        for i in range(len(self.llm)):
            up = up or self.trainable(("llm", i))
            out[("llm", i)] = up
        return out

    def stage_batch(self, lids, batch: dict) -> dict:
        """`batch` plus what every layer of a stage shares, computed once per stage: a Hugging Face
        decoder's rotary position embeddings (as `LlamaModel.forward` computes them once)."""
        for lid in lids:
            layer = self.layer(tuple(lid))
            if isinstance(layer, HFDecoderLayer):
                return {**batch, "position_embeddings": layer.position_embeddings(None)}
        return batch

    def run_layers(self, lids, acts: dict, batch: dict, needs: dict | None = None) -> dict:
        needs = needs if needs is not None else self.needs_grad()
        batch = self.stage_batch(lids, batch)
        for lid in lids:
            with torch.set_grad_enabled(needs[lid]):
                acts = self.layer(lid)(acts, batch)
        return acts

    def forward(self, batch: dict) -> torch.Tensor:
        return self.run_layers(self.layer_ids(), {}, batch)["loss"]


def synthetic_batch(cfg: MLLMConfig, size: int, seed: int) -> dict:
    """A learnable multimodal task: each item has a class c; its modality inputs are class prototypes
    plus noise, and its text is the sequence t_{j+1} = (t_j + c + 1) mod vocab, so predicting the text
    needs the modality tokens (for the step) or the earlier text."""
    lay = layout(cfg)
    g = torch.Generator().manual_seed(10_000 + seed)
    proto_g = torch.Generator().manual_seed(cfg.seed + 77)
    classes = torch.randint(0, 4, (size,), generator=g)
    batch = {}
    for enc in cfg.encoders:
        image = (enc.channels, enc.image_size, enc.image_size)
        shape = image if enc.image_size else (enc.tokens, enc.input_dim)
        protos = torch.randn(4, *shape, generator=proto_g)
        batch[enc.name] = protos[classes] + 0.5 * torch.randn(size, *shape, generator=g)
    text_pos = np.flatnonzero(lay["modality"] == 0)
    start = torch.randint(0, cfg.vocab, (size, 1), generator=g)
    seq = (start + (classes[:, None] + 1) * torch.arange(len(text_pos))[None, :]) % cfg.vocab
    tokens = torch.zeros(size, cfg.seq_len, dtype=torch.long)
    tokens[:, text_pos] = seq
    for i, enc in enumerate(cfg.encoders):
        tokens[:, lay[enc.name]] = cfg.placeholder(i)
    labels = torch.full((size, cfg.seq_len), -100, dtype=torch.long)
    labels[:, text_pos[:-1]] = seq[:, 1:]
    batch["tokens"], batch["labels"] = tokens, labels
    return batch


def microbatches(batch: dict, m: int) -> list[dict]:
    size = batch["tokens"].shape[0]
    if size % m:
        raise ValueError(f"batch size {size} is not divisible by {m} microbatches")
    return [{k: v[i * size // m : (i + 1) * size // m] for k, v in batch.items()} for i in range(m)]
