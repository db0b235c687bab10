"""Workload-balanced context parallelism (Cornstarch §CP; HEAD `ContextParallelBatchSplitUtils`).

Mask semantics (ours; the authors' bitfield kernel is marked unfinished, and as coded a text query
never sees a modality key). Each token has a modality (0 = text, m >= 1 = modality m) and a span id
(each contiguous run of one modality is one span). Query q may attend key k iff

    k <= q                                   (causal over everything before, any modality), or
    modality(q) != text and span(k) == span(q)   (a modality span is bidirectional within itself).

So text is causal over all earlier tokens (modality tokens included), and an image (audio) span sees
all of itself plus everything before it. On a text-only sequence this is the causal mask.

Workload: the mask is tiled into 128-query x 32-key tiles; a 128-token row block's workload is
`n_nonzero_tiles * t_attn + t_linear` (the authors' defaults t_attn = t_linear = 1). Splits over cp ranks:
`uniform` (contiguous chunks of row blocks), `zigzag` (2cp chunks, rank i takes chunks i and 2cp-1-i:
balanced for causal masks only), `lpt` (row blocks sorted by workload, each given to the least-loaded
rank: the makespan-minimizing greedy of Graham). Imbalance = max rank load / mean rank load.
"""

from __future__ import annotations

import heapq

import numpy as np
import torch

BLOCK_M, BLOCK_N = 128, 32
MODES = ("uniform", "zigzag", "lpt")


def spans(modality: np.ndarray) -> np.ndarray:
    """Span id per token: a new id whenever the modality changes."""
    modality = np.asarray(modality)
    change = np.ones(len(modality), dtype=bool)
    change[1:] = modality[1:] != modality[:-1]
    return np.cumsum(change) - 1


def attention_mask(modality, span=None) -> torch.Tensor:
    """(T, T) boolean mask, True where query (row) may attend key (column)."""
    modality = torch.as_tensor(np.asarray(modality))
    span = torch.as_tensor(spans(modality.numpy()) if span is None else np.asarray(span))
    t = len(modality)
    idx = torch.arange(t)
    causal = idx[None, :] <= idx[:, None]
    same = (span[:, None] == span[None, :]) & (modality[:, None] != 0)
    return causal | same


def pair_mask(q_pos, k_pos, modality, span) -> torch.Tensor:
    """The mask between query positions and key positions (any order), for split/reordered tokens."""
    q_pos, k_pos = torch.as_tensor(q_pos), torch.as_tensor(k_pos)
    where = q_pos.device  # the mask lives with the positions (a GPU rank's, in ring attention)
    modality = torch.as_tensor(np.asarray(modality), device=where)
    span = torch.as_tensor(np.asarray(span), device=where)
    k_pos = k_pos.to(where)
    causal = k_pos[None, :] <= q_pos[:, None]
    same = (span[q_pos][:, None] == span[k_pos][None, :]) & (modality[q_pos][:, None] != 0)
    return causal | same


