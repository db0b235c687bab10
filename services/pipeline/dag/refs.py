"""References from one step's parameters to an earlier step's outputs, found and filled in.

A reference is a mapping with `from` (a step name) and exactly one of:
  `artifact: <name>`   the step's artifact, as an input reference (`paperworks.v1.InputRef`)
  `model: true`        the step's job id, for a field naming a job whose announced model to load
  `job_id: true`       the step's job id
  `result: "a.b.0"`    a value of the step's result (dots walk mappings and list indices)
Anything else is an ordinary parameter value. Paths are the target service's field paths as its
validation names them (`model.source`, `images.2`), so a refusal points at the field.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

OUTPUTS = ("artifact", "model", "job_id", "result")


class RefError(ValueError):
    """A reference that cannot be followed; `path` is where it sits in the step's parameters."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path
        self.message = message


@dataclass(frozen=True)
class Ref:
    path: str  # where the reference sits in the step's params ("" = the params themselves)
    step: str  # the step it reads from
    output: str  # one of OUTPUTS
    name: str = ""  # the artifact name, or the result path


@dataclass
class Outputs:
    """What a finished step offers the steps after it."""

    job_id: str
    service: str
    result: dict = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> sha256
    models: list[str] = field(default_factory=list)  # artifact names it announced (MODEL_READY)


def is_ref(value: Any) -> bool:
    return isinstance(value, dict) and "from" in value


def parse_ref(value: dict, path: str) -> Ref:
    step = value.get("from")
    if not isinstance(step, str) or not step:
        raise RefError(path, "a reference's `from` names a step")
    outputs = [k for k in OUTPUTS if k in value]
    extra = sorted(set(value) - {"from", *OUTPUTS})
    if len(outputs) != 1 or extra:
        raise RefError(path, "a reference is {from: <step>} with exactly one of artifact, model, "
                       f"job_id and result (got {', '.join(sorted(set(value) - {'from'})) or 'none'})")
    output = outputs[0]
    arg = value[output]
    if output in ("model", "job_id"):
        if arg is not True:
            raise RefError(path, f"`{output}: true` is the only form")
        return Ref(path, step, output)
    if not isinstance(arg, str) or not arg or len(arg) > 256:
        raise RefError(path, f"`{output}` names a {'artifact' if output == 'artifact' else 'result field'} "
                       "(1..256 characters)")
    return Ref(path, step, output, arg)


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def find_refs(params: Any, path: str = "") -> list[Ref]:
    """Every reference in `params`, depth first, each with its field path."""
    if is_ref(params):
        return [parse_ref(params, path)]
    found: list[Ref] = []
    if isinstance(params, dict):
        for key, value in params.items():
            found += find_refs(value, _join(path, key))
    elif isinstance(params, list):
        for i, value in enumerate(params):
            found += find_refs(value, _join(path, i))
    return found


def result_value(result: Any, dotted: str, path: str) -> Any:
    value = result
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
        else:
            raise RefError(path, f"the result has no field {dotted!r} (stopped at {part!r})")
    return value


def _replace(params: Any, fill: Callable[[Ref], Any], path: str = "") -> Any:
    if is_ref(params):
        return fill(parse_ref(params, path))
    if isinstance(params, dict):
        return {k: _replace(v, fill, _join(path, k)) for k, v in params.items()}
    if isinstance(params, list):
        return [_replace(v, fill, _join(path, i)) for i, v in enumerate(params)]
    return params


def resolve(params: dict, outputs: dict[str, Outputs],
            artifact_input: Callable[[Ref, Outputs], dict]) -> dict:
    """`params` with every reference replaced by the value it names. `artifact_input(ref, outputs)`
    turns an artifact reference into an input reference (the same service reads a job's artifact;
    another service gets it another way); a missing output raises RefError naming the field."""

    def fill(ref: Ref):
        out = outputs.get(ref.step)
        if out is None:
            raise RefError(ref.path, f"step {ref.step!r} has not finished")
        if ref.output == "job_id":
            return out.job_id
        if ref.output == "model":
            if not out.models:
                raise RefError(ref.path, f"step {ref.step!r} ({out.job_id}) announced no model")
            return out.job_id
        if ref.output == "result":
            return result_value(out.result, ref.name, ref.path)
        if ref.name not in out.artifacts:
            known = ", ".join(sorted(out.artifacts)) or "none"
            raise RefError(ref.path, f"step {ref.step!r} ({out.job_id}) has no artifact {ref.name!r} "
                           f"(it has: {known})")
        return artifact_input(ref, out)

    return _replace(params, fill)


PENDING_SHA = "0" * 64


def placeholders(params: dict, producers: dict[str, str]) -> tuple[dict, set[str], set[str]]:
    """For validating a step before its inputs exist: (params with each reference replaced by a
    stand-in of the right shape, the paths of inputs and job ids to leave unchecked, the paths
    whose value is only known at run time). `producers` maps a step name to its service."""
    deferred: set[str] = set()
    unknown: set[str] = set()

    def fill(ref: Ref):
        service = producers.get(ref.step, "job")
        if ref.output in ("model", "job_id"):
            deferred.add(ref.path)
            return f"{service}-{'0' * 32}"
        if ref.output == "artifact":
            deferred.add(ref.path)
            return {"artifact": {"job_id": f"{service}-{'0' * 32}", "name": ref.name}}
        unknown.add(ref.path)
        return _UNKNOWN

    filled = _replace(params, fill)
    return _drop_unknown(filled), deferred, unknown


_UNKNOWN = object()


def _drop_unknown(value: Any) -> Any:
    """A result's value is unknown until the step ran: its field is left out (the default, or a
    'required' violation the caller ignores at that path)."""
    if isinstance(value, dict):
        return {k: _drop_unknown(v) for k, v in value.items() if v is not _UNKNOWN}
    if isinstance(value, list):
        return [None if v is _UNKNOWN else _drop_unknown(v) for v in value]
    return value
