"""Crash points inside a planner turn: SIGKILL at every durability point of a consented tool.

The conversation: "launch apollo" → the planner plans a side-effecting tool and asks for
consent (turn 1) → "yes" → the tool runs and the answer is given (turn 2). Both turns run in
a forked child whose instrumentation counts the durability points, that is every durable
journal commit (``FileConversationStore._commit``) and every durable ``system_config`` write
(``SqliteConfigStore.set``), and SIGKILLs itself just before or just after point *k*. A
dry run lists the points; the test kills at each of them, both sides, which covers: before
the user message's commit, between that commit and the model, before and after the durable
save of the step (between it and the tool), after the tool (before its result is durable),
the paused and the final states, and before and after the answer's commit.

After every kill, in the parent:

* the agent is opened again (recovery runs); ``verify()`` is ok, ``history.json`` and
  ``meta.json`` parse and agree with the journal; every message whose ``append`` returned in
  the child is there;
* the user carries on as a user would (re-sends what got no answer, answers "yes" to a
  consent question, stops once the agent has answered) — with a model that plans the launch
  whenever it is asked to plan;
* every run of the tool answered "yes" to the consent question the user saw last, and
  it ran at most once in all: killed before the step's durable "running" save, the consent
  is still pending and the user's "yes" runs it once; killed after that save and before the
  tool, it is unknown whether the tool ran (that state is the same as after the tool), so it
  is not run again and the user is told (at most once); killed after the tool, it ran once
  and the next turn reports what ran (and the answer, if it was lost) instead of planning it
  again.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent, ScriptedModel
from agentkit.events import AskUserEvent, ToolCallEvent
from agentkit.store import ConversationKey, FileConversationStore
from agentkit.store.sqlite_kv import SqliteConfigStore

from ._processes import fork_call, wait_exit

pytestmark = pytest.mark.slow

AGENT = "launcher"
REQUEST = "launch apollo"

TOOLS = '''
"""One side-effecting tool: every run appends a line to workspace/launches.log."""

from __future__ import annotations

import os

from agentkit.tools import ToolContext, tool


@tool(side_effect=True)
def launch(ctx: ToolContext, name: str) -> dict[str, str]:
    """Launch a rocket (it cannot be undone)."""
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    with open(ctx.workspace / "launches.log", "a", encoding="utf-8") as log:
        log.write(f"{os.environ.get('CRASH_TEST_RUN', '?')} {name}\\n")
    return {"launched": name}
'''

PLAN = {
    "goal": "launch apollo",
    "steps": [
        {"id": "s1", "type": "tool", "title": "launch", "tool_name": "launch",
         "tool_args": {"name": "apollo"}},
        {"id": "s2", "type": "respond", "title": "report", "instruction": "Say it launched."},
    ],
}  # fmt: skip
# Every purpose repeats its last reply: whenever the planner plans, it plans the launch.
SCRIPT: dict[str, list[Any]] = {
    "plan": [PLAN],
    "replan": [{"action": "continue"}],
    "respond": ["Apollo is launched."],
}
FINAL = "Apollo is launched."
CONSENT = "To continue I need to run launch"  # how the planner's consent question starts
INTERRUPTED = "My last turn was interrupted"  # how the report of a killed turn starts
RUNNING = "kv execution_state running s1=running,s2=pending"


# ------------------------------------------------------------------------------- the agent


def make_root(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "data"
    folder = root / "agents" / AGENT
    (folder / "workspace").mkdir(parents=True)
    config = {"engine": "planner", "toolsets": [{"python": "tools.py"}]}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    with Agent.open(AGENT, data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
        conversation = agent.create_conversation("crash").conversation_id
    return root, conversation


def launches(root: Path) -> list[str]:
    path = root / "agents" / AGENT / "workspace" / "launches.log"
    return path.read_text(encoding="utf-8").splitlines() if path.is_file() else []


# ------------------------------------------------------------------ the child and its points


def _append_line(path: Path, line: str) -> None:
    """One O_APPEND write: it survives the SIGKILL that may follow right after."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _instrument(points: Path, acks: Path, kill_at: int, side: str) -> None:
    """Count durability points (written to *points*), SIGKILL at point *kill_at* (*side* =
    before | after), and log every message ``append`` that returned (to *acks*)."""
    count = 0

    def point(label: str, call: Callable[[], Any]) -> Any:
        nonlocal count
        count += 1
        _append_line(points, f"{count} {label}")
        if count == kill_at and side == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = call()
        if count == kill_at and side == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    commit = FileConversationStore._commit
    append = FileConversationStore.append
    kv_set = SqliteConfigStore.set

    def counted_commit(self: FileConversationStore, key: Any, records: Any, **kw: Any) -> Any:
        if not kw.get("durable", True):
            return commit(self, key, records, **kw)
        label = f"journal {len(records)} record(s)"
        return point(label, lambda: commit(self, key, records, **kw))

    def acked_append(self: FileConversationStore, key: Any, message: Any, **kw: Any) -> Any:
        meta = append(self, key, message, **kw)
        _append_line(acks, json.dumps({"id": message.message_id, "role": message.role}))
        return meta

    def counted_set(self: SqliteConfigStore, key: str, value: Any, **kw: Any) -> Any:
        if not kw.get("durable", True):
            return kv_set(self, key, value, **kw)
        status = value.get("status", "") if isinstance(value, dict) else ""
        steps = value.get("steps", []) if isinstance(value, dict) else []
        shown = ",".join(f"{s['id']}={s['status']}" for s in steps if isinstance(s, dict))
        label = f"kv {key.split(':', maxsplit=1)[0]} {status} {shown}".rstrip()
        return point(label, lambda: kv_set(self, key, value, **kw))

    FileConversationStore._commit = counted_commit  # type: ignore[method-assign]
    FileConversationStore.append = acked_append  # type: ignore[method-assign]
    SqliteConfigStore.set = counted_set  # type: ignore[method-assign]


