"""Notebooks double as regression tests: run each with papermill on a temporary data root."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_conversations_notebook_runs_and_leaves_a_checked_conversation(
    data_dir: Path, tmp_path: Path
) -> None:
    summary_path = tmp_path / "summary.json"
    papermill.execute_notebook(
        str(NOTEBOOKS / "00_conversations.ipynb"),
        str(tmp_path / "out.ipynb"),
        parameters={"data_dir": str(data_dir), "summary_path": str(summary_path)},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    summary = json.loads(summary_path.read_text())
    assert summary["messages"] == [
        "你好, what can you do?",
        "我可以帮你整理想法 / I help you plan.",
    ]
    assert summary["message_count"] == 2
    assert summary["verify_ok"] is True
    folder = data_dir / "agents" / "innovator-001" / "conversations" / summary["conversation_id"]
    assert len(json.loads((folder / "history.json").read_text())) == 2


# -- the workbench notebooks (01-03), on scripted models ------------------------------------------

API_KEY = "AKEY-0123456789abcd"
SECRET_KEY = "SKEY-9876543210wxyz"


def run_workbench_notebook(
    name: str, data_dir: Path, tmp_path: Path, **parameters: object
) -> dict[str, Any]:
    """Run notebooks/*name* with papermill on *data_dir*; return the JSON summary it wrote."""
    summary_path = tmp_path / f"{name}.summary.json"
    papermill.execute_notebook(
        str(NOTEBOOKS / name),
        str(tmp_path / f"{name}.out.ipynb"),
        parameters={"data_dir": str(data_dir), "summary_path": str(summary_path), **parameters},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    return summary


def write_script(tmp_path: Path, script: dict[str, list[Any]]) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script))
    return f"scripted:{path}"


def test_chat_notebook_streams_two_turns_the_second_on_the_live_session(
    data_dir: Path, tmp_path: Path
) -> None:
    model = write_script(tmp_path, {"chat": ["Hello from the script.", "Write it down first."]})
    summary = run_workbench_notebook(
        "01_chat.ipynb", data_dir, tmp_path, model=model, message="Hi!", follow_up="And then?"
    )
    assert summary["agent_id"] == "innovator-001"
    assert summary["scenarios"] == ["A", "B"]
    assert summary["statuses"] == ["completed", "completed"]
    assert summary["replies"] == ["Hello from the script.", "Write it down first."]
    assert summary["errors"] == []
    for types in summary["event_types"]:
        assert types[0] == "session" and types[-1] == "result"
        assert types.count("agent_output") > 1  # streamed in pieces
    assert summary["history"] == [
        "Hi!",
        "Hello from the script.",
        "And then?",
        "Write it down first.",
    ]
    assert summary["browser_turns"] == ["Hi!", "And then?"]
    folder = data_dir / "agents" / "innovator-001" / "conversations" / summary["conversation_id"]
    assert len(json.loads((folder / "history.json").read_text())) == 4


def test_chat_notebook_on_a_planner_shows_its_plan(data_dir: Path, tmp_path: Path) -> None:
    plan = {
        "goal": "list traders",
        "steps": [
            {"id": "s1", "type": "tool", "title": "List traders", "tool_name": "list_traders"},
            {"id": "s2", "type": "respond", "title": "Answer", "instruction": "Summarise."},
        ],
    }
    model = write_script(
        tmp_path,
        {"plan": [plan], "replan": [{"action": "continue"}], "respond": ["No traders yet."]},
    )
    summary = run_workbench_notebook(
        "01_chat.ipynb", data_dir, tmp_path, agent_id="desk-001", model=model, follow_up=""
    )
    assert summary["scenarios"] == ["A"]
    assert summary["replies"] == ["No traders yet."]
    assert summary["plan_steps"] == ["List traders", "Answer"]


DESK_CONNECT: dict[str, list[Any]] = {
    "plan": [
        {
            "goal": "connect a binance account",
            "steps": [
                {
                    "id": "s1",
                    "type": "ask_user",
                    "title": "Ask for the keys",
                    "instruction": "What are your API key and secret?",
                }
            ],
        }
    ],
    "replan": [
        {
            "action": "replace_remaining",
            "steps": [
                {
                    "id": "s2",
                    "type": "tool",
                    "title": "Connect the account",
                    "tool_name": "create_exchange_config",
                    "tool_args": {
                        "exchange": "binance",
                        "account_name": "main",
                        "api_key": API_KEY,
                        "secret_key": SECRET_KEY,
                    },
                },
                {"id": "s3", "type": "respond", "title": "Confirm", "instruction": "Confirm."},
            ],
        },
        {"action": "continue"},
    ],
    "respond": ["Your binance account is connected."],
}


@pytest.mark.parametrize("approve", [True, False])
def test_plan_notebook_pauses_for_an_answer_then_for_consent(
    data_dir: Path, tmp_path: Path, approve: bool
) -> None:
    model = write_script(tmp_path, DESK_CONNECT)
    summary = run_workbench_notebook(
        "02_plan_steps.ipynb",
        data_dir,
        tmp_path,
        agent_id="desk-001",
        model=model,
        answer=f"account main, key {API_KEY} secret {SECRET_KEY}",
        approve=approve,
    )
    stages = summary["stages"]
    assert [(s["stage"], s["status"], s["pending"]) for s in stages] == [
        ("request", "waiting_user", "question"),
        ("answer", "waiting_confirmation", "confirmation"),
        ("approve" if approve else "reject", "completed", None),
    ]
    assert all(s["errors"] == [] for s in stages)
    steps = {row["step"]: row for row in summary["steps"]}
    assert steps["s2"]["tool"] == "create_exchange_config"
    assert '"api_key": "****abcd"' in steps["s2"]["arguments"]
    shown = json.dumps(summary["steps"]) + summary["plan_html"]
    assert API_KEY not in shown and SECRET_KEY not in shown
    if approve:
        assert summary["exchange_accounts"] == ["main"]
        assert [steps[s]["status"] for s in ("s1", "s2", "s3")] == ["done", "done", "done"]
        assert summary["history"][-2:] == ["yes", "Your binance account is connected."]
    else:
        assert summary["exchange_accounts"] == []
        assert steps["s2"]["status"] == "skipped"
        assert summary["history"][-2] == "no"


def test_task_state_notebook_saves_pins_and_refuses_stale_and_invalid_saves(
    data_dir: Path, tmp_path: Path
) -> None:
    summary = run_workbench_notebook(
        "03_task_state.ipynb", data_dir, tmp_path, new_goal="Two traders", fact_to_pin="Use BTC"
    )
    assert summary["pinned"] is True and summary["saved"] is True
    assert summary["conflict_saved"] is False  # someone else saved in between
    assert summary["resaved"] is True and summary["invalid_saved"] is False
    assert summary["version"] == 4  # seed, save, theirs, re-save: the refused saves wrote nothing
    state = summary["task_state"]
    assert state["current_goal"] == "Two traders"
    assert state["active_flow"] == "review_traders"  # theirs survived the conflict
    assert state["pinned_facts"] == ["Use BTC"]
    assert state["important_facts"] == ["Prefers low risk"]
    assert state["open_loops"] == ["Pick a model for the trader", "Decide on a budget"]


# -- notebook 07: your own tools ----------------------------------------------------------------


@pytest.mark.parametrize("approve", [True, False])
def test_own_tools_notebook_asks_consent_then_uses_an_mcp_servers_tools(
    tmp_path: Path, approve: bool
) -> None:
    root = tmp_path / "root"
    summary = run_workbench_notebook("07_your_own_tools.ipynb", root, tmp_path, approve=approve)
    assert summary["first_pending"] == "confirmation"  # the write waited for consent
    assert summary["final_status"] == "completed"
    if approve:
        assert summary["tasks"] == [{"title": "water the plants", "priority": "high"}]
    else:
        assert summary["tasks"] == []  # never after "no"
    assert sorted(summary["mcp_tools"]) == ["convert_time", "get_current_time"]
    (result,) = summary["time_results"]
    assert result["tool"] == "get_current_time" and result["ok"]
    assert json.loads(result["output"])["timezone"] == "Asia/Tokyo"
