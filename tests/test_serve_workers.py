"""``agentkit serve --workers 2``, on the file store and on PostgreSQL: two processes on one
port, every route working whichever of them a connection reaches.

A turn that streams until cancelled runs in one worker (A). A connection is known to reach
the other (B) when B's health counts no running turn while A's counts it (a kept-alive
connection stays with its process). From B: the same conversation is 409, the turn's events
replay after a ``Last-Event-ID`` and follow it live, a cancel stops it, and the partial reply
is kept; an approval paused by a turn on A and decided on B and on A at once runs its tool
exactly once (the other decision is 409). Nothing waits on the clock: each step waits for
what it needs, bounded by the suite's per-test timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from agentkit import testing

from tests._postgres import PostgresServer, fresh_url, postgres_server  # noqa: F401
from tests._processes import children, listening
from tests.conftest import REPO, SAMPLE_AGENTS, run_cli
from tests.fakes.live_api import SseEvent, free_port, iter_events, parse_sse
from tests.test_approvals import CREATE, seed, traders

AGENT = "innovator-001"
CHAT = f"/api/agent/{AGENT}/chat"
CONVERSATIONS = f"/api/agent/{AGENT}/conversations"
DESK = "/api/agent/desk-001"
MODEL_MODULE = """
import asyncio
import json

PLAN = {
    "goal": "create a trader",
    "steps": [
        {"id": "s1", "type": "tool", "title": "s1", "tool_name": "create_trader",
         "tool_args": CREATE_ARGS},
        {"id": "s2", "type": "respond", "title": "s2", "instruction": "Confirm."},
    ],
}


async def reply(request):
    if request.purpose == "plan":
        yield json.dumps(PLAN)
    elif request.purpose == "replan":
        yield json.dumps({"action": "continue"})
    elif request.purpose == "respond":
        yield "Done."
    elif request.prompt.startswith("hang"):
        while True:  # only a cancel ends it
            yield "."
            await asyncio.sleep(0.01)
    else:
        yield "echo: " + request.prompt
