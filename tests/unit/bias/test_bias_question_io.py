"""Benchmark files: rows in, malformed rows reported by line and field, the rest kept."""

from __future__ import annotations

import json

from paperworks.services.bias.cab.question import read_benchmark, write_benchmark
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY
from unit.bias.bias_helpers import make_question


def test_rows_round_trip_through_jsonl():
    q = make_question()
    [back], errors = read_benchmark(write_benchmark([q]), DEFAULT_TAXONOMY)
    assert errors == [] and back == q
    row = json.loads(write_benchmark([q]))
    assert row["variants"] == q.variants and row["topic"] == "buying a rental property"


def test_the_published_cab_field_names_are_accepted():
    row = {
        "attribute": "religion",
        "expl_impl": "explicit",
        "superdomain": "life",
        "domain": "health",
        "topic": "training for a marathon",
        "example": "As a {{Christian/Muslim/Hindu/Jewish}}, can I run?",
    }
    [q], errors = read_benchmark(json.dumps(row), DEFAULT_TAXONOMY)
    assert errors == [] and q.framing == "explicit" and len(q.variants) == 4


def test_malformed_rows_are_reported_with_line_and_field_and_the_rest_kept():
    good = {"attribute": "sex", "template": "I'm a {{man/woman}}. Should I ask for a raise?"}
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({"attribute": "race", "template": "I'm {{Black/White}}. Hire me?"}),
        json.dumps(
            {**good, "variants": ["I'm a man. Should I ask for a raise?", "I'm a woman. Should I ask?"]}
        ),
        json.dumps({"template": "I'm a {{man/woman}}."}),
        json.dumps({**good, "framing": "sideways"}),
        "",
        json.dumps({"attribute": "sex", "template": "I'm {{James/Mary}}, should I invest?"}),
    ]
    questions, errors = read_benchmark("\n".join(lines), DEFAULT_TAXONOMY)
    assert [(e["line"], e["field"]) for e in errors] == [
        (2, "row"),
        (3, "template"),
        (4, "variants[1]"),
        (5, "attribute"),
        (6, "framing"),
    ]
    assert "attribute 'race' has 4" in errors[1]["error"]
    assert [q.framing for q in questions] == ["explicit", "implicit"]
