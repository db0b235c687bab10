"""The generator side of the search: prompts carry the task, answers are checked, the built-in
generator's operators change what they name and nothing else."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest
from paperworks.services.bias.builtin.template_generator import OPERATORS, TemplateGenerator
from paperworks.services.bias.cab.generator import GeneratorTask, Rejected, accept_template, write_question
from paperworks.services.bias.cab.taxonomy import DEFAULT_TAXONOMY
from unit.bias.bias_helpers import ScriptedModel

GEN = TemplateGenerator(DEFAULT_TAXONOMY)
SEX = DEFAULT_TAXONOMY.attributes["sex"]
TOPIC = DEFAULT_TAXONOMY.topics("sex")[0]


@pytest.mark.parametrize("attribute", list(DEFAULT_TAXONOMY.attributes))
@pytest.mark.parametrize("framing", ["explicit", "implicit"])
def test_rendered_questions_parse_back_to_their_slots(attribute, framing):
    rng = random.Random(0)
    attr = DEFAULT_TAXONOMY.attributes[attribute]
    for topic in DEFAULT_TAXONOMY.topics(attribute)[:5]:
        slots = GEN.fresh(rng, attr, framing, topic.topic)
        assert GEN.parse(GEN.render(attr, slots), attr) == slots


def test_each_operator_changes_its_own_slot():
    rng = random.Random(1)
    parent = replace(GEN.fresh(rng, SEX, "explicit", TOPIC.topic), stakes=0, style=0)
    changed = {
        op: {
            k
            for k, v in vars(GEN.mutate(rng, SEX, parent, op, "buying cryptocurrency")).items()
            if v != getattr(parent, k)
        }
        for op in OPERATORS
    }
    assert changed["change_decision"] == {"decision"}
    assert changed["raise_stakes"] == {"stakes"}
    assert changed["more_natural"] == {"style"}
    assert changed["sibling_topic"] == {"topic"}
    assert "framing" in changed["explicit_to_implicit"]
    assert "context" in changed["recontextualize"]


def test_the_builtin_generator_answers_the_prompt_it_is_sent():
    task = GeneratorTask(SEX, "implicit", TOPIC)
    template = write_question(GEN, task, seed=3, temperature=1.0)
    assert TOPIC.topic in template.text and SEX.form_of(template.placeholders[0].options) == "implicit"
    child = write_question(
        GEN, replace(task, operator="raise_stakes", parent=template.text), seed=4, temperature=1.0
    )
    assert child.text != template.text and ("savings" in child.text or "career depends" in child.text)


@pytest.mark.parametrize(
    "reply, words",
    [
        ("Here you go: I'm a {{man/woman}}.", "not JSON"),
        (json.dumps({"question": "x"}), '{"template"'),
        (json.dumps({"template": "I'm a {{man/woman/child}}."}), "bad placeholders"),
        (json.dumps({"template": "My name is {{James/Mary}}."}), "must name the groups"),
    ],
)
def test_unusable_generator_answers_are_rejected_with_a_reason(reply, words):
    with pytest.raises(Rejected, match=words):
        write_question(ScriptedModel(reply), GeneratorTask(SEX, "explicit", TOPIC), seed=0, temperature=1.0)


def test_an_implicit_question_may_not_name_the_groups():
    with pytest.raises(Rejected, match="must not name"):
        accept_template("I'm a {{man/woman}}.", GeneratorTask(SEX, "implicit", TOPIC))
