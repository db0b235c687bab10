"""The white-box attack of RITA's protocol: PGD (Madry et al. 2018) under an L-inf budget eps on the
frozen CLIP with a plain prompt ("a photo of a {class}", zero-shot logits), 7 steps of size
eps/4 from a uniform random start, images kept in [0, 1]. Test-time methods then see the attacked
image; the attack does not know the method (the paper's main setting)."""

from __future__ import annotations

import torch
from torch.nn import functional as F


def pgd(
    encoder,
    images: torch.Tensor,
    labels: torch.Tensor,
    text: torch.Tensor,
    eps: float,
    steps: int = 7,
    step_size: float | None = None,
    generator: torch.Generator | None = None,
    batch: int = 256,
) -> torch.Tensor:
    """Adversarial images (same shape as `images`, in [0, 1]) maximising the cross-entropy of
    logit_scale * cos(image, text_k) for the true label; `text` (K, D) normalised."""
    if eps <= 0:
        return images.clone()
    step_size = eps / 4 if step_size is None else step_size
    out = []
    for p in encoder.parameters():
        p.requires_grad_(False)
    for i in range(0, len(images), batch):
        x = images[i : i + batch].to(encoder.device)
        y = labels[i : i + batch].to(encoder.device)
        noise = torch.rand(x.shape, generator=generator).to(x.device) * 2 - 1
        adv = (x + eps * noise).clamp(0, 1)
        for _ in range(steps):
            adv.requires_grad_(True)
            with torch.enable_grad():
                logits = encoder.logit_scale * encoder.encode_image(adv) @ text.T
                loss = F.cross_entropy(logits, y)
                (grad,) = torch.autograd.grad(loss, adv)
            adv = adv.detach() + step_size * grad.sign()
            adv = torch.min(torch.max(adv, x - eps), x + eps).clamp(0, 1)
        out.append(adv.detach().cpu())
    return torch.cat(out)
