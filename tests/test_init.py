"""``agentkit init``, ``agentkit tools`` and ``agentkit tool`` on agents of any domain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentkit import Agent
from agentkit.agent_folder import PROMPT_FILES

from .conftest import run_cli


def test_init_then_send_with_the_scripted_model(tmp_path: Path) -> None:
    made = run_cli("--data-dir", str(tmp_path), "init", "helper")
    assert made.exit_code == 0, made.stderr
    folder = tmp_path / "agents" / "helper"
    assert str(folder) in made.stdout
    for name in (*PROMPT_FILES, "config.json", "tools.py", "script.json"):
        assert (folder / name).is_file(), name
    config = json.loads((folder / "config.json").read_text())
    assert config["engine"] == "planner" and config["toolsets"] == [{"python": "tools.py"}]

    listed = run_cli("--data-dir", str(tmp_path), "tools", "helper", "--json")
    assert listed.exit_code == 0, listed.stderr
    tools = {row["name"]: row for row in json.loads(listed.stdout)}
    assert tools["list_reminders"]["live_state"] and not tools["list_reminders"]["side_effect"]
    assert tools["add_reminder"]["side_effect"]
    assert tools["add_reminder"]["schema"]["required"] == ["text"]

    sent = run_cli(
        "--data-dir", str(tmp_path), "send", "helper", "what reminders do I have?",
        "--model", "scripted:script.json", "--json",
    )  # fmt: skip
    assert sent.exit_code == 0, sent.stderr
    events = [json.loads(line) for line in sent.stdout.splitlines() if line.strip()]
    kinds = [event["type"] for event in events]
    assert "tool_call" in kinds and kinds[-1] == "result"
    assert events[-1]["status"] == "completed"
    assert "no reminders yet" in events[-1]["text"]

    # the side-effecting tool, run directly as the user
    ran = run_cli(
        "--data-dir", str(tmp_path), "tool", "helper", "add_reminder", '{"text": "call mum"}'
    )
    assert ran.exit_code == 0, ran.stderr
    assert json.loads(ran.stdout) == {"saved": "call mum", "count": 1}
    text = run_cli("--data-dir", str(tmp_path), "tools", "helper").stdout
    assert "add_reminder" in text and "[side_effect]" in text and "(tools)" in text


def test_init_a_chat_agent_and_refuse_to_overwrite(tmp_path: Path) -> None:
    assert run_cli("--data-dir", str(tmp_path), "init", "talker", "--engine", "chat").exit_code == 0
    folder = tmp_path / "agents" / "talker"
    assert not (folder / "tools.py").exists()
    with Agent.open("talker", data_dir=tmp_path) as agent:
        assert agent.config.engine == "chat"
        assert agent.tools.names() == ()
    again = run_cli("--data-dir", str(tmp_path), "init", "talker")
    assert again.exit_code == 2 and "already exists" in again.stderr
    bad = run_cli("--data-dir", str(tmp_path), "init", "../escape")
    assert bad.exit_code == 2 and "invalid agent id" in bad.stderr
    assert not (tmp_path / "escape").exists()


def test_tools_commands_report_toolset_config_errors_by_file_and_field(tmp_path: Path) -> None:
    run_cli("--data-dir", str(tmp_path), "init", "broken")
    config = tmp_path / "agents" / "broken" / "config.json"
    data = json.loads(config.read_text())
    data["toolsets"] = [{"python": "tools.py"}, {"python": "missing.py"}]
    config.write_text(json.dumps(data))
    for command in (("tools", "broken"), ("tool", "broken", "list_reminders"), ("info", "broken")):
        result = run_cli("--data-dir", str(tmp_path), *command)
        assert result.exit_code == 2, command
        assert str(config) in result.stderr and "'toolsets.1'" in result.stderr
        assert "missing.py does not exist" in result.stderr


def test_tools_of_the_sample_agents(tmp_path: Path) -> None:
    from .conftest import SAMPLE_AGENTS

    root = SAMPLE_AGENTS.parent
    desk = json.loads(run_cli("--data-dir", str(root), "tools", "desk-001", "--json").stdout)
    assert len(desk) == 10 and {row["toolset"] for row in desk} == {"desk"}
    notes = json.loads(run_cli("--data-dir", str(root), "tools", "notes-001", "--json").stdout)
    assert [row["name"] for row in notes] == [
        "add_note",
        "list_notes",
        "search_notes",
        "delete_note",
    ]
    assert notes[0]["examples"]
    chat = run_cli("--data-dir", str(root), "tools", "innovator-001")
    assert chat.exit_code == 0 and "has no tools" in chat.stdout


def test_send_shows_the_tools_a_turn_ran_unless_quiet(tmp_path: Path) -> None:
    run_cli("--data-dir", str(tmp_path), "init", "helper")
    args = ("--data-dir", str(tmp_path), "send", "helper", "what reminders do I have?")
    sent = run_cli(*args, "--model", "scripted:script.json")
    assert sent.exit_code == 0, sent.stderr
    lines = [line for line in sent.stderr.splitlines() if line.startswith("[tool] ")]
    assert any(line.startswith("[tool] list_reminders {} -> ok: ") for line in lines), lines
    assert "[tool]" not in sent.stdout  # stdout stays the reply
    quiet = run_cli(*args, "--model", "scripted:script.json", "--quiet")
    assert quiet.exit_code == 0 and "[tool]" not in quiet.stderr


DOOR_TOOLS = '''
from agentkit.tools import ToolContext, tool


@tool(side_effect=True)
def set_door_code(ctx: ToolContext, door: str, code: str) -> dict[str, str]:
    """Set the code of a door."""
    (ctx.workspace / f"{door}.code").write_text(code, encoding="utf-8")
    return {"door": door, "code": code}
'''


@pytest.mark.real_model
def test_a_fresh_agent_sets_the_front_door_code_on_the_embedded_model(tmp_path: Path) -> None:
    run_cli("--data-dir", str(tmp_path), "init", "home")
    folder = tmp_path / "agents" / "home"
    (folder / "tools.py").write_text(DOOR_TOOLS, encoding="utf-8")
    asked = run_cli("--data-dir", str(tmp_path), "send", "home", "--json",
                    "set the front door code to 1234")  # fmt: skip
    assert asked.exit_code == 0, asked.stderr
    events = [json.loads(line) for line in asked.stdout.splitlines() if line.strip()]
    [consent] = [e for e in events if e["type"] == "ask_user"]
    assert consent["kind"] == "confirmation", consent
    assert consent["toolArgs"] == {"door": "front", "code": "1234"}, consent
    conversation = events[-1]["conversationId"]
    done = run_cli("--data-dir", str(tmp_path), "send", "home", "-c", conversation, "yes")
    assert done.exit_code == 0, done.stderr
    assert (folder / "workspace" / "front.code").read_text(encoding="utf-8") == "1234"
