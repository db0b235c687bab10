"""RITA's confidence-filtered dynamic class caches (Algorithm 1, Eq. 8-9).

One bank per class of at most `capacity` view features with their entropies. A view whose
prediction entropy is <= gamma is offered to the bank of its pseudo-label; a full bank takes it
only in place of its highest-entropy entry, and only if the newcomer's entropy is lower
(low entropy = high priority, as in TDA). The state is plain tensors so a stream's cache can be
stored between calls (`state` / `from_state`).
"""

from __future__ import annotations

import torch


class ClassCache:
    def __init__(self, num_classes: int, dim: int, capacity: int = 8):
        self.K, self.dim, self.capacity = num_classes, dim, capacity
        self.feats = [torch.empty(0, dim) for _ in range(num_classes)]
        self.ents = [torch.empty(0) for _ in range(num_classes)]

    def __len__(self) -> int:
        return sum(len(e) for e in self.ents)

    def sizes(self) -> list[int]:
        return [len(e) for e in self.ents]

    def offer(self, feat: torch.Tensor, label: int, entropy: float) -> bool:
        """Insert one feature into class `label`'s bank; True when it was kept."""
        feat = feat.detach().float().cpu()[None]
        f, e = self.feats[label], self.ents[label]
        if len(e) < self.capacity:
            self.feats[label] = torch.cat([f, feat])
            self.ents[label] = torch.cat([e, torch.tensor([float(entropy)])])
            return True
        worst = int(e.argmax())
        if entropy < float(e[worst]):
            f = f.clone()
            e = e.clone()
            f[worst], e[worst] = feat[0], float(entropy)
            self.feats[label], self.ents[label] = f, e
            return True
        return False

    def update(self, feats: torch.Tensor, probs: torch.Tensor, gamma: float) -> int:
        """Offer every view with entropy <= gamma (Eq. 8) to its pseudo-label's bank; returns how
        many were kept."""
        ent = -(probs * probs.clamp_min(1e-12).log()).sum(-1)
        labels = probs.argmax(-1)
        kept = 0
        for i in torch.nonzero(ent <= gamma).flatten().tolist():
            kept += self.offer(feats[i], int(labels[i]), float(ent[i]))
        return kept

    def state(self) -> dict[str, torch.Tensor]:
        feats = torch.zeros(self.K, self.capacity, self.dim)
        ents = torch.full((self.K, self.capacity), float("nan"))
        for k in range(self.K):
            n = len(self.ents[k])
            feats[k, :n], ents[k, :n] = self.feats[k], self.ents[k]
        return {"feats": feats, "ents": ents}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> ClassCache:
        feats, ents = state["feats"].float(), state["ents"].float()
        k, cap, dim = feats.shape
        cache = cls(k, dim, cap)
        for c in range(k):
            keep = ~torch.isnan(ents[c])
            cache.feats[c], cache.ents[c] = feats[c][keep].clone(), ents[c][keep].clone()
        return cache
