"""Learnable prompts (CoOp, Zhou et al. 2022; as adapted at test time by TPT, R-TPT and RITA).

For K classes and M descriptors, prompt (k, m) is "<ctx_1..ctx_4> {descriptor_m} {class_k}" where
the four context vectors (one per token of "a photo of a" in the model's tokenizer: four in the
tiny one's and in OpenAI CLIP's) are shared by all prompts, initialised from the token embeddings
of "a photo of a", and are the only parameters test-time adaptation updates. RITA's class
distribution Q_k (Eq. 3) is uniform over the M prompt features of class k.
"""

from __future__ import annotations

import torch
from torch import nn

INIT = "a photo of a"


class PromptBank(nn.Module):
    def __init__(self, encoder, classes: list[str], descriptors: list[str] | None = None):
        super().__init__()
        self.encoder = encoder
        self.descriptors = list(descriptors) if descriptors else [""]
        self.K, self.M = len(classes), len(self.descriptors)
        texts = [f"{INIT} {d} {c}".replace("  ", " ") for c in classes for d in self.descriptors]
        ids = encoder.tokenize(texts)
        self.register_buffer("ids", ids, persistent=False)
        with torch.no_grad():
            emb = encoder.token_embeddings(ids).detach()
        self.register_buffer("base", emb, persistent=False)
        # as many context vectors as "a photo of a" has tokens (4 words; more for a tokenizer that
        # splits a word), so every one of them is replaced and nothing of the class name is
        n_ctx = int(encoder.eot_positions(encoder.tokenize([INIT]))[0]) - 1
        self.n_ctx = n_ctx
        self.init_ctx = emb[0, 1 : 1 + n_ctx].clone()
        self.ctx = nn.Parameter(self.init_ctx.clone())

    def reset(self) -> None:
        """Episodic protocol: every test sample starts from the initial context."""
        with torch.no_grad():
            self.ctx.copy_(self.init_ctx)

    def features(self) -> torch.Tensor:
        """(K, M, D) L2-normalised prompt features (differentiable in ctx)."""
        emb = torch.cat(
            [self.base[:, :1], self.ctx[None].expand(len(self.base), -1, -1), self.base[:, 1 + self.n_ctx :]],
            1,
        )
        feats = self.encoder.encode_text_embeddings(emb, self.ids)
        return feats.view(self.K, self.M, -1)

    def prototypes(self, feats: torch.Tensor | None = None) -> torch.Tensor:
        """(K, D): the normalised mean of each class's M prompt features (z_bar_k)."""
        feats = self.features() if feats is None else feats
        return torch.nn.functional.normalize(feats.mean(1), dim=-1)
