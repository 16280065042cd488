"""Data roots written by earlier releases open, verify clean, take turns, fork and move.

tests/fixtures/data_roots/{release}/ holds a data root each release wrote
(tests/fixtures/data_roots/make_root.py says how): chat turns with a compressed window and a
pinned TaskState fact, a fork, a planner turn waiting for consent and one approved (its
ExecutionState), and, where the release could, that root through its PostgreSQL store and
back (``postgres-export``). Each must verify clean as written (a view in an earlier format
is a note, not a problem), take a turn on every conversation, fork, export and import (file
store and PostgreSQL) and verify clean after each. A view damaged on purpose is still a
problem: verifying by meaning does not hide damage. And the code's persisted fields must be
the newest fixture's: a field added without a fixture written by the code that has it fails.
"""

from __future__ import annotations

import json
import shutil
import sys
import typing
from pathlib import Path

import pytest
from agentkit import Agent, ScriptedModel
from agentkit.events import AskUserEvent, ToolCallEvent
from agentkit.store import FileConversationStore, SqliteConfigStore
from agentkit.store._views import VIEW_FORMAT
from agentkit.store.transfer import export_to, import_from

from tests._postgres import PostgresServer, fresh_url, postgres_server  # noqa: F401 (fixture)
from tests.conftest import run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "data_roots"
RELEASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "RELEASE").is_file())
NEWEST = RELEASES[-1]
CHAT, PLANNER = "chat-fixture", "planner-fixture"
PLANNER_SCRIPT = {"plan": [{"goal": "answer", "steps": [
    {"id": "s1", "type": "respond", "title": "answer", "instruction": "Answer."}
]}], "replan": [{"action": "continue"}], "respond": ["Done."]}  # fmt: skip

sys.path.insert(0, str(FIXTURES))
from persisted import persisted_fields  # noqa: E402


