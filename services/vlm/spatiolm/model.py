"""The student VLM and SpatioLM's spatio-vision branch ("vision_3r") and 3-D head (arXiv 2608.01899 §3;
the authors' `models/modules/qwen3.py` and `models/internvl/modeling_internvl3r_chat.py`, research note 7a).

`SpatialVLM` is the small base: a per-frame patch-embedding ViT, a projector into the LM, and a
causal decoder LM over [visual tokens of all frames; question words]; the answer is read at the last
position over `qa.ANSWERS`. `SpatioBranch` attaches at LM layers L (default (0, 1)) and, with c the
branch state (initialised to the condition tokens: mid-layer ViT features through `condition_proj`)
and h the LM hidden states at the visual positions entering layer l:

    h = h_vis^l + W_in^l c;  h = FrameAttn^l(h)  (non-causal, block-diagonal per frame);
    h = GlobalAttn^l(h)  (non-causal over all frames);  c <- h;  h_vis^{l+1} += W_out^l h

W_in and W_out are the authors' bias-free "zero_proj" linears, zero-initialised, so at
initialisation the VLM's outputs are exactly unchanged, and only visual positions are ever written
(text positions untouched). The authors attach at layers (4, 11, 17) of a 36-layer LM, all in its
first half so that later LM layers read what the branch wrote; (0, 1) are the proportional places in
our 3-layer LM (an attachment at the last layer would write where no LM layer reads).

`DPTHead` reads what the authors' head reads: their `vision_dpt_config.layer_ids` (-4, -3, -2, -1)
index [branch states of the attached layers..., the LM's last hidden states at the visual
positions], i.e. every branch state *and* the LM's own visual tokens after its last layer. The
latter is how the 3-D losses reach the LM stream (through the frozen LM layers into every W_out)
instead of training only the side branch. It predicts, at half resolution, depth D, its confidence
c_D, the 6-channel ray map R (origin, direction) and its confidence c_R.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from paperworks.services.vlm.spatiolm import qa, world
from torch import nn
from torch.nn import functional as F

PATCH = 4
GRID = world.IMAGE // PATCH
TOKENS = GRID * GRID  # visual tokens per frame


@dataclass(frozen=True)
class SpatialConfig:
    d_model: int = 48
    heads: int = 4
    vision_layers: int = 2
    lm_layers: int = 3
    frames: int = 1
    select_layer: int = 1  # ViT block whose output gives the condition tokens (mid-layer features)
    branch_layers: tuple[int, ...] = (0, 1)

    def as_dict(self) -> dict:
        return asdict(self)


class Block(nn.Module):
    """Pre-norm transformer block; `mask` (T, T) boolean, True = may attend."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        z = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(z)
        return x + self.mlp(self.ln2(x))


