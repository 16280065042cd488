"""kill -9 of ``agentkit serve`` while 20 clients are mid-turn loses no acknowledged turn.

A real server (the file store in one process and with ``--workers 2``, and PostgreSQL), 20
clients each on its own conversation, each sending its next turn when the last one's stream
ended. Once at least two turns per client have completed and the even clients are held
inside their third turn (its ``session`` event came: the user's message was acknowledged,
durably) while the odd ones keep sending turns (writes in flight), the server gets SIGKILL
(every process of it, workers too). Then, on a restarted server: every acknowledged message
is in its history under the id it was acknowledged with, every completed reply too, nothing
unsent is there, one more turn on each conversation completes (the turn cut short is marked
failed), and ``agentkit verify`` is clean. Nothing is timed: each step waits on a condition,
bounded by the suite's per-test timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from agentkit import testing

from tests._postgres import PostgresServer, fresh_url, postgres_server  # noqa: F401
from tests._processes import children, listening
from tests.conftest import REPO, SAMPLE_AGENTS, run_cli
from tests.fakes.live_api import free_port, iter_events

AGENT = "innovator-001"
CHAT = f"/api/agent/{AGENT}/chat"
CONVERSATIONS = f"/api/agent/{AGENT}/conversations"
CLIENTS = 20
MODEL_MODULE = """
import asyncio


async def reply(request):
    prompt = request.prompt
    yield "echo"
    # the even clients' third turns stay inside the model until the server is killed; the
    # odd clients keep sending turns, so the kill also lands on writes in flight
    client, _, number = prompt.partition(" n")
    if prompt.startswith("c") and int(client[1:]) % 2 == 0 and int(number) >= 3:
        while True:
            await asyncio.sleep(0.01)
    for piece in (": ", prompt):
        yield piece
        await asyncio.sleep(0.002)
