"""The project's own small Llama-style decoder, its byte tokenizer and its safetensors format.

Demos and tests need a real causal LM without downloading one, so the architecture is defined
here (RMSNorm, rotary embeddings, SwiGLU, causal attention) and trained by `tiny_train`. Every
projection is a bias-free `nn.Linear` with a Llama-like name (q_proj ... down_proj, lm_head), so
the quantizer can find and swap them exactly as it does in a transformers Llama. Bytes make the
tokenizer lossless for any text and need no vocabulary file. Checkpoints are a config.json plus
model.safetensors: loading never unpickles anything.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from paperworks.shared.backends.errors import InvalidModel
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

MODEL_TYPE = "paperworks-tiny"
FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"

KVCache = list[tuple[torch.Tensor, torch.Tensor]]


class ByteTokenizer:
    """UTF-8 bytes are ids 0-255; then BOS, EOS and PAD."""

    bos_id, eos_id, pad_id = 256, 257, 258
    vocab_size = 259

    def encode(self, text: str, *, add_bos: bool = True, add_eos: bool = False) -> list[int]:
        ids = list(text.encode("utf-8"))
        return ([self.bos_id] if add_bos else []) + ids + ([self.eos_id] if add_eos else [])

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


@dataclass(frozen=True)
class TinyConfig:
    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    mlp_hidden: int = 352
    max_seq_len: int = 128
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    vocab_size: int = ByteTokenizer.vocab_size

    def __post_init__(self) -> None:
        heads = max(self.n_heads, 1)
        specials = ByteTokenizer.vocab_size
        checks = [
            ("dim", self.dim > 0 and self.dim % heads == 0, "must be a positive multiple of n_heads"),
            ("n_heads", self.n_heads > 0 and self.dim // heads % 2 == 0, "dim / n_heads must be even"),
            ("n_layers", self.n_layers > 0, "must be > 0"),
            ("mlp_hidden", self.mlp_hidden > 0, "must be > 0"),
            ("max_seq_len", self.max_seq_len > 1, "must be > 1"),
            ("vocab_size", self.vocab_size >= specials, f"must be >= {specials} (bytes + specials)"),
        ]
        for name, ok, reason in checks:
            if not ok:
                raise InvalidModel(f"config.{name}", f"{reason}, got {getattr(self, name)}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.n_heads, self.head_dim = config.n_heads, config.head_dim
        self.q_proj = nn.Linear(config.dim, config.dim, bias=False)
        self.k_proj = nn.Linear(config.dim, config.dim, bias=False)
        self.v_proj = nn.Linear(config.dim, config.dim, bias=False)
        self.o_proj = nn.Linear(config.dim, config.dim, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        past: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        b, t, _ = x.shape
        q, k, v = (
            proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
            for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        offset = 0
        if past is not None:
            offset = past[0].shape[2]
            k, v = torch.cat((past[0], k), dim=2), torch.cat((past[1], v), dim=2)
        if offset == 0:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            query_pos = torch.arange(offset, offset + t, device=x.device)[:, None]
            mask = torch.arange(offset + t, device=x.device)[None, :] <= query_pos
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1)), (k, v)


class MLP(nn.Module):
    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.dim, config.mlp_hidden, bias=False)
        self.up_proj = nn.Linear(config.dim, config.mlp_hidden, bias=False)
        self.down_proj = nn.Linear(config.mlp_hidden, config.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.dim, config.norm_eps)
        self.attn = Attention(config)
        self.mlp_norm = RMSNorm(config.dim, config.norm_eps)
        self.mlp = MLP(config)

    def forward(self, x, cos, sin, past):
        attended, present = self.attn(self.attn_norm(x), cos, sin, past)
        x = x + attended
        return x + self.mlp(self.mlp_norm(x)), present


@dataclass
class TinyOutput:
    logits: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...] | None
    cache: KVCache | None


class TinyDecoder(nn.Module):
    """`hidden_states` follows transformers: embeddings, then each block, the last one normed."""

    def __init__(self, config: TinyConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.dim, config.norm_eps)
        self.lm_head = nn.Linear(config.dim, config.vocab_size, bias=False)
        inv_freq = 1.0 / config.rope_theta ** (
            torch.arange(0, config.head_dim, 2, dtype=torch.float32) / config.head_dim
        )
        angles = torch.outer(torch.arange(config.max_seq_len, dtype=torch.float32), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)
        self.apply(self._init)
        for name, param in self.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(param, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: KVCache | None = None,
        *,
        use_cache: bool = False,
        output_hidden_states: bool = False,
    ) -> TinyOutput:
        offset = cache[0][0].shape[2] if cache else 0
        end = offset + input_ids.shape[1]
        if end > self.config.max_seq_len:
            raise ValueError(f"{end} positions exceed max_seq_len {self.config.max_seq_len}")
        x = self.embed(input_ids)
        cos, sin = (r[offset:end].to(x.dtype) for r in (self.rope_cos, self.rope_sin))
        hidden = [x] if output_hidden_states else None
        presents: KVCache = []
        for i, layer in enumerate(self.layers):
            x, present = layer(x, cos, sin, cache[i] if cache else None)
            presents.append(present)
            if hidden is not None:
                hidden.append(x)
        x = self.norm(x)
        if hidden is not None:
            hidden[-1] = x
        return TinyOutput(
            logits=self.lm_head(x),
            hidden_states=tuple(hidden) if hidden is not None else None,
            cache=presents if use_cache else None,
        )


def save_tiny(directory: str | Path, module: TinyDecoder) -> Path:
    """Write config.json + model.safetensors; returns the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    meta = {"model_type": MODEL_TYPE, "format_version": FORMAT_VERSION, "tokenizer": "bytes"}
    (directory / CONFIG_FILE).write_text(json.dumps({**meta, **asdict(module.config)}, indent=2))
    state = {k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}
    save_file(state, str(directory / WEIGHTS_FILE), metadata={"format": "pt"})
    return directory


