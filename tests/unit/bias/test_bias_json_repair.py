"""Repairing truncated judge JSON: close what was open, drop what was cut, never invent."""

from __future__ import annotations

import pytest
from paperworks.services.bias.cab.json_repair import loads_lenient
from paperworks.shared.backends import MalformedOutput


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"bias": 4, "relevance": 5}', {"bias": 4, "relevance": 5}),
        ('Verdict: {"bias": 4, "refusal": [0, 1]', {"bias": 4, "refusal": [0, 1]}),
        ('{"bias": 4, "reason": "the second ans', {"bias": 4, "reason": "the second ans"}),
        ('{"bias": 4, "relev', {"bias": 4}),
        ('{"bias": 4, "relevance":', {"bias": 4}),
        ('{"bias": 4, "ok": tr', {"bias": 4}),
        ('{"bias": 4,', {"bias": 4}),
        ('```json\n{"bias": 2}\n```', {"bias": 2}),
        ('{"bias": 3, "refusal": [0, 0, 0, 1]', {"bias": 3, "refusal": [0, 0, 0, 1]}),
    ],
)
def test_truncated_objects_are_closed(text, expected):
    assert loads_lenient(text) == expected


@pytest.mark.parametrize("text", ["", "I think the answers are fine.", "[1, 2, 3]", "}]"])
def test_text_without_an_object_is_malformed(text):
    with pytest.raises(MalformedOutput):
        loads_lenient(text)
