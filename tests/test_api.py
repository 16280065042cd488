"""The HTTP API against a real uvicorn on a loopback port, with a real HTTP client (httpx).

Models are scripted (deterministic) or gated (a turn held mid-reply until the test opens the
gate), so every outcome is decided by the test, never by timing.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentkit import FunctionModel, ModelRequest, ScriptedModel, UsageError
from agentkit.api import create_app
from agentkit.api.schemas import NON_BLANK_REGEX, ChatRequest
from agentkit.store import ConversationKey, FileConversationStore
from pydantic import ValidationError

from tests.conftest import SAMPLE_AGENTS, run_cli, tree
from tests.fakes.gated_model import Gate
from tests.fakes.live_api import ServeProcess, SseEvent, iter_events, live_server, parse_sse

REPLY = "Hello from the script"
SCRIPT: dict[str, list[Any]] = {"chat": [REPLY]}
ASK = {
    "plan": [
        {
            "goal": "create a trader",
            "steps": [
                {
                    "id": "s1",
                    "type": "ask_user",
                    "title": "ask",
                    "instruction": "Which exchange account?",
                }
            ],
        }
    ],
    "chat": [REPLY],
}
TOKEN = "s3cret-token-for-tests"
INNOVATOR = "/api/agent/innovator-001"


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll until *condition* holds; the timeout only stops a broken test from hanging."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> str:
    """The response is an error of *status* in the one error shape; returns its message."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    if code is not None:
        assert body["error"]["code"] == code, body
    message = body["error"]["message"]
    assert isinstance(message, str) and len(message) > 15
    return message


def chat(
    client: httpx.Client, text: str, agent: str = "innovator-001", **body: Any
) -> list[SseEvent]:
    response = client.post(f"/api/agent/{agent}/chat", json={"message": text, **body})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


