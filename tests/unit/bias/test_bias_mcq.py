"""MCQ data, the two renderers, permutations, the letter parser and the text matcher."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from paperworks.services.bias.data import read_mcq_jsonl
from paperworks.services.bias.mcq.match import match_text, normalize, parse_letter
from paperworks.services.bias.mcq.nonsenseqa import MCQItem, nonsense_qa
from paperworks.services.bias.mcq.render import permutations, render_prompt

ITEM = MCQItem("Which is a fruit?", ("carrot", "apple", "leek", "kale"), 1, "q1")


def test_rows_accept_index_letter_or_text_and_report_malformed_lines():
    rows = [
        {"question": "Q1?", "options": ["a", "b"], "answer": 1},
        {"question": "Q2?", "options": ["a", "b", "c"], "answer": "C"},
        {"question": "Q3?", "options": ["x", "y"], "answer": "y"},
        {"question": "", "options": ["a", "b"], "answer": 0},
        {"question": "Q5?", "options": ["a"], "answer": 0},
        {"question": "Q6?", "options": ["a", "A"], "answer": 0},
        {"question": "Q7?", "options": ["a", "b"], "answer": 5},
        {"question": "Q8?", "options": ["a", "b"], "answer": "maybe"},
    ]
    text = "\n".join([json.dumps(r) for r in rows[:3]] + ["[oops"] + [json.dumps(r) for r in rows[3:]])
    items, errors = read_mcq_jsonl(text)
    assert [i.answer for i in items] == [1, 2, 1]
    assert [(e["line"], e["field"]) for e in errors] == [
        (4, "row"),
        (5, "question"),
        (6, "options"),
        (7, "options"),
        (8, "answer"),
        (9, "answer"),
    ]


def test_permuting_moves_the_gold_with_its_text():
    shown = ITEM.permuted((3, 1, 0, 2))
    assert (
        shown.options == ("kale", "apple", "carrot", "leek") and shown.gold == "apple" and shown.answer == 1
    )
    assert ITEM.with_answer_at(0).options[0] == "apple" and ITEM.with_answer_at(0).answer == 0


def test_all_permutations_up_to_four_options_else_rotations_then_random():
    assert len(permutations(4, 24)) == 24 and permutations(4, 24)[0] == (0, 1, 2, 3)
    five = permutations(5, 12, seed=1)
    assert five[:5] == [tuple((i + r) % 5 for i in range(5)) for r in range(5)]
    assert len(five) == len(set(five)) == 12
    assert len(permutations(3, 100)) == 6


def test_standard_renderer_letters_options_and_demos_answer_with_letters():
    prompt = render_prompt("standard", ITEM, [ITEM.with_answer_at(2)])
    assert "A. carrot\nB. apple" in prompt and "Answer: C\n" in prompt and prompt.endswith("Answer:")


def test_md_renderer_dashes_every_option_and_demos_answer_with_text():
    prompt = render_prompt("md", ITEM, [ITEM])
    assert "- carrot\n- apple\n- leek\n- kale" in prompt and "Answer: apple\n" in prompt
    assert "A." not in prompt and prompt.endswith("Answer:")


@pytest.mark.parametrize(
    "response, index",
    [
        ("B", 1),
        (" B\n", 1),
        ("Answer: C.", 2),
        ("(d)", 3),
        ("I think A is right", 0),
        ("E", None),
        ("", None),
    ],
)
def test_letters_are_parsed(response, index):
    assert parse_letter(response, 4).index == index


def test_exact_match_short_circuits_the_embedding():
    def no_embedder():
        raise AssertionError("exact answers must not be embedded")

    match = match_text("- Apple.", ITEM.options, no_embedder)
    assert (match.index, match.method, match.margin) == (1, "exact", None)
    assert normalize("  B) apple!\nmore") == "apple"
    assert match_text("   ", ITEM.options, no_embedder).method == "none"


def test_free_text_is_matched_by_minilm_with_its_margin(embedder):
    match = match_text("an apple, clearly", ITEM.options, lambda: embedder)
    assert match.index == 1 and match.method == "similarity" and match.margin > 0


def test_nonsenseqa_spreads_golds_evenly_over_positions():
    items = nonsense_qa(40, n_options=4, seed=0)
    assert Counter(i.answer for i in items) == {0: 10, 1: 10, 2: 10, 3: 10}
    assert all(len(set(i.options)) == 4 and i.question.endswith("?") for i in items)
    assert nonsense_qa(40, seed=0) == items and nonsense_qa(40, seed=1) != items