def _root(release: str, tmp_path: Path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(FIXTURES / release / "data", root)
    return root


def _verified_clean(root: Path, *args: str) -> str:
    """``agentkit verify`` on *root* exits 0 with no problem; its output."""
    out = run_cli("--data-dir", str(root), "verify", *args)
    assert out.exit_code == 0, out.stdout + out.stderr
    assert " 0 problems" in out.stdout and "does not match" not in out.stdout, out.stdout
    return out.stdout


def _metas(root: Path) -> list[Path]:
    return sorted(root.glob("agents/*/conversations/*/meta.json"))


def _conversations(root: Path) -> dict[str, list[str]]:
    store = FileConversationStore(root)
    return {
        agent: sorted(meta.conversation_id for meta in store.conversations(agent))
        for agent in (CHAT, PLANNER)
    }


def _take_turns(root: Path, store: str | None = None, *, waiting: int = 1) -> None:
    """A turn on every conversation: the chat ones a message; the planner's *waiting* ones
    (as the fixture holds it: one) approved (its tool runs once), then a new request each."""
    keys = _conversations(root) if store is None else None
    with Agent.open(CHAT, data_dir=root, store=store, model=ScriptedModel(["Fine."] * 20)) as a:
        for conversation in (
            keys[CHAT] if keys else [m.conversation_id for m in a.list_conversations()]
        ):
            before = len(a.load_conversation_history(conversation))
            done = a.send("one more thing after the upgrade", conversation)
            assert done.text == "Fine."
            assert len(a.load_conversation_history(conversation)) == before + 2
    model = ScriptedModel(PLANNER_SCRIPT)
    with Agent.open(PLANNER, data_dir=root, store=store, model=model) as a:
        conversations = (
            keys[PLANNER] if keys else [m.conversation_id for m in a.list_conversations()]
        )
        paused = [c for c in conversations if a.pending_approvals(c)]
        assert len(paused) == waiting, paused
        for conversation in paused:
            (pending,) = a.pending_approvals(conversation)
            done = a.decide(conversation, pending.approval_id, "approve")
            ran = [e for e in done.events if isinstance(e, ToolCallEvent)]
            assert [e.name for e in ran] == [pending.tool_name]
            assert not a.pending_approvals(conversation)
        for conversation in conversations:
            turn = a.send("list the traders", conversation)
            assert not [e for e in turn.events if isinstance(e, AskUserEvent)]


@pytest.mark.parametrize("release", RELEASES)
def test_an_earlier_data_root_verifies_clean_as_written(release: str, tmp_path: Path) -> None:
    root = _root(release, tmp_path)
    before = {p: p.read_bytes() for p in root.glob("agents/*/conversations/**/*") if p.is_file()}
    shown = _verified_clean(root)
    report = FileConversationStore(root).verify()
    assert report.ok and report.conversations >= 5, report.problems
    if (
        json.loads((FIXTURES / release / "FIELDS.json").read_text())["formats"]["VIEW_FORMAT"]
        < VIEW_FORMAT
    ):
        assert report.notes and "written by an earlier release (fine)" in shown
        assert all(note.kind == "earlier-format" for note in report.notes)
    # neither opening nor verifying writes: an old view changes only by a write or --repair
    with Agent.open(CHAT, data_dir=root, model=ScriptedModel([])) as agent:
        for meta in agent.list_conversations():
            assert agent.load_conversation_history(meta.conversation_id)
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.parametrize("release", RELEASES)
def test_an_earlier_data_root_takes_turns_forks_and_moves(release: str, tmp_path: Path) -> None:
    root = _root(release, tmp_path)
    with Agent.open(PLANNER, data_dir=root, model=ScriptedModel([])) as agent:
        metas = agent.list_conversations()
        assert any(meta.forked_from is not None for meta in metas)
        compressed = [
            m.conversation_id for m in metas if agent.conversation_records(m.conversation_id)
        ]
        assert compressed, "the fixture's compressed window"
        facts = [agent.task_state(c).value.important_facts for c in compressed]
        assert any("pinned: tea, not coffee" in kept for kept in facts)
    with Agent.open(CHAT, data_dir=root, model=ScriptedModel([])) as agent:
        assert any(meta.forked_from is not None for meta in agent.list_conversations())

    histories = {m.parent: json.loads(m.read_bytes()).get("views", {}) for m in _metas(root)}
    _take_turns(root)
    _verified_clean(root)
    # the next write brought meta.json to the current format; history.json's older entries
    # stay as written (historyFormat carried), the new ones are in the current format
    for meta in _metas(root):
        data = json.loads(meta.read_bytes())
        assert data["v"] == VIEW_FORMAT
        written = histories[meta.parent].get("historyFormat", 1)
        assert data["views"]["historyFormat"] == written

    with Agent.open(PLANNER, data_dir=root, model=ScriptedModel([])) as agent:
        pinned = next(
            c
            for c in compressed
            if "pinned: tea, not coffee" in agent.task_state(c).value.important_facts
        )
        fork = agent.fork(pinned, title="after the upgrade")
        kept = agent.task_state(fork.conversation_id).value.important_facts
        assert "pinned: tea, not coffee" in kept
        assert agent.conversation_records(fork.conversation_id)
    _verified_clean(root)

    # export and import: the file store
    export, target = tmp_path / "export", tmp_path / "target"
    store = FileConversationStore(root)
    with SqliteConfigStore(root / "agentkit.db") as config:
        export_to(store, config, export, [CHAT, PLANNER])
    shutil.copytree(
        root / "agents", target / "agents", ignore=shutil.ignore_patterns("conversations")
    )
    with SqliteConfigStore(target / "agentkit.db") as config:
        moved = import_from(export, FileConversationStore(target), config)
    assert moved.conversations == sum(len(v) for v in _conversations(root).values())
    _verified_clean(export)
    _verified_clean(target)
    _take_turns(target, waiting=0)
    _verified_clean(target)


@pytest.mark.parametrize("release", RELEASES)
def test_verify_repair_brings_earlier_views_to_the_current_format(
    release: str, tmp_path: Path
) -> None:
    root = _root(release, tmp_path)
    journals = {p: p.read_bytes() for p in root.rglob("journal.log")}
    shown = _verified_clean(root, "--repair")
    assert "written by an earlier release" not in shown
    report = FileConversationStore(root).verify()
    assert report.ok and not report.notes
    for meta in root.rglob("meta.json"):
        data = json.loads(meta.read_bytes())
        assert data["v"] == VIEW_FORMAT and data["views"]["historyFormat"] == VIEW_FORMAT
    assert {p: p.read_bytes() for p in root.rglob("journal.log")} == journals  # never touched


@pytest.mark.parametrize("release", RELEASES)
def test_a_view_damaged_on_purpose_is_still_a_problem(release: str, tmp_path: Path) -> None:
    root = _root(release, tmp_path)
    folders = sorted(p.parent for p in (root / "agents").rglob("history.json"))
    changed, missing, renamed = folders[:3]

    history = changed / "history.json"
    entries = json.loads(history.read_bytes())
    entries[0]["content"] = "a message nobody wrote"
    history.write_text(json.dumps(entries, ensure_ascii=False))  # same meaning elsewhere

    history = missing / "history.json"
    lines = history.read_bytes().split(b"\n")
    del lines[2]  # the second entry (one per line)
    history.write_bytes(b"\n".join(lines))

    meta = renamed / "meta.json"
    data = json.loads(meta.read_bytes())
    data["title"] = "a title the journal never had"
    meta.write_text(json.dumps(data, indent=2))

    out = run_cli("--data-dir", str(root), "verify")
    assert out.exit_code == 1
    report = FileConversationStore(root).verify()
    found = {(p.conversation_id, p.kind) for p in report.problems}
    assert (changed.name, "history-mismatch") in found
    assert (missing.name, "history-mismatch") in found
    assert (renamed.name, "meta-mismatch") in found
    assert "does not match the journal" in out.stdout
    details = " ".join(p.detail for p in report.problems)
    assert "entry 0" in details and "differs" in details


@pytest.mark.postgres
@pytest.mark.parametrize("release", RELEASES)
def test_an_earlier_data_root_moves_through_postgresql(
    release: str,
    tmp_path: Path,
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    """Exported (the file store's export of the old root, and the release's own PostgreSQL
    export where it has one), imported into PostgreSQL, verified, a turn on every
    conversation, verified, exported back and verified."""
    root = _root(release, tmp_path)
    files = tmp_path / "files"
    out = run_cli("--data-dir", str(root), "export", "--to", str(files))
    assert out.exit_code == 0, out.stderr
    sources = [files, FIXTURES / release / "postgres-export"]
    for number, source in enumerate(s for s in sources if s.is_dir()):
        url = fresh_url(postgres_server)
        loaded = run_cli("--data-dir", str(root), "import", str(source), "--store", url)
        assert loaded.exit_code == 0, loaded.stderr
        _verified_clean(root, "--store", url)
        _take_turns(root, store=url)
        _verified_clean(root, "--store", url)
        back = tmp_path / f"back-{number}"
        out = run_cli("--data-dir", str(root), "export", "--store", url, "--to", str(back))
        assert out.exit_code == 0, out.stderr
        _verified_clean(back)


@pytest.mark.parametrize(
    "release", [r for r in RELEASES if (FIXTURES / r / "postgres-export").is_dir()]
)
def test_an_earlier_postgresql_export_imports_and_verifies_clean(
    release: str, tmp_path: Path
) -> None:
    export = FIXTURES / release / "postgres-export"
    _verified_clean(_copy(export, tmp_path / "as-written"))
    root = _root(release, tmp_path)
    target = tmp_path / "target"
    shutil.copytree(
        root / "agents", target / "agents", ignore=shutil.ignore_patterns("conversations")
    )
    with SqliteConfigStore(target / "agentkit.db") as config:
        import_from(export, FileConversationStore(target), config)
    _verified_clean(target)
    _take_turns(target)
    _verified_clean(target)


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def test_every_persisted_field_has_a_data_root_written_with_it() -> None:
    """The code's persisted fields and format versions are the newest fixture's: adding a
    field to a persisted value (a journal record, meta.json's checkpoint, TaskState,
    ExecutionState, a call record) needs a data root written by the code that has it (run
    tests/fixtures/data_roots/make_root.py on your commit) and a view format that says so."""
    newest = json.loads((FIXTURES / NEWEST / "FIELDS.json").read_text())
    now = persisted_fields()
    added = sorted(set(now["fields"]) - set(newest["fields"]))
    dropped = sorted(set(newest["fields"]) - set(now["fields"]))
    assert not added and not dropped, (
        f"persisted fields changed since the newest data-root fixture ({NEWEST}): "
        f"added {added}, dropped {dropped}; write a fixture with make_root.py"
    )
    assert now["formats"] == newest["formats"]


def test_the_newest_fixture_holds_every_kind_of_record() -> None:
    """The newest data root holds every journal record kind and every typed conversation
    record kind (a kind no fixture holds is a kind no upgrade test reads)."""
    from agentkit.store._journal import scan_frames
    from agentkit.store._records import JournalRecord, decode_records
    from agentkit.store.records import CompressionRecord

    kinds: set[str] = set()
    typed: set[str] = set()
    for journal in (FIXTURES / NEWEST / "data").rglob("journal.log"):
        payloads = [frame.payload for frame in scan_frames(journal.read_bytes()).frames]
        for record in decode_records(payloads):
            kinds.add(record.kind)
            inner = getattr(record, "record", None)
            if inner is not None:
                typed.add(inner.kind)
    union = typing.get_args(JournalRecord)[0]  # Annotated[Union[...], discriminator]
    every = {member.model_fields["kind"].default for member in typing.get_args(union)}
    assert every <= kinds, every - kinds
    assert CompressionRecord.model_fields["kind"].default in typed
