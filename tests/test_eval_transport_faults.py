"""Transient transport faults: the OpenAI-compatible backend retries them and a sweep counts
them; a sweep whose endpoint is down says so and exits 1.

The endpoints are real sockets on loopback: one resets (RST) the first N connections it
accepts before reading a byte, as a server shedding load does, then answers like
``bench/bench_eval.py``'s endpoint; one is a port nobody listens on (connection refused).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from agentkit.errors import ModelSpecError
from agentkit.eval import Expectations, Scenario, Turn, run_eval
from agentkit.eval.results import report_text
from agentkit.models.base import ChatMessage
from agentkit.models.openai import OpenAIModel
from agentkit.models.transport import counting_transport, env_proxy

from .conftest import run_cli
from .fakes.openai_server import Reply

pytestmark = pytest.mark.real_model

PLAN = {"goal": "answer", "steps": [
    {"id": "s1", "type": "tool", "title": "accounts", "tool_name": "get_exchange_configs",
     "tool_args": {}},
    {"id": "s2", "type": "respond", "title": "answer", "instruction": "Answer."},
]}  # fmt: skip
ACCOUNTS = [{"exchange": "binance", "account_name": "main", "api_key": "A", "secret_key": "S"}]


class _Answers(BaseHTTPRequestHandler):
    """Answers by purpose (plan, replan, the streamed answer), with keep-alive."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        purpose = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        server = self.server
        assert isinstance(server, _Resetting)
        with server.lock:
            server.answered += 1
        text = {"plan": json.dumps(PLAN), "replan": json.dumps({"action": "continue"})}.get(
            purpose, "One account: binance main."
        )
        chunks = [*Reply.text(text, usage=(50, 5)).chunks, "[DONE]"]
        payload = "".join(f"data: {chunk}\n\n" for chunk in chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


class _Resetting(ThreadingHTTPServer):
    """Resets the first *resets* connections it accepts (SO_LINGER 0, then close: the
    client's request meets a RST), then serves normally."""

    daemon_threads = True

    def __init__(self, resets: int) -> None:
        super().__init__(("127.0.0.1", 0), _Answers)
        self.lock = threading.Lock()
        self.resets = resets
        self.reset = self.answered = 0

    def verify_request(self, request: Any, client_address: Any) -> bool:
        with self.lock:
            if self.reset >= self.resets:
                return True
            self.reset += 1
        request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        request.close()
        return False

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}/v1"


@pytest.fixture
def resetting() -> Iterator[_Resetting]:
    server = _Resetting(resets=3)  # at most max_retries (3): every call can get through
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def closed_port() -> Iterator[str]:
    """A base URL whose port is bound but never listening: every connection is refused (and
    no other process can take the port while the test runs)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


def accounts(expect: Expectations | None = None) -> Scenario:
    return Scenario(
        id="accounts",
        language="en",
        agent="desk-001",
        state={"desk": {"exchange_configs": ACCOUNTS}},
        turns=(Turn(user="which exchange accounts do I have?"),),
        expect=expect or Expectations(tool_sequence=("get_exchange_configs",), status="completed"),
    )


def test_reset_connections_are_retried_and_counted(resetting: _Resetting) -> None:
    model = OpenAIModel("m", base_url=resetting.base_url, api_key=None, backoff=0.0)
    messages = [ChatMessage(role="user", content="hi")]

    async def call() -> str:
        try:
            with counting_transport() as counted:
                completion = await model.complete(messages, purpose="chat")
            assert (counted.retries, counted.failures) == (3, 0)
            return completion.text
        finally:
            await model.aclose()

    assert asyncio.run(call()) == "One account: binance main."
    assert (resetting.reset, resetting.answered) == (3, 1)


def test_a_sweep_against_an_endpoint_resetting_connections_finishes_every_run(
    data_dir: Path, resetting: _Resetting, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTKIT_OPENAI_BASE_URL", resetting.base_url)
    frame = run_eval(
        [accounts()], model="openai:m", repeat=6, concurrency=3, data_dir=data_dir,
        progress=False,
    )  # fmt: skip
    assert frame["passed"].all(), frame["error"].tolist()
    assert (frame["error"] == "").all() and (frame["model_calls"] == 3).all()
    # every reset connection carried one request, sent again: counted in its run's row
    assert int(frame["transport_retries"].sum()) == resetting.reset == 3
    assert resetting.answered == 18


def test_a_sweep_against_a_refusing_endpoint_reports_the_errors_and_exits_1(
    data_dir: Path, closed_port: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTKIT_OPENAI_BASE_URL", closed_port)
    monkeypatch.setenv("AGENTKIT_OPENAI_MAX_RETRIES", "1")  # one pause of ~0.5 s per request
    scenario = tmp_path / "accounts.yaml"
    scenario.write_text(json.dumps(accounts().model_dump(mode="json", exclude_defaults=True)))
    out = tmp_path / "r.csv"
    args = ["--data-dir", str(data_dir), "eval", str(scenario), "--model", "openai:m",
            "--repeat", "2", "--no-progress", "--out", str(out)]  # fmt: skip
    result = run_cli(*args)
    assert result.exit_code == 1, result.stderr
    assert "2 of 2 runs ended in an error" in result.stdout
    assert "cannot POST" in result.stdout and "(after 2 attempts)" in result.stdout
    assert f"wrote {out} (2 rows" in result.stdout  # the table is written all the same
    # asked not to fail: the same summary, exit 0
    allowed = run_cli(*args, "--allow-errors")
    assert allowed.exit_code == 0, allowed.stderr
    assert "2 of 2 runs ended in an error" in allowed.stdout


def test_the_summary_counts_errors_and_retries(
    data_dir: Path, closed_port: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTKIT_OPENAI_BASE_URL", closed_port)
    monkeypatch.setenv("AGENTKIT_OPENAI_MAX_RETRIES", "2")
    frame = run_eval([accounts()], model="openai:m", data_dir=data_dir, progress=False)
    # the planner carries on after a failed call (a repair round): still the run's error
    assert frame["outcome"].tolist() == ["error"] and not frame["passed"].iloc[0]
    error = frame["error"].iloc[0]
    assert "model request(s) failed: openai:m: cannot POST" in error
    assert "(after 3 attempts)" in error
    retried = int(frame["transport_retries"].iloc[0])
    assert retried > 0 and retried % 2 == 0  # max_retries (2) for each request that failed
    text = report_text(frame)
    assert f"1 of 1 runs ended in an error (they were not judged); {retried} model " in text


def test_max_retries_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTKIT_OPENAI_MAX_RETRIES", "5")
    assert OpenAIModel.from_env("m").max_retries == 5
    monkeypatch.setenv("AGENTKIT_OPENAI_MAX_RETRIES", "many")
    with pytest.raises(ModelSpecError, match="AGENTKIT_OPENAI_MAX_RETRIES is not a number"):
        OpenAIModel.from_env("m")


def test_the_pool_takes_the_proxy_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    assert env_proxy("https://api.example.com/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert env_proxy("https://api.example.com/v1") == "http://proxy.internal:3128"
    assert env_proxy("http://api.example.com/v1") is None  # no HTTP_PROXY, no ALL_PROXY
    assert env_proxy("https://127.0.0.1:8080/v1") is None  # NO_PROXY
