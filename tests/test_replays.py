"""Replay a 6-turn desk conversation under an edited plan prompt; the CLI's fork and replay;
the HTTP fork route with bad ids and a busy source."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import agentkit
import pandas as pd
import pytest
from agentkit import Agent
from agentkit.api import create_app
from agentkit.models.cassette import RecordingModel
from agentkit.models.scripted import ScriptedModel
from agentkit.store import ConversationKey, FileConversationStore
from fastapi.testclient import TestClient

from .conftest import run_cli
from .test_branches import AGENT, digest, folder_of
from .test_model_cassette import CONTINUE, DESK_TURNS, fixed_desk_clock, seed, step  # noqa: F401

MORE_TURNS: list[tuple[str, dict[str, list[Any]]]] = [
    (
        "which traders do I have?",
        {
            "plan": [
                {
                    "goal": "list traders",
                    "steps": [
                        step("s1", "tool", tool_name="list_traders", tool_args={}),
                        step("s2", "respond", instruction="Name the traders."),
                    ],
                }
            ],
            "replan": [CONTINUE],
            "respond": ["You have one trader: Alpha."],
        },
    ),
    (
        "thanks",
        {
            "plan": [{"goal": "thank", "steps": [step("s1", "respond", instruction="Reply.")]}],
            "respond": ["You're welcome."],
        },
    ),
    (
        "which exchange is it on?",
        {
            "plan": [
                {
                    "goal": "exchange",
                    "steps": [
                        step("s1", "tool", tool_name="get_exchange_configs", tool_args={}),
                        step("s2", "respond", instruction="Say which exchange."),
                    ],
                }
            ],
            "replan": [CONTINUE],
            "respond": ["It runs on binance (main)."],
        },
    ),
]
SIX = [*DESK_TURNS, *MORE_TURNS]


def six_turns(data_dir: Path, tmp_path: Path) -> tuple[str, list[str], list[str]]:
    """The 6-turn conversation; its id, turn ids, and every model reply in call order."""
    seed(data_dir)
    workspace = data_dir / "agents" / AGENT / "workspace"
    shutil.copytree(workspace, tmp_path / "seeded-workspace")
    cassette = tmp_path / "six.jsonl"
    conversation: str | None = None
    ids: list[str] = []
    for text, script in SIX:
        model = RecordingModel(ScriptedModel(script), cassette)
        with Agent.open(AGENT, data_dir=data_dir, model=model) as agent:
            result = agent.send(text, conversation)
        conversation = result.conversation_id
        ids.append(result.result.message_id)
    # the desk as it was before the conversation: the replay's tools start from it
    shutil.rmtree(workspace)
    shutil.copytree(tmp_path / "seeded-workspace", workspace)
    replies = [json.loads(line)["reply"]["text"] for line in cassette.read_text().splitlines()]
    assert conversation is not None
    return conversation, ids, replies


def test_replay_under_an_edited_plan_prompt_gives_one_row_per_turn(
    data_dir: Path, tmp_path: Path
) -> None:
    conversation, ids, replies = six_turns(data_dir, tmp_path)
    source = folder_of(data_dir, conversation)
    before = digest(source)
    package = Path(agentkit.__file__).parent / "planning" / "prompts" / "plan.md"
    edited = tmp_path / "plan.md"
    edited.write_text("EDITED PLAN PROMPT.\n" + package.read_text(encoding="utf-8"))

    table = agentkit.replay(
        AGENT,
        conversation,
        model=ScriptedModel(replies),
        prompts={"plan": edited},
        data_dir=data_dir,
    )
    assert list(table["turn"]) == [1, 2, 3, 4, 5, 6]
    assert list(table["user"]) == [text for text, _ in SIX]
    assert list(table["original_message_id"]) == ids
    assert table["same_answer"].all() and table["same_tools"].all()
    assert [c.split(" ")[0] for c in table["original_consent"]] == ["", "create_trader", *[""] * 4]
    assert table["branch_consent"].tolist() == table["original_consent"].tolist()
    assert table.loc[2, "branch_tools"].startswith("create_trader(")
    assert table.loc[3, "branch_tools"] == "list_traders({})"
    assert (table["branch_model_calls"] == table["original_model_calls"]).all()
    assert (table["branch_model_calls"] > 0).all()

    branch = table.attrs["branch"]
    store = FileConversationStore(data_dir)
    meta = store.meta(ConversationKey(AGENT, branch))
    assert meta.forked_from is not None and meta.forked_from.message_id is None
    assert meta.stats.message_count == 12
    traces = "".join(p.read_text() for p in folder_of(data_dir, branch).glob("*/calls.jsonl"))
    assert "EDITED PLAN PROMPT." in traces
    assert digest(source) == before
    # the agent's own prompts and config are unchanged
    assert not (data_dir / "agents" / AGENT / "prompts" / "plan.md").exists()


def test_cli_fork_and_replay_from_a_turn(data_dir: Path, tmp_path: Path) -> None:
    conversation, ids, replies = six_turns(data_dir, tmp_path)
    root = ["--data-dir", str(data_dir)]
    forked = run_cli(*root, "fork", AGENT, conversation, "--at", ids[1], "--title", "branch")
    assert forked.exit_code == 0, forked.stderr
    fork_id = forked.stdout.strip()
    meta = json.loads((folder_of(data_dir, fork_id) / "meta.json").read_text())
    assert meta["forkedFrom"] == {"conversationId": conversation, "messageId": ids[1]}
    assert meta["title"] == "branch"

    bad = run_cli(*root, "fork", AGENT, conversation, "--at", "msg-unknown")
    assert bad.exit_code == 2 and "no turn 'msg-unknown'" in bad.stderr

    later = tmp_path / "later.json"  # the replies of turns 4-6, in call order
    later.write_text(json.dumps(replies[-8:]))
    out = tmp_path / "cmp.csv"
    replayed = run_cli(
        *root,
        "replay",
        AGENT,
        conversation,
        "--from",
        ids[3],
        "--model",
        f"scripted:{later}",
        "--set",
        "compression.keep_recent=4",
        "--out",
        str(out),
    )
    assert replayed.exit_code == 0, replayed.stderr
    assert replayed.stdout.startswith("branch conv-")
    table = pd.read_csv(out)
    assert list(table["turn"]) == [1, 2, 3]
    assert list(table["original_message_id"]) == ids[3:]
    assert table["same_answer"].all()

    typo = run_cli(*root, "replay", AGENT, conversation, "--set", "planner.nope=1")
    assert typo.exit_code == 2 and "nope" in typo.stderr


def test_http_fork_route(data_dir: Path, tmp_path: Path) -> None:
    conversation, ids, _ = six_turns(data_dir, tmp_path)
    client = TestClient(create_app(data_dir=data_dir), base_url="http://127.0.0.1")
    base = f"/api/agent/{AGENT}/conversations"
    made = client.post(f"{base}/{conversation}/fork", json={"at": ids[2], "title": "t3"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["forkedFrom"] == {"conversationId": conversation, "messageId": ids[2]}
    assert body["stats"]["messageCount"] == 6
    assert client.post(f"{base}/{conversation}/fork").status_code == 201  # no body: latest

    before = digest(data_dir / "agents")
    unknown = client.post(f"{base}/{conversation}/fork", json={"at": "msg-nope"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "turn_not_found"
    assert client.post(f"{base}/conv-missing/fork").status_code == 404
    assert client.post(f"{base}/{conversation}/fork", json={"at": "../x"}).status_code == 422
    assert client.post(f"{base}/{conversation}/fork", json={"extra": 1}).status_code == 422
    with FileConversationStore(data_dir).hold(ConversationKey(AGENT, conversation)):
        busy = client.post(f"{base}/{conversation}/fork")
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "conversation_busy"
    assert digest(data_dir / "agents") == before


@pytest.fixture(autouse=True)
def _no_env_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTKIT_MODEL", raising=False)
