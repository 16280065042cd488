"""TaskState: the durable, summarised memory of one conversation (seed 002, ``memory.go``).

TaskState keeps only context that is *durable and not derivable*: the user's current goal, the
named flow in progress, high-level open loops, important facts the user stated, user-pinned
facts and the last key decision. It is not a stale copy of live data (prices, balances,
configs): tools re-fetch that.

Invariants, held by :meth:`TaskState.normalize` (applied on load, on save and after the model
writes one):

* every string is trimmed; lists drop empties and are de-duplicated case-insensitively (first
  spelling wins); an important fact that repeats a pinned fact is dropped (it is shown once);
* ``open_loops`` hold no step-level to-dos ("wait for …", "call …", "step 2 …") and nothing
  secret-looking (API keys, passphrases, long tokens): those belong in ExecutionState or nowhere;
* ``pinned_facts`` are set by the user only: the summariser can neither see them as editable nor
  remove them (:meth:`TaskState.apply_summary` carries them over);
* ``updated_at`` and ``last_decision.timestamp`` are always filled after normalising; a decision
  with neither action nor reason is dropped.

The model-written JSON is a trust boundary: :class:`TaskStateSummary` validates it (any subset
of the editable fields; missing ones take their defaults) and :func:`summary_schema` is the JSON
schema the model is asked to follow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agentkit.types import Timestamp, utc_now

__all__ = [
    "DecisionMemory",
    "DecisionSummary",
    "FactSource",
    "TaskState",
    "TaskStateSummary",
    "clean_list",
    "is_allowed_open_loop",
    "looks_secret",
    "summary_schema",
]

TASK_STATE_HEADER = "[Structured Task State - durable, non-derivable context]"

# nofx filterTaskStateOpenLoops: step-level work, tool instructions and credentials.
_STEP_PREFIXES = (
    "wait for ",
    "waiting for ",
    "ask for ",
    "call ",
    "run ",
    "execute ",
    "invoke ",
    "use tool",
    "step ",
)
_STEP_FRAGMENTS = ("current step", "tool call", "step id", "tool id")
_SECRET_FRAGMENTS = (
    "api key",
    "apikey",
    "api secret",
    "secret key",
    "passphrase",
    "password",
    "private key",
    "access token",
    "bearer ",
)
_SECRET_PATTERNS = (
    re.compile(r"\b(?:sk|pk|rk|ak)[-_][A-Za-z0-9_-]{12,}"),  # sk-… style keys
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\b(?:0x)?[0-9a-fA-F]{32,}\b"),  # hex secrets, private keys
    re.compile(r"\b(?=[A-Za-z0-9+/=]*\d)(?=[A-Za-z0-9+/=]*[A-Za-z])[A-Za-z0-9+/=]{32,}"),
)
_STEP_NUMBER = re.compile(r"^step\s*\d")


def _folded(text: str) -> str:
    """Lower case, ``_``/``-`` as spaces, single spaces: ``API_Key`` → ``api key``."""
    return " ".join(re.sub(r"[_\-]", " ", text.lower()).split())


def looks_secret(text: str) -> bool:
    """True when *text* names a credential or contains a key-like token."""
    folded = _folded(text)
    if any(fragment in folded for fragment in _SECRET_FRAGMENTS):
        return True
    return any(pattern.search(text) for pattern in _SECRET_PATTERNS)


def is_allowed_open_loop(item: str) -> bool:
    """The nofx open-loop rules: high-level, cross-turn issues only; no step work, no secrets."""
    lowered = " ".join(item.lower().split())
    if lowered.startswith(_STEP_PREFIXES) or _STEP_NUMBER.match(lowered):
        return False
    if any(fragment in lowered or fragment in _folded(item) for fragment in _STEP_FRAGMENTS):
        return False
    return not looks_secret(item)


def clean_list(items: Iterable[str], *, exclude: Iterable[str] = ()) -> tuple[str, ...]:
    """Trim, drop empties, de-duplicate case-insensitively (first spelling wins)."""
    seen = {item.strip().casefold() for item in exclude}
    kept: list[str] = []
    for raw in items:
        item = " ".join(raw.split())
        key = item.casefold()
        if item and key not in seen:
            seen.add(key)
            kept.append(item)
    return tuple(kept)


class _Value(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DecisionMemory(_Value):
    """The single most recent key decision and why it was taken."""

    action: str = ""
    reason: str = ""
    still_valid: bool = True
    timestamp: Timestamp | None = None


class FactSource(_Value):
    """Which messages an important fact was taken from (extractive compression)."""

    fact: str
    message_ids: tuple[str, ...] = ()


class TaskState(_Value):
    """Durable memory of one conversation. Persisted as JSON under ``task_state:{agent}:{conv}``.

    ``fact_sources``: for important facts taken from the dialogue by rule (compression
    strategies ``extractive``/``hybrid``), the ids of the messages they came from; kept only
    for facts still in ``important_facts`` (not shown to the model, not edited by hand)."""

    v: Literal[1] = 1
    current_goal: str = ""
    active_flow: str = ""
    open_loops: tuple[str, ...] = ()
    important_facts: tuple[str, ...] = ()
    pinned_facts: tuple[str, ...] = ()
    last_decision: DecisionMemory | None = None
    updated_at: Timestamp | None = None
    fact_sources: tuple[FactSource, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when it carries no content (timestamps and version aside)."""
        return not (
            self.current_goal
            or self.active_flow
            or self.open_loops
            or self.important_facts
            or self.pinned_facts
            or self.last_decision
        )

    def normalize(self, *, now: datetime | None = None) -> TaskState:
        """The canonical form (see the module docstring); idempotent."""
        moment = now or utc_now()
        pinned = clean_list(self.pinned_facts)
        decision = self.last_decision
        if decision is not None:
            action, reason = decision.action.strip(), decision.reason.strip()
            decision = (
                DecisionMemory(
                    action=action,
                    reason=reason,
                    still_valid=decision.still_valid,
                    timestamp=decision.timestamp or moment,
                )
                if action or reason
                else None
            )
        facts = clean_list(self.important_facts, exclude=pinned)
        return TaskState(
            current_goal=self.current_goal.strip(),
            active_flow=self.active_flow.strip(),
            open_loops=tuple(
                item for item in clean_list(self.open_loops) if is_allowed_open_loop(item)
            ),
            important_facts=facts,
            pinned_facts=pinned,
            last_decision=decision,
            updated_at=self.updated_at or moment,
            fact_sources=_sources_of(facts, self.fact_sources),
        )

    def pin(self, fact: str) -> TaskState:
        """A copy with *fact* pinned (kept by every compression until unpinned)."""
        return self.model_copy(update={"pinned_facts": (*self.pinned_facts, fact)}).normalize()

    def unpin(self, fact: str) -> TaskState:
        """A copy without the pinned *fact* (compared case-insensitively)."""
        key = fact.strip().casefold()
        kept = tuple(item for item in self.pinned_facts if item.strip().casefold() != key)
        return self.model_copy(update={"pinned_facts": kept}).normalize()

    def summary_view(self) -> dict[str, Any]:
        """The editable fields as the summariser sees them (the shape it must return)."""
        decision: dict[str, Any] | None = None
        if self.last_decision is not None:
            decision = self.last_decision.model_dump(include={"action", "reason", "still_valid"})
        return {
            "current_goal": self.current_goal,
            "active_flow": self.active_flow,
            "open_loops": list(self.open_loops),
            "important_facts": list(self.important_facts),
            "last_decision": decision,
        }

    def apply_summary(self, summary: TaskStateSummary, *, now: datetime | None = None) -> TaskState:
        """The state the summariser wrote, with this state's pinned facts carried over.

        The summary replaces every editable field (an omitted field takes its default, as the
        prompt asks the model to drop stale items). A decision equal to the current one keeps
        its original timestamp.
        """
        moment = now or utc_now()
        decision: DecisionMemory | None = None
        if summary.last_decision is not None:
            new = summary.last_decision
            old = self.last_decision
            same = (
                old is not None
                and old.action.strip().casefold() == new.action.strip().casefold()
                and old.reason.strip().casefold() == new.reason.strip().casefold()
            )
            decision = DecisionMemory(
                action=new.action,
                reason=new.reason,
                still_valid=new.still_valid,
                timestamp=old.timestamp if same and old is not None else moment,
            )
        return TaskState(
            current_goal=summary.current_goal,
            active_flow=summary.active_flow,
            open_loops=summary.open_loops,
            important_facts=summary.important_facts,
            pinned_facts=self.pinned_facts,
            last_decision=decision,
            updated_at=moment,
            fact_sources=self.fact_sources,
        ).normalize(now=moment)

    def render(self) -> str:
        """The prompt block (nofx ``buildTaskStateContext``); ``""`` when there is nothing."""
        state = self.normalize()
        if state.is_empty:
            return ""
        lines = [TASK_STATE_HEADER]
        if state.current_goal:
            lines.append(f"- Current goal: {state.current_goal}")
        if state.active_flow:
            lines.append(f"- Active flow: {state.active_flow}")
        lines.extend(f"- High-level open loop: {item}" for item in state.open_loops)
        lines.extend(f"- Pinned fact (set by the user): {item}" for item in state.pinned_facts)
        lines.extend(f"- Important fact: {item}" for item in state.important_facts)
        if state.last_decision is not None:
            decision = state.last_decision
            validity = "still valid" if decision.still_valid else "no longer valid"
            lines.append(
                f"- Last decision: {decision.action} | reason: {decision.reason} | {validity}"
            )
        return "\n".join(lines)


