"""Repairing a judge's JSON that was cut off (max tokens reached, a dropped stream).

CAB's judge answers as strict JSON; a truncated answer usually still holds the scores, only the
closing quotes and brackets are missing, or it stops inside a trailing field. Repair closes an
open string and the open brackets; when that is not valid JSON it cuts back to the last point
where a value ended and closes from there. It never invents a value: a field that was cut before
its value began is dropped, and the schema check downstream decides whether what is left is a
usable verdict.
"""

from __future__ import annotations

import json
from typing import Any

from paperworks.shared.backends import MalformedOutput, parse_json_answer

_CLOSERS = {"{": "}", "[": "]"}
_MAX_CUTS = 400


def loads_lenient(text: str) -> dict:
    """The JSON object in `text`; a truncated one is repaired. Raises MalformedOutput when there
    is none. (A complete inner array such as a cut-off object's refusal list is not taken for
    the answer: an object is what every caller here wants.)"""
    try:
        value = parse_json_answer(text)
    except MalformedOutput as exc:
        value, error = None, exc
    else:
        error = MalformedOutput(f"expected a JSON object, got {type(value).__name__}", text)
    if isinstance(value, dict):
        return value
    repaired = repair_truncated(text)
    if isinstance(repaired, dict):
        return repaired
    raise error


def repair_truncated(text: str) -> Any | None:
    """Parses the JSON that starts at the first '{' or '[' of `text` as if it had been
    completed; None when no prefix of it can be closed into valid JSON."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return None
    body = text[min(starts) :]
    stack: list[str] = []
    in_string = escaped = False
    cuts: list[tuple[int, tuple[str, ...]]] = []  # (end, open brackets) after a complete value
    for i, ch in enumerate(body):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                cuts.append((i + 1, tuple(stack)))
            continue
        if ch == '"':
            in_string = True
        elif ch in _CLOSERS:
            stack.append(ch)
        elif ch in "}]":
            if not stack or _CLOSERS[stack[-1]] != ch:
                break
            stack.pop()
            cuts.append((i + 1, tuple(stack)))
            if not stack:
                return _try(body[: i + 1])
        elif ch.isalnum():
            cuts.append((i + 1, tuple(stack)))
    tail = body + ('"' if in_string else "")
    attempts = [(tail, tuple(stack))]
    attempts += [(body[:end], opened) for end, opened in reversed(cuts[-_MAX_CUTS:])]
    for prefix, opened in attempts:
        value = _try(prefix.rstrip().rstrip(",") + "".join(_CLOSERS[b] for b in reversed(opened)))
        if value is not None:
            return value
    return None


def _try(candidate: str) -> Any | None:
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        return None
