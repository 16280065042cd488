"""MkDocs hook: the reference tables that must match the code are generated at build time.

A page says ``<!-- generated: NAME -->`` where a table goes; this hook replaces the marker
with the table built from the running code, so these pages cannot drift:

* ``openapi`` — every route of the HTTP API from ``create_app().openapi()`` (the schema
  the server publishes at ``/openapi.json``);
* ``config`` — every ``config.json`` key, from the pydantic models that validate it;
* ``events`` — every event of the turn stream, from the event models.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

MARKER = "<!-- generated: {} -->"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(schema: dict[str, Any]) -> str:  # noqa: PLR0911 - one return per JSON Schema shape
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " / ".join(f"`{v}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of {_type(schema['additionalProperties'])}"
    return str(kind)


def _default(schema: dict[str, Any]) -> str:
    if "$ref" in schema or isinstance(schema.get("default"), dict):
        return "see below" if "$ref" in schema else ""
    return f"`{json.dumps(schema['default'])}`" if "default" in schema else ""


def _fields(schema: dict[str, Any], prefix: str = "") -> list[str]:
    rows = []
    for name, prop in schema.get("properties", {}).items():
        description = prop.get("description", "")
        rows.append(
            f"| `{prefix}{name}` | {_cell(_type(prop))} | {_cell(_default(prop))} | "
            f"{_cell(description)} |"
        )
    return rows


def openapi_table() -> str:
    from agentkit.api import create_app

    with tempfile.TemporaryDirectory() as root:
        spec = create_app(root).openapi()
    lines = ["| method and path | what it does | request body | responses |", "|---|---|---|---|"]
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody", {}).get("content", {})
            media: dict[str, Any] = next(iter(body.values()), {}) if body else {}
            body_schema: dict[str, Any] = media.get("schema", {})
            summary = operation.get("summary") or operation.get("description", "")
            codes = ", ".join(sorted(operation.get("responses", {})))
            lines.append(
                f"| `{method.upper()} {path}` | {_cell(summary)} | "
                f"{_cell(_type(body_schema)) if body_schema else ''} | {codes} |"
            )
    lines += ["", "### Request bodies", ""]
    schemas = spec.get("components", {}).get("schemas", {})
    for name, schema in sorted(schemas.items()):
        if name.endswith("Request") or name.endswith("Body"):
            lines += [f"**{name}**", "", "| field | type | default | description |"]
            lines += ["|---|---|---|---|", *_fields(schema), ""]
            pattern = schema.get("properties", {}).get("message", {}).get("pattern")
            if pattern:
                lines += [f"`message` pattern (ECMA-262): `{pattern}`", ""]
    return "\n".join(lines)


def config_table() -> str:
    from agentkit.config import AgentConfig

    schema = AgentConfig.model_json_schema()
    defs = schema.get("$defs", {})
    lines = ["| key | type | default | description |", "|---|---|---|---|", *_fields(schema)]
    for name, prop in schema.get("properties", {}).items():
        ref = prop.get("$ref") or next(
            (s.get("$ref") for s in prop.get("anyOf", []) if "$ref" in s), None
        )
        if ref and ref.rsplit("/", 1)[-1] in defs:
            section = defs[ref.rsplit("/", 1)[-1]]
            lines += [
                "",
                f"### `{name}`",
                "",
                "| key | type | default | description |",
                "|---|---|---|---|",
            ]
            lines += _fields(section, f"{name}.")
    return "\n".join(lines)


def events_table() -> str:
    from typing import get_args

    from agentkit.events import AgentEvent
    from pydantic import TypeAdapter

    union = get_args(AgentEvent)[0]
    lines: list[str] = []
    for model in get_args(union):  # dataclasses: the schema's description is the docstring
        schema = TypeAdapter(model).json_schema(by_alias=True)
        kind = schema.get("properties", {}).get("type", {}).get("default", model.__name__)
        doc = schema.get("description", "").strip().split("\n\n")[0]
        lines += [f"### `{kind}`", "", _cell(doc), ""]
        lines += ["| field | type | default | description |", "|---|---|---|---|"]
        lines += [row for row in _fields(schema) if not row.startswith("| `type` ")]
        lines.append("")
    return "\n".join(lines)


GENERATORS = {"openapi": openapi_table, "config": config_table, "events": events_table}


def on_page_markdown(markdown: str, **_: object) -> str:
    for name, generate in GENERATORS.items():
        marker = MARKER.format(name)
        if marker in markdown:
            markdown = markdown.replace(marker, generate())
    return markdown
