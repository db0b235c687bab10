"""A pipeline as a DAG: steps, the edges their references and `after` lists make, validation
(unique names, known steps, no cycles), a run order, and which steps can run now.

Errors carry the request field they are about (`steps[2].params.model.source`, `steps[1].after[0]`)
so the service refuses a pipeline the way it refuses any bad field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from paperworks.services.pipeline.dag.refs import Ref, RefError, find_refs

SUCCEEDED, FAILED, CANCELLED = "SUCCEEDED", "FAILED", "CANCELLED"
TERMINAL = (SUCCEEDED, FAILED, CANCELLED)


class DagError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass
class StepNode:
    index: int
    name: str
    service: str
    kind: str
    params: dict[str, Any]
    after: list[str] = field(default_factory=list)
    retries: int = 0
    refs: list[Ref] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"steps[{self.index}]"

    @property
    def needs(self) -> list[str]:
        """The steps that must SUCCEED before this one, in first-mention order."""
        return list(dict.fromkeys([*self.after, *(r.step for r in self.refs)]))


@dataclass
class Dag:
    steps: list[StepNode]

    @property
    def by_name(self) -> dict[str, StepNode]:
        return {s.name: s for s in self.steps}

    def order(self) -> list[str]:
        """A topological order, stable in the order the steps were written (Kahn)."""
        done: list[str] = []
        left = list(self.steps)
        while left:
            ready = [s for s in left if all(n in done for n in s.needs)]
            if not ready:  # parse() refuses cycles, so this never happens for a parsed Dag
                raise DagError(left[0].where, "is part of a cycle")
            done.append(ready[0].name)
            left.remove(ready[0])
        return done

    def ready(self, states: dict[str, str]) -> list[StepNode]:
        """Steps not yet started (no state) whose every dependency SUCCEEDED, in run order."""
        by_name = self.by_name
        return [by_name[n] for n in self.order()
                if n not in states and all(states.get(d) == SUCCEEDED for d in by_name[n].needs)]

    def depth(self) -> dict[str, int]:
        """Each step's layer: 0 for steps needing nothing, else one more than its deepest need."""
        depth: dict[str, int] = {}
        by_name = self.by_name
        for name in self.order():
            depth[name] = 1 + max((depth[d] for d in by_name[name].needs), default=-1)
        return depth


def parse(steps: list[dict]) -> Dag:
    """The Dag of validated step mappings (name, service, kind, params, after, retries); refuses
    duplicate names, references and `after` entries naming no other step, and cycles."""
    nodes: list[StepNode] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(steps):
        name = raw["name"]
        if name in seen:
            raise DagError(f"steps[{i}].name", f"{name!r} is already the name of steps[{seen[name]}]")
        seen[name] = i
        try:
            refs = find_refs(raw.get("params") or {})
        except RefError as exc:
            raise DagError(_param_field(i, exc.path), exc.message) from None
        nodes.append(StepNode(i, name, raw["service"], raw["kind"], dict(raw.get("params") or {}),
                              list(raw.get("after") or []), int(raw.get("retries") or 0), refs))
    for node in nodes:
        for j, before in enumerate(node.after):
            if before not in seen:
                raise DagError(f"{node.where}.after[{j}]", f"no step is called {before!r}")
            if before == node.name:
                raise DagError(f"{node.where}.after[{j}]", "a step cannot wait for itself")
        for ref in node.refs:
            where = _param_field(node.index, ref.path)
            if ref.step not in seen:
                raise DagError(f"{where}.from", f"no step is called {ref.step!r}")
            if ref.step == node.name:
                raise DagError(f"{where}.from", "a step cannot read its own outputs")
    dag = Dag(nodes)
    cycle = find_cycle(dag)
    if cycle:
        first = dag.by_name[cycle[0]]
        raise DagError(first.where, "the steps form a cycle: " + " -> ".join([*cycle, cycle[0]]))
    return dag


def find_cycle(dag: Dag) -> list[str]:
    """One cycle (step names, each needing the next... in dependency order), or []."""
    by_name = dag.by_name
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> list[str]:
        color[name] = 1
        stack.append(name)
        for need in by_name[name].needs:
            if color.get(need) == 1:
                return stack[stack.index(need):]
            if not color.get(need):
                found = visit(need)
                if found:
                    return found
        stack.pop()
        color[name] = 2
        return []

    for node in dag.steps:
        if not color.get(node.name):
            found = visit(node.name)
            if found:
                return list(reversed(found))
    return []


def _param_field(index: int, path: str) -> str:
    return f"steps[{index}].params" + (f".{path}" if path else "")


def param_field(node: StepNode, path: str) -> str:
    """The request field of a path inside a step's parameters."""
    return _param_field(node.index, path)