@pytest.fixture
def scripted_server(data_dir: Path) -> Iterator[httpx.Client]:
    def build(port: int) -> Any:
        return create_app(data_dir, model=ScriptedModel(ASK), port=port)

    with live_server(build) as base, httpx.Client(base_url=base, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    """One server for the many read-only bad-input cases (they must not write anything)."""
    root = tmp_path_factory.mktemp("shared") / "data"
    shutil.copytree(
        SAMPLE_AGENTS, root / "agents", ignore=shutil.ignore_patterns("conversations", ".*.lock")
    )

    def build(port: int) -> Any:
        return create_app(root, model=ScriptedModel(SCRIPT), port=port)

    with live_server(build) as base, httpx.Client(base_url=base, timeout=60) as client:
        client.get(f"{INNOVATOR}/info")  # the agent is open: the baseline tree is stable
        yield client, root


@pytest.fixture
def gated(data_dir: Path) -> Iterator[tuple[httpx.Client, Gate]]:
    gate = Gate()
    with (
        live_server(lambda port: create_app(data_dir, model=gate.model, port=port)) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        try:
            yield client, gate
        finally:
            gate.open_gate()  # never leave a turn parked at shutdown


# -- routes --------------------------------------------------------------------------------


def test_health_and_agent_list(scripted_server: httpx.Client) -> None:
    agents = scripted_server.get("/api/agent/list").json()["agents"]
    health = scripted_server.get("/api/health").json()
    assert health["status"] == "ok" and health["runningTurns"] == 0
    assert health["agents"] == len(agents) >= 2
    by_id = {a["agentId"]: a for a in agents}
    assert by_id["desk-001"]["engine"] == "planner" and by_id["innovator-001"]["engine"] == "chat"
    for agent_id in ("desk-001", "innovator-001"):
        assert by_id[agent_id]["name"] and by_id[agent_id]["model"] == "llama"
        assert by_id[agent_id]["error"] == ""


def test_agent_with_a_broken_config_is_listed_with_the_reason(
    scripted_server: httpx.Client, data_dir: Path
) -> None:
    (data_dir / "agents" / "innovator-001" / "config.json").write_text('{"engine": "rocket"}')
    agents = scripted_server.get("/api/agent/list").json()["agents"]
    broken = next(a for a in agents if a["agentId"] == "innovator-001")
    assert "engine" in broken["error"] and "config.json" in broken["error"]
    info = scripted_server.get(f"{INNOVATOR}/info")
    assert "config.json" in assert_error(info, 500, "agent_config_invalid")


def test_agent_info_counts_conversations(scripted_server: httpx.Client) -> None:
    info = scripted_server.get(f"{INNOVATOR}/info").json()
    assert info["agentId"] == "innovator-001" and info["engine"] == "chat"
    assert "identity.md" in info["promptFiles"] and info["config"]["engine"] == "chat"
    assert info["conversationCount"] == 0
    scripted_server.post(f"{INNOVATOR}/conversations", json={"title": "one"})
    assert scripted_server.get(f"{INNOVATOR}/info").json()["conversationCount"] == 1


def test_create_list_get_and_delete_a_conversation(
    scripted_server: httpx.Client, data_dir: Path
) -> None:
    created = scripted_server.post(f"{INNOVATOR}/conversations", json={"title": "  My   plan "})
    assert created.status_code == 201
    meta = created.json()
    conversation = meta["conversationId"]
    assert meta["title"] == "My plan" and meta["agentId"] == "innovator-001"
    untitled = scripted_server.post(f"{INNOVATOR}/conversations")  # the body is optional
    assert untitled.status_code == 201 and untitled.json()["title"] == "New conversation"

    listed = scripted_server.get(f"{INNOVATOR}/conversations").json()["conversations"]
    assert {c["conversationId"] for c in listed} == {
        conversation,
        untitled.json()["conversationId"],
    }
    detail = scripted_server.get(f"{INNOVATOR}/conversations/{conversation}").json()
    assert detail["meta"]["conversationId"] == conversation and detail["messages"] == []

    folder = data_dir / "agents" / "innovator-001" / "conversations" / conversation
    assert folder.is_dir()
    deleted = scripted_server.delete(f"{INNOVATOR}/conversations/{conversation}")
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
    assert not folder.exists()
    gone = scripted_server.get(f"{INNOVATOR}/conversations/{conversation}")
    assert "GET /api/agent/innovator-001/conversations" in assert_error(
        gone, 404, "conversation_not_found"
    )
    assert_error(
        scripted_server.delete(f"{INNOVATOR}/conversations/{conversation}"),
        404,
        "conversation_not_found",
    )


def test_chat_streams_typed_events_session_first_result_last(
    scripted_server: httpx.Client,
) -> None:
    events = chat(scripted_server, "hi")
    assert [e.event for e in events] == [e.data["type"] for e in events]
    session, *middle, result = events
    assert session.event == "session" and result.event == "result"
    assert session.data["scenario"] == "A" and session.data["agentId"] == "innovator-001"
    conversation = session.data["conversationId"]
    assert result.data["conversationId"] == conversation and result.data["status"] == "completed"
    assert {e.event for e in middle} == {"agent_output"}
    assert "".join(e.data["text"] for e in middle) == REPLY == result.data["text"]
    message_id = session.data["messageId"]
    assert [e.id for e in events] == [f"{message_id}:{n}" for n in range(1, len(events) + 1)]

    history = scripted_server.get(f"{INNOVATOR}/conversations/{conversation}").json()
    assert [(m["role"], m["content"]) for m in history["messages"]] == [
        ("user", "hi"),
        ("assistant", REPLY),
    ]
    assert history["meta"]["status"] == "completed"


def test_consecutive_chats_in_one_server_are_scenario_b(scripted_server: httpx.Client) -> None:
    first = chat(scripted_server, "hello")
    conversation = first[0].data["conversationId"]
    second = chat(scripted_server, "and again", conversationId=conversation)
    assert second[0].data["scenario"] == "B"
    assert second[0].data["conversationId"] == conversation
    messages = scripted_server.get(f"{INNOVATOR}/conversations/{conversation}").json()["messages"]
    assert [m["content"] for m in messages] == ["hello", REPLY, "and again", REPLY]


def test_planner_turn_with_a_question_streams_plan_and_ask_user(
    scripted_server: httpx.Client,
) -> None:
    events = chat(scripted_server, "create a trader", agent="desk-001")
    kinds = [e.event for e in events]
    assert kinds[0] == "session" and kinds[-1] == "result"
    assert kinds.index("planning") < kinds.index("plan") < kinds.index("ask_user")
    plan = next(e for e in events if e.event == "plan").data
    assert plan["goal"] == "create a trader" and plan["steps"][0]["stepType"] == "ask_user"
    question = next(e for e in events if e.event == "ask_user").data
    assert question["question"] == "Which exchange account?" and question["kind"] == "question"
    result = events[-1].data
    assert result["status"] == "completed" and "Which exchange account?" in result["text"]
    conversation = result["conversationId"]
    stored = scripted_server.get(f"/api/agent/desk-001/conversations/{conversation}").json()
    assert stored["messages"][-1]["role"] == "assistant"
    assert "Which exchange account?" in stored["messages"][-1]["content"]


def test_openapi_documents_every_route_with_status_codes_and_sse(
    scripted_server: httpx.Client,
) -> None:
    document = scripted_server.get("/openapi.json").json()
    paths = document["paths"]
    routes = {(method.upper(), path) for path, item in paths.items() for method in item}
    assert routes == {
        ("GET", "/api/health"),
        ("GET", "/api/agent/list"),
        ("GET", "/api/agent/{agentId}/info"),
        ("GET", "/api/agent/{agentId}/conversations"),
        ("POST", "/api/agent/{agentId}/conversations"),
        ("GET", "/api/agent/{agentId}/conversations/{convId}"),
        ("DELETE", "/api/agent/{agentId}/conversations/{convId}"),
        ("POST", "/api/agent/{agentId}/conversations/{convId}/cancel"),
        ("POST", "/api/agent/{agentId}/conversations/{convId}/fork"),
        ("POST", "/api/agent/{agentId}/chat"),
        ("GET", "/api/agent/{agentId}/conversations/{convId}/turns/{messageId}/events"),
        ("GET", "/api/agent/{agentId}/conversations/{convId}/approvals"),
        ("POST", "/api/agent/{agentId}/conversations/{convId}/approvals/{approvalId}"),
    }
    for path, item in paths.items():
        for method, operation in item.items():
            statuses = set(operation["responses"])
            assert {"400", "403", "413"} <= statuses, (method, path)
            if path != "/api/health":
                assert "401" in statuses, (method, path)
            if "{agentId}" in path:
                assert {"404", "422"} <= statuses, (method, path)
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}
    chat_responses = paths["/api/agent/{agentId}/chat"]["post"]["responses"]
    assert {"409", "503"} <= set(chat_responses)
    stream = chat_responses["200"]["content"]["text/event-stream"]["schema"]
    assert {"session", "agent_output", "ask_user", "result"} <= set(
        stream["properties"]["event"]["enum"]
    )
    assert stream["properties"]["data"]["contentSchema"]["$ref"].endswith("/AgentEvent")
    assert "SessionEvent" in document["components"]["schemas"]
    assert "409" in paths["/api/agent/{agentId}/conversations/{convId}"]["delete"]["responses"]


# -- bad input: ids, unknown agents and conversations, bodies ---------------------------------


AGENT_ROUTES = [
    ("GET", "/api/agent/{a}/info", None),
    ("GET", "/api/agent/{a}/conversations", None),
    ("POST", "/api/agent/{a}/conversations", {"title": "t"}),
    ("GET", "/api/agent/{a}/conversations/conv-x", None),
    ("DELETE", "/api/agent/{a}/conversations/conv-x", None),
    ("POST", "/api/agent/{a}/conversations/conv-x/cancel", None),
    ("POST", "/api/agent/{a}/chat", {"message": "hi"}),
]


@pytest.mark.parametrize(("method", "route", "body"), AGENT_ROUTES)
def test_unknown_agent_is_404_on_every_agent_route(
    shared: tuple[httpx.Client, Path], method: str, route: str, body: Any
) -> None:
    client, data_dir = shared
    before = tree(data_dir)
    response = client.request(method, route.format(a="nobody-007"), json=body)
    assert "GET /api/agent/list" in assert_error(response, 404, "agent_not_found")
    assert tree(data_dir) == before


BAD_IDS = {
    "dot-dot": "%2e%2e",
    "dot-dot-slash": "..%2f..%2fetc",
    "encoded-slash": "a%2Fb",
    "hidden-name": ".hidden",
    "dotted": "a.b",
    "trailing-newline": "a1%0A",
    "nul-byte": "a%00b",
    "space": "a%20b",
    "tab": "a%09b",
    "fullwidth-a": "%EF%BD%81",
    "fullwidth-con": "%EF%BD%83%EF%BD%8F%EF%BD%8E",
    "accented": "caf%C3%A9",
    "rtl-override": "a%E2%80%AEb",
    "one-dot-leader": "%E2%80%A4%E2%80%A4",
    "colon": "a:b",
    "tilde": "~root",
    "leading-dash": "-rf",
    "leading-underscore": "_x",
    "backslash": "a%5Cb",
    "sixty-five-chars": "a" * 65,
}


@pytest.mark.parametrize("bad", list(BAD_IDS.values()), ids=list(BAD_IDS))
def test_invalid_agent_ids_are_refused_and_nothing_is_written(
    shared: tuple[httpx.Client, Path], bad: str
) -> None:
    client, data_dir = shared
    before = tree(data_dir)
    for method, route, body in AGENT_ROUTES:
        response = client.request(method, route.format(a=bad), json=body)
        assert response.status_code in (404, 422), (method, route, response.text)
        assert_error(response, response.status_code)
    assert tree(data_dir) == before


@pytest.mark.parametrize("bad", list(BAD_IDS.values()), ids=list(BAD_IDS))
def test_invalid_conversation_ids_in_path_are_refused_and_nothing_is_written(
    shared: tuple[httpx.Client, Path], bad: str
) -> None:
    client, data_dir = shared
    before = tree(data_dir)
    for method, suffix in [("GET", ""), ("DELETE", ""), ("POST", "/cancel")]:
        response = client.request(method, f"{INNOVATOR}/conversations/{bad}{suffix}")
        assert response.status_code in (404, 422), (method, suffix, response.text)
        assert_error(response, response.status_code)
    assert tree(data_dir) == before


BAD_BODY_IDS = {
    "dot-dot-slash": "../etc",
    "trailing-newline": "conv-1\n",
    "fullwidth": "ｃｏｎｖ",
    "absolute": "/abs",
    "too-long": "c" * 65,
    "empty": "",
    "not-a-string": 7,
}


@pytest.mark.parametrize("bad", list(BAD_BODY_IDS.values()), ids=list(BAD_BODY_IDS))
def test_invalid_conversation_id_in_chat_body_is_422_and_nothing_is_written(
    shared: tuple[httpx.Client, Path], bad: Any
) -> None:
    client, data_dir = shared
    before = tree(data_dir)
    response = client.post(f"{INNOVATOR}/chat", json={"message": "hi", "conversationId": bad})
    assert "conversationId" in assert_error(response, 422, "invalid_request")
    assert tree(data_dir) == before


BAD_BODIES = {
    "missing-message": {},
    "empty-message": {"message": ""},
    "whitespace-only-message": {"message": "   \n "},
    # whitespace to str.strip() but not to ECMA's or Rust's \s (the old pattern let it through)
    "record-separator-message": {"message": "\u001e"},
    "python-whitespace-only-message": {"message": "\u001c\u001d\u001e\u001f\u0085\u2028\u3000"},
    "message-too-long": {"message": "x" * 32_001},
    "message-not-a-string": {"message": ["hi"]},
    "unknown-field": {"message": "hi", "sessionId": "s"},
    "snake-case-field": {"message": "hi", "conversation_idx": "c"},
    "body-is-a-list": ["hi"],
}


@pytest.mark.parametrize("body", list(BAD_BODIES.values()), ids=list(BAD_BODIES))
def test_invalid_chat_body_is_422_and_nothing_is_written(
    shared: tuple[httpx.Client, Path], body: Any
) -> None:
    client, data_dir = shared
    before = tree(data_dir)
    assert_error(client.post(f"{INNOVATOR}/chat", json=body), 422)
    assert tree(data_dir) == before


def test_a_message_with_any_character_besides_whitespace_is_accepted(
    scripted_server: httpx.Client,
) -> None:
    # U+FEFF is whitespace to ECMA's \s but not to str.strip(); U+200B to neither
    for text in ("\u001ex", " \u2028y\u0085 ", "\ufeff", "\u200b"):
        session, *_, result = chat(scripted_server, text)
        assert result.data["status"] == "completed", text
        conversation = session.data["conversationId"]
        stored = scripted_server.get(f"{INNOVATOR}/conversations/{conversation}").json()
        assert stored["messages"][0]["content"] == text.strip()


def _stripped() -> list[int]:
    """Every code point that ``str.strip()`` removes (``str.isspace()``)."""
    return [i for i in range(sys.maxunicode + 1) if chr(i).isspace()]


def test_the_documented_message_pattern_is_exactly_what_str_strip_removes(data_dir: Path) -> None:
    stripped = _stripped()
    assert stripped == [i for i in range(sys.maxunicode + 1) if not chr(i).strip()]
    non_blank = re.compile(NON_BLANK_REGEX)
    assert [i for i in range(sys.maxunicode + 1) if not non_blank.search(chr(i))] == stripped
    schema = create_app(data_dir).openapi()["components"]["schemas"]["ChatRequest"]
    message = schema["properties"]["message"]
    assert message["pattern"] == NON_BLANK_REGEX and message["minLength"] == 1
    near = [*range(0x3100), 0xFEFF, 0x1F600, sys.maxunicode]
    for c in map(chr, near):  # the body model refuses exactly what the pattern does not match
        for text in (c, f" {c}\t", c * 3):
            if text.strip():
                assert ChatRequest.model_validate({"message": text}).message == text
            else:
                with pytest.raises(ValidationError, match="not whitespace"):
                    ChatRequest.model_validate({"message": text})


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node for an ECMA-262 regex")
def test_the_message_pattern_means_the_same_in_ecma_regex(tmp_path: Path) -> None:
    script = tmp_path / "blank.js"
    script.write_text(
        "for (const flags of ['', 'u']) {\n"
        "  const re = new RegExp(process.argv[2], flags), blank = [];\n"
        "  for (let i = 0; i <= 0x10ffff; i++) {\n"
        "    if (i >= 0xd800 && i <= 0xdfff) continue;\n"
        "    if (!re.test(String.fromCodePoint(i))) blank.push(i);\n"
        "  }\n"
        "  console.log(JSON.stringify(blank));\n"
        "}\n"
    )
    run = subprocess.run(
        ["node", str(script), NON_BLANK_REGEX], capture_output=True, text=True, check=True
    )
    plain, unicode = (json.loads(line) for line in run.stdout.splitlines())
    assert plain == unicode == _stripped()


def test_fork_at_an_empty_or_blank_turn_is_422_and_writes_nothing(
    scripted_server: httpx.Client, data_dir: Path
) -> None:
    session, *_, result = chat(scripted_server, "hello")
    conversation, turn = session.data["conversationId"], result.data["messageId"]
    fork = f"{INNOVATOR}/conversations/{conversation}/fork"
    before = tree(data_dir)
    for at in ("", "   ", "\u001e", f" {turn}"):
        message = assert_error(scripted_server.post(fork, json={"at": at}), 422, "invalid_request")
        assert message.startswith("the request does not match the API schema") and "at:" in message
    assert tree(data_dir) == before
    for body in ({}, {"at": turn}, {"at": None}):  # none: the last finished turn
        forked = scripted_server.post(fork, json=body)
        assert forked.status_code == 201, forked.text
        assert forked.json()["forkedFrom"] == {"conversationId": conversation, "messageId": turn}


def test_chat_body_that_is_not_json_is_refused(scripted_server: httpx.Client) -> None:
    not_json = scripted_server.post(
        f"{INNOVATOR}/chat", content=b"{message: hi", headers={"content-type": "application/json"}
    )
    assert_error(not_json, 422, "invalid_request")
    form = scripted_server.post(f"{INNOVATOR}/chat", data={"message": "hi"})  # a CSRF-style form
    assert_error(form, 422, "invalid_request")
    huge_number = b'{"message": "hi", "conversationId": ' + b"9" * 5000 + b"}"
    response = scripted_server.post(
        f"{INNOVATOR}/chat", content=huge_number, headers={"content-type": "application/json"}
    )
    assert_error(response, 400)
    assert scripted_server.get(f"{INNOVATOR}/conversations").json()["conversations"] == []


def test_unknown_conversation_is_404_for_chat_and_cancel(scripted_server: httpx.Client) -> None:
    response = scripted_server.post(
        f"{INNOVATOR}/chat", json={"message": "hi", "conversationId": "conv-missing"}
    )
    assert "leave out conversationId" in assert_error(response, 404, "conversation_not_found")
    cancel = scripted_server.post(f"{INNOVATOR}/conversations/conv-missing/cancel")
    assert_error(cancel, 404, "conversation_not_found")


def test_oversize_body_is_413_by_content_length_and_when_chunked(
    scripted_server: httpx.Client, data_dir: Path
) -> None:
    scripted_server.get(f"{INNOVATOR}/info")
    before = tree(data_dir)
    big = json.dumps({"message": "x" * 70_000}).encode()
    declared = scripted_server.post(
        f"{INNOVATOR}/chat", content=big, headers={"content-type": "application/json"}
    )
    assert "65536 bytes" in assert_error(declared, 413, "body_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding: chunked
        for start in range(0, len(big), 4096):
            yield big[start : start + 4096]

    chunked = scripted_server.post(
        f"{INNOVATOR}/chat", content=chunks(), headers={"content-type": "application/json"}
    )
    assert chunked.request.headers.get("transfer-encoding") == "chunked"
    assert_error(chunked, 413, "body_too_large")
    assert tree(data_dir) == before


def test_deeply_nested_json_is_400_before_it_is_parsed(
    scripted_server: httpx.Client, data_dir: Path
) -> None:
    scripted_server.get(f"{INNOVATOR}/info")
    before = tree(data_dir)
    bomb = b'{"message": "hi", "x": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    response = scripted_server.post(
        f"{INNOVATOR}/chat", content=bomb, headers={"content-type": "application/json"}
    )
    assert_error(response, 400, "json_too_deep")
    just_over = b'{"m": ' + b"[" * 32 + b"]" * 32 + b"}"  # 33 levels
    assert_error(
        scripted_server.post(f"{INNOVATOR}/conversations", content=just_over), 400, "json_too_deep"
    )
    brackets_in_a_string = {"title": "[" * 100}
    created = scripted_server.post(f"{INNOVATOR}/conversations", json=brackets_in_a_string)
    assert created.status_code == 201  # only structure counts, not brackets inside strings
    assert len(tree(data_dir) - before) > 0


def test_every_error_is_json_even_for_unknown_routes_and_methods(
    scripted_server: httpx.Client,
) -> None:
    assert_error(scripted_server.get("/api/nothing-here"), 404, "not_found")
    wrong_method = scripted_server.put(f"{INNOVATOR}/conversations")
    assert_error(wrong_method, 405, "method_not_allowed")
    assert {"GET", "POST"} <= {m.strip() for m in wrong_method.headers["allow"].split(",")}


# -- concurrency, cancel, disconnects --------------------------------------------------------


def test_busy_conversation_gets_409_and_cancel_stops_the_turn(
    gated: tuple[httpx.Client, Gate], data_dir: Path
) -> None:
    client, gate = gated
    conversation = client.post(f"{INNOVATOR}/conversations").json()["conversationId"]
    with client.stream(
        "POST", f"{INNOVATOR}/chat", json={"message": "long one", "conversationId": conversation}
    ) as stream:
        events = iter_events(stream)
        session, first_piece = next(events), next(events)
        assert session.event == "session" and first_piece.data["text"] == "first "
        wait_until(lambda: gate.waiting == 1, "the turn to park at the gate")

        busy = client.post(
            f"{INNOVATOR}/chat", json={"message": "me too", "conversationId": conversation}
        )
        assert "busy" in assert_error(busy, 409, "conversation_busy")
        assert_error(client.delete(f"{INNOVATOR}/conversations/{conversation}"), 409)
        other = client.post(f"{INNOVATOR}/conversations").json()["conversationId"]
        with client.stream(
            "POST", f"{INNOVATOR}/chat", json={"message": "other", "conversationId": other}
        ) as parallel:
            assert next(iter_events(parallel)).event == "session"  # not blocked by the first

        cancel = client.post(f"{INNOVATOR}/conversations/{conversation}/cancel")
        assert cancel.status_code == 200 and cancel.json()["cancelled"] is True
        gate.open_gate()
        rest = list(events)
    assert rest[-1].event == "result" and rest[-1].data["status"] == "cancelled"
    assert rest[-1].data["text"] == "first "
    stored = client.get(f"{INNOVATOR}/conversations/{conversation}").json()
    assert [(m["role"], m["content"]) for m in stored["messages"]] == [
        ("user", "long one"),
        ("assistant", "first "),  # the partial reply is kept
    ]
    assert stored["meta"]["status"] == "idle"
    again = client.post(f"{INNOVATOR}/conversations/{conversation}/cancel").json()
    assert again["cancelled"] is False and "no turn is running" in again["message"]
    follow_up = chat(client, "after the cancel", conversationId=conversation)
    assert follow_up[-1].data["status"] == "completed"


def test_cancel_of_a_planner_turn_interrupts_its_model_call(
    gated: tuple[httpx.Client, Gate],
) -> None:
    client, gate = gated
    desk = "/api/agent/desk-001"
    conversation = client.post(f"{desk}/conversations").json()["conversationId"]
    with client.stream(
        "POST", f"{desk}/chat", json={"message": "list my traders", "conversationId": conversation}
    ) as stream:
        events = iter_events(stream)
        assert next(events).event == "session"
        wait_until(lambda: gate.waiting == 1, "the planner's model call to park at the gate")
        cancel = client.post(f"{desk}/conversations/{conversation}/cancel").json()
        assert cancel["cancelled"] is True
        rest = list(events)  # the gate was never opened: the cancel interrupted the call
    assert rest[-1].event == "result" and rest[-1].data["status"] == "cancelled"
    assert any(e.event == "error" and e.data["code"] == "cancelled" for e in rest)
    stored = client.get(f"{desk}/conversations/{conversation}").json()
    assert stored["meta"]["status"] == "idle"
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant"]
    again = client.post(f"{desk}/conversations/{conversation}/cancel").json()
    assert again["cancelled"] is False and "no turn is running" in again["message"]


def test_conversation_held_by_another_process_gets_409(
    scripted_server: httpx.Client, data_dir: Path
) -> None:
    conversation = scripted_server.post(f"{INNOVATOR}/conversations").json()["conversationId"]
    other_writer = FileConversationStore(data_dir)  # its own lock, as another process has
    with other_writer.hold(ConversationKey("innovator-001", conversation)):
        busy = scripted_server.post(
            f"{INNOVATOR}/chat", json={"message": "hi", "conversationId": conversation}
        )
        assert_error(busy, 409, "conversation_busy")
    detail = scripted_server.get(f"{INNOVATOR}/conversations/{conversation}").json()
    assert detail["messages"] == []  # the refused turn wrote nothing
    assert chat(scripted_server, "now", conversationId=conversation)[-1].data["status"] == (
        "completed"
    )


def test_fifty_disconnects_after_the_first_event_lose_no_turn(
    gated: tuple[httpx.Client, Gate],
) -> None:
    client, gate = gated
    conversations: list[str] = []
    for n in range(50):
        with client.stream("POST", f"{INNOVATOR}/chat", json={"message": f"turn {n}"}) as stream:
            first = next(iter_events(stream))
            assert first.event == "session"
            conversations.append(first.data["conversationId"])
        # leaving the block closes the connection mid-turn: the client is gone
    wait_until(lambda: gate.waiting == 50, "all 50 turns to be parked mid-reply")
    listed = client.get(f"{INNOVATOR}/conversations").json()["conversations"]
    assert {c["conversationId"] for c in listed} == set(conversations)
    assert {c["status"] for c in listed} == {"running"}  # every client left before the reply

    gate.open_gate()
    wait_until(lambda: client.get("/api/health").json()["runningTurns"] == 0, "turns to end")
    for n, conversation in enumerate(conversations):
        detail = client.get(f"{INNOVATOR}/conversations/{conversation}").json()
        assert [(m["role"], m["content"]) for m in detail["messages"]] == [
            ("user", f"turn {n}"),
            ("assistant", gate.reply),
        ]
        assert detail["meta"]["status"] == "completed"


def brokenmodel() -> FunctionModel:
    """A backend with a bug: streams one piece, then raises something that is not a
    ModelError (``wrap_errors=False``: the function's exception reaches the turn as it is)."""

    async def reply(request: ModelRequest) -> AsyncIterator[str]:
        yield "partial "
        raise RuntimeError("boom")

    return FunctionModel(reply, name="broken", wrap_errors=False)


def test_a_turn_that_fails_midway_ends_its_stream_with_an_error_event(data_dir: Path) -> None:
    with (
        live_server(lambda port: create_app(data_dir, model=brokenmodel(), port=port)) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        events = chat(client, "hi")
        assert [e.event for e in events] == ["session", "agent_output", "error", "result"]
        error = events[-2].data
        assert error["code"] == "model_error" and "turn log" in error["message"]
        assert "boom" not in error["message"]  # internals stay on the server
        assert events[-1].data["status"] == "failed"
        conversation = events[0].data["conversationId"]
        stored = client.get(f"{INNOVATOR}/conversations/{conversation}").json()
        assert [m["content"] for m in stored["messages"]] == ["hi"]  # the question is kept
        assert client.get("/api/health").json()["runningTurns"] == 0  # and the server goes on


# -- security: token, Host, Origin, bind address -----------------------------------------------


@pytest.fixture
def token_server(data_dir: Path) -> Iterator[httpx.Client]:
    def build(port: int) -> Any:
        return create_app(data_dir, model=ScriptedModel(SCRIPT), token=TOKEN, port=port)

    with live_server(build) as base, httpx.Client(base_url=base, timeout=60) as client:
        yield client


def test_token_is_required_and_checked(token_server: httpx.Client, data_dir: Path) -> None:
    before = tree(data_dir)
    missing = token_server.post(f"{INNOVATOR}/chat", json={"message": "hi"})
    assert "Authorization: Bearer" in assert_error(missing, 401, "token_required")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = {"Authorization": f"Bearer {TOKEN}x"}
    assert_error(token_server.get("/api/agent/list", headers=wrong), 401, "token_invalid")
    assert_error(
        token_server.get("/api/agent/list", headers={"Authorization": f"Basic {TOKEN}"}), 401
    )
    assert_error(token_server.get("/openapi.json"), 401, "token_required")
    assert tree(data_dir) == before
    assert token_server.get("/api/health").status_code == 200  # liveness stays open

    good = {"Authorization": f"Bearer {TOKEN}"}
    assert token_server.get("/api/agent/list", headers=good).status_code == 200
    response = token_server.post(f"{INNOVATOR}/chat", json={"message": "hi"}, headers=good)
    assert parse_sse(response.text)[-1].data["text"] == REPLY


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}", "127.0.0.1:1", "", "[::1"],
    ids=["foreign-name", "foreign-name-with-port", "rebinding-name", "wrong-port", "empty", "bad"],
)
def test_foreign_host_header_is_rejected(shared: tuple[httpx.Client, Path], host: str) -> None:
    scripted_server, data_dir = shared
    before = tree(data_dir)
    port = scripted_server.base_url.port
    header = {"Host": host.format(port=port)}
    for path in ("/api/health", "/api/agent/list", "/openapi.json"):
        assert_error(scripted_server.get(path, headers=header), 400, "host_not_allowed")
    assert_error(
        scripted_server.post(f"{INNOVATOR}/chat", json={"message": "hi"}, headers=header),
        400,
        "host_not_allowed",
    )
    assert tree(data_dir) == before


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}"])
def test_loopback_names_are_accepted_as_host(shared: tuple[httpx.Client, Path], host: str) -> None:
    client, _ = shared
    port = client.base_url.port
    response = client.get("/api/agent/list", headers={"Host": host.format(port=port)})
    assert response.status_code == 200