def block_workload(mask: torch.Tensor, t_attn: float = 1.0, t_linear: float = 1.0) -> np.ndarray:
    """Workload per 128-token row block: nonzero 128x32 tiles times t_attn, plus t_linear."""
    t = mask.shape[0]
    rows, cols = -(-t // BLOCK_M), -(-t // BLOCK_N)
    padded = torch.zeros(rows * BLOCK_M, cols * BLOCK_N, dtype=torch.bool)
    padded[:t, :t] = mask
    tiles = padded.view(rows, BLOCK_M, cols, BLOCK_N).any(dim=(1, 3))
    return tiles.sum(dim=1).numpy().astype(float) * t_attn + t_linear


def tile_workload(modality, t_attn: float = 1.0, t_linear: float = 1.0) -> np.ndarray:
    """`block_workload(attention_mask(modality))` without materializing the T x T mask: a tile is
    nonzero when its first key is at or before the block's last query (causal part) or when the
    block and the tile both overlap one modality span (the span is bidirectional)."""
    modality = np.asarray(modality)
    t = len(modality)
    rows, cols = -(-t // BLOCK_M), -(-t // BLOCK_N)
    last_q = np.minimum((np.arange(rows) + 1) * BLOCK_M, t) - 1
    tiles = (np.arange(cols)[None, :] * BLOCK_N) <= last_q[:, None]
    span = spans(modality)
    starts = np.flatnonzero(np.r_[True, span[1:] != span[:-1]])
    ends = np.r_[starts[1:], t]
    for a, b in zip(starts, ends, strict=True):
        if modality[a] != 0:
            tiles[a // BLOCK_M : (b - 1) // BLOCK_M + 1, a // BLOCK_N : (b - 1) // BLOCK_N + 1] = True
    return tiles.sum(axis=1).astype(float) * t_attn + t_linear


def split_blocks(workload: np.ndarray, cp: int, mode: str) -> list[list[int]]:
    """Row blocks per rank (each sorted)."""
    n = len(workload)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if n < cp:
        raise ValueError(f"{n} row blocks cannot be split over {cp} ranks")
    if mode == "uniform":
        return [list(c) for c in np.array_split(np.arange(n), cp)]
    if mode == "zigzag":
        chunks = np.array_split(np.arange(n), 2 * cp)
        return [sorted([*chunks[i], *chunks[2 * cp - 1 - i]]) for i in range(cp)]
    order = sorted(range(n), key=lambda b: (-workload[b], b))
    heap = [(0.0, r) for r in range(cp)]
    out: list[list[int]] = [[] for _ in range(cp)]
    for b in order:
        load, r = heapq.heappop(heap)
        out[r].append(b)
        heapq.heappush(heap, (load + float(workload[b]), r))
    return [sorted(o) for o in out]


def imbalance(workload: np.ndarray, assignment: list[list[int]]) -> float:
    loads = np.array([workload[a].sum() if a else 0.0 for a in assignment])
    return float(loads.max() / loads.mean())


def token_offsets(assignment: list[list[int]], seq_len: int) -> list[np.ndarray]:
    """Token positions per rank (the row blocks' tokens, in order); their union is a permutation."""
    out = []
    for blocks in assignment:
        pos = [np.arange(b * BLOCK_M, min((b + 1) * BLOCK_M, seq_len)) for b in blocks]
        out.append(np.concatenate(pos) if pos else np.zeros(0, dtype=int))
    return out


def plan_split(modality, cp: int, mode: str = "lpt") -> dict:
    """Mask -> workload -> split: offsets per rank and the imbalance (max/mean rank load)."""
    work = tile_workload(modality)
    assignment = split_blocks(work, cp, mode)
    return {
        "mode": mode,
        "cp": cp,
        "blocks": assignment,
        "offsets": token_offsets(assignment, len(modality)),
        "imbalance": imbalance(work, assignment),
        "loads": [float(work[a].sum()) for a in assignment],
    }


def synthetic_sequence(
    rng: np.random.Generator, seq_len: int = 8192, modalities: int = 2, causal_only: bool = False
) -> np.ndarray:
    """Modality per token of a synthetic multimodal sequence: text spans interleaved with 1-4 image
    spans (576..2304 tokens, modality 1) and an audio span (modality 2), as in the paper's evaluation."""
    if causal_only:
        return np.zeros(seq_len, dtype=np.int64)
    spans_: list[tuple[int, int]] = []
    budget = seq_len
    for _ in range(int(rng.integers(1, 5))):
        size = int(rng.integers(576, 2305))
        if size > budget // 2:
            break
        spans_.append((1, size))
        budget -= size
    if modalities > 1 and budget > 512:
        size = int(rng.integers(256, min(1536, budget // 2) + 1))
        spans_.append((2, size))
        budget -= size
    rng.shuffle(spans_)
    cuts = np.sort(rng.integers(0, budget + 1, len(spans_)))
    text = np.diff(np.concatenate([[0], cuts, [budget]]))
    out = []
    for i, (m, size) in enumerate(spans_):
        out += [0] * int(text[i]) + [m] * size
    out += [0] * int(text[-1])
    return np.asarray(out, dtype=np.int64)


def masked_attention(q, k, v, mask) -> torch.Tensor:
    """Reference: softmax(q k^T / sqrt(d), masked) v, (..., T, d)."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _partial(q, k, v, mask):
    """Unnormalized block attention: (out, row max, row sum) for online-softmax merging."""
    scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True)
    safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    p = torch.exp(scores - safe)
    return p @ v, m, p.sum(dim=-1, keepdim=True)


def ring_attention(q, k, v, positions, modality, span, group=None) -> torch.Tensor:
    """Context-parallel masked attention over torch.distributed (ring): each rank holds its tokens'
    q, k, v (`positions`: their places in the full sequence, any order) and passes (k, v, positions)
    around the ring; partial results merge by online softmax (the FlashAttention recurrence).
    Ranks may hold different token counts (LPT): the travelling keys are padded to the longest
    share and the padding masked out. q, k, v: (T_rank, d)."""
    import torch.distributed as dist

    world, rank = dist.get_world_size(group), dist.get_rank(group)
    where = q.device  # every tensor on the rank's device (CPU with gloo, its GPU with NCCL)
    positions = torch.as_tensor(positions, dtype=torch.long).to(where)
    # LPT gives ranks different block counts: pad the travelling keys to the longest share
    size = torch.tensor([len(positions)], device=where)
    dist.all_reduce(size, op=dist.ReduceOp.MAX, group=group)
    pad = int(size) - len(positions)
    out = torch.zeros_like(q)
    run_max = torch.full(q.shape[:-1] + (1,), float("-inf"), dtype=q.dtype, device=where)
    run_sum = torch.zeros(q.shape[:-1] + (1,), dtype=q.dtype, device=where)
    cur_k = torch.cat([k, k.new_zeros(pad, *k.shape[1:])]).contiguous()
    cur_v = torch.cat([v, v.new_zeros(pad, *v.shape[1:])]).contiguous()
    cur_pos = torch.cat([positions, positions.new_full((pad,), -1)])
    for step in range(world):
        if step < world - 1:
            nk, nv, npos = torch.empty_like(cur_k), torch.empty_like(cur_v), torch.empty_like(cur_pos)
            ops = [dist.P2POp(dist.isend, t, (rank + 1) % world, group) for t in (cur_k, cur_v, cur_pos)]
            ops += [dist.P2POp(dist.irecv, t, (rank - 1) % world, group) for t in (nk, nv, npos)]
            reqs = dist.batch_isend_irecv(ops)
        mask = pair_mask(positions, cur_pos, modality, span) & (cur_pos >= 0)[None, :]
        part, m, s = _partial(q, cur_k, cur_v, mask)
        new_max = torch.maximum(run_max, m)
        a = torch.exp(run_max - new_max).nan_to_num(0.0)
        b = torch.exp(m - new_max).nan_to_num(0.0)
        out = out * a + part * b
        run_sum = run_sum * a + s * b
        run_max = new_max
        if step < world - 1:
            for r in reqs:
                r.wait()
            cur_k, cur_v, cur_pos = nk, nv, npos
    return out / run_sum
