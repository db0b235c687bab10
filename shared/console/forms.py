"""A job kind's submit form, generated from the JSON Schema DescribeService returns.

Top-level parameters become inputs (integer/number/text/select/checkbox); nested objects and
lists are JSON text areas. The form only converts text to JSON types: the server validates
(its INVALID_ARGUMENT field violations are shown next to the field they name).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from paperworks.shared.sdk.describe import example

LIMITS = (("minimum", "min"), ("maximum", "max"))


@dataclass
class FormField:
    name: str
    label: str
    widget: str  # "integer" | "number" | "text" | "select" | "checkbox" | "json"
    required: bool = False
    default: object = None
    description: str = ""
    options: list = field(default_factory=list)
    attrs: dict = field(default_factory=dict)  # min / max hints for number inputs

    @property
    def initial(self) -> str:
        if self.default is None:
            return ""
        if self.widget == "json":
            return json.dumps(self.default)
        return str(self.default).lower() if isinstance(self.default, bool) else str(self.default)


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema.get("$defs", {}).get(node["$ref"].rsplit("/", 1)[1], {})
    return node


def _alternatives(schema: dict, node: dict) -> list[dict]:
    node = _resolve(schema, node)
    alts = node.get("anyOf") or node.get("oneOf")
    if not alts:
        return [node]
    return [_resolve(schema, a) for a in alts if a.get("type") != "null"] or [{}]


def fields_of(schema: dict) -> list[FormField]:
    """One FormField per top-level parameter, in the schema's order."""
    root = _resolve(schema, schema)
    required = set(root.get("required", ()))
    out = []
    for name, node in root.get("properties", {}).items():
        alts = _alternatives(schema, node)
        alt = alts[0] if len(alts) == 1 else {}
        kind = alt.get("type")
        widget, options = "json", []
        if "enum" in alt:
            widget, options = "select", list(alt["enum"])
        elif kind == "integer":
            widget = "integer"
        elif kind == "number":
            widget = "number"
        elif kind == "boolean":
            widget = "checkbox"
        elif kind == "string":
            widget = "text"
        attrs = {html: alt[key] for key, html in LIMITS if key in alt and widget in ("integer", "number")}
        description = node.get("description") or _resolve(schema, node).get("description") or ""
        default = node.get("default")
        if default is None and name in required and widget == "json":
            default = example(schema, node)  # a value that validates, to edit (as `describe` prints)
        out.append(FormField(
            name=name, label=node.get("title") or name.replace("_", " "), widget=widget,
            required=name in required, default=default,
            description=description.splitlines()[0] if description else "", options=options, attrs=attrs,
        ))
    return out


def parse(fields: list[FormField], form) -> tuple[dict, dict[str, str], dict[str, str]]:
    """(params, errors by field, the raw values to show again). Empty optional fields are left
    out so the server applies its default; text that is not the field's type is an error here."""
    params, errors, raw = {}, {}, {}
    for f in fields:
        if f.widget == "checkbox":
            value = form.get(f.name) is not None
            raw[f.name] = "true" if value else "false"
            params[f.name] = value
            continue
        text = str(form.get(f.name, "")).strip()
        raw[f.name] = text
        if not text:
            if f.required:
                errors[f.name] = "required"
            continue
        try:
            if f.widget == "integer":
                params[f.name] = int(text)
            elif f.widget == "number":
                params[f.name] = float(text)
            elif f.widget == "json":
                params[f.name] = json.loads(text)
            elif f.widget == "select":
                match = [o for o in f.options if str(o) == text]
                if not match:
                    raise ValueError(f"one of {', '.join(map(str, f.options))}")
                params[f.name] = match[0]
            else:
                params[f.name] = text
        except ValueError as exc:
            expected = {"integer": "a whole number", "number": "a number", "json": "JSON"}.get(f.widget)
            errors[f.name] = f"must be {expected}" if expected else f"must be {exc}"
    return params, errors, raw


def field_errors(violations: list[tuple[str, str]], names: list[str]) -> tuple[dict[str, str], list[str]]:
    """Server violations split into (errors on a form field, the rest). A violation's field path
    (`steps`, `params.steps`, `source.path`) is placed on the first form field it names."""
    placed: dict[str, str] = {}
    rest = []
    for path, message in violations:
        parts = [p for p in path.replace("[", ".").replace("]", "").split(".") if p]
        target = next((p for p in parts if p in names), None)
        if target is None:
            rest.append(f"{path}: {message}")
        else:
            inner = parts[parts.index(target) + 1:]
            text = f"{'.'.join(inner)}: {message}" if inner else message
            placed[target] = f"{placed[target]}; {text}" if target in placed else text
    return placed, rest
