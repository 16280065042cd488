"""The calendar agent's tools: typed Python functions made tools with ``@tool``.

The events live in ``workspace/calendar.json`` (one JSON list, rewritten atomically). Times
are ISO 8601 local times (``2030-01-07T09:00``). ``toolset`` gives the tools together with the
calendar's state, so the evaluation harness can seed a scenario's events.
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated

from agentkit.tools import FunctionToolset, ToolContext, ToolFailedError, tool
from pydantic import BaseModel, ConfigDict, Field, JsonValue

CALENDAR_FILE = "calendar.json"
DAY_START, DAY_END = 9, 18  # free time is looked for between these hours


class Event(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int
    title: str
    start: str
    minutes: int = 60
    place: str = ""


class EventSeed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(min_length=1)
    start: str
    minutes: int = Field(default=60, ge=1)
    place: str = ""


class CalendarState(BaseModel):
    """A scenario's starting events (ids are given in order: 1, 2, …)."""

    model_config = ConfigDict(extra="forbid")

    events: list[EventSeed] = Field(default_factory=list)


def _path(ctx: ToolContext) -> Path:
    return ctx.workspace / CALENDAR_FILE


def _load(ctx: ToolContext) -> list[Event]:
    path = _path(ctx)
    if not path.is_file():
        return []
    return [Event.model_validate(item) for item in json.loads(path.read_text(encoding="utf-8"))]


def _save(ctx: ToolContext, events: list[Event]) -> None:
    path = _path(ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps([event.model_dump(mode="json") for event in events], ensure_ascii=False)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".calendar-", suffix=".tmp")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


def _when(value: str, what: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ToolFailedError(f"{what} must be an ISO date or time like 2030-01-07T09:00") from None


def _find(events: list[Event], event_id: int) -> Event:
    for event in events:
        if event.id == event_id:
            return event
    raise ToolFailedError(f"no event with id {event_id} (list_events shows the ids)")


@tool(
    live_state=True,
    examples=["what's coming up on my calendar?", "show my schedule", "列出我的日程"],
)
def list_events(
    ctx: ToolContext,
    day: Annotated[str | None, "the first day to show, e.g. 2030-01-07 (default: all)"] = None,
    days: Annotated[int, Field(ge=1, le=31, description="how many days to show")] = 7,
) -> dict[str, list[Event]]:
    """List the events on the calendar, in time order (optionally from a day on)."""
    events = sorted(_load(ctx), key=lambda event: event.start)
    if day is not None:
        first = _when(day, "day")
        last = first + timedelta(days=days)
        events = [e for e in events if first <= datetime.fromisoformat(e.start) < last]
    return {"events": events}


@tool(examples=["find my appointment with the vet", "找一下关于开会的日程"])
def search_events(
    ctx: ToolContext, query: Annotated[str, "words to look for in titles and places"]
) -> dict[str, list[Event]]:
    """Find events whose title or place contains the words (case-insensitive)."""
    folded = query.casefold()
    found = [e for e in _load(ctx) if folded in e.title.casefold() or folded in e.place.casefold()]
    return {"events": found}


@tool(examples=["when do I have time on Tuesday?", "周二哪里有空档"])
def free_time(
    ctx: ToolContext, day: Annotated[str, "the day, e.g. 2030-01-07"]
) -> dict[str, list[str]]:
    """The free slots of a day between 9:00 and 18:00."""
    start = _when(day, "day").replace(hour=DAY_START, minute=0)
    end = start.replace(hour=DAY_END)
    busy = sorted(
        (
            datetime.fromisoformat(e.start),
            datetime.fromisoformat(e.start) + timedelta(minutes=e.minutes),
        )
        for e in _load(ctx)
        if datetime.fromisoformat(e.start).date() == start.date()
    )
    slots, cursor = [], start
    for begin, finish in busy:
        if begin > cursor:
            slots.append(f"{cursor:%H:%M}-{min(begin, end):%H:%M}")
        cursor = max(cursor, finish)
    if cursor < end:
        slots.append(f"{cursor:%H:%M}-{end:%H:%M}")
    return {"free": slots}


@tool(
    side_effect=True,
    examples=["add a meeting with Bob on Monday at 10", "下周二下午加一个会议"],
    consent="This puts a new event on your calendar.",
)
def add_event(
    ctx: ToolContext,
    title: Annotated[str, Field(min_length=1, max_length=200, description="what it is")],
    start: Annotated[str, "when it starts, e.g. 2030-01-07T09:00"],
    minutes: Annotated[int, Field(ge=1, le=24 * 60, description="how long it lasts")] = 60,
    place: str = "",
) -> Event:
    """Put a new event on the calendar; returns it with its id."""
    _when(start, "start")
    events = _load(ctx)
    event = Event(
        id=max((e.id for e in events), default=0) + 1,
        title=title.strip(),
        start=start,
        minutes=minutes,
        place=place,
    )
    _save(ctx, [*events, event])
    return event


@tool(
    side_effect=True,
    examples=["move event 3 to Friday morning", "把活动 1 换到周五"],
    consent="This moves the event to the new time; its old time is freed.",
)
def move_event(
    ctx: ToolContext,
    event_id: Annotated[int, Field(ge=1)],
    start: Annotated[str, "the new start, e.g. 2030-01-07T15:00"],
) -> Event:
    """Move an event to a new start time (list_events shows the ids)."""
    _when(start, "start")
    events = _load(ctx)
    event = _find(events, event_id)
    moved = event.model_copy(update={"start": start})
    _save(ctx, [moved if e.id == event_id else e for e in events])
    return moved


@tool(
    side_effect=True,
    examples=["cancel event 4", "取消这个活动"],
    consent="This cancels the event and takes it off your calendar; it cannot be undone.",
)
def cancel_event(ctx: ToolContext, event_id: Annotated[int, Field(ge=1)]) -> dict[str, object]:
    """Cancel an event and remove it from the calendar (list_events shows the ids)."""
    events = _load(ctx)
    _find(events, event_id)
    _save(ctx, [e for e in events if e.id != event_id])
    return {"cancelled": event_id}


def toolset(ctx: ToolContext) -> FunctionToolset:
    """The calendar tools, with the events as the toolset's state."""

    def snapshot() -> JsonValue:
        events = _load(ctx)
        return {
            "count": len(events),
            "events": [event.model_dump(mode="json") for event in events],
        }

    def seed(state: JsonValue) -> None:
        given = CalendarState.model_validate(state)
        _save(ctx, [Event(id=n, **seed.model_dump()) for n, seed in enumerate(given.events, 1)])

    return FunctionToolset(
        "calendar",
        [list_events, search_events, free_time, add_event, move_event, cancel_event],
        context=ctx,
        snapshot=snapshot,
        seed=seed,
        state_model=CalendarState,
    )
