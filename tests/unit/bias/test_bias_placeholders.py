"""Placeholder expansion: one variant per option, identical outside the placeholders, and a
precise error (field and character) for every malformed template."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from paperworks.services.bias.cab.placeholders import PlaceholderError, check_variants, expand, parse_template
from paperworks.services.bias.cab.taxonomy import DEFAULT_ATTRIBUTES


def test_variant_i_takes_option_i_in_every_placeholder():
    text = "As a {{man/woman}}, should my {{wife/husband}} and I buy a house?"
    assert expand(text) == [
        "As a man, should my wife and I buy a house?",
        "As a woman, should my husband and I buy a house?",
    ]


def test_options_are_trimmed_and_may_hold_spaces():
    assert expand("I {{go to church / pray at the mosque}}.") == ["I go to church.", "I pray at the mosque."]


@pytest.mark.parametrize(
    "text, position, words",
    [
        ("I am {{man/woman", 5, "never closed"),
        ("I am man/woman}} ok", 14, "closes no placeholder"),
        ("{{a/{{b/c}}}}", 4, "cannot nest"),
        ("I am {{man//woman}}", 5, "option 2 is empty"),
        ("I am {{man}}", 5, "at least 2"),
        ("I am {{man/Man}}", 5, "repeats an option"),
        ("A {{a/b}} and {{c/d/e}}", 14, "placeholder 2 at char 14 has 3 options"),
        ("no placeholder here", None, "at least one"),
    ],
)
def test_malformed_templates_say_where_and_why(text, position, words):
    with pytest.raises(PlaceholderError) as exc:
        parse_template(text)
    assert exc.value.field == "template" and exc.value.position == position
    assert words in exc.value.message


def test_option_count_must_match_the_attribute():
    with pytest.raises(PlaceholderError, match="attribute 'race' has 4"):
        parse_template("I am {{Black/White}}.", DEFAULT_ATTRIBUTES["race"])


def test_supplied_variants_must_equal_the_expansion_outside_placeholders():
    template = parse_template("I am a {{man/woman}} and I cook.")
    check_variants(template, ["I am a man and I cook.", "I am a woman and I cook."])
    with pytest.raises(PlaceholderError) as exc:
        check_variants(template, ["I am a man and I cook.", "I am a woman and I bake."])
    assert exc.value.field == "variants[1]" and exc.value.position == len("I am a woman and I ")
    with pytest.raises(PlaceholderError, match="3 variants"):
        check_variants(template, ["a", "b", "c"])


literal = st.text(
    alphabet=st.characters(blacklist_characters="{}/", blacklist_categories=("Cs",)), max_size=12
)
option = st.text(alphabet="abcdefgh ", min_size=1, max_size=6).map(str.strip).filter(bool)


@given(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.lists(literal, min_size=2, max_size=4),
            st.lists(st.lists(option, min_size=n, max_size=n, unique_by=str.lower), min_size=3, max_size=3),
        )
    )
)
def test_variants_differ_only_inside_placeholders(case):
    literals, option_sets = case
    option_sets = option_sets[: len(literals) - 1]
    text = literals[0] + "".join(
        "{{" + "/".join(o) + "}}" + lit for o, lit in zip(option_sets, literals[1:], strict=False)
    )
    variants = expand(text)
    assert len(variants) == len(option_sets[0])
    for i, variant in enumerate(variants):
        assert variant == literals[0] + "".join(
            o[i] + lit for o, lit in zip(option_sets, literals[1:], strict=False)
        )
