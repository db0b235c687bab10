"""The multimodal 1F1B schedule (Cornstarch `multimodal_1f1b.py`) and its simulator.

A plan is a list of stages, one per rank; stage `s` holds `layers` (module, index) and sends its
output to `next[s]` (None for the last stage, which computes the loss). Encoder branches run on
disjoint ranks and all feed the LLM's first stage; a one-encoder model is a single chain.

Warm-up: a stage runs `min(M, D_s - 1)` forwards before its first backward, where `D_s` counts the
stages from `s` to the last one along the DAG — for LLM rank i of S_llm that is S_llm - i - 1, for an
encoder rank i of S_enc it is S_enc + S_llm - i - 1 (the encoder's warm-up counts the LLM's stages).
Then one forward / one backward alternate, then the cool-down backwards. A stage through which no
gradient flows (frozen, with nothing trainable upstream) has no backward slots: it runs its M
forwards back to back (the source of the frozen-aware gain).

The simulator list-schedules these per-stage op sequences with per-stage forward/backward durations
and a per-message latency; sends never block (the executor uses non-blocking sends), receives do.
"""

from __future__ import annotations


def depth(plan: list[dict], s: int) -> int:
    d = 1
    while plan[s]["next"] is not None:
        s = plan[s]["next"]
        d += 1
    return d


def prevs(plan: list[dict], s: int) -> list[int]:
    return [p for p, st in enumerate(plan) if st["next"] == s]


def ops(plan: list[dict], s: int, microbatches: int, has_backward: bool) -> list[tuple[str, int]]:
    """The op sequence of stage s: ("F", m) / ("B", m)."""
    m = microbatches
    if not has_backward:
        return [("F", i) for i in range(m)]
    warm = min(m, depth(plan, s) - 1)
    seq = [("F", i) for i in range(warm)]
    for i in range(m - warm):
        seq += [("F", warm + i), ("B", i)]
    seq += [("B", i) for i in range(m - warm, m)]
    return seq


def simulate(
    plan: list[dict],
    fwd: list[float],
    bwd: list[float],
    microbatches: int,
    comm: float = 0.0,
    has_backward: list[bool] | None = None,
) -> dict:
    """Predicted iteration time and the timeline {stage: [(op, m, start, end)]} of one iteration."""
    n = len(plan)
    has_b = has_backward if has_backward is not None else [b > 0 for b in bwd]
    seqs = [ops(plan, s, microbatches, has_b[s]) for s in range(n)]
    pos, free = [0] * n, [0.0] * n
    done: dict[tuple[str, int, int], float] = {}
    timeline: list[list[tuple[str, int, float, float]]] = [[] for _ in range(n)]
    parents = [prevs(plan, s) for s in range(n)]
    remaining = sum(len(q) for q in seqs)
    while remaining:
        progressed = False
        for s in range(n):
            if pos[s] == len(seqs[s]):
                continue
            op, m = seqs[s][pos[s]]
            if op == "F":
                deps = [("F", p, m) for p in parents[s]]
            elif plan[s]["next"] is None:
                deps = [("F", s, m)]
            else:
                deps = [("B", plan[s]["next"], m)]
            if not all(d in done for d in deps):
                continue
            cross = [done[d] + (comm if d[1] != s else 0.0) for d in deps]
            start = max([free[s], *cross])
            end = start + (fwd[s] if op == "F" else bwd[s])
            done[(op, s, m)] = end
            timeline[s].append((op, m, start, end))
            free[s] = end
            pos[s] += 1
            remaining -= 1
            progressed = True
        if not progressed:
            raise RuntimeError("schedule deadlock")
    total = max(free)
    busy = [sum(e - b for _, _, b, e in t) for t in timeline]
    return {"iteration_time": total, "timeline": timeline, "bubble": [1 - b / total for b in busy]}