"""


class Server:
    """``agentkit serve`` in its own process (its log in a file)."""

    def __init__(self, root: Path, models: Path, store: str | None, workers: int = 1) -> None:
        self.root, self.models, self.store, self.workers = root, models, store, workers
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = root.parent / "serve.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        agentkit = str(Path(sys.executable).with_name("agentkit"))
        path = os.pathsep.join(filter(None, [str(self.models), os.environ.get("PYTHONPATH")]))
        command = [agentkit, "--data-dir", str(self.root), "serve", "--port", str(self.port),
                   "--model", "function:kill_model:reply",
                   *(["--store", self.store] if self.store else []),
                   *(["--workers", str(self.workers)] if self.workers > 1 else [])]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKIT_")}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, env={**env, "PYTHONPATH": path}, stdout=subprocess.DEVNULL,
                stderr=log, cwd=REPO,
            )  # fmt: skip
        while not self.healthy():
            time.sleep(0.02)

    def healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"agentkit serve exited:\n{self.log.read_text()[-3000:]}")
        if not listening(self.process.pid, self.port):
            return False
        if self.workers > 1:
            workers = children(self.process.pid)
            if sum(listening(pid, self.port) for pid in workers) < self.workers:
                return False
        try:
            return httpx.get(f"{self.base_url}/api/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        assert self.process is not None
        workers = children(self.process.pid)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait()
        for pid in workers:  # reaped by whoever adopted them
            while _alive(pid):
                time.sleep(0.01)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@dataclass
class Ledger:
    """What the clients sent and what the server acknowledged."""

    sent: dict[str, list[str]] = field(default_factory=dict)
    #: user messages acknowledged (their session event came): conversation → text → messageId
    acked: dict[str, dict[str, str]] = field(default_factory=dict)
    #: turns acknowledged whole (their result came, completed): messageId → reply
    completed: dict[str, str] = field(default_factory=dict)
    #: the clients inside a turn now (acknowledged, no result yet)
    inside: set[int] = field(default_factory=set)
    guard: threading.Lock = field(default_factory=threading.Lock)


def drive(index: int, http: httpx.Client, conversation: str, text: str, ledger: Ledger) -> str:
    with ledger.guard:
        ledger.sent.setdefault(conversation, []).append(text)
    body = {"message": text, "conversationId": conversation}
    try:
        with http.stream("POST", CHAT, json=body) as response:
            if response.status_code != 200:
                response.read()
                return str(response.status_code)
            for event in iter_events(response):
                if event.event == "session":
                    with ledger.guard:
                        ledger.acked.setdefault(conversation, {})[text] = event.data["messageId"]
                        ledger.inside.add(index)
                elif event.event == "result":
                    with ledger.guard:
                        ledger.inside.discard(index)
                        if event.data["status"] == "completed":
                            ledger.completed[event.data["messageId"]] = event.data["text"]
                    return str(event.data["status"])
            return "ended"
    except httpx.TransportError:  # the server died under the request
        return "lost"


@pytest.fixture(
    params=["files", "files, 2 workers", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    if request.param.startswith("files"):
        yield None
        return
    pytest.importorskip("psycopg")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    yield fresh_url(server)


def test_kill_9_with_twenty_clients_mid_turn_loses_no_acknowledged_turn(
    tmp_path: Path, store_url: str | None, request: pytest.FixtureRequest
) -> None:
    data_dir = testing.data_root(tmp_path / "data", source=SAMPLE_AGENTS.parent)
    models = tmp_path / "models"
    models.mkdir()
    (models / "kill_model.py").write_text(textwrap.dedent(MODEL_MODULE), encoding="utf-8")
    workers = 2 if "2 workers" in request.node.callspec.params["store_url"] else 1
    server = Server(data_dir, models, store_url, workers)
    server.start()
    ledger = Ledger()
    stop = threading.Event()
    try:
        with httpx.Client(base_url=server.base_url, timeout=60) as setup:
            conversations = []
            for i in range(CLIENTS):
                created = setup.post(CONVERSATIONS, json={"title": f"kill {i}"})
                assert created.status_code == 201, created.text
                conversations.append(str(created.json()["conversationId"]))

        def client(index: int) -> None:
            with httpx.Client(base_url=server.base_url, timeout=60) as http:
                number = 0
                while not stop.is_set():
                    number += 1
                    text = f"c{index} n{number}"
                    if drive(index, http, conversations[index], text, ledger) == "lost":
                        return

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for thread in threads:
            thread.start()

        def everyone_inside() -> bool:  # the even clients held in their turns, odd ones busy
            with ledger.guard:
                held = {i for i in ledger.inside if i % 2 == 0}
                return len(ledger.completed) >= 2 * CLIENTS and len(held) == CLIENTS // 2

        while not everyone_inside():
            assert all(thread.is_alive() for thread in threads), "a client stopped early"
            time.sleep(0.001)
        server.kill()  # kill -9: 20 turns acknowledged and not finished
        stop.set()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads)

        server.start()  # on the same data and store
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            for conversation in conversations:
                got = http.get(f"{CONVERSATIONS}/{conversation}")
                assert got.status_code == 200, got.text
                messages = got.json()["messages"]
                questions = {m["content"]: m["messageId"] for m in messages if m["role"] == "user"}
                answers = {m["messageId"]: m["content"] for m in messages if m["role"] != "user"}
                sent = ledger.sent[conversation]
                assert set(questions) <= set(sent), "a message was stored that was never sent"
                assert list(questions) == sorted(questions, key=sent.index)  # in order
                for text, message_id in ledger.acked[conversation].items():
                    assert questions.get(text) == message_id, f"acknowledged {text!r} was lost"
                    if message_id in ledger.completed:
                        assert answers[message_id] == ledger.completed[message_id]
                # one more turn: the one cut short is marked failed, the conversation goes on
                assert drive(0, http, conversation, "after", ledger) == "completed"
    finally:
        stop.set()
        server.stop()
    store_args = ["--store", store_url] if store_url else []
    verified = run_cli("--data-dir", str(data_dir), "verify", *store_args)
    assert verified.exit_code == 0, verified.stdout + verified.stderr
    assert ", 0 problems" in verified.stdout
