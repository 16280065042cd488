"""Replay a conversation from one of its turns under other settings, and compare per turn.

:func:`replay` forks the conversation at the turn before ``from_message`` (the branch), then
sends the original user messages from there, in order, to the same agent under a changed model,
config keys (``--set``) or prompt templates (``--prompt``). Questions and consent requests are
answered as the original answered them: the user's next message is sent as it was. The result is
one table row per replayed turn, the original beside the branch: answer, tools run (with
arguments, secrets masked), consent asked, model calls, tokens, latency.

Both sides are read the same way, from what the store keeps: each turn's checkpoint (status and
ExecutionState: the tool steps it ran, the consent it waits for), its messages and its
``calls.jsonl`` trace. The branch runs on a copy of the agent folder made for the replay (its
config.json and prompts changed, its tools' workspace copied), so the tools' side effects land in
that copy, never in the agent's own workspace; the branch conversation itself is stored beside
the original, with ``forkedFrom``.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from agentkit._extras import require
from agentkit.calls.secrets import mask_secrets
from agentkit.errors import TurnNotFoundError, UsageError
from agentkit.ids import check_id
from agentkit.planning.replay import TraceNotFoundError, load_call_records
from agentkit.store import ConversationKey, ConversationStore, TurnCheckpoint
from agentkit.store.forks import FORK_START
from agentkit.types import Message

if TYPE_CHECKING:
    import pandas as pd

    from agentkit.agent import Agent
    from agentkit.models.base import ChatModel, SessionBackend

__all__ = ["compare_turns", "replay", "turn_facts"]

_SIDES = ("original", "branch")


def _tool_steps(state: JsonValue) -> tuple[str, dict[str, str]]:
    """The plan id and the finished tool steps (id → ``name(args)``) of an ExecutionState."""
    if not isinstance(state, dict):
        return "", {}
    steps = state.get("steps")
    done: dict[str, str] = {}
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict) or step.get("type") != "tool":
            continue
        if step.get("status") not in ("done", "failed"):
            continue
        args = json.dumps(mask_secrets(step.get("tool_args") or {}), sort_keys=True)
        done[str(step.get("id"))] = f"{step.get('tool_name')}({args})"
    return str(state.get("plan_id", "")), done


def _consent(state: JsonValue) -> str:
    """The tool a turn ended asking consent for ("" when it did not)."""
    if not isinstance(state, dict) or state.get("status") != "waiting_confirmation":
        return ""
    waiting = state.get("waiting")
    target = waiting.get("confirmation_target") if isinstance(waiting, dict) else ""
    return str(target or "yes")


def _calls(
    store: ConversationStore, key: ConversationKey, message_id: str
) -> tuple[int, int, float]:
    """Model calls, tokens and model latency (ms) of a turn, from its trace."""
    try:
        records = load_call_records(store, key, message_id)
    except TraceNotFoundError:
        return 0, 0, 0.0
    tokens = sum(r.input_tokens + r.output_tokens for r in records)
    return len(records), tokens, sum(r.latency_ms for r in records)


def turn_facts(store: ConversationStore, key: ConversationKey) -> list[dict[str, Any]]:
    """One dict per finished turn of a conversation: what the comparison table shows."""
    messages = store.messages(key)
    by_turn: dict[str, list[Message]] = {}
    for message in messages:
        by_turn.setdefault(message.message_id, []).append(message)
    facts: list[dict[str, Any]] = []
    previous: TurnCheckpoint | None = None
    for checkpoint in store.checkpoints(key):
        turn = by_turn.get(checkpoint.message_id, [])
        user = next((m for m in turn if m.role == "user"), None)
        answer = next((m for m in reversed(turn) if m.role == "assistant"), None)
        plan, done = _tool_steps(checkpoint.execution_state)
        old_plan, old_done = _tool_steps(previous.execution_state if previous else None)
        ran = [call for step, call in done.items() if plan != old_plan or step not in old_done]
        calls, tokens, model_ms = _calls(store, key, checkpoint.message_id)
        if not calls and answer is not None and answer.usage is not None:
            tokens = answer.usage.input_tokens + answer.usage.output_tokens
            calls = 1
        latency = (checkpoint.at - user.timestamp).total_seconds() * 1000 if user else 0.0
        facts.append(
            {
                "message_id": checkpoint.message_id,
                "user": user.content if user else "",
                "answer": answer.content if answer else "",
                "status": checkpoint.status,
                "flow": (
                    str(checkpoint.execution_state.get("status", ""))
                    if isinstance(checkpoint.execution_state, dict)
                    else ""
                ),
                "tools": ran,
                "consent": _consent(checkpoint.execution_state),
                "model_calls": calls,
                "tokens": tokens,
                "model_ms": round(model_ms, 1),
                "latency_ms": round(max(latency, 0.0), 1),
            }
        )
        previous = checkpoint
    return facts


def compare_turns(
    original: Sequence[Mapping[str, Any]], branch: Sequence[Mapping[str, Any]]
) -> pd.DataFrame:
    """The side-by-side table: one row per turn, ``original_*`` and ``branch_*`` columns."""
    require("eval", "a replay's comparison table", "pandas")
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for index in range(max(len(original), len(branch))):
        sides = [
            original[index] if index < len(original) else {},
            branch[index] if index < len(branch) else {},
        ]
        row: dict[str, Any] = {
            "turn": index + 1,
            "user": sides[0].get("user") or sides[1].get("user", ""),
        }
        for name, facts in zip(_SIDES, sides, strict=True):
            for field in ("message_id", "answer", "status", "flow", "tools", "consent"):
                value = facts.get(field, "")
                row[f"{name}_{field}"] = "; ".join(value) if isinstance(value, list) else value
            for field in ("model_calls", "tokens", "model_ms", "latency_ms"):
                row[f"{name}_{field}"] = facts.get(field, 0)
        row["same_answer"] = row["original_answer"] == row["branch_answer"]
        row["same_tools"] = row["original_tools"] == row["branch_tools"]
        rows.append(row)
    return pd.DataFrame(rows)


def _branch_folder(
    source: Agent, root: Path, sets: Mapping[str, JsonValue], prompts: Mapping[str, str | Path]
) -> Path:
    """A copy of the agent folder under *root* with *sets* and *prompts* applied."""
    from agentkit.eval.params import apply_params, validate_config

    target = root / "agents" / source.id
    ignored = shutil.ignore_patterns("conversations", ".*.lock")
    shutil.copytree(source.folder.path, target, ignore=ignored)
    config_file = target / "config.json"
    raw = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    config = apply_params(raw, sets)
    validate_config(config, f"replay of {source.id}")
    config_file.write_text(json.dumps(config, ensure_ascii=False, indent=2), encoding="utf-8")
    for name, file in prompts.items():
        stem = name.removesuffix(".md")
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", stem):
            raise UsageError(f"--prompt {name}: a template name is like plan or replan")
        try:
            text = Path(file).read_text(encoding="utf-8")
        except OSError as error:
            raise UsageError(f"--prompt {name}: cannot read {file}: {error}") from None
        (target / "prompts").mkdir(exist_ok=True)
        (target / "prompts" / f"{stem}.md").write_text(text, encoding="utf-8")
    return root


def _settings(sets: Mapping[str, JsonValue] | Sequence[str]) -> dict[str, JsonValue]:
    if isinstance(sets, Mapping):
        return dict(sets)
    from agentkit.eval.params import parse_sets

    return dict(parse_sets(list(sets)))


def replay(
    agent: str | Agent,
    conversation_id: str,
    *,
    from_message: str | None = None,
    model: str | ChatModel | SessionBackend | None = None,
    sets: Mapping[str, JsonValue] | Sequence[str] = (),
    prompts: Mapping[str, str | Path] | None = None,
    data_dir: Path | str | None = None,
    title: str | None = None,
) -> pd.DataFrame:
    """Replay *conversation_id* from turn *from_message* (None: the first) under *model*,
    config keys *sets* (``{"planner.strategy": "next_step"}`` or ``["key=value", …]``) and
    prompt templates *prompts* (``{"plan": "my_plan.md"}``); return the comparison table.

    The table's ``attrs["branch"]`` is the id of the branch conversation (beside the original)."""
    require("eval", "a replay's comparison table", "pandas")  # before the branch is written
    from agentkit.agent import Agent
    from agentkit.branches import fork_conversation
    from agentkit.runtime import AgentRuntime

    source = agent if isinstance(agent, Agent) else Agent.open(agent, data_dir=data_dir)
    owned = source is not agent
    try:
        key = ConversationKey(source.id, check_id(conversation_id, "conversation"))
        original = turn_facts(source.store, key)
        start = 0
        if from_message is not None:
            ids = [facts["message_id"] for facts in original]
            if from_message not in ids:
                raise TurnNotFoundError(source.id, conversation_id, from_message)
            start = ids.index(from_message)
        at = original[start - 1]["message_id"] if start else FORK_START
        settings = _settings(sets)
        with tempfile.TemporaryDirectory(prefix="agentkit-replay-") as scratch:
            root = _branch_folder(source, Path(scratch), settings, prompts or {})
            from agentkit.agent_folder import AgentFolder

            folder = AgentFolder.load(root, source.id)
            base = source.store.meta(key).title
            meta = fork_conversation(source.runtime, key, at=at, title=title or f"{base} (replay)")
            branch_id = meta.conversation_id
            runner = Agent(
                AgentRuntime(
                    folder, source.store, model=model, config_store=source.runtime.memory.store
                )
            )
            runner.runtime.load_tools()
            try:
                for facts in original[start:]:
                    runner.send(str(facts["user"]), branch_id)
            finally:
                runner.close()
        branch = turn_facts(source.store, ConversationKey(source.id, branch_id))
        table = compare_turns(original[start:], branch[start:])
        table.attrs["branch"] = branch_id
        table.attrs["source"] = conversation_id
        return table
    finally:
        if owned:
            source.close()