class SpatialVLM(nn.Module):
    def __init__(self, config: SpatialConfig):
        super().__init__()
        c = self.config = config
        d = c.d_model
        self.patch_embed = nn.Linear(PATCH * PATCH * 3, d)
        self.vision_pos = nn.Parameter(torch.randn(TOKENS, d) * 0.02)
        self.vision = nn.ModuleList(Block(d, c.heads) for _ in range(c.vision_layers))
        self.projector = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d))
        self.frame_embed = nn.Parameter(torch.randn(4, d) * 0.02)
        self.tok_embed = nn.Embedding(len(qa.VOCAB), d)
        self.lm_pos = nn.Parameter(torch.randn(4 * TOKENS + qa.MAX_TEXT, d) * 0.02)
        self.lm = nn.ModuleList(Block(d, c.heads) for _ in range(c.lm_layers))
        self.final_norm = nn.LayerNorm(d)
        self.unembed = nn.Linear(d, len(qa.VOCAB), bias=False)

    def encode_frames(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """images (B, F, S, S, 3) -> (visual tokens (B, F*TOKENS, d), mid-layer features (B, F*TOKENS, d))."""
        b, f = images.shape[:2]
        x = images.reshape(b * f, GRID, PATCH, GRID, PATCH, 3).permute(0, 1, 3, 2, 4, 5)
        x = self.patch_embed(x.reshape(b * f, TOKENS, -1)) + self.vision_pos
        mid = x
        for i, block in enumerate(self.vision):
            x = block(x)
            if i + 1 == self.config.select_layer:
                mid = x
        x = self.projector(x).view(b, f, TOKENS, -1) + self.frame_embed[:f, None]
        return x.reshape(b, f * TOKENS, -1), mid.reshape(b, f * TOKENS, -1)

    def forward(
        self,
        images: torch.Tensor,
        tokens: torch.Tensor,
        branch: SpatioBranch | None = None,
        visual: bool = False,
    ):
        """Logits over the vocabulary at the last position (B, V); with a branch, also its states
        at each attached layer (list of (B, F*TOKENS, d)); with `visual`, also the LM's hidden
        states at the visual positions after its last layer (B, F*TOKENS, d), before the final
        norm (the authors' last `condition_hidden_states` entry, read by the DPT head)."""
        vis, mid = self.encode_frames(images)
        n_vis = vis.shape[1]
        x = torch.cat([vis, self.tok_embed(tokens)], 1)
        t = x.shape[1]
        x = x + self.lm_pos[:t]
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        c = branch.condition(mid) if branch is not None else None
        states = []
        for i, block in enumerate(self.lm):
            h = None
            if branch is not None and str(i) in branch.layers:
                h = c = branch.layers[str(i)].run(x[:, :n_vis], c, images.shape[1])
                states.append(h)
            x = block(x, causal)
            if h is not None:
                delta = branch.layers[str(i)].w_out(h)
                x = x + F.pad(delta, (0, 0, 0, t - n_vis))  # visual positions only
        logits = self.unembed(self.final_norm(x[:, -1]))
        if visual:
            return logits, states, x[:, :n_vis]
        return (logits, states) if branch is not None else logits


def frame_mask(frames: int, device) -> torch.Tensor:
    ids = torch.arange(frames * TOKENS, device=device) // TOKENS
    return ids[:, None] == ids[None, :]


class BranchLayer(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        # the authors' in_zero_proj / out_zero_proj: bias-free, zero-initialised
        self.w_in, self.w_out = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        for lin in (self.w_in, self.w_out):
            nn.init.zeros_(lin.weight)
        self.frame_attn, self.global_attn = Block(d, heads), Block(d, heads)

    def run(self, h_vis: torch.Tensor, c: torch.Tensor, frames: int) -> torch.Tensor:
        h = h_vis + self.w_in(c)
        h = self.frame_attn(h, frame_mask(frames, h.device))
        return self.global_attn(h)


class SpatioBranch(nn.Module):
    """condition_proj + one BranchLayer per attached LM layer."""

    def __init__(self, config: SpatialConfig):
        super().__init__()
        self.condition_proj = nn.Linear(config.d_model, config.d_model)
        self.layers = nn.ModuleDict(
            {str(i): BranchLayer(config.d_model, config.heads) for i in config.branch_layers}
        )

    def condition(self, mid: torch.Tensor) -> torch.Tensor:
        return self.condition_proj(mid)


class DPTHead(nn.Module):
    """DPT-lite: branch states of the attached layers and the LM's last visual hidden states (see
    the module docstring), each reassembled per frame into the patch grid, fused, upsampled x2 to
    half resolution -> depth (exp), c_D (1 + exp), rays (6), c_R (1 + exp)."""

    def __init__(self, config: SpatialConfig):
        super().__init__()
        d, n = config.d_model, len(config.branch_layers)
        self.reassemble = nn.ModuleList(nn.Conv2d(d, d, 1) for _ in range(n))
        self.reassemble_lm = nn.Conv2d(d, d, 1)
        self.fuse = nn.Sequential(nn.Conv2d(d, d, 3, padding=1), nn.GELU())
        self.up = nn.Sequential(
            nn.ConvTranspose2d(d, d // 2, 2, stride=2),
            nn.GELU(),
            nn.Conv2d(d // 2, d // 2, 3, padding=1),
            nn.GELU(),
        )
        self.out = nn.Conv2d(d // 2, 1 + 1 + 6 + 1, 1)

    def forward(
        self, states: list[torch.Tensor], visual: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        """`states`: the branch states (one per attached layer); `visual`: the LM's last visual
        hidden states (what `SpatialVLM(..., visual=True)` returns; training always passes it)."""
        b, t, d = states[0].shape
        f = t // TOKENS
        grid = lambda s: s.reshape(b * f, GRID, GRID, d).permute(0, 3, 1, 2)  # noqa: E731
        x = sum(r(grid(s)) for r, s in zip(self.reassemble, states, strict=True))
        if visual is not None:
            x = x + self.reassemble_lm(grid(visual))
        y = self.out(self.up(self.fuse(x)))
        y = y.view(b, f, 9, 2 * GRID, 2 * GRID)
        return {
            "depth": y[:, :, 0].exp(),
            "depth_conf": 1 + y[:, :, 1].exp(),
            "rays": y[:, :, 2:8].permute(0, 1, 3, 4, 2),
            "ray_conf": 1 + y[:, :, 8].exp(),
        }


def answer_logprobs(logits: torch.Tensor) -> torch.Tensor:
    """log p over qa.ANSWERS, (B, |A|)."""
    return F.log_softmax(logits[:, list(qa.ANSWER_IDS)].float(), -1)
