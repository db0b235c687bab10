"""The backbones WNE wraps (any will do: the wrapper's equivariance does not depend on them), 2-D,
(B, 1, H, W) in and out.

- `DnCNN` (Zhang et al. 2017): a conv-BN-ReLU stack predicting the noise, with biases.
- `WindowAttention`: a small Swin-style model: conv embedding, non-overlapping windowed multi-head
  self-attention and MLP blocks with LayerNorm, conv head, residual.
"""

from __future__ import annotations

from torch import nn


class DnCNN(nn.Module):
    def __init__(self, depth: int = 6, width: int = 32):
        super().__init__()
        layers = [nn.Conv2d(1, width, 3, padding=1), nn.ReLU()]
        for _ in range(depth - 2):
            layers += [nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
        layers.append(nn.Conv2d(width, 1, 3, padding=1))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return x - self.net(x)


class _Block(nn.Module):
    def __init__(self, dim, heads, window):
        super().__init__()
        self.window = window
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):  # (B, H, W, C), H and W multiples of the window
        b, h, w, c = x.shape
        s = self.window
        t = x.reshape(b, h // s, s, w // s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, s * s, c)
        n = self.n1(t)
        t = t + self.attn(n, n, n, need_weights=False)[0]
        t = t + self.mlp(self.n2(t))
        return t.reshape(b, h // s, w // s, s, s, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)


class WindowAttention(nn.Module):
    def __init__(self, dim: int = 24, heads: int = 2, blocks: int = 2, window: int = 8):
        super().__init__()
        self.window = window
        self.embed = nn.Conv2d(1, dim, 3, padding=1)
        self.blocks = nn.ModuleList(_Block(dim, heads, window) for _ in range(blocks))
        self.head = nn.Conv2d(dim, 1, 3, padding=1)

    def forward(self, x):
        h, w = x.shape[-2:]
        ph, pw = (-h) % self.window, (-w) % self.window
        xp = nn.functional.pad(x, (0, pw, 0, ph), mode="replicate")
        t = self.embed(xp).permute(0, 2, 3, 1)
        for blk in self.blocks:
            t = blk(t)
        out = xp + self.head(t.permute(0, 3, 1, 2))
        return out[..., :h, :w]


BACKBONES = {"dncnn": DnCNN, "attention": WindowAttention}
