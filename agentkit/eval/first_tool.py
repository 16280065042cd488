"""First-tool tables: does an agent's first action for a request pick the right tool?

A table (YAML or JSON, ``kind: first_tool``) names one agent, an optional starting state (by
toolset, as in scenarios) and rows ``{text, expect, lang, split}``: ``expect`` is the tool the
first action should call, or ``none`` for a request that needs no tool (a greeting, thanks, a
question about the assistant); ``split`` is ``dev`` (looked at while building the router) or
``heldout`` (kept out of development, reported on its own).

:func:`run_first_tool` sends each request as a new conversation in a data root of its own and
stops the turn at its first action: the first step of a ``plan`` event, a tool call (the
live-state refresh excepted), a consent request (the side-effecting tool it proposes), a
question (``ask``) or an answer (``none``). Each row records the action, whether it was right,
and the latency of the model calls that chose it (the router's ``route`` calls; without the
router, the strategy's first ``act`` or ``plan`` call). :func:`first_tool_summary` gives, per
table and split, first-tool accuracy, "no tool" precision, side-effecting false positives (a
side-effecting tool proposed for a read or for a request that needs no tool) and latency:
the choice call's, the argument call's (router only) and the time to the first action.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from agentkit._extras import require
from agentkit.calls.records import CallRecord
from agentkit.errors import ConfigError, UsageError
from agentkit.events import (
    AgentEvent,
    AgentOutputEvent,
    AskUserEvent,
    ErrorEvent,
    PlanEvent,
    SessionEvent,
    StepStartEvent,
    ToolCallEvent,
)
from agentkit.layout import DataLayout

__all__ = [
    "FirstToolRow",
    "FirstToolTable",
    "first_tool_report",
    "first_tool_summary",
    "is_first_tool_table",
    "load_first_tool_tables",
    "run_first_tool",
]

NO_TOOL = "none"
_CHOICE_PURPOSES = ("act", "plan")


class FirstToolRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1)
    expect: str = Field(min_length=1, description="a tool name, or none")
    lang: Literal["zh", "en"]
    split: Literal["dev", "heldout"] = "dev"
    #: which batch of rows this one came in (held-out rows are written in batches, each
    #: before any result for it was seen); reported on its own with ``by_batch``
    batch: str = ""


class FirstToolTable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    v: Literal[1] = 1
    kind: Literal["first_tool"]
    id: str = ""
    agent: str
    state: dict[str, JsonValue] = Field(default_factory=dict)
    rows: tuple[FirstToolRow, ...] = Field(min_length=1)


def _read(path: Path) -> Any:  # noqa: ANN401 - YAML or JSON, validated by the caller
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return json.loads(text)
    require("eval", "a YAML first-tool table", "yaml")
    import yaml

    return yaml.safe_load(text)


def is_first_tool_table(path: Path) -> bool:
    """A file that says ``kind: first_tool``, or a folder holding only such files."""
    if path.is_dir():
        files = _table_files(path)
        return bool(files) and all(is_first_tool_table(file) for file in files)
    try:
        data = _read(path)
    except (OSError, ValueError):
        return False
    except Exception:  # a YAML error
        return False
    return isinstance(data, dict) and data.get("kind") == "first_tool"


def _table_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml", ".json"))


def load_first_tool_tables(paths: Sequence[Path]) -> list[FirstToolTable]:
    tables: list[FirstToolTable] = []
    for path in paths:
        for file in _table_files(path) if path.is_dir() else [path]:
            try:
                table = FirstToolTable.model_validate(_read(file))
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                raise ConfigError(file, where, first["msg"]) from None
            tables.append(table if table.id else table.model_copy(update={"id": file.stem}))
    if not tables:
        raise UsageError("no first-tool tables found")
    return tables


def _first_action(event: AgentEvent) -> str | None:  # noqa: PLR0911 - one case per event
    """The action *event* shows, if it is a first action: a tool, ``none`` or ``ask``."""
    if isinstance(event, PlanEvent):
        if not event.steps:
            return NO_TOOL
        step = event.steps[0]
        if step.step_type == "tool":
            return step.tool_name
        return "ask" if step.step_type == "ask_user" else NO_TOOL
    if isinstance(event, ToolCallEvent) and not event.id.startswith("live-"):
        return event.name
    if isinstance(event, AskUserEvent):
        return event.tool_name if event.kind == "confirmation" else "ask"
    if isinstance(event, StepStartEvent) and event.step_type == "respond":
        return NO_TOOL
    if isinstance(event, AgentOutputEvent):
        return NO_TOOL
    if isinstance(event, ErrorEvent):
        return "error"
    return None


def _stage(record: CallRecord) -> str:
    route = record.route if isinstance(record.route, dict) else {}
    return str(route.get("stage", "choice"))


def _choice_latency(records: Sequence[CallRecord]) -> float:
    """The call that chose the action: the router's choice call, or the strategy's first
    ``act``/``plan`` call (which also wrote the arguments)."""
    routed = [
        r.latency_ms
        for r in records
        if r.purpose == "route" and _stage(r) in ("choice", "semantic")
    ]
    if routed:
        return round(sum(routed), 1)
    first = next((r for r in records if r.purpose in _CHOICE_PURPOSES), None)
    return round(first.latency_ms, 1) if first is not None else 0.0


async def _run_table(
    table: FirstToolTable,
    agents_dir: Path,
    model: str | None,
    params: Mapping[str, JsonValue],
    splits: Sequence[str],
) -> list[dict[str, Any]]:
    from agentkit.agent import Agent
    from agentkit.eval.params import apply_params, validate_config
    from agentkit.models.spec import create_model

    root = Path(tempfile.mkdtemp(prefix="agentkit-first-tool-"))
    rows: list[dict[str, Any]] = []
    try:
        files = DataLayout(root).agent(table.agent)
        shutil.copytree(
            agents_dir / table.agent,
            files.dir,
            ignore=shutil.ignore_patterns("conversations", "logs", "__pycache__", "*.lock"),
        )
        config = json.loads(files.config.read_text(encoding="utf-8"))
        config = apply_params(config, params)
        validate_config(config, f"{table.id}: config")
        files.config.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
        chosen = create_model(model, base_dir=files.dir) if model else None
        agent = Agent.open(table.agent, data_dir=root, model=chosen)
        try:
            tools = agent.tools
            if table.state:  # no first action changes it: a write waits for consent
                agent.runtime.load_tools().seed(table.state)
            for number, row in enumerate(table.rows):
                if row.split not in splits:
                    continue
                row_result = await _run_row(agent, table, number, row, tools)
                row_result.update(_traced(agent, row_result.pop("_ids")))
                rows.append(row_result)
        finally:
            await agent.aclose()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


async def _run_row(
    agent: Any,  # noqa: ANN401 - agentkit.agent.Agent (imported lazily)
    table: FirstToolTable,
    number: int,
    row: FirstToolRow,
    tools: Any,  # noqa: ANN401 - a ToolRegistry
) -> dict[str, Any]:
    conversation = agent.create_conversation(f"first tool {number}").conversation_id
    started = time.perf_counter()
    action, message_id, first_ms = "error", "", 0.0
    stream = agent.send_message(conversation, row.text)
    try:
        async for event in stream:
            if isinstance(event, SessionEvent):
                message_id = event.message_id
                started = time.perf_counter()
                continue
            found = _first_action(event)
            if found is not None:
                action = found
                first_ms = round((time.perf_counter() - started) * 1000, 1)
                break
    finally:
        await stream.aclose()
    known = action in tools
    side_effect = known and tools.get(action).side_effect
    expected_side_effect = row.expect in tools and tools.get(row.expect).side_effect
    return {
        "table": table.id,
        "agent": table.agent,
        "row": number,
        "split": row.split,
        "batch": row.batch,
        "lang": row.lang,
        "text": row.text,
        "expect": row.expect,
        "action": action,
        "correct": action == row.expect,
        "side_effect": bool(side_effect),
        "side_effect_false_positive": bool(side_effect)
        and action != row.expect
        and not expected_side_effect,
        "expect_side_effect": bool(expected_side_effect),
        "first_action_ms": first_ms,
        "_ids": (conversation, message_id),
    }


def _traced(agent: Any, ids: tuple[str, str]) -> dict[str, Any]:  # noqa: ANN401 - an Agent
    """What the turn's trace says: the choice's latency and the route decision."""
    conversation, message_id = ids
    records = agent.call_records(conversation, message_id) if message_id else []
    route = next(
        (r.route for r in records if r.purpose == "route" and r.route and _stage(r) == "choice"),
        None,
    )
    return {
        "choice_ms": _choice_latency(records),
        "arguments_ms": round(
            sum(r.latency_ms for r in records if r.purpose == "route" and _stage(r) == "arguments"),
            1,
        ),
        "model_calls": sum(1 for r in records if r.messages),
        "route": json.dumps(route, ensure_ascii=False) if route else "",
    }


def run_first_tool(
    tables: Sequence[FirstToolTable],
    *,
    data_dir: Path,
    model: str | None = None,
    params: Mapping[str, JsonValue] | None = None,
    splits: Sequence[str] = ("dev", "heldout"),
) -> list[dict[str, Any]]:
    """One row per request of *tables* (agents from ``{data_dir}/agents``), the turn stopped
    at its first action. *params* are config.json keys set for every agent."""
    rows: list[dict[str, Any]] = []
    agents_dir = Path(data_dir) / "agents"
    for table in tables:
        rows.extend(asyncio.run(_run_table(table, agents_dir, model, params or {}, splits)))
    return rows


def first_tool_summary(
    rows: Sequence[Mapping[str, Any]], *, by_batch: bool = False
) -> list[dict[str, Any]]:
    """Per table and split (and batch, with *by_batch*): accuracy, "no tool" precision,
    side-effect false positives, median and 90th-percentile choice latency (ms), median time
    to the first action."""
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        batch = str(row.get("batch", "")) if by_batch else ""
        groups.setdefault((str(row["table"]), str(row["split"]), batch), []).append(row)
    summary: list[dict[str, Any]] = []
    for (table, split, batch), items in sorted(groups.items()):
        said_none = [r for r in items if r["action"] == NO_TOOL]
        reads = [r for r in items if not _expects_side_effect(r)]
        latencies = sorted(float(r["choice_ms"]) for r in items)
        summary.append({
            "table": table,
            "split": split,
            **({"batch": batch} if by_batch else {}),
            "requests": len(items),
            "accuracy": round(sum(bool(r["correct"]) for r in items) / len(items), 3),
            "none_precision": (
                round(sum(r["expect"] == NO_TOOL for r in said_none) / len(said_none), 3)
                if said_none
                else None
            ),
            "none_recall": _ratio(
                sum(r["action"] == NO_TOOL for r in items if r["expect"] == NO_TOOL),
                sum(r["expect"] == NO_TOOL for r in items),
            ),
            "side_effect_fp": sum(bool(r["side_effect_false_positive"]) for r in items),
            "reads_and_none": len(reads),
            "asked": sum(r["action"] == "ask" for r in items),
            "choice_ms_median": round(statistics.median(latencies), 1),
            "choice_ms_p90": round(latencies[int(0.9 * (len(latencies) - 1))], 1),
            "arguments_ms_median": round(
                statistics.median(float(r["arguments_ms"]) for r in items), 1
            ),
            "first_action_ms_median": round(
                statistics.median(float(r["first_action_ms"]) for r in items), 1
            ),
        })  # fmt: skip
    return summary


def _expects_side_effect(row: Mapping[str, Any]) -> bool:
    return bool(row.get("expect_side_effect", False))


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def first_tool_report(summary: Sequence[Mapping[str, Any]]) -> str:
    """The summary as a fixed-width text table."""
    columns = [
        ("table", 22),
        ("split", 8),
        *([("batch", 6)] if any("batch" in item for item in summary) else []),
        ("requests", 9),
        ("accuracy", 9),
        ("none_precision", 15),
        ("side_effect_fp", 15),
        ("asked", 6),
        ("choice_ms_median", 17),
        ("choice_ms_p90", 14),
        ("arguments_ms_median", 20),
        ("first_action_ms_median", 23),
    ]
    lines = ["".join(name.ljust(width) for name, width in columns)]
    for item in summary:
        cells = ["-" if item[name] is None else str(item[name]) for name, _ in columns]
        padded = (cell.ljust(width) for cell, (_, width) in zip(cells, columns, strict=True))
        lines.append("".join(padded))
    return "\n".join(lines)
