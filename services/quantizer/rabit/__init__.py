"""RaBiT: *Residual-Aware Binarization Training for Accurate and Efficient LLMs* (You, Lee, Choi, Kim,
Chong, Kim, Kim, Kim), ICML 2026, arXiv 2602.05367: 2-bit weights as two coupled binary paths.

A weight at 2 bits is the sum of two binary paths (Sec. 3, Eq. 1)

    W_hat = W_hat_1 + W_hat_2,   W_hat_i = diag(g_i) B_i diag(h_i),   B_i in {-1, +1}^{N x M}.

*Coupled forward* (Sec. 3.2, the point of the paper): one latent full-precision W per layer,

    B_1 = sign(W),   R_1 = W - W_hat_1,   B_2 = sign(R_1),

with the straight-through estimator d sign(u)/du = 1 carrying the gradient to W, and g, h
learned. Path 2 is derived from path 1's residual on every step, so the paths cannot
co-adapt; the baseline `IndependentBinaryLinear` gives each path its own latent instead
(standard residual-binarization QAT, where one global gradient drives both paths).

*Function-aware initialization* (Sec. 3.3): channel importance s_j = sqrt(E[x_j^2]) from
calibration activations preconditions the weight (W~ = W diag(s)); then Gauss-Seidel sweeps
fit each path's rank-1 magnitude by SVID (sign-value-independent decomposition: with B fixed,
min ||T - diag(g) B diag(h)||_F is the rank-1 SVD of B * T, since B * B = 1) against what the
other path leaves: path 1 against W~ - W~_hat_2 (B_1 = sign(W) is fixed by the coupling),
path 2 against W~ - W~_hat_1 with B_2 = sign(W~ - W~_hat_1); finally h_i = h~_i / s.
The sweeps run to the Gauss-Seidel fixed point (B_2 no longer changes, the fit stops moving):
on the reproduction's layers that takes 14-41 sweeps. It matters for the residual hierarchy:
path 1 fitted alone undershoots the layer's output (the sign keeps less of the structured part of
W than of its noise), so path 2 must add to it and Corr(y_1, y_2) > 0 (+0.19 after one sweep,
+0.05 after four); each sweep refits g_1 against W~ - W~_hat_2, which grows path 1 until path 2
corrects rather than extends it (Corr(y_1, y_2) ~ 0 at the fixed point and below 0 after coupled
QAT in the reproduction; a larger model's more structured layers start above 0, see
docs/reproductions/quantizer.md).

*Training loss* (Sec. 3.4): KL to the full-precision teacher plus hidden-state MSE
(the service's `distill.distill_loss`). The per-layer diagnostics Corr(y_1, y_2) and
Corr(R_1, y_2) live in the service's `diagnostics.py`.

Inference (`PackedBinaryLinear`): sign bits of B_1, B_2 plus g, h;
y = sum_i g_i * (B_i (h_i * x)) on the kernel library's `binary_linear`.

Design choices (not fixed by the paper): identity STE (no clipping; the latent keeps its
scale), at most 50 Gauss-Seidel sweeps by default, and the independent baseline starts from
the very same step-0 model (latents W and W - W_hat_1) so that only the coupling differs.

Code: `layers.py` (init, `RaBiTLinear`, `IndependentBinaryLinear`, `PackedBinaryLinear`).
Pure PyTorch on the kernel library: no platform imports.
"""

from .layers import (
    IndependentBinaryLinear,
    PackedBinaryLinear,
    RaBiTLinear,
    TwoPathLinear,
    channel_importance,
    greedy_init,
    make_layer,
    sign,
    svid_init,
)

__all__ = ["IndependentBinaryLinear", "PackedBinaryLinear", "RaBiTLinear", "TwoPathLinear",
           "channel_importance", "greedy_init", "make_layer", "sign", "svid_init"]
