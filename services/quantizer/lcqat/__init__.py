"""LC-QAT: *Data-Efficient 2-Bit QAT via Linear-Constrained Vector Quantization* (Wang, Yu, Zhao,
Wang, Han), ICML 2026, arXiv 2606.10531: 2-bit weight-only vector QAT through a linear-constrained
codebook. Its scalar 2-bit baselines live in the service's `baselines.py`.

*Incoherence processing* (Sec. 3.1): with random-sign block Hadamards U = H D_out, V = H D_in
(orthogonal) and a learned per-input-channel scale c, a linear y = W x runs as

    y = U^T (s * Q(W~) (V (x / c))),   W~ = U W diag(c) V^T / s   (s: learned per-row scale),

so the quantized matrix Q(W~) sees incoherent, near-Gaussian weights.

*Linear-constrained codebook* (Sec. 3.2, Eq. 3): the 256 codewords of a 4-D vector are an
affine image of the 2-bit integer grid, c(z) = A z + b with z in {0..3}^4, A (4x4) and b (4)
per weight matrix, so a code is the 8-bit index of z (2 bits per weight).

*PTQ initialization* (Sec. 3.3): Hessian-aware sequential rounding - GPTQ over 4-column blocks
with H = E[x~ x~^T] from calibration data, in act-order (the blocks with the largest diag(H)
first): each block is rounded to its nearest codeword and the error, scaled by the
inverse-Hessian Cholesky factor, is pushed onto the blocks not yet rounded; A and b are then
refitted to the chosen z by least squares weighted by the Hessian (and the squared row scales),
i.e. to minimise the layer's output error on the calibration inputs (two rounds). Then *block
reconstruction fine-tuning*: per transformer block, the continuous parameters (A, b, s, c) are
fitted so that the block's output on the full-precision block input matches the full-precision
block; optionally (`latent_lr` > 0) the code latents train with them, through QAT's rounding
and surrogate (below), and are rounded back into codes. Optionally (`end_to_end`, our
extension) the whole model then fits the QAT objective on the same calibration windows (all
layers' A, b, s, c and code latents).

*QAT* (Sec. 3.4): a continuous latent V in z-space, z = clamp(round(V), 0, 3) rounded per
coordinate (no nearest-codeword search, no lookup in the forward), W~ = A z + b, and the DGE
surrogate gradient for round: d round(v)/dv ~ (1/k) |2 (v - floor(v) - 1/2)|^(1/k - 1), capped
at `DGE_MAX` (k = `DGE_K`). V starts at the PTQ z exactly, so the step-0 QAT model is the
PTQ model (the PTQ layer computes through the codebook lookup, the QAT layer through
per-coordinate rounding; the tests check they agree).

*Inference* (Sec. 3.5): A and b fold into the activations, (A z + b) . x_q = z . (A^T x_q) +
b . x_q, leaving a plain 2-bit integer matvec: `ops.lattice_linear`.

Design choices: Hadamard blocks are the largest power of two dividing the width (<= 256);
1% diagonal damping; block fine-tuning uses Adam for `block_steps` steps per block, on the
calibration windows 16 at a time, and may train the code latents too (our choice; the paper's
block reconstruction fits the continuous parameters with the codes fixed); DGE k = 4.

Code: `layers.py` (`Rotation`, `dge_round`, `LCLinear` with its PTQ and QAT modes,
`PackedLatticeLinear`), `finetune.py` (`block_reconstruction`, `end_to_end`).
Pure PyTorch on the kernel library: no platform imports.
"""

from .finetune import block_reconstruction, end_to_end, lc_layers
from .layers import DGE_K, DGE_MAX, GRID, LCLinear, PackedLatticeLinear, Rotation, dge_round

__all__ = ["DGE_K", "DGE_MAX", "GRID", "LCLinear", "PackedLatticeLinear", "Rotation", "block_reconstruction",
           "dge_round", "end_to_end", "lc_layers"]
