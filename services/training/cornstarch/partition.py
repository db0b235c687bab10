"""Pipeline partitioning over the encoder-branches -> LLM DAG.

`frozen_aware` (Cornstarch's contribution; the automatic search is our reconstruction: HEAD takes
user-given templates) enumerates every contiguous partition (per-branch stage counts and cut points)
and keeps the one whose simulated 1F1B iteration time — the pipeline's critical path under the
profiled, freezing-aware costs — is smallest among those within the per-stage memory limit.

Frozen-unaware baselines minimize the bottleneck stage of a freezing-blind metric: `parameters`
(parameter count, DeepSpeed's default `partition_method`), `layers` (layer count, DeepSpeed
`uniform`), `forward3x` (3 x profiled forward, i.e. backward assumed 2 x forward everywhere).
Every plan is then scored with the same true costs by the simulator.
"""

from __future__ import annotations

import itertools

from . import costs, schedule

METHODS = ("frozen_aware", "parameters", "layers", "forward3x")
MAX_CANDIDATES = 50_000


def _splits(n: int, k: int):
    """All ways to cut n layers into k non-empty contiguous groups (as index ranges)."""
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0, *cuts, n)
        yield [range(bounds[i], bounds[i + 1]) for i in range(k)]


def candidates(modules: dict[str, int], world: int):
    """Plans for `modules` = {encoder name: layers, ..., "llm": layers} on `world` ranks: one chain
    when there is one encoder; otherwise each encoder branch and the LLM get >= 1 stage each."""
    encs = [m for m in modules if m != "llm"]
    if len(encs) <= 1:
        chain = [(m, i) for m in [*encs, "llm"] for i in range(modules[m])]
        if world > len(chain):
            raise ValueError(f"world size {world} exceeds the model's {len(chain)} layers")
        for groups in _splits(len(chain), world):
            yield [
                {"layers": [list(chain[i]) for i in g], "next": s + 1 if s + 1 < world else None}
                for s, g in enumerate(groups)
            ]
        return
    if world < len(encs) + 1:
        raise ValueError(f"world size {world} < {len(encs) + 1} (a stage per encoder branch and the LLM)")
    names = [*encs, "llm"]
    for counts in itertools.product(range(1, world + 1), repeat=len(names)):
        if sum(counts) != world or any(c > modules[n] for n, c in zip(names, counts, strict=True)):
            continue
        first_llm = world - counts[-1]
        for parts in itertools.product(
            *[list(_splits(modules[n], c)) for n, c in zip(names, counts, strict=True)]
        ):
            plan = []
            for n, groups in zip(names, parts, strict=True):
                for j, g in enumerate(groups):
                    last = j == len(groups) - 1
                    nxt = (first_llm if n != "llm" else None) if last else len(plan) + 1
                    plan.append({"layers": [[n, i] for i in g], "next": nxt})
            yield plan


def stage_costs(plan, prof: dict) -> tuple[list[float], list[float], list[bool]]:
    fwd, bwd, has_b = [], [], []
    for st in plan:
        entries = [prof[f"{m}:{i}"] for m, i in st["layers"]]
        fwd.append(sum(e["f"] for e in entries))
        bwd.append(sum(costs.backward_cost(e) for e in entries))
        has_b.append(any(e["needs_grad"] for e in entries))
    return fwd, bwd, has_b


def stage_memory(plan, prof: dict, microbatches: int) -> list[float]:
    out = []
    for s, st in enumerate(plan):
        entries = [prof[f"{m}:{i}"] for m, i in st["layers"]]
        flowing = any(e["needs_grad"] for e in entries)
        in_flight = min(microbatches, schedule.depth(plan, s)) if flowing else 0
        out.append(costs.memory_bytes(entries, in_flight))
    return out


def _metric(method: str, entry: dict) -> float:
    return {"parameters": entry["params"], "layers": 1.0, "forward3x": 3 * entry["f"]}[method]


def evaluate(plan, prof: dict, microbatches: int, comm: float = 0.0) -> dict:
    fwd, bwd, has_b = stage_costs(plan, prof)
    sim = schedule.simulate(plan, fwd, bwd, microbatches, comm, has_b)
    return {
        "stages": plan,
        "stage_forward": fwd,
        "stage_backward": bwd,
        "stage_memory": stage_memory(plan, prof, microbatches),
        "predicted_iteration_time": sim["iteration_time"],
        "bubble": sim["bubble"],
        "timeline": sim["timeline"],
    }


def partition(
    prof: dict,
    modules: dict[str, int],
    world: int,
    microbatches: int,
    method: str,
    memory_limit: float | None = None,
    comm: float = 0.0,
) -> dict:
    """The best plan of `method` (see the module docstring), evaluated with the true costs."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    best, best_key = None, None
    for n, plan in enumerate(candidates(modules, world)):
        if n >= MAX_CANDIDATES:
            break
        if memory_limit is not None and max(stage_memory(plan, prof, microbatches)) > memory_limit:
            continue
        if method == "frozen_aware":
            fwd, bwd, has_b = stage_costs(plan, prof)
            key = (schedule.simulate(plan, fwd, bwd, microbatches, comm, has_b)["iteration_time"],)
        else:
            loads = sorted(
                (sum(_metric(method, prof[f"{m}:{i}"]) for m, i in st["layers"]) for st in plan), reverse=True
            )
            key = tuple(loads)
        if best_key is None or key < best_key:
            best, best_key = plan, key
    if best is None:
        raise ValueError("no partition fits the per-stage memory limit")
    return {"method": method, **evaluate(best, prof, microbatches, comm)}


def count_candidates(modules: dict[str, int], world: int) -> int:
    """How many plans `candidates` enumerates (to bound the search before running it)."""
    from math import comb

    encs = [m for m in modules if m != "llm"]
    if len(encs) <= 1:
        return comb(sum(modules.values()) - 1, world - 1)
    names = [*encs, "llm"]
    total = 0
    for counts in itertools.product(range(1, world + 1), repeat=len(names)):
        if sum(counts) == world:
            n = 1
            for name, c in zip(names, counts, strict=True):
                n *= comb(modules[name] - 1, c - 1)
            total += n
    return total
