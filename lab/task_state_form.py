"""The TaskState editor's form, as plain values: fields from the schema, parsing, pinning, diff.

The form is derived from :class:`agentkit.TaskState`'s pydantic fields (:func:`form_fields`):
a ``str`` is a text box, a ``tuple[str, ...]`` a textarea with one item per line, a ``bool`` a
checkbox, and a nested model (``last_decision``) contributes its own fields as
``last_decision.action`` etc. A field of any other type raises, so a new TaskState field cannot
silently drop out of the editor. Bookkeeping fields (``v``, ``updated_at``, timestamps) are set by
agentkit, not edited.

:func:`parse_form` is the trust boundary between what was typed and a TaskState: it refuses
(with one message per field, :class:`InvalidFormError`) what the memory layer would otherwise drop
silently — step-level or secret-looking open loops — and anything secret-looking elsewhere,
then validates with pydantic. Nothing is saved from here; the editor saves with a version.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agentkit import TaskState
from agentkit.memory.task_state import is_allowed_open_loop, looks_secret
from pydantic import BaseModel, ValidationError

__all__ = [
    "InvalidFormError",
    "FormField",
    "FormValues",
    "diff_text",
    "form_fields",
    "move_fact",
    "parse_form",
    "state_lines",
    "to_form",
]

FormValues = dict[str, str | bool]
"""Field name → what the control holds (text, lines joined by newlines, or a checkbox)."""

_NOT_EDITED = frozenset({"v", "updated_at", "timestamp", "fact_sources"})
FACT_LISTS = ("important_facts", "pinned_facts")


@dataclass(frozen=True)
class FormField:
    """One control of the form."""

    name: str
    label: str
    kind: Literal["text", "lines", "flag"]
    help: str = ""


class InvalidFormError(ValueError):
    """The form does not make a valid TaskState; ``errors`` maps a field name to why."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{name}: {why}" for name, why in self.errors.items()))


def _model_of(annotation: Any) -> type[BaseModel] | None:  # noqa: ANN401 - any annotation
    """The model class in ``Model`` or ``Model | None``, else None."""
    candidates = (
        typing.get_args(annotation)
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
        else (annotation,)
    )
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def form_fields(model: type[BaseModel] = TaskState, prefix: str = "") -> tuple[FormField, ...]:
    """The controls for *model*'s editable fields, in schema order."""
    fields: list[FormField] = []
    for name, info in model.model_fields.items():
        if name in _NOT_EDITED:
            continue
        full = f"{prefix}{name}"
        label = full.replace(".", " > ").replace("_", " ")
        annotation = info.annotation
        help_text = info.description or ""
        if annotation is str:
            fields.append(FormField(full, label, "text", help_text))
        elif annotation == tuple[str, ...]:
            fields.append(FormField(full, label, "lines", help_text or "one item per line"))
        elif annotation is bool:
            fields.append(FormField(full, label, "flag", help_text))
        elif (nested := _model_of(annotation)) is not None:
            fields.extend(form_fields(nested, prefix=f"{full}."))
        else:
            raise TypeError(f"the TaskState editor has no control for {full}: {annotation!r}")
    return tuple(fields)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def to_form(state: TaskState) -> FormValues:
    """The form's values showing *state*."""
    values: FormValues = {}
    data = state.model_dump()
    for field in form_fields():
        value: Any = data
        for part in field.name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if field.kind == "lines":
            values[field.name] = "\n".join(value or ())
        elif field.kind == "flag":
            values[field.name] = True if value is None else bool(value)
        else:
            values[field.name] = value or ""
    return values


def _check_items(name: str, items: list[str], errors: dict[str, str]) -> None:
    for number, item in enumerate(items, start=1):
        if looks_secret(item):
            errors[name] = (
                f"line {number} looks like a credential ({item[:24]}…); TaskState must never hold "
                "secrets"
            )
            return
        if name == "open_loops" and not is_allowed_open_loop(item):
            errors[name] = (
                f"line {number} ({item!r}) is step-level work (wait for / call / step …); open "
                "loops are high-level issues that outlive a turn"
            )
            return


def parse_form(values: Mapping[str, str | bool], *, base: TaskState) -> TaskState:
    """The TaskState the form describes; raises :class:`InvalidFormError` naming each bad field.

    *base* is the state the form was loaded from: a ``last_decision`` left unchanged keeps its
    timestamp; an edited one gets a new one when saved.
    """
    errors: dict[str, str] = {}
    data: dict[str, Any] = {}
    for field in form_fields():
        raw = values.get(field.name, False if field.kind == "flag" else "")
        if field.kind == "flag":
            value: Any = bool(raw)
        elif not isinstance(raw, str):
            errors[field.name] = "expected text"
            continue
        elif field.kind == "lines":
            value = _lines(raw)
            _check_items(field.name, value, errors)
        else:
            value = raw.strip()
            _check_items(field.name, [value] if value else [], errors)
        target = data
        *parents, leaf = field.name.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    if errors:
        raise InvalidFormError(errors)
    decision = data.get("last_decision")
    if isinstance(decision, dict):
        old = base.last_decision
        if not (decision.get("action") or decision.get("reason")):
            data["last_decision"] = None
        elif old is not None and (old.action, old.reason, old.still_valid) == (
            decision.get("action"),
            decision.get("reason"),
            decision.get("still_valid"),
        ):
            decision["timestamp"] = old.timestamp
    try:
        state = TaskState.model_validate(data)
    except ValidationError as error:
        raise InvalidFormError(
            {
                ".".join(str(part) for part in problem["loc"]) or "form": problem["msg"]
                for problem in error.errors()
            }
        ) from None
    return state


def move_fact(values: Mapping[str, str | bool], fact: str, *, pin: bool) -> FormValues:
    """Move *fact* between important and pinned facts; InvalidFormError if it is not there."""
    source, target = FACT_LISTS if pin else reversed(FACT_LISTS)
    key = fact.strip().casefold()
    items = _lines(str(values.get(source, "")))
    kept = [item for item in items if item.casefold() != key]
    if not key or len(kept) == len(items):
        where = source.replace("_", " ")
        raise InvalidFormError({source: f"{fact.strip()!r} is not among the {where}"})
    moved = next(item for item in items if item.casefold() == key)
    updated: FormValues = dict(values)
    updated[source] = "\n".join(kept)
    updated[target] = "\n".join([*_lines(str(values.get(target, ""))), moved])
    return updated


def state_lines(state: TaskState) -> list[str]:
    """A readable, canonical text of the editable content (what the diff compares)."""
    lines = [f"current_goal: {state.current_goal}", f"active_flow: {state.active_flow}"]
    for name in ("open_loops", "important_facts", "pinned_facts"):
        items: tuple[str, ...] = getattr(state, name)
        lines.append(f"{name}:" + ("" if items else " (none)"))
        lines.extend(f"  - {item}" for item in items)
    decision = state.last_decision
    if decision is None:
        lines.append("last_decision: (none)")
    else:
        validity = "still valid" if decision.still_valid else "no longer valid"
        lines.append(f"last_decision: {decision.action} | reason: {decision.reason} | {validity}")
    return lines


def diff_text(stored: TaskState, edited: TaskState, *, stored_version: int) -> str:
    """A unified diff from the stored state to the edited one ("" when they say the same)."""
    before = state_lines(stored.normalize())
    after = state_lines(edited.normalize())
    return "\n".join(
        difflib.unified_diff(
            before, after, f"stored (version {stored_version})", "edited", lineterm=""
        )
    )