def _conversation(root: str, conversation: str, work: str, kill_at: int, side: str) -> None:
    """The child: turn 1 (the request) and turn 2 ("yes"), killed at point *kill_at*."""
    os.environ["CRASH_TEST_RUN"] = "first"
    _instrument(Path(work, "points"), Path(work, "acks"), kill_at, side)
    for text in (REQUEST, "yes"):
        with Agent.open(AGENT, data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
            agent.send(text, conversation)


def run_child(root: Path, conversation: str, work: Path, kill_at: int, side: str) -> int:
    work.mkdir()
    pid = fork_call(_conversation, str(root), conversation, str(work), kill_at, side)
    return wait_exit(pid)


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.is_file() else []


# ----------------------------------------------------------------------- after the crash


def check_files(root: Path, conversation: str, acked: list[dict[str, str]]) -> None:
    """Every file of the conversation parses and agrees; every acknowledged message is there."""
    store = FileConversationStore(root)
    report = store.verify(AGENT)
    assert report.ok, "\n".join(map(str, report.problems))
    key = ConversationKey(AGENT, conversation)
    messages = store.messages(key)
    folder = root / "agents" / AGENT / "conversations" / conversation
    history = json.loads((folder / "history.json").read_bytes())
    assert history == [m.to_json_dict() for m in messages]
    meta = json.loads((folder / "meta.json").read_bytes())
    assert meta["stats"]["messageCount"] == len(messages)
    for path in folder.glob("*/calls.jsonl"):  # traces of model calls: whole lines only
        for line in path.read_text().splitlines():
            json.loads(line)
    present = [(m.message_id, m.role) for m in messages]
    for ack in acked:
        assert (ack["id"], ack["role"]) in present, f"acknowledged message lost: {ack}"


def carry_on(root: Path, conversation: str) -> list[str]:
    """The user continues after the restart, going by what they see (the history): a
    message that got no answer is sent again, a consent question is answered "yes", any
    other answer ends it. Returns what they said. The tool may run only in a turn that says
    "yes" to the consent question the user saw last, while it is pending."""
    said: list[str] = []
    os.environ["CRASH_TEST_RUN"] = "after"
    for _ in range(4):
        with Agent.open(AGENT, data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
            history = agent.load_conversation_history(conversation)
            stored = agent.execution_state(conversation)
            if not history:
                text = REQUEST  # the request itself was not acknowledged
            elif history[-1].role == "user":
                text = history[-1].content  # no answer to it: say it again
            elif history[-1].content.startswith(CONSENT):
                text = "yes"
            else:
                return said
            # the consent question the user saw last (their "yes" may be there, unanswered)
            seen = [m for m in history if m.role == "assistant"][-1:]
            consented = text == "yes" and bool(seen) and seen[0].content.startswith(CONSENT)
            pending = stored is not None and stored.value.status == "waiting_confirmation"
            before = len(launches(root))
            turn = agent.send(text, conversation)
            said.append(text)
            ran = [e for e in turn.events if isinstance(e, ToolCallEvent) and e.name == "launch"]
            assert len(launches(root)) == before + len(ran)
            if ran:
                assert consented and pending, f"launch ran without consent after {said}"
            if any(isinstance(e, AskUserEvent) for e in turn.events):
                assert not ran  # a consent question, and the tool did not run with it
    raise AssertionError(f"the conversation did not settle: {said}")


# ---------------------------------------------------------------------------------- tests


def test_a_dry_run_passes_every_durability_point(tmp_path: Path) -> None:
    root, conversation = make_root(tmp_path)
    assert run_child(root, conversation, tmp_path / "dry", 0, "none") == 0
    labels = [line.split(" ", 1)[1] for line in read_lines(tmp_path / "dry" / "points")]
    # turn 1: request + running, planning…paused (durable), answer + status
    # turn 2: "yes" + running, step running before the tool, step done after it, final, answer
    assert labels.count("journal 2 record(s)") == 4, labels
    assert "kv execution_state running s1=running,s2=pending" in labels, labels
    assert "kv execution_state running s1=done,s2=pending" in labels, labels
    assert launches(root) == ["first apollo"]
    assert carry_on(root, conversation) == []


def _points(tmp_path: Path) -> list[str]:
    root, conversation = make_root(tmp_path / "count")
    assert run_child(root, conversation, tmp_path / "count" / "work", 0, "none") == 0
    return read_lines(tmp_path / "count" / "work" / "points")


def test_sigkill_at_every_durability_point_of_a_consented_tool(tmp_path: Path) -> None:
    points = _points(tmp_path)
    # the step's durable "running" save: the tool runs right after it returns
    tool_point = next(int(line.split()[0]) for line in points if line.endswith(RUNNING))
    outcomes: list[str] = []
    for number, label in (line.split(" ", 1) for line in points):
        for side in ("before", "after"):
            k = int(number)
            where = f"point {k} {side} ({label})"
            base = tmp_path / f"k{k}-{side}"
            root, conversation = make_root(base)
            code = run_child(root, conversation, base / "work", k, side)
            assert code == -signal.SIGKILL, f"{where}: the child ended with {code}"
            acked = [json.loads(line) for line in read_lines(base / "work" / "acks")]
            ran_first = launches(root)
            check_files(root, conversation, acked)
            said = carry_on(root, conversation)
            check_files(root, conversation, [])
            ran = launches(root)
            with Agent.open(AGENT, data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
                answer = agent.load_conversation_history(conversation)[-1]
            assert answer.role == "assistant", where
            if k < tool_point or (k == tool_point and side == "before"):
                # before the durable "running" save: not run; the user's "yes" runs it once
                assert ran_first == [] and ran == ["after apollo"], f"{where}: {ran}"
                assert answer.content == FINAL, where
            elif k == tool_point:
                # saved as running, killed before the tool: it may or may not have run, so
                # it is not run again; the user is told
                assert ran == [], f"{where}: {ran}"
                assert answer.content.startswith(INTERRUPTED), (where, answer.content)
                assert "may or may not have run" in answer.content, where
            else:  # the tool ran in the first process, and never again
                assert ran == ["first apollo"], f"{where}: {ran}"
                # the answer, or (its turn killed before the answer) what ran, and the
                # answer if the flow had finished
                assert answer.content == FINAL or answer.content.startswith(INTERRUPTED), where
            outcomes.append(f"{k:>2} {side:<6} {label:<56} ran={ran} then user said {said}")
    print("\n" + "\n".join(outcomes))


# ------------------------------------------------------------- decisions made from Python


def _decided_conversation(root: str, conversation: str, work: str, kill_at: int, side: str) -> None:
    """The child: turn 1 (the request), then the approval decided from Python by its id."""
    os.environ["CRASH_TEST_RUN"] = "first"
    _instrument(Path(work, "points"), Path(work, "acks"), kill_at, side)
    with Agent.open(AGENT, data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
        agent.send(REQUEST, conversation)
        (pending,) = agent.pending_approvals(conversation)
        agent.decide(conversation, pending.approval_id, "approve")


def test_sigkill_around_a_python_decision_never_runs_twice_or_loses_it(tmp_path: Path) -> None:
    """Killed just before the durable point that consumes the decision, the approval is still
    pending (the user approves again and it runs once); just after it, the tool may or may
    not have run and never runs again; after the tool, it ran once."""
    root, conversation = make_root(tmp_path / "count")
    work = tmp_path / "count" / "work"
    work.mkdir()
    assert (
        wait_exit(
            fork_call(_decided_conversation, str(root), str(conversation), str(work), 0, "none")
        )
        == 0
    )
    points = read_lines(work / "points")
    tool_point = next(int(line.split()[0]) for line in points if line.endswith(RUNNING))
    for k, side in ((tool_point, "before"), (tool_point, "after"), (tool_point + 1, "after")):
        base = tmp_path / f"k{k}-{side}"
        root, conversation = make_root(base)
        (base / "work").mkdir()
        pid = fork_call(_decided_conversation, str(root), conversation, str(base / "work"), k, side)
        assert wait_exit(pid) == -signal.SIGKILL
        first = launches(root)
        with Agent.open(AGENT, data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
            pending = agent.pending_approvals(conversation)
            if side == "before":  # not consumed: still pending, and approving runs it once
                assert first == [] and len(pending) == 1
                os.environ["CRASH_TEST_RUN"] = "after"
                agent.decide(conversation, pending[0].approval_id, "approve")
                assert launches(root) == ["after apollo"]
            else:  # consumed with the durable running point: never pending again
                assert pending == []
                (decided,) = agent.approval_decisions(conversation)
                assert decided.decision == "approve" and decided.source == "python"
                said = carry_on(root, conversation)
                assert launches(root) == first and len(first) <= 1, said


def _race(root: str, conversation: str, approval_id: str, out: str) -> None:
    from agentkit.errors import ApprovalDecidedError

    with Agent.open(AGENT, data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
        try:
            agent.decide(conversation, approval_id, "approve")
            _append_line(Path(out), "ran")
        except ApprovalDecidedError:
            _append_line(Path(out), "already decided")


def test_two_processes_deciding_at_once_run_the_tool_once(tmp_path: Path) -> None:
    root, conversation = make_root(tmp_path)
    with Agent.open(AGENT, data_dir=root, model=ScriptedModel(SCRIPT)) as agent:
        agent.send(REQUEST, conversation)
        (pending,) = agent.pending_approvals(conversation)
    out = tmp_path / "outcomes"
    pids = [
        fork_call(_race, str(root), conversation, pending.approval_id, str(out)) for _ in range(2)
    ]
    assert [wait_exit(pid) for pid in pids] == [0, 0]
    assert sorted(read_lines(out)) == ["already decided", "ran"]
    assert len(launches(root)) == 1
