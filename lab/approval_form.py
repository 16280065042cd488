"""The "Edit arguments" form of a pending approval: fields built from the tool's schema.

Rendering and reading are plain functions (:func:`form_fields`, :func:`read_fields`),
testable without a kernel; :class:`ApprovalForm` is the thin widget over them. A field's
kind comes from its JSON Schema type (string, integer, number, boolean; anything else is
edited as JSON). Secret-named arguments are never shown nor edited here: the planned value
(masked in the approval) cannot be read back, so a tool with one is approved as planned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import ipywidgets as widgets
from agentkit.calls.secrets import is_secret_key
from agentkit.memory import PendingApproval

__all__ = ["ApprovalForm", "FormField", "form_fields", "read_fields"]

FieldKind = Literal["string", "integer", "number", "boolean", "json"]
_KINDS: dict[str, FieldKind] = {
    "string": "string", "integer": "integer", "number": "number", "boolean": "boolean"
}  # fmt: skip


@dataclass(frozen=True)
class FormField:
    name: str
    kind: FieldKind
    value: Any
    required: bool


def form_fields(approval: PendingApproval) -> list[FormField] | None:
    """The editable fields of *approval*, prefilled with the planned values; None when the
    call has a secret-named argument (it cannot be edited here)."""
    schema = approval.args_schema
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    required = schema.get("required", [])
    names = set(properties) | set(approval.tool_args)
    if any(is_secret_key(name) for name in names):
        return None
    fields = []
    for name, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        known = _KINDS.get(kind, "json") if isinstance(kind, str) else "json"
        fields.append(
            FormField(
                name=name,
                kind=known,
                value=approval.tool_args.get(name),
                required=isinstance(required, list) and name in required,
            )
        )
    return fields


def read_fields(fields: list[FormField], texts: dict[str, Any]) -> dict[str, Any]:
    """The arguments the form says: each field's entered value in its kind (an empty
    optional field is left out). Raises ``ValueError`` naming the field that does not read."""
    args: dict[str, Any] = {}
    for field in fields:
        raw = texts.get(field.name)
        if field.kind == "boolean":
            args[field.name] = bool(raw)
            continue
        text = "" if raw is None else str(raw).strip()
        if not text:
            if field.required:
                raise ValueError(f"{field.name} is required")
            continue
        try:
            if field.kind == "integer":
                args[field.name] = int(text)
            elif field.kind == "number":
                args[field.name] = float(text)
            elif field.kind == "json":
                args[field.name] = json.loads(text)
            else:
                args[field.name] = text
        except ValueError:
            raise ValueError(f"{field.name} is not a valid {field.kind}") from None
    return args


class ApprovalForm(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """Inputs for each editable argument of a pending approval."""

    def __init__(self, approval: PendingApproval) -> None:
        self.approval = approval
        self.fields = form_fields(approval)
        self.inputs: dict[str, Any] = {}
        children: list[Any] = []
        if self.fields is None:
            children.append(
                widgets.HTML("<i>This call has secret arguments: approve it as planned.</i>")
            )
        for field in self.fields or []:
            shown = field.value
            if field.kind == "boolean":
                box: Any = widgets.Checkbox(value=bool(shown), description=field.name)
            else:
                text = (
                    ""
                    if shown is None
                    else (json.dumps(shown) if field.kind == "json" else str(shown))
                )
                box = widgets.Text(value=text, description=field.name)
            box.add_class(f"agentkit-approval-arg-{field.name}")
            self.inputs[field.name] = box
            children.append(box)
        super().__init__(children)
        self.add_class("agentkit-approval-form")

    def args(self) -> dict[str, Any]:
        """The edited arguments (``ValueError`` when a field does not read)."""
        values = {name: box.value for name, box in self.inputs.items()}
        return read_fields(self.fields or [], values)
