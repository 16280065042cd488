"""The agentkit command line, run as the installed script (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import run_cli, tree

SCRIPT = Path(sys.executable).with_name("agentkit")


def agentkit(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_a_conversation_through_the_cli(data_dir: Path) -> None:
    agents = json.loads(agentkit(data_dir, "agents", "--json").stdout)
    assert [a["agentId"] for a in agents] == [
        "bfcl-001",
        "calendar-001",
        "desk-001",
        "desk-local-001",
        "innovator-001",
        "notes-001",
        "tau2-airline",
        "tau2-retail",
        "tau2-telecom",
    ]
    assert {a["agentId"]: a["engine"] for a in agents}["desk-001"] == "planner"

    info = json.loads(agentkit(data_dir, "info", "innovator-001", "--json").stdout)
    assert info["engine"] == "chat" and info["conversationCount"] == 0
    assert info["promptFiles"][0] == "identity.md"

    created = agentkit(data_dir, "new", "innovator-001", "--title", "你好 world")
    assert created.returncode == 0, created.stderr
    cid = created.stdout.strip()
    assert created.stdout == f"{cid}\n" and cid.startswith("conv-")

    # Messages arrive with send_message (issue 3); append through the API meanwhile.
    from agentkit import Agent, Message

    agent = Agent.open("innovator-001", data_dir=data_dir)
    question = Message.user("第一个问题\nline 2")
    agent.append_message(cid, question)
    agent.append_message(cid, Message.assistant("答案", message_id=question.message_id))

    listed = json.loads(agentkit(data_dir, "conversations", "innovator-001", "--json").stdout)
    assert [(c["conversationId"], c["title"]) for c in listed] == [(cid, "你好 world")]
    assert listed[0]["stats"]["messageCount"] == 2
    text = agentkit(data_dir, "conversations", "innovator-001").stdout
    assert cid in text and "2 msgs" in text

    history = agentkit(data_dir, "history", "innovator-001", cid, "--json")
    messages = json.loads(history.stdout)
    assert [m["content"] for m in messages] == ["第一个问题\nline 2", "答案"]
    assert messages[0]["messageId"] == question.message_id
    assert "assistant: 答案" in agentkit(data_dir, "history", "innovator-001", cid).stdout

    verified = agentkit(data_dir, "verify")
    assert verified.returncode == 0
    assert "1 conversations checked, 0 problems" in verified.stdout

    deleted = agentkit(data_dir, "delete", "innovator-001", cid)
    assert deleted.returncode == 0
    assert json.loads(agentkit(data_dir, "conversations", "innovator-001", "--json").stdout) == []


def test_bad_input_is_one_line_exit_2_and_writes_nothing(data_dir: Path) -> None:
    before = tree(data_dir.parent)
    cases = [
        (("info", "nobody"), "no agent 'nobody'"),
        (("new", "nobody"), "no agent 'nobody'"),
        (("history", "innovator-001", "conv-missing"), "no conversation 'conv-missing'"),
        (("delete", "innovator-001", "conv-missing"), "no conversation 'conv-missing'"),
        (("verify", "nobody"), "no agent 'nobody'"),
        (("new", "../innovator-001"), "invalid agent id"),
        (("history", "innovator-001"), "Missing argument"),
        (("frobnicate",), "No such command"),
    ]
    for args, message in cases:
        result = agentkit(data_dir, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert tree(data_dir.parent) == before


def test_fork_with_an_empty_or_blank_at_is_exit_2_and_writes_nothing(data_dir: Path) -> None:
    from agentkit import Agent, ScriptedModel

    model = ScriptedModel({"chat": ["hi"]})
    with Agent.open("innovator-001", data_dir=data_dir, model=model) as agent:
        cid = agent.send("hello").conversation_id  # one finished turn: the default would fork it
    root = ("--data-dir", str(data_dir))
    before = tree(data_dir.parent)
    for at in ("", "   ", "\t"):
        result = run_cli(*root, "fork", "innovator-001", cid, "--at", at)
        assert result.exit_code == 2, (at, result.stdout, result.stderr)
        assert result.stdout == ""
        assert result.stderr == (
            f"agentkit: error: invalid message id {at!r}: ids are 1-64 ASCII letters, digits, "
            "'-' or '_', starting with a letter or digit\n"
        )
    assert tree(data_dir.parent) == before
    forked = run_cli(*root, "fork", "innovator-001", cid)  # no --at: the last turn
    assert forked.exit_code == 0, forked.stderr
    assert forked.stdout.startswith("conv-") and forked.stdout.strip() != cid


def test_verify_reports_damage_and_repair_fixes_it(data_dir: Path) -> None:
    cid = run_cli("--data-dir", str(data_dir), "new", "innovator-001").stdout.strip()
    folder = data_dir / "agents" / "innovator-001" / "conversations" / cid
    (folder / "history.json").write_text("[{broken")
    result = run_cli("--data-dir", str(data_dir), "verify", "innovator-001")
    assert result.exit_code == 1
    assert "history-mismatch" in result.stdout and "not valid JSON" in result.stdout
    repaired = run_cli("--data-dir", str(data_dir), "verify", "--repair")
    assert repaired.exit_code == 0, repaired.stdout
    assert f"recovered innovator-001/{cid}" in repaired.stdout
    assert json.loads((folder / "history.json").read_text()) == []


def test_data_dir_comes_from_the_environment(data_dir: Path) -> None:
    env = {**os.environ, "AGENTKIT_DATA_DIR": str(data_dir)}
    result = subprocess.run(
        [str(SCRIPT), "agents", "--json"], capture_output=True, text=True, env=env, check=True
    )
    assert len(json.loads(result.stdout)) == 9  # the sample agents and the tau2 ones


def test_an_invalid_agent_config_is_listed_not_fatal(data_dir: Path) -> None:
    (data_dir / "agents" / "desk-001" / "config.json").write_text('{"engine": "rocket"}')
    result = run_cli("--data-dir", str(data_dir), "agents")
    assert result.exit_code == 0
    assert "desk-001" in result.stdout and "invalid" in result.stdout and "engine" in result.stdout
    info = run_cli("--data-dir", str(data_dir), "info", "desk-001")
    assert info.exit_code == 2 and "'engine'" in info.stderr


def test_tool_runs_as_the_user_and_masks_secrets(data_dir: Path) -> None:
    secret = "sk-live-0123456789abcdef"
    created = agentkit(
        data_dir,
        "tool",
        "desk-001",
        "create_exchange_config",
        json.dumps(
            {
                "exchange": "binance",
                "account_name": "main",
                "api_key": secret,
                "secret_key": "another-secret-9876",
            }
        ),
    )
    assert created.returncode == 0, created.stderr
    record = json.loads(created.stdout)
    assert record["id"] == "ex-1" and record["exchange"] == "binance"
    assert secret not in created.stdout and "another-secret" not in created.stdout
    assert record["api_key"].endswith("cdef")  # masked, last 4 kept
    listed = json.loads(agentkit(data_dir, "tool", "desk-001", "get_exchange_configs").stdout)
    assert [c["id"] for c in listed["exchange_configs"]] == ["ex-1"]
    desk_db = data_dir / "agents" / "desk-001" / "workspace" / "desk.db"
    assert secret.encode() in desk_db.read_bytes() or any(
        secret.encode() in p.read_bytes() for p in desk_db.parent.glob("desk.db*")
    )  # stored (in the db or its WAL), never shown
    failed = agentkit(
        data_dir,
        "tool",
        "desk-001",
        "create_trader",
        '{"name": "t1", "exchange_id": "ex-9", "model_id": "model-1"}',
    )
    assert failed.returncode == 1 and "ex-9" in failed.stdout
    before = tree(data_dir.parent)
    for args in (("nope",), ("create_trader", "{bad"), ("create_trader", '{"name": 1}')):
        bad = agentkit(data_dir, "tool", "desk-001", *args)
        assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert tree(data_dir.parent) == before


def test_state_shows_and_clear_forgets_the_memory_layers(data_dir: Path) -> None:
    from agentkit.memory import MemoryRepository, TaskState
    from agentkit.store import SqliteConfigStore

    cid = run_cli("--data-dir", str(data_dir), "new", "desk-001").stdout.strip()
    store = SqliteConfigStore(data_dir / "agentkit.db")
    try:
        MemoryRepository(store).save_task_state(
            "desk-001",
            cid,
            TaskState(current_goal="create a trader", important_facts=("user trades on Binance",)),
            expected_version=0,
        )
    finally:
        store.close()
    shown = agentkit(data_dir, "state", "desk-001", cid, "--json")
    assert shown.returncode == 0, shown.stderr
    state = json.loads(shown.stdout)
    assert state["task_state"]["current_goal"] == "create a trader"
    assert state["task_state"]["important_facts"] == ["user trades on Binance"]
    assert state["execution_state"] is None
    assert "create a trader" in agentkit(data_dir, "state", "desk-001", cid).stdout
    assert agentkit(data_dir, "clear", "desk-001", cid).returncode == 0
    cleared = json.loads(agentkit(data_dir, "state", "desk-001", cid, "--json").stdout)
    assert cleared["task_state"]["current_goal"] == ""
    # A step waiting for consent keeps its raw arguments in the store; state never prints them.
    from agentkit.memory import ExecutionState, PlanStep, Waiting

    secret = "sk-live-abcdefghijklmnop"
    store = SqliteConfigStore(data_dir / "agentkit.db")
    try:
        pending = ExecutionState(
            conversation_id=cid,
            goal="add an exchange",
            status="waiting_confirmation",
            steps=(
                PlanStep(
                    id="s1",
                    type="tool",
                    title="add it",
                    tool_name="create_exchange_config",
                    tool_args={
                        "exchange": "binance",
                        "account_name": "m",
                        "api_key": secret,
                        "secret_key": secret,
                    },
                ),
            ),
            current_step_id="s1",
            waiting=Waiting(question="Run create_exchange_config?", intent="confirm"),
        )
        MemoryRepository(store).save_execution_state("desk-001", cid, pending, expected_version=0)
    finally:
        store.close()
    shown = agentkit(data_dir, "state", "desk-001", cid, "--json")
    assert shown.returncode == 0, shown.stderr
    assert secret not in shown.stdout
    assert json.loads(shown.stdout)["execution_state"]["status"] == "waiting_confirmation"
    missing = agentkit(data_dir, "state", "desk-001", "conv-missing")
    assert missing.returncode == 2 and "no conversation" in missing.stderr