def _sources_of(facts: tuple[str, ...], sources: Iterable[FactSource]) -> tuple[FactSource, ...]:
    """The sources of *facts* (one per fact, in their order; message ids de-duplicated)."""
    by_fact: dict[str, list[str]] = {}
    for source in sources:
        ids = by_fact.setdefault(" ".join(source.fact.split()).casefold(), [])
        ids.extend(mid for mid in source.message_ids if mid not in ids)
    kept: list[FactSource] = []
    for fact in facts:
        found = by_fact.get(fact.casefold())
        if found:
            kept.append(FactSource(fact=fact, message_ids=tuple(found)))
    return tuple(kept)


class DecisionSummary(_Value):
    """``last_decision`` as the summariser writes it (the timestamp is ours to set)."""

    action: str = ""
    reason: str = ""
    still_valid: bool = True


class TaskStateSummary(_Value):
    """What the ``summarize`` call returns: any subset of TaskState's editable fields."""

    current_goal: str = ""
    active_flow: str = ""
    open_loops: tuple[str, ...] = ()
    important_facts: tuple[str, ...] = ()
    last_decision: DecisionSummary | None = None


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:  # noqa: ANN401 - JSON schema tree
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref.removeprefix("#/$defs/")], defs)
        return {key: _inline_refs(value, defs) for key, value in node.items() if key != "$defs"}
    if isinstance(node, list):
        return [_inline_refs(item, defs) for item in node]
    return node


def summary_schema() -> dict[str, Any]:
    """The JSON schema of :class:`TaskStateSummary`, self-contained (no ``$ref``), so grammar
    converters and strict structured-output backends can take it as is."""
    schema = TaskStateSummary.model_json_schema()
    inlined: dict[str, Any] = _inline_refs(schema, schema.get("$defs", {}))
    return inlined
