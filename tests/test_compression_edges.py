"""The ``compression`` event that memory upkeep emits after a turn's ``result`` reaches the
edges, not only eval: the HTTP turn's SSE stream (after ``result``, in order) and an ACP
client (a thought after the reply)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import acp
import httpx
from agentkit import Agent, Message, ScriptedModel
from agentkit.api import create_app

from tests._acp_peer import serve
from tests.fakes.live_api import live_server, parse_sse

PLAN = {"goal": "chat", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]}
SCRIPT: dict[str, list[Any]] = {
    "plan": [PLAN, PLAN],
    "respond": ["Noted.", "Noted again."],
    "summarize": [{"current_goal": "set up trading", "important_facts": ["trades on Binance"]}],
}


def compress_early(data_dir: Path) -> None:
    config_path = data_dir / "agents" / "desk-001" / "config.json"
    config = json.loads(config_path.read_text())
    config["compression"] = {"max_messages": 4, "token_threshold": 10, "keep_recent": 2}
    config_path.write_text(json.dumps(config))


def long_conversation(data_dir: Path) -> str:
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel({})) as agent:
        cid = agent.create_conversation("long").conversation_id
        for index in range(3):
            question = Message.user(f"old question {index}")
            agent.append_message(cid, question)
            agent.append_message(
                cid, Message.assistant(f"old answer {index}", message_id=question.message_id)
            )
    return cid


def test_the_sse_stream_of_a_turn_ends_with_its_compression_event(data_dir: Path) -> None:
    compress_early(data_dir)
    cid = long_conversation(data_dir)

    def build(port: int) -> Any:
        return create_app(data_dir, model=ScriptedModel(SCRIPT), port=port)

    with live_server(build) as base, httpx.Client(base_url=base, timeout=60) as client:
        response = client.post(
            "/api/agent/desk-001/chat",
            json={"message": "remember that I trade on Binance", "conversationId": cid},
        )
        assert response.status_code == 200, response.text
        events = parse_sse(response.text)
    kinds = [e.event for e in events]
    assert kinds[-2:] == ["result", "compression"], kinds
    compression = events[-1].data
    assert (compression["messagesBefore"], compression["messagesAfter"]) == (8, 2)
    assert compression["usage"]["calls"] == 1  # the summary call, counted after the result
    ids = [e.id for e in events]
    assert len(set(ids)) == len(ids)  # a resumable stream: the event after result has its id


def test_an_acp_client_sees_the_compression_after_the_reply(data_dir: Path, tmp_path: Path) -> None:
    compress_early(data_dir)
    model = tmp_path / "script.json"
    model.write_text(json.dumps(SCRIPT), encoding="utf-8")

    async def body() -> str:
        async with serve(data_dir, "desk-001", "--model", f"scripted:{model}") as served:
            await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            sid = await served.new_session(tmp_path)
            for text in ("old question 0", "old question 1", "remember that I trade on Binance"):
                await served.prompt(sid, text)
                if "compressed" in served.client.thoughts(sid):
                    break
            return served.client.thoughts(sid)

    thoughts = asyncio.run(body())
    assert "(history compressed: " in thoughts, thoughts
