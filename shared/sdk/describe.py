"""`paperworks describe`: a job kind's parameters or an RPC's request, as text a person reads.

Kinds are rendered from the JSON Schema DescribeService returns (the pydantic model the server
validates Submit<Kind> with); sync RPCs from the request message's descriptor in the stubs.
"""
from __future__ import annotations

import json
import shlex

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from paperworks.shared.sdk import discovery

CONSTRAINTS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
               ("minLength", "min length"), ("maxLength", "max length"), ("minItems", "min items"),
               ("maxItems", "max items"))


def service_text(d) -> str:
    lines = [f"{d.service}: {d.description}", "", "job kinds (paperworks describe SERVICE KIND):"]
    lines += [f"  {k.name:22s} {k.description}" for k in d.kinds]
    lines += ["", "sync RPCs (paperworks describe SERVICE RPC; paperworks call SERVICE RPC):"]
    lines += [f"  {r.name:22s} {r.description.splitlines()[0] if r.description else ''}" for r in d.rpcs]
    return "\n".join(lines)


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _options(schema: dict, node: dict) -> list[dict]:
    """The alternatives of a field (`X | None` is X, unset allowed)."""
    node = _resolve(schema, node)
    alts = node.get("anyOf") or node.get("oneOf")
    if not alts:
        return [node]
    return [_resolve(schema, a) for a in alts if a.get("type") != "null"]


def _type(schema: dict, node: dict) -> str:
    names = []
    for alt in _options(schema, node):
        if "enum" in alt:
            names.append("one of " + ", ".join(json.dumps(v) for v in alt["enum"]))
        elif "const" in alt:
            names.append(json.dumps(alt["const"]))
        elif alt.get("type") == "array":
            names.append(f"list of {_type(schema, alt.get('items', {}))}")
        elif alt.get("type") == "object" or "properties" in alt:
            names.append(alt.get("title", "object"))
        else:
            names.append(alt.get("type", "any"))
    return " or ".join(names)


def _limits(schema: dict, node: dict) -> str:
    found = []
    for alt in _options(schema, node):
        found += [f"{word} {alt[key]}" for key, word in CONSTRAINTS if key in alt]
    return ", ".join(found)


def _fields(schema: dict, node: dict, indent: str, lines: list[str], depth: int = 0) -> None:
    node = _resolve(schema, node)
    required = set(node.get("required", ()))
    for name, field in node.get("properties", {}).items():
        parts = [_type(schema, field)]
        if name in required:
            parts.append("required")
        elif "default" in field:
            parts.append(f"default {json.dumps(field['default'])}")
        limits = _limits(schema, field)
        if limits:
            parts.append(limits)
        lines.append(f"{indent}{name}: {'; '.join(parts)}")
        described = field.get("description") or _resolve(schema, field).get("description")
        if described and depth == 0:
            lines.append(f"{indent}    {described.splitlines()[0]}")
        nested = [a for a in _options(schema, field) if "properties" in a]
        if nested and depth < 4:
            _fields(schema, nested[0], indent + "    ", lines, depth + 1)


def example(schema: dict, node: dict):
    """A value that validates: defaults and required fields, filled from the schema."""
    options = _options(schema, node)
    alt = options[0] if options else {}
    if "default" in node and node["default"] is not None:
        return node["default"]
    if "enum" in alt:
        return alt["enum"][0]
    if "const" in alt:
        return alt["const"]
    kind = alt.get("type")
    if "properties" in alt:
        required = alt.get("required", ())
        filled = {name: example(schema, alt["properties"][name]) for name in required}
        if not required:  # one-of-style objects (`path` or `synthetic`): take the nested choice
            nested = [name for name, f in alt["properties"].items()
                      if f.get("default", 0) is None and any("properties" in o for o in _options(schema, f))]
            filled.update({name: example(schema, {**alt["properties"][name], "default": None})
                           for name in nested[:1]})
        return filled
    if kind == "integer":
        return int(alt.get("minimum", alt.get("exclusiveMinimum", 0) + 1))
    if kind == "number":
        return alt.get("minimum", 1.0)
    if kind == "array":
        return [example(schema, alt.get("items", {}))] if alt.get("minItems") else []
    if kind == "boolean":
        return False
    return "<text>"


def kind_text(service: str, kind) -> str:
    schema = json.loads(kind.params_schema_json)
    lines = [f"{service} {kind.name} ({kind.submit_rpc}): {kind.description}", "", "parameters:"]
    _fields(schema, schema, "  ", lines)
    sets = [f"--set {shlex.quote(f'{name}={value if isinstance(value, str) else json.dumps(value)}')}"
            for name, value in example(schema, schema).items()]
    if kind.result_legend:
        legend = sorted(kind.result_legend.items())
        lines += ["", "result:"] + [f"  {key:24s} {meaning}" for key, meaning in legend]
    lines += ["", "example:", f"  paperworks submit {service} {kind.name} {' '.join(sets)} --watch".rstrip()]
    return "\n".join(lines)


def _message_fields(message: Descriptor, indent: str, lines: list[str], depth: int = 0) -> None:
    for field in message.fields:
        if field.message_type is not None:
            kind = field.message_type.full_name
        elif field.enum_type is not None:
            kind = "one of " + ", ".join(v.name for v in field.enum_type.values)
        else:
            kind = {FieldDescriptor.TYPE_STRING: "string", FieldDescriptor.TYPE_BOOL: "boolean",
                    FieldDescriptor.TYPE_BYTES: "bytes (base64)", FieldDescriptor.TYPE_DOUBLE: "number",
                    FieldDescriptor.TYPE_FLOAT: "number"}.get(field.type, "integer")
        repeated = "list of " if field.is_repeated else ""
        unset = " (optional: unset means the default)" if field.has_presence and field.message_type is None \
            else ""
        if kind == "paperworks.v1.Tensor":
            kind = "tensor: a .npy file (@path) or nested lists"
        lines.append(f"{indent}{field.name}: {repeated}{kind}{unset}")
        if field.message_type is not None and depth < 3 and not kind.startswith(("tensor", "google.")):
            _message_fields(field.message_type, indent + "    ", lines, depth + 1)


def rpc_text(service: str, rpc) -> str:
    method = discovery.rpc_method(service, rpc.name)
    stream = " (streams its replies)" if rpc.server_streaming else ""
    lines = [f"{service} {rpc.name}{stream}: {rpc.description}".rstrip(), "", "request fields:"]
    _message_fields(method.input_type, "  ", lines)
    lines += ["", f"call: paperworks call {service} {rpc.name} --set FIELD=VALUE ... [--out DIR]"]
    return "\n".join(lines)
