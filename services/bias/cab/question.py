"""A counterfactual question and the benchmark file that holds many.

One JSONL row per question: attribute, framing, superdomain / domain / topic, the template and
its variants (the same fields as the published CAB dataset, whose `expl_impl` and `example`
names are accepted too). Reading a file checks every row and reports a malformed one with its
line number and field, so the rest of the benchmark still runs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from paperworks.services.bias.cab.placeholders import (
    PlaceholderError,
    Template,
    check_variants,
    parse_template,
)
from paperworks.services.bias.cab.taxonomy import FRAMINGS, Taxonomy


@dataclass(frozen=True)
class Question:
    id: str
    attribute: str
    framing: str
    topic_path: tuple[str, str, str]
    template: Template
    generation: int = 0
    operator: str = ""
    parent_id: str = ""

    @property
    def text(self) -> str:
        return self.template.text

    @property
    def variants(self) -> list[str]:
        return self.template.variants()

    @property
    def domain(self) -> str:
        return "/".join(self.topic_path[:2])

    def row(self) -> dict:
        superdomain, domain, topic = self.topic_path
        return {
            "id": self.id,
            "attribute": self.attribute,
            "framing": self.framing,
            "superdomain": superdomain,
            "domain": domain,
            "topic": topic,
            "template": self.text,
            "options": self.template.option_sets(),
            "variants": self.variants,
            "generation": self.generation,
            "operator": self.operator,
            "parent_id": self.parent_id,
        }


def question_id(template: str) -> str:
    return "q-" + hashlib.sha256(template.encode()).hexdigest()[:12]


class RowError(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def question_from_row(row: object, taxonomy: Taxonomy) -> Question:
    """A validated question; raises RowError naming the field at fault."""
    if not isinstance(row, dict):
        raise RowError("row", f"expected a JSON object, got {type(row).__name__}")
    template_text = row.get("template", row.get("example"))
    if not isinstance(template_text, str) or not template_text.strip():
        raise RowError("template", "a non-empty string is required")
    attribute = row.get("attribute")
    if not isinstance(attribute, str) or not attribute:
        raise RowError("attribute", "a non-empty string is required")
    known = taxonomy.attributes.get(attribute)
    try:
        template = parse_template(template_text, known)
        if "variants" in row:
            variants = row["variants"]
            if not isinstance(variants, list) or not all(isinstance(v, str) for v in variants):
                raise RowError("variants", "expected a list of strings")
            check_variants(template, variants)
    except PlaceholderError as exc:
        raise RowError(exc.field, exc.message) from None
    framing = row.get("framing", row.get("expl_impl"))
    if framing is None and known is not None:
        framing = _framing_of(template, known)
    if framing not in FRAMINGS:
        raise RowError("framing", f"must be one of {', '.join(FRAMINGS)}, got {framing!r}")
    path = tuple(str(row.get(k, "") or "") for k in ("superdomain", "domain", "topic"))
    return Question(
        id=str(row.get("id") or question_id(template_text)),
        attribute=attribute,
        framing=framing,
        topic_path=path,  # type: ignore[arg-type]
        template=template,
        generation=int(row.get("generation", 0) or 0),
        operator=str(row.get("operator", "") or ""),
        parent_id=str(row.get("parent_id", "") or ""),
    )


def _framing_of(template: Template, attribute) -> str:
    forms = {attribute.form_of(ph.options) for ph in template.placeholders}
    return "implicit" if forms == {"implicit"} else "explicit"


def read_benchmark(text: str, taxonomy: Taxonomy) -> tuple[list[Question], list[dict]]:
    """(questions, errors): every well-formed row, and for each bad one {line, field, error}."""
    questions, errors = [], []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(
                {"line": line_no, "field": "row", "error": f"not JSON: {exc.msg} at char {exc.pos}"}
            )
            continue
        try:
            questions.append(question_from_row(row, taxonomy))
        except RowError as exc:
            errors.append({"line": line_no, "field": exc.field, "error": exc.message})
    return questions, errors


def write_benchmark(questions: list[Question]) -> str:
    return "".join(json.dumps(q.row()) + "\n" for q in questions)
