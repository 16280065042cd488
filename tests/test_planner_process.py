"""The create-a-trader flow with a real process per turn: `agentkit send` exits after each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = Path(sys.executable).with_name("agentkit")


def agentkit(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def send(data_dir: Path, tmp: Path, name: str, script: dict[str, Any], *args: str) -> list[Any]:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(script))
    done = agentkit(data_dir, "send", "desk-001", "--json", "--model", f"scripted:{path}", *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def step(id: str, type: str, **fields: Any) -> dict[str, Any]:
    return {"id": id, "type": type, "title": id, **fields}


def test_the_flow_survives_process_exits_and_runs_each_tool_once(
    data_dir: Path, tmp_path: Path
) -> None:
    assert (
        agentkit(
            data_dir,
            "tool",
            "desk-001",
            "create_model_config",
            '{"provider": "openai", "model": "gpt-4o"}',
        ).returncode
        == 0
    )
    assert (
        agentkit(
            data_dir,
            "tool",
            "desk-001",
            "create_exchange_config",
            '{"exchange": "binance", "account_name": "main", "api_key": "AK-123456789",'
            ' "secret_key": "SK-987654321"}',
        ).returncode
        == 0
    )

    plan = {
        "goal": "create a trader",
        "steps": [
            step("s1", "tool", tool_name="get_exchange_configs", tool_args={}),
            step("s2", "ask_user", instruction="What should the trader be called?"),
        ],
    }
    first = send(
        data_dir,
        tmp_path,
        "first",
        {"plan": [plan], "replan": [{"action": "continue"}]},
        "create a trader on my binance account",
    )
    conversation = first[0]["conversationId"]
    assert first[-1]["text"] == "What should the trader be called?"
    state = json.loads(agentkit(data_dir, "state", "desk-001", conversation, "--json").stdout)
    assert state["execution_state"]["status"] == "waiting_user"

    create = step(
        "s3",
        "tool",
        tool_name="create_trader",
        tool_args={"name": "Alpha", "exchange_id": "ex-1", "model_id": "model-1"},
    )
    second = send(
        data_dir,
        tmp_path,
        "second",
        {
            "replan": [
                {
                    "action": "replace_remaining",
                    "steps": [create, step("s4", "respond", instruction="Confirm it.")],
                }
            ]
        },
        "-c",
        conversation,
        "Alpha",
    )
    asks = [e for e in second if e["type"] == "ask_user"]
    assert asks and asks[0]["kind"] == "confirmation"
    traders = json.loads(agentkit(data_dir, "tool", "desk-001", "list_traders").stdout)
    assert traders["traders"] == []  # nothing runs before consent
    state = json.loads(agentkit(data_dir, "state", "desk-001", conversation, "--json").stdout)
    assert state["execution_state"]["status"] == "waiting_confirmation"

    third = send(
        data_dir,
        tmp_path,
        "third",
        {"replan": [{"action": "continue"}], "respond": ["Trader Alpha is ready."]},
        "-c",
        conversation,
        "yes",
    )
    assert third[-1]["status"] == "completed" and third[-1]["text"] == "Trader Alpha is ready."
    traders = json.loads(agentkit(data_dir, "tool", "desk-001", "list_traders").stdout)
    assert [t["name"] for t in traders["traders"]] == ["Alpha"]
    planned = [
        e["name"]
        for turn in (first, second, third)
        for e in turn
        if e["type"] == "tool_call" and not e["id"].startswith("live-")
    ]
    assert planned == ["get_exchange_configs", "create_trader"]  # each exactly once
    state = json.loads(agentkit(data_dir, "state", "desk-001", conversation, "--json").stdout)
    assert state["execution_state"]["status"] == "completed"
