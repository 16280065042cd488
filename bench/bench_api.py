"""HTTP API latency: time to the first SSE event, to the first words, and to the end of a turn.

A real uvicorn on a loopback port over a scratch copy of the sample agents, a real httpx
client. Two models: the scripted one (the API's own overhead: store writes, SSE framing) and
the embedded llama (what a user of ``agentkit serve`` waits for; the first chat loads the
weights). Run ``python bench/bench_api.py``; figures, not pass/fail; rows are appended to
bench/results/api.csv.
"""

from __future__ import annotations

import csv
import shutil
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import httpx
import uvicorn
from agentkit import ScriptedModel
from agentkit.api import create_app
from agentkit.models.base import ChatModel

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "api.csv"
SCRIPTED_TURNS = 30
LLAMA_WARM_TURNS = 3


@contextmanager
def serve(data_dir: Path, model: ChatModel | str | None) -> Iterator[str]:
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(data_dir, model=model, port=port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", ws="none", http="h11"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()


def one_turn(client: httpx.Client, text: str, conversation: str | None) -> tuple[float, ...]:
    """Milliseconds to the session event, to the first agent_output, to the end of the turn."""
    body = {"message": text, **({"conversationId": conversation} if conversation else {})}
    started = time.perf_counter()
    session = first_words = None
    with client.stream("POST", "/api/agent/innovator-001/chat", json=body) as response:
        for line in response.iter_lines():
            now = (time.perf_counter() - started) * 1000
            if line == "event: session" and session is None:
                session = now
            if line == "event: agent_output" and first_words is None:
                first_words = now
    total = (time.perf_counter() - started) * 1000
    assert session is not None
    return session, first_words if first_words is not None else total, total


def conversation_of(client: httpx.Client) -> str:
    listed = client.get("/api/agent/innovator-001/conversations").json()["conversations"]
    return str(listed[0]["conversationId"])


def main() -> None:
    rows: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = Path(scratch) / "data"
        shutil.copytree(
            ROOT / "data" / "agents",
            data_dir / "agents",
            ignore=shutil.ignore_patterns("conversations", ".*.lock", "*.db*"),
        )
        script = ScriptedModel({"chat": ["A scripted reply of a few words."]})
        with serve(data_dir, script) as base, httpx.Client(base_url=base, timeout=120) as client:
            turns = [one_turn(client, f"turn {n}", None) for n in range(SCRIPTED_TURNS)]
        rows.append(("scripted_session_event_ms", statistics.median(t[0] for t in turns)))
        rows.append(("scripted_turn_ms", statistics.median(t[2] for t in turns)))

        with serve(data_dir, None) as base, httpx.Client(base_url=base, timeout=300) as client:
            cold = one_turn(client, "hi", None)
            conversation = conversation_of(client)
            warm = [
                one_turn(client, "Give me one idea for a weekend project.", conversation)
                for _ in range(LLAMA_WARM_TURNS)
            ]
        rows += [
            ("llama_cold_session_event_ms", cold[0]),
            ("llama_cold_first_words_ms", cold[1]),
            ("llama_cold_turn_ms", cold[2]),
            ("llama_warm_first_words_ms", statistics.median(t[1] for t in warm)),
            ("llama_warm_turn_ms", statistics.median(t[2] for t in warm)),
        ]
    print(f"HTTP API — scripted: median of {SCRIPTED_TURNS}; llama: 1 cold, median of warm")
    for name, value in rows:
        print(f"  {name:<30} {value:10.1f}")
    RESULTS.parent.mkdir(exist_ok=True)
    new = not RESULTS.exists()
    with RESULTS.open("a", newline="") as handle:
        writer = csv.writer(handle)
        if new:
            writer.writerow(["timestamp", "metric", "value"])
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name, value in rows:
            writer.writerow([stamp, name, f"{value:.3f}"])


if __name__ == "__main__":
    main()