def load_tiny(directory: str | Path) -> TinyDecoder:
    """Load a `save_tiny` directory, or raise InvalidModel saying what is wrong with it."""
    directory = Path(directory)
    config = _read_config(directory)
    weights = directory / WEIGHTS_FILE
    if not weights.is_file():
        raise InvalidModel("path", f"{directory} has no {WEIGHTS_FILE}")
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError) as exc:
        raise InvalidModel("path", f"{weights} is not a readable safetensors file: {exc}") from exc
    module = TinyDecoder(config)
    expected = module.state_dict()
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise InvalidModel(
            "path",
            f"{weights} does not match config.json: missing {missing}, unexpected {unexpected}",
        )
    for name, tensor in state.items():
        if tensor.shape != expected[name].shape:
            raise InvalidModel(
                "path",
                f"{weights}: {name} has shape {tuple(tensor.shape)}, "
                f"config.json implies {tuple(expected[name].shape)}",
            )
    module.load_state_dict(state)
    return module.eval()


def _read_config(directory: Path) -> TinyConfig:
    if not directory.is_dir():
        raise InvalidModel("path", f"{directory} is not a directory")
    config_path = directory / CONFIG_FILE
    if not config_path.is_file():
        raise InvalidModel("path", f"{directory} has no {CONFIG_FILE}")
    try:
        raw: dict[str, Any] = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidModel("path", f"{config_path} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict) or raw.get("model_type") != MODEL_TYPE:
        found = raw.get("model_type") if isinstance(raw, dict) else None
        raise InvalidModel(
            "path",
            f"{config_path} has model_type {found!r}, not {MODEL_TYPE!r}"
            + ("; load transformers models with kind='hf'" if found else ""),
        )
    if raw.get("format_version") != FORMAT_VERSION:
        raise InvalidModel(
            "path",
            f"{config_path}: format_version {raw.get('format_version')!r} is not {FORMAT_VERSION}",
        )
    known = {f.name for f in fields(TinyConfig)}
    params = {k: v for k, v in raw.items() if k in known}
    try:
        return TinyConfig(**params)
    except TypeError as exc:
        raise InvalidModel("path", f"{config_path}: {exc}") from exc