""".replace("CREATE_ARGS", repr(CREATE))


@dataclass
class Served:
    base: str
    data_dir: Path
    store: str  # the --store given

    def fresh(self) -> httpx.Client:
        """A client on a new connection: either worker may take it."""
        return httpx.Client(base_url=self.base, timeout=60)

    def connect(self, *, running: bool) -> httpx.Client:
        """A client whose connection reaches the worker that runs a turn (*running*) or the
        one that runs none: asked again on new connections until one does."""
        while True:
            client = self.fresh()
            health = client.get("/api/health")
            assert health.status_code == 200, health.text
            if (health.json()["runningTurns"] > 0) is running:
                return client
            client.close()

    @contextmanager
    def pinned(self, *, running: bool) -> Iterator[httpx.Client]:
        """:meth:`connect`, closed after the block."""
        client = self.connect(running=running)
        try:
            yield client
        finally:
            client.close()


@pytest.fixture(
    scope="module", params=["files", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp_path = tmp_path_factory.mktemp("workers")
    if request.param == "postgres":
        pytest.importorskip("psycopg")
        store = fresh_url(request.getfixturevalue("postgres_server"))
    else:
        store = "files"
    data_dir = testing.data_root(tmp_path / "data", source=SAMPLE_AGENTS.parent)
    seed(data_dir)
    models = tmp_path / "models"
    models.mkdir()
    (models / "workers_model.py").write_text(textwrap.dedent(MODEL_MODULE), encoding="utf-8")
    port = free_port()
    agentkit = str(Path(sys.executable).with_name("agentkit"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKIT_")}
    path = os.pathsep.join(filter(None, [str(models), os.environ.get("PYTHONPATH")]))
    log = tmp_path / "serve.log"
    command = [agentkit, "--data-dir", str(data_dir), "serve", "--port", str(port),
               "--workers", "2", "--store", store,
               "--model", "function:workers_model:reply"]  # fmt: skip
    with log.open("ab") as sink:
        process = subprocess.Popen(
            command, env={**env, "PYTHONPATH": path}, stdout=subprocess.DEVNULL, stderr=sink,
            cwd=REPO,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"agentkit serve exited:\n{log.read_text()[-3000:]}")
        workers = children(process.pid)
        if len([w for w in workers if listening(w, port)]) < 2:
            return False
        try:
            return httpx.get(f"{base}/api/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    try:
        while not ready():
            time.sleep(0.05)
        yield Served(base, data_dir, store)
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    verified = run_cli("--data-dir", str(data_dir), "verify", "--store", store)
    assert verified.exit_code == 0, verified.stdout + verified.stderr


def test_busy_replay_and_cancel_from_the_other_worker(served: Served) -> None:
    with served.fresh() as http:
        created = http.post(CONVERSATIONS, json={"title": "workers"})
        assert created.status_code == 201, created.text
        conversation = str(created.json()["conversationId"])
        done = http.post(CHAT, json={"message": "first", "conversationId": conversation})
        assert parse_sse(done.text)[-1].data["status"] == "completed"

    body = {"message": "hang on", "conversationId": conversation}
    with served.fresh() as streaming, streaming.stream("POST", CHAT, json=body) as response:
        assert response.status_code == 200
        events = iter_events(response)
        session = next(events)
        assert session.event == "session"
        message_id = session.data["messageId"]
        first_delta = next(events)
        assert first_delta.event == "agent_output"
        with served.pinned(running=False) as other:  # worker B: the turn runs in A
            busy = other.post(CHAT, json={"message": "x", "conversationId": conversation})
            assert busy.status_code == 409, busy.text
        with served.pinned(running=True) as same:  # and in A itself
            busy = same.post(CHAT, json={"message": "x", "conversationId": conversation})
            assert busy.status_code == 409, busy.text
        follow = f"{CONVERSATIONS}/{conversation}/turns/{message_id}/events"
        with (
            served.pinned(running=False) as other,
            other.stream("GET", follow, headers={"Last-Event-ID": session.id}) as followed,
        ):
            assert followed.status_code == 200
            replay = iter_events(followed)
            resumed = next(replay)
            assert resumed.id == f"{message_id}:2"  # the first event after session
            assert resumed.data == first_delta.data
            live = next(replay)  # and the turn live, as it goes on in A
            assert live.id == f"{message_id}:3" and live.event == "agent_output"
            with served.pinned(running=False) as cancelling:
                cancelled = cancelling.post(f"{CONVERSATIONS}/{conversation}/cancel")
                assert cancelled.status_code == 200, cancelled.text
                assert cancelled.json()["cancelled"] is True
            last = [resumed, live, *replay][-1]
            assert last.event == "result"
            assert last.data["status"] == "cancelled"
        ended = list(events)
        assert ended[-1].event == "result" and ended[-1].id == last.id
    with served.fresh() as http:
        history = http.get(f"{CONVERSATIONS}/{conversation}").json()["messages"]
        texts = [m["content"] for m in history]
        assert texts[:3] == ["first", "echo: first", "hang on"]
        assert set(texts[3]) == {"."}  # the partial reply, kept


def test_an_approval_decided_on_both_workers_at_once_runs_once(served: Served) -> None:
    workspace = served.data_dir / "agents" / "desk-001" / "workspace"
    with served.fresh() as http:  # a turn that keeps worker A known while the desk works
        created = http.post(CONVERSATIONS, json={"title": "marker"}).json()
    marker = str(created["conversationId"])
    body = {"message": "hang on", "conversationId": marker}
    with served.fresh() as streaming, streaming.stream("POST", CHAT, json=body) as response:
        assert response.status_code == 200
        events = iter_events(response)
        assert next(events).event == "session"
        assert next(events).event == "agent_output"
        rest: list[SseEvent] = []  # read as it comes: a reader that stalls is cut off
        drainer = threading.Thread(target=lambda: rest.extend(events))
        drainer.start()
        with served.pinned(running=True) as on_a:
            paused = on_a.post(f"{DESK}/chat", json={"message": "create a trader called Alpha"})
            assert paused.status_code == 200, paused.text
            streamed = parse_sse(paused.text)
        conversation = streamed[0].data["conversationId"]
        (ask,) = [e for e in streamed if e.event == "ask_user"]
        approval = ask.data["approvalId"]
        with served.pinned(running=False) as on_b:  # B lists what A paused
            listed = on_b.get(f"{DESK}/conversations/{conversation}/approvals").json()
        assert [a["approvalId"] for a in listed["approvals"]] == [approval]
        route = f"{DESK}/conversations/{conversation}/approvals/{approval}"
        clients = [served.connect(running=False), served.connect(running=True)]
        start = threading.Barrier(len(clients))
        statuses: list[int] = []

        def decide(client: httpx.Client) -> None:
            start.wait()
            statuses.append(client.post(route, json={"decision": "approve"}).status_code)

        threads = [threading.Thread(target=decide, args=(client,)) for client in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for client in clients:
            client.close()
        assert sorted(statuses) == [200, 409]
        with served.pinned(running=False) as on_b:
            again = on_b.post(route, json={"decision": "reject"})
            assert again.status_code == 409
            assert "already decided: approve (http" in again.json()["error"]["message"]
            cancelled = on_b.post(f"{CONVERSATIONS}/{marker}/cancel")
            assert cancelled.json()["cancelled"] is True
        drainer.join()
        assert rest[-1].event == "result" and rest[-1].data["status"] == "cancelled"
    assert traders(workspace) == ["Alpha"]  # the tool ran once