def test_foreign_origin_is_refused_and_no_cors_headers_by_default(
    scripted_server: httpx.Client,
) -> None:
    evil = {"Origin": "http://evil.example"}
    assert_error(scripted_server.get("/api/agent/list", headers=evil), 403, "origin_not_allowed")
    preflight = scripted_server.options(
        f"{INNOVATOR}/chat", headers={**evil, "Access-Control-Request-Method": "POST"}
    )
    assert preflight.status_code in (403, 405)
    assert "access-control-allow-origin" not in preflight.headers
    port = scripted_server.base_url.port
    same = scripted_server.get("/api/agent/list", headers={"Origin": f"http://127.0.0.1:{port}"})
    assert same.status_code == 200 and "access-control-allow-origin" not in same.headers


def test_cors_only_for_configured_origins(data_dir: Path) -> None:
    allowed = "http://localhost:5173"

    def build(port: int) -> Any:
        return create_app(data_dir, model=ScriptedModel(SCRIPT), port=port, cors_origins=[allowed])

    with live_server(build) as base, httpx.Client(base_url=base, timeout=60) as client:
        ok = client.get("/api/agent/list", headers={"Origin": allowed})
        assert ok.headers["access-control-allow-origin"] == allowed
        preflight = client.options(
            f"{INNOVATOR}/chat",
            headers={"Origin": allowed, "Access-Control-Request-Method": "POST"},
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == allowed
        other = client.get("/api/agent/list", headers={"Origin": "http://localhost:6666"})
        assert_error(other, 403, "origin_not_allowed")


def test_non_loopback_bind_without_a_token_is_refused(data_dir: Path) -> None:
    for host in ("0.0.0.0", "192.168.1.20", "::", "example.org"):
        with pytest.raises(UsageError, match="--token"):
            create_app(data_dir, host=host)
    assert create_app(data_dir, host="0.0.0.0", token=TOKEN).state.policy.token == TOKEN
    with pytest.raises(UsageError, match="8-512 printable"):
        create_app(data_dir, token="short")
    result = run_cli("--data-dir", str(data_dir), "serve", "--host", "0.0.0.0", "--port", "1")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "without a token" in result.stderr


# -- agentkit serve, restart → scenario C -----------------------------------------------------


def test_serve_restart_restores_the_conversation_as_scenario_c(
    data_dir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    env = {"AGENTKIT_TOKEN": TOKEN}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    first = ServeProcess(data_dir, "--model", f"scripted:{script}", env=env)
    try:
        with httpx.Client(base_url=first.base_url, headers=auth, timeout=60) as client:
            assert_error(httpx.get(f"{first.base_url}/api/agent/list"), 401, "token_required")
            opening = chat(client, "remember the number 42")
            conversation = opening[0].data["conversationId"]
            assert opening[0].data["scenario"] == "A"
            again = chat(client, "still there?", conversationId=conversation)
            assert again[0].data["scenario"] == "B"
    finally:
        code, stderr = first.stop()
    assert code in (0, -signal.SIGTERM), stderr  # uvicorn re-raises the signal once shut down
    assert "Application shutdown complete" in stderr
    assert "http://127.0.0.1" in stderr and "bearer token is required" in stderr

    second = ServeProcess(data_dir, "--model", f"scripted:{script}", env=env)
    try:
        with httpx.Client(base_url=second.base_url, headers=auth, timeout=60) as client:
            restored = chat(client, "what was the number?", conversationId=conversation)
            session = restored[0].data
            assert session["scenario"] == "C" and session["historyMessages"] == 4
            assert "summary of the last 4 messages" in session["injected"]
            messages = client.get(f"{INNOVATOR}/conversations/{conversation}").json()["messages"]
            assert [m["content"] for m in messages[::2]] == [
                "remember the number 42",
                "still there?",
                "what was the number?",
            ]
    finally:
        code, stderr = second.stop()
    assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in stderr, stderr
