"""Sweep parameters: ``--set key=value`` and ``--grid key=v1,v2,…`` over an agent's config.json.

A key is a dotted path into :class:`~agentkit.config.AgentConfig` (``compression.token_threshold``,
``planner.strategy``, ``model``). Invariants, so that a typo costs seconds and not a night of
runs:

* every key is checked against the config schema before any run starts; an unknown key is a
  :class:`~agentkit.errors.UsageError` naming the key and the keys that do exist there;
* every value is converted by the type of the field it sets (``300`` becomes an integer,
  ``true`` a boolean, ``[a, b]`` JSON a list) and a value the field refuses is a UsageError
  naming the key;
* the grid is the Cartesian product of its axes, the first axis varying slowest, and the
  points keep that order (row order in the results is reproducible).
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, JsonValue, TypeAdapter, ValidationError

from agentkit.config import AgentConfig
from agentkit.errors import UsageError

__all__ = [
    "Params",
    "apply_params",
    "check_key",
    "convert_value",
    "grid_points",
    "merge_config",
    "parse_assignment",
    "parse_grid",
    "parse_sets",
    "validate_config",
]

#: one parameter point: dotted key → converted value
Params = dict[str, JsonValue]


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def check_key(key: str) -> Any:  # noqa: ANN401 - the field's annotation, a type expression
    """The annotation of the config field *key* names; UsageError for an unknown key."""
    model: type[BaseModel] = AgentConfig
    parts = key.split(".")
    annotation: Any = None
    for index, part in enumerate(parts):
        fields = model.model_fields
        if part not in fields:
            where = ".".join(parts[:index]) or "config.json"
            known = ", ".join(sorted(fields))
            raise UsageError(
                f"unknown config key {key!r}: {where} has no {part!r} (it has {known})"
            )
        info = fields[part]
        annotation = info.annotation
        if index < len(parts) - 1:
            if not _is_model(annotation):
                raise UsageError(
                    f"unknown config key {key!r}: {'.'.join(parts[: index + 1])} is a value, "
                    "not a section"
                )
            model = annotation
    if _is_model(annotation):
        known = ", ".join(f"{key}.{name}" for name in sorted(annotation.model_fields))
        raise UsageError(f"config key {key!r} is a section: set one of its keys ({known})")
    # the field's own constraints (ge=1, gt=0 …) travel with the type
    return Annotated[annotation, *info.metadata] if info.metadata else annotation


def convert_value(key: str, value: object) -> JsonValue:
    """*value* converted by the type of field *key*; text is read the way a command line
    means it (``300`` → 300, ``true`` → True, JSON for ``[…]``/``{…}``)."""
    adapter: TypeAdapter[Any] = TypeAdapter(check_key(key))
    try:
        if isinstance(value, str):
            text = value.strip()
            if text[:1] in ("[", "{"):
                try:
                    parsed = adapter.validate_python(json.loads(text))
                except json.JSONDecodeError as error:
                    raise UsageError(f"{key}={value}: not valid JSON ({error.msg})") from None
            else:
                parsed = adapter.validate_strings(text)
        else:
            parsed = adapter.validate_python(value)
    except ValidationError as error:
        raise UsageError(f"{key}={value}: {error.errors()[0]['msg']}") from None
    result: JsonValue = adapter.dump_python(parsed, mode="json")
    return result


def parse_assignment(text: str, option: str = "--set") -> tuple[str, str]:
    """``key=value`` → (key, value); anything else is a UsageError."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or not value.strip():
        raise UsageError(f"{option} needs key=value (e.g. compression.keep_recent=4), got {text!r}")
    return key, value


def _split_values(text: str) -> list[str]:
    """``a,b,c`` → three values; a JSON list ``[…]`` → its items (for values with commas)."""
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError:
            items = None
        if isinstance(items, list):
            return [item if isinstance(item, str) else json.dumps(item) for item in items]
    return [item.strip() for item in stripped.split(",")]


def parse_sets(items: Sequence[str]) -> Params:
    """``--set`` options → one point's fixed parameters (a key given twice: the last wins)."""
    params: Params = {}
    for item in items:
        key, value = parse_assignment(item)
        params[key] = convert_value(key, value)
    return params


def parse_grid(items: Sequence[str]) -> dict[str, list[JsonValue]]:
    """``--grid`` options → axes (each value converted; duplicates dropped, order kept)."""
    axes: dict[str, list[JsonValue]] = {}
    for item in items:
        key, text = parse_assignment(item, "--grid")
        if key in axes:
            raise UsageError(f"--grid {key} is given twice: put all its values in one option")
        values = [convert_value(key, value) for value in _split_values(text) if value]
        if not values:
            raise UsageError(f"--grid {key} has no values")
        axes[key] = _unique(values)
    return axes


def _unique(values: Sequence[JsonValue]) -> list[JsonValue]:
    kept: list[JsonValue] = []
    for value in values:
        if value not in kept:
            kept.append(value)
    return kept


def grid_points(
    sets: Mapping[str, object] | None = None, grid: Mapping[str, Sequence[object]] | None = None
) -> list[Params]:
    """The parameter points: *sets* in every point, times the product of the *grid* axes.
    Values may be text (as on a command line) or Python values; all are converted."""
    fixed = {key: convert_value(key, value) for key, value in (sets or {}).items()}
    axes: dict[str, list[JsonValue]] = {}
    for key, values in (grid or {}).items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise UsageError(f"grid axis {key!r} needs a list of values, got {values!r}")
        if not values:
            raise UsageError(f"grid axis {key!r} has no values")
        if key in fixed:
            raise UsageError(f"{key!r} is both set and swept: give it in one place")
        axes[key] = _unique([convert_value(key, value) for value in values])
    points: list[Params] = []
    for combination in itertools.product(*axes.values()):
        point: Params = dict(fixed)
        point.update(zip(axes, combination, strict=True))
        points.append(point)
    return points


def merge_config(base: Mapping[str, Any], partial: Mapping[str, Any]) -> dict[str, Any]:
    """*base* with *partial* merged in, section by section (a new dict; inputs untouched)."""
    merged = copy.deepcopy(dict(base))
    for key, value in partial.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[key] = merge_config(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def apply_params(config: Mapping[str, Any], params: Mapping[str, JsonValue]) -> dict[str, Any]:
    """*config* (a config.json mapping) with each dotted key of *params* set."""
    result = copy.deepcopy(dict(config))
    for key, value in params.items():
        *sections, leaf = key.split(".")
        node = result
        for section in sections:
            child = node.get(section)
            if not isinstance(child, dict):
                child = {}
                node[section] = child
            node = child
        node[leaf] = copy.deepcopy(value)
    return result


def validate_config(data: Mapping[str, Any], where: str) -> AgentConfig:
    """*data* as an AgentConfig; a problem is a UsageError naming *where* and the key."""
    try:
        return AgentConfig.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise UsageError(f"{where}: config key {key!r}: {problem}") from None
