"""RITA and the test-time baselines it is compared with, one test image at a time.

RITA (Zhu et al., ICML 2026, arXiv 2607.09450), per attacked test image x:
  1. N augmented views (view 0 = x), frozen image features -> P_t uniform over them (Eq. 3).
  2. One prompt-adaptation step (AdamW, lr 5e-3, the shared context vectors only), episodic: the
     prompts are reset for every sample. The paper does not state the TTA loss; `loss="tpt"` is
     TPT's marginal entropy over the 10% lowest-entropy views, `loss="ot"` the entropy of
     softmax_k(-d_OT(P_S, Q_k) / tau) over that subset (gradient through Sinkhorn by the envelope
     theorem). The service default is chosen on validation seeds (README).
  3. d_OT(P_t, Q_k) between the views and each class's M adapted prompt features (Eq. 4-5).
  4. Views with entropy <= gamma of softmax_k(s * mean_m cos) (Eq. 8, s = the model's logit scale)
     go to the dynamic caches (Algorithm 1); each class's cache is aligned to its prototype by
     orthogonal Procrustes (Eq. 10) and d_cOT(P_t, Q~_k) computed the same way (Eq. 11).
  5. y = argmin_k d_OT + alpha * d_cOT (Eq. 12). The paper sets d_cOT = 0 for an empty class; as
     distances are >= 0 that favours classes with no cache, so by default (`empty="max"`) an empty
     class gets the largest d_cOT of the non-empty ones (no bonus); `empty="zero"` is the letter.

Baselines: zero-shot CLIP (plain prompt, x only); Ensemble (mean logits over the same N views and
M prompts, no adaptation); TPT (Shu et al. 2022: marginal entropy of the 10% most confident views,
one step, predict on x); R-TPT (Sheng et al. CVPR 2025: mean pointwise entropy of those views,
then a reliability-weighted ensemble of all views, weight = softmax(mean top-20 cosine to the other
views / 0.01)); TDA (Karmanov et al. CVPR 2024: positive/negative caches, training-free).
Every adaptive method sees the same views (same generator seed) and the same M prompts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from paperworks.services.clip.rita.cache import ClassCache
from paperworks.services.clip.rita.ot import align_to_prototype, cosine_cost, ot_distances, ot_loss
from paperworks.services.clip.rita.prompts import PromptBank
from paperworks.services.clip.rita.views import augment
from torch.nn import functional as F

METHODS = ("zero_shot", "ensemble", "tpt", "rtpt", "tda", "rita", "rita_no_cache")


@dataclass
class TTAConfig:
    views: int = 64
    select: float = 0.1  # TPT / R-TPT / RITA-TPT-loss confident fraction
    lr: float = 5e-3
    steps: int = 1
    epsilon: float = 0.05  # Sinkhorn lambda (cost scale [0, 2])
    iters: int = 100
    gamma: float = 0.8  # cache entropy threshold
    capacity: int = 8  # cache entries per class
    alpha: float = 0.1  # cache OT weight
    loss: str = "tpt"  # RITA's TTA loss: "tpt" | "ot" | "none"
    ot_tau: float = 0.01
    empty: str = "max"  # d_cOT of an empty class: "max" | "zero"
    crop_scale: tuple[float, float] = (0.5, 1.0)
    tda: dict = field(
        default_factory=lambda: {
            "pos": (3, 2.0, 5.0),
            "neg": (2, 0.117, 1.0),
            "neg_entropy": (0.2, 0.5),
            "neg_mask": (0.03, 1.0),
        }
    )


def entropy(p: torch.Tensor) -> torch.Tensor:
    return -(p * p.clamp_min(1e-12).log()).sum(-1)


class Stream:
    """One test stream: the frozen encoder, the prompt banks, and the stateful caches (TDA's and
    RITA's). Call `predict(method, image, seed)` per test image, in stream order."""

    def __init__(
        self,
        encoder,
        classes: list[str],
        descriptors: list[str] | None,
        cfg: TTAConfig,
        rita_cache: ClassCache | None = None,
    ):
        self.enc, self.cfg = encoder, cfg
        for p in encoder.parameters():
            p.requires_grad_(False)
        self.plain = PromptBank(encoder, classes, None)
        self.bank = PromptBank(encoder, classes, descriptors)
        with torch.no_grad():
            self.plain_text = self.plain.prototypes()
            self.frozen = self.bank.features()
            self.frozen_proto = self.bank.prototypes(self.frozen)
        self.K = len(classes)
        dim = self.frozen.shape[-1]
        self.cache = rita_cache if rita_cache is not None else ClassCache(self.K, dim, cfg.capacity)
        self.tda_pos: list[list] = [[] for _ in range(self.K)]
        self.tda_neg: list[list] = [[] for _ in range(self.K)]

    @property
    def scale(self) -> torch.Tensor:
        return self.enc.logit_scale.detach()

    @torch.no_grad()
    def view_features(self, image: torch.Tensor, seed: int) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        views = augment(image.to(self.enc.device), self.cfg.views, g, scale=self.cfg.crop_scale)
        return self.enc.encode_image(views)

    def _confident(self, logits: torch.Tensor) -> torch.Tensor:
        n = max(1, int(round(self.cfg.select * len(logits))))
        return entropy(logits.softmax(-1)).argsort()[:n]

    def _adapt(self, feats: torch.Tensor, loss_kind: str) -> torch.Tensor:
        """cfg.steps AdamW steps on the shared context from the initial prompts; returns the
        adapted (K, M, D) prompt features."""
        self.bank.reset()
        opt = torch.optim.AdamW([self.bank.ctx], lr=self.cfg.lr)
        with torch.enable_grad():
            for _ in range(self.cfg.steps if loss_kind != "none" else 0):
                z = self.bank.features()
                logits = self.scale * feats @ self.bank.prototypes(z).T
                sel = self._confident(logits.detach())
                if loss_kind == "tpt":  # marginal entropy of the mean prediction
                    logp = logits[sel].log_softmax(-1)
                    avg = torch.logsumexp(logp, 0) - torch.log(torch.tensor(float(len(sel))))
                    loss = entropy(avg.exp())
                elif loss_kind == "rtpt":  # mean pointwise entropy
                    loss = entropy(logits[sel].softmax(-1)).mean()
                elif loss_kind == "ot":
                    cost = cosine_cost(feats[sel][None].expand(self.K, -1, -1), z)
                    d = ot_loss(cost, self.cfg.epsilon, self.cfg.iters)
                    loss = entropy((-d / self.cfg.ot_tau).softmax(-1))
                else:
                    raise ValueError(f"unknown TTA loss {loss_kind!r}")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        with torch.no_grad():
            return self.bank.features()

    # --- methods -------------------------------------------------------------------------
    @torch.no_grad()
    def zero_shot(self, image: torch.Tensor, seed: int) -> torch.Tensor:
        f = self.enc.encode_image(image[None].to(self.enc.device))
        return (self.scale * f @ self.plain_text.T)[0]

    @torch.no_grad()
    def ensemble(self, image: torch.Tensor, seed: int) -> torch.Tensor:
        feats = self.view_features(image, seed)
        return (self.scale * feats @ self.frozen_proto.T).mean(0)

    def tpt(self, image: torch.Tensor, seed: int) -> torch.Tensor:
        feats = self.view_features(image, seed)
        z = self._adapt(feats, "tpt")
        return (self.scale * feats[:1] @ self.bank.prototypes(z).T)[0]

    def rtpt(self, image: torch.Tensor, seed: int) -> torch.Tensor:
        feats = self.view_features(image, seed)
        z = self._adapt(feats, "rtpt")
        probs = (self.scale * feats @ self.bank.prototypes(z).T).softmax(-1)
        sim = feats @ feats.T
        sim.fill_diagonal_(-2.0)
        top = sim.topk(min(20, len(feats) - 1), dim=1).values.mean(1)
        w = (top / 0.01).softmax(0)
        return (w[:, None] * probs).sum(0).clamp_min(1e-12).log()

    @torch.no_grad()
    def tda(self, image: torch.Tensor, seed: int) -> torch.Tensor:
        (pcap, pa, pb), (ncap, na, nb) = self.cfg.tda["pos"], self.cfg.tda["neg"]
        lo, hi = self.cfg.tda["neg_entropy"]
        mlo, mhi = self.cfg.tda["neg_mask"]
        f = self.enc.encode_image(image[None].to(self.enc.device))[0]
        logits = self.scale * f @ self.frozen_proto.T
        probs = logits.softmax(-1)
        ent = float(entropy(probs)) / float(torch.log(torch.tensor(float(self.K))))
        pred = int(probs.argmax())

        def put(bank, cap, item):
            bank[pred].append(item)
            bank[pred].sort(key=lambda t: t[1])
            del bank[pred][cap:]

        put(self.tda_pos, pcap, (f, ent, None))
        if lo < ent < hi:
            put(self.tda_neg, ncap, (f, ent, probs))
        out = logits.clone()
        pos = [(e[0], k) for k in range(self.K) for e in self.tda_pos[k]]
        if pos:
            keys = torch.stack([p[0] for p in pos])
            vals = F.one_hot(torch.tensor([p[1] for p in pos], device=keys.device), self.K).float()
            out += pa * torch.exp(-(pb - pb * (keys @ f))) @ vals
        neg = [e for k in range(self.K) for e in self.tda_neg[k]]
        if neg:
            keys = torch.stack([e[0] for e in neg])
            vals = torch.stack([((e[2] > mlo) & (e[2] < mhi)).float() for e in neg])
            out -= na * torch.exp(-(nb - nb * (keys @ f))) @ vals
        return out

    def rita(
        self, image: torch.Tensor, seed: int, use_cache: bool = True, update_cache: bool = True
    ) -> torch.Tensor:
        """Scores -(d_OT + alpha d_cOT) per class (higher is better)."""
        cfg = self.cfg
        feats = self.view_features(image, seed)
        z = self._adapt(feats, cfg.loss)
        with torch.no_grad():
            d_ot = ot_distances(cosine_cost(feats[None].expand(self.K, -1, -1), z), cfg.epsilon, cfg.iters)
            if not use_cache:
                return -d_ot
            if update_cache:
                probs = (self.scale * torch.einsum("nd,kmd->nkm", feats, z).mean(-1)).softmax(-1)
                self.cache.update(feats, probs, cfg.gamma)
            d_c = self.cache_distances(feats, self.bank.prototypes(z))
            return -(d_ot + cfg.alpha * d_c)

    def cache_distances(self, feats: torch.Tensor, protos: torch.Tensor) -> torch.Tensor:
        """d_cOT(P_t, Q~_k) per class over the Procrustes-aligned caches (Eq. 10-11)."""
        d = torch.full((self.K,), float("nan"), device=feats.device)
        for k in range(self.K):
            bank = self.cache.feats[k]
            if len(bank):
                aligned = align_to_prototype(bank.to(feats.device), protos[k])
                d[k] = ot_distances(cosine_cost(feats, aligned)[None], self.cfg.epsilon, self.cfg.iters)[0]
        empty = torch.isnan(d)
        if empty.all():
            return torch.zeros_like(d)
        fill = 0.0 if self.cfg.empty == "zero" else float(d[~empty].max())
        return torch.where(empty, torch.full_like(d, fill), d)

    def predict(self, method: str, image: torch.Tensor, seed: int) -> torch.Tensor:
        if method == "rita_no_cache":
            return self.rita(image, seed, use_cache=False)
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; one of {', '.join(METHODS)}")
        return getattr(self, method)(image, seed)
