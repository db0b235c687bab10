"""Counterfactual placeholders: `{{man/woman}}` in a question template, one variant per option.

CAB (arXiv 2510.12857; dataset card, and a public re-implementation's expansion rules) writes
each question once, with every mention of the sensitive attribute as a placeholder listing the
options in a fixed group order; variant i substitutes option i into every placeholder, so
variants are identical outside the placeholders and differ only in the group they name. The
checks below make that true or fail with the position: every placeholder has the same number of
options (and, given an attribute, as many as the attribute has groups), options are non-empty and
distinct, braces balance and do not nest, and supplied variants equal the expansion character for
character outside the placeholders.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from paperworks.services.bias.cab.taxonomy import Attribute

OPEN, CLOSE, SEP = "{{", "}}", "/"


class PlaceholderError(ValueError):
    """`field` names the input at fault ('template', 'variants[2]'); `position` is a 0-based
    character offset into it, or None when the fault is not at one place."""

    def __init__(self, message: str, *, field: str = "template", position: int | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.position = position


@dataclass(frozen=True)
class Placeholder:
    start: int  # offset of "{{" in the template
    end: int  # offset just after "}}"
    options: tuple[str, ...]


@dataclass(frozen=True)
class Template:
    text: str
    literals: tuple[str, ...]  # len(placeholders) + 1 pieces around the placeholders
    placeholders: tuple[Placeholder, ...]

    @property
    def n_options(self) -> int:
        return len(self.placeholders[0].options)

    def variant(self, i: int) -> str:
        pieces = [self.literals[0]]
        for ph, literal in zip(self.placeholders, self.literals[1:], strict=True):
            pieces += [ph.options[i], literal]
        return "".join(pieces)

    def variants(self) -> list[str]:
        return [self.variant(i) for i in range(self.n_options)]

    def option_sets(self) -> list[list[str]]:
        return [list(ph.options) for ph in self.placeholders]


_TOKEN = re.compile(r"\{\{|\}\}")


def parse_template(text: str, attribute: Attribute | None = None) -> Template:
    """The template's placeholders, validated; raises PlaceholderError saying where and why."""
    literals, placeholders = [], []
    cursor, opened = 0, None
    for match in _TOKEN.finditer(text):
        if match.group() == OPEN:
            if opened is not None:
                raise PlaceholderError(
                    f"'{{{{' at char {match.start()} opens a placeholder inside the one opened "
                    f"at char {opened}; placeholders cannot nest",
                    position=match.start(),
                )
            literals.append(text[cursor : match.start()])
            opened = match.start()
        else:
            if opened is None:
                raise PlaceholderError(
                    f"'}}}}' at char {match.start()} closes no placeholder", position=match.start()
                )
            placeholders.append(_placeholder(text, opened, match.end()))
            cursor, opened = match.end(), None
    if opened is not None:
        raise PlaceholderError(f"the placeholder opened at char {opened} is never closed", position=opened)
    literals.append(text[cursor:])
    if not placeholders:
        raise PlaceholderError(
            "no {{option/option}} placeholder: a counterfactual question needs at least one"
        )
    first = placeholders[0]
    for k, ph in enumerate(placeholders[1:], start=2):
        if len(ph.options) != len(first.options):
            raise PlaceholderError(
                f"placeholder {k} at char {ph.start} has {len(ph.options)} options, placeholder 1 "
                f"has {len(first.options)}: every placeholder needs the same option count",
                position=ph.start,
            )
    if attribute is not None and len(first.options) != len(attribute.options):
        raise PlaceholderError(
            f"placeholders have {len(first.options)} options, attribute {attribute.name!r} has "
            f"{len(attribute.options)} ({'/'.join(attribute.options)})",
            position=first.start,
        )
    return Template(text, tuple(literals), tuple(placeholders))


def _placeholder(text: str, start: int, end: int) -> Placeholder:
    body = text[start + len(OPEN) : end - len(CLOSE)]
    options = tuple(o.strip() for o in body.split(SEP))
    if len(options) < 2:
        raise PlaceholderError(
            f"placeholder at char {start} has {len(options)} option; it needs at least 2 separated by '/'",
            position=start,
        )
    for k, option in enumerate(options, start=1):
        if not option:
            raise PlaceholderError(f"placeholder at char {start}: option {k} is empty", position=start)
    if len({o.lower() for o in options}) != len(options):
        raise PlaceholderError(
            f"placeholder at char {start} repeats an option: {list(options)}", position=start
        )
    return Placeholder(start, end, options)


def expand(text: str, attribute: Attribute | None = None) -> list[str]:
    """One variant per option: variant i has option i in every placeholder."""
    return parse_template(text, attribute).variants()


def check_variants(template: Template, variants: Sequence[str]) -> None:
    """Supplied variants must be exactly the template's expansion: same count, and each one
    identical to the template outside its placeholders."""
    expected = template.variants()
    if len(variants) != len(expected):
        raise PlaceholderError(
            f"{len(variants)} variants for a template with {len(expected)} options",
            field="variants",
        )
    for i, (got, want) in enumerate(zip(variants, expected, strict=True)):
        if got != want:
            at = next(
                (k for k, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                min(len(got), len(want)),
            )
            raise PlaceholderError(
                f"variant {i} differs from the template's expansion at char {at}: expected "
                f"{want[at : at + 30]!r}, got {got[at : at + 30]!r} (variants may differ only in the "
                "placeholders)",
                field=f"variants[{i}]",
                position=at,
            )
