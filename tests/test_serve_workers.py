"""``agentkit serve --workers 2`` on PostgreSQL: two processes on one port, every route working
whichever of them a connection reaches.

A turn that streams until cancelled runs in one worker; from fresh connections (each handed by
the kernel to either worker): the same conversation is 409, the turn's events replay after a
``Last-Event-ID`` and follow it live, a cancel stops it, and the partial reply is kept. On the
file store ``--workers 2`` is refused with the reason (a turn's events stay in its process).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from agentkit import testing

from tests._postgres import PostgresServer, fresh_url, postgres_server  # noqa: F401
from tests._processes import listening
from tests.conftest import REPO, SAMPLE_AGENTS, run_cli
from tests.fakes.live_api import free_port, iter_events, parse_sse

AGENT = "innovator-001"
CHAT = f"/api/agent/{AGENT}/chat"
CONVERSATIONS = f"/api/agent/{AGENT}/conversations"
MODEL_MODULE = """
import asyncio


async def reply(request):
    if request.prompt.startswith("hang"):
        while True:  # only a cancel ends it
            yield "."
            await asyncio.sleep(0.01)
    yield "echo: " + request.prompt
"""


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.postgres
def test_two_workers_on_one_port_serve_every_route(
    tmp_path: Path,
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    pytest.importorskip("psycopg")
    url = fresh_url(postgres_server)
    data_dir = testing.data_root(tmp_path / "data", source=SAMPLE_AGENTS.parent)
    models = tmp_path / "models"
    models.mkdir()
    (models / "workers_model.py").write_text(textwrap.dedent(MODEL_MODULE), encoding="utf-8")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    agentkit = str(Path(sys.executable).with_name("agentkit"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKIT_")}
    path = os.pathsep.join(filter(None, [str(models), os.environ.get("PYTHONPATH")]))
    log = tmp_path / "serve.log"
    command = [agentkit, "--data-dir", str(data_dir), "serve", "--port", str(port),
               "--workers", "2", "--store", url,
               "--model", "function:workers_model:reply"]  # fmt: skip
    with log.open("ab") as sink:
        process = subprocess.Popen(
            command, env={**env, "PYTHONPATH": path}, stdout=subprocess.DEVNULL, stderr=sink,
            cwd=REPO,
        )  # fmt: skip

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

        def fresh() -> httpx.Client:  # a new connection: either worker may take it
            return httpx.Client(base_url=base, timeout=60)

        with fresh() as http:
            created = http.post(CONVERSATIONS, json={"title": "workers"})
            assert created.status_code == 201, created.text
            conversation = str(created.json()["conversationId"])
            done = http.post(CHAT, json={"message": "first", "conversationId": conversation})
            assert parse_sse(done.text)[-1].data["status"] == "completed"

        body = {"message": "hang on", "conversationId": conversation}
        with fresh() as streaming, streaming.stream("POST", CHAT, json=body) as response:
            assert response.status_code == 200
            events = iter_events(response)
            session = next(events)
            assert session.event == "session"
            message_id = session.data["messageId"]
            first_delta = next(events)
            assert first_delta.event == "agent_output"
            for _ in range(8):  # busy, from whichever worker answers
                with fresh() as http:
                    busy = http.post(CHAT, json={"message": "x", "conversationId": conversation})
                    assert busy.status_code == 409, busy.text
            follow = f"{CONVERSATIONS}/{conversation}/turns/{message_id}/events"
            with (
                fresh() as http,
                http.stream("GET", follow, headers={"Last-Event-ID": session.id}) as followed,
            ):
                assert followed.status_code == 200
                replay = iter_events(followed)
                resumed = next(replay)
                assert resumed.id == f"{message_id}:2"  # the first event after session
                with fresh() as other:
                    cancelled = other.post(f"{CONVERSATIONS}/{conversation}/cancel")
                    assert cancelled.status_code in (200, 202), cancelled.text
                last = [resumed, *replay][-1]
                assert last.event == "result"
                assert last.data["status"] == "cancelled"
            ended = list(events)
            assert ended[-1].event == "result" and ended[-1].id == last.id
        with fresh() as http:
            history = http.get(f"{CONVERSATIONS}/{conversation}").json()["messages"]
            texts = [m["content"] for m in history]
            assert texts[:3] == ["first", "echo: first", "hang on"]
            assert set(texts[3]) == {"."}  # the partial reply, kept
    finally:
        process.terminate()
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    verified = run_cli("--data-dir", str(data_dir), "verify", "--store", url)
    assert verified.exit_code == 0, verified.stdout + verified.stderr


def test_several_workers_on_the_file_store_are_refused_with_the_reason(data_dir: Path) -> None:
    result = run_cli("--data-dir", str(data_dir), "serve", "--workers", "2")
    assert result.exit_code != 0
    assert "--workers N needs a shared store" in result.stdout + result.stderr
