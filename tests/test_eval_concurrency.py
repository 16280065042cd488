"""Runs at once (``--concurrency``): the same table as one at a time; repeats; one connection
pool per endpoint against a real loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from agentkit import FunctionModel, ModelRequest
from agentkit.eval import (
    RUN_SPECIFIC_COLUMNS,
    Expectations,
    Scenario,
    Turn,
    load_scenarios,
    repeats,
    run_eval,
    summarize,
)

from .conftest import run_cli
from .fakes.openai_server import Reply
from .test_eval_runs import SCENARIOS

TAGS = ("consent", "restart", "compression", "simulated_user", "commands")


def without_timings(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=list(RUN_SPECIFIC_COLUMNS))


def test_concurrency_8_gives_the_same_table_as_one_run_at_a_time(data_dir: Path) -> None:
    chosen = load_scenarios(SCENARIOS, tags=TAGS)
    assert len(chosen) >= 16
    one = run_eval(chosen, model="scripted", data_dir=data_dir, progress=False)
    eight = run_eval(chosen, model="scripted", concurrency=8, data_dir=data_dir, progress=False)
    assert one["passed"].all(), one.loc[~one["passed"], ["scenario", "failures"]]
    pd.testing.assert_frame_equal(without_timings(eight), without_timings(one))


def test_concurrency_composes_with_workers(data_dir: Path, tmp_path: Path) -> None:
    args = ["--data-dir", str(data_dir), "eval", str(SCENARIOS), "--model", "scripted"]
    args += ["--tag", "consent", "--no-progress"]
    frames = []
    for extra in ([], ["--workers", "2", "--concurrency", "3"]):
        out = tmp_path / f"r{len(frames)}.parquet"
        result = run_cli(*args, *extra, "--out", str(out))
        assert result.exit_code == 0, result.stderr
        frames.append(pd.read_parquet(out))
    pd.testing.assert_frame_equal(without_timings(frames[1]), without_timings(frames[0]))


def test_each_dask_task_runs_a_batch_at_once(data_dir: Path) -> None:
    from distributed import Client, LocalCluster

    chosen = load_scenarios(SCENARIOS, tags=["consent"])
    local = run_eval(chosen, model="scripted", data_dir=data_dir, progress=False)
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        batched = run_eval(
            chosen, model="scripted", executor=client, concurrency=3, data_dir=data_dir,
            progress=False,
        )  # fmt: skip
    pd.testing.assert_frame_equal(without_timings(batched), without_timings(local))


def test_repeats_give_pass_at_k_and_pass_hat_k(data_dir: Path) -> None:
    calls: list[int] = []

    def flaky(request: ModelRequest) -> str:  # right on the 1st and 3rd run of each scenario
        calls.append(1)
        return "hello there" if len(calls) % 3 != 2 else "goodbye"

    greet = Scenario(
        id="greet",
        language="en",
        agent="innovator-001",
        turns=(Turn(user="say hello"),),
        expect=Expectations(answer_contains=("hello",)),
    )
    frame = run_eval(
        [greet], model=FunctionModel(flaky), repeat=3, data_dir=data_dir, progress=False
    )
    assert frame["repeat"].tolist() == [0, 1, 2]
    assert frame["passed"].tolist() == [True, False, True]
    per_scenario = repeats(frame)
    assert per_scenario[["runs", "passed", "pass@3", "pass^3"]].values.tolist() == [[3, 2, 1, 0]]
    summary = summarize(frame)
    assert (summary["pass@3"].iloc[0], summary["pass^3"].iloc[0]) == (1.0, 0.0)


class _KeepAlive(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint with keep-alive that answers by purpose; counts
    connections and requests."""

    protocol_version = "HTTP/1.1"
    connections: ClassVar[list[int]] = []
    requests: ClassVar[list[str]] = []
    lock = threading.Lock()

    def setup(self) -> None:
        super().setup()
        with self.lock:
            self.connections.append(1)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        purpose = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        with self.lock:
            self.requests.append(purpose)
        if purpose == "plan":
            text = json.dumps({"goal": "answer", "steps": [
                {"id": "s1", "type": "tool", "title": "accounts", "tool_name":
                 "get_exchange_configs", "tool_args": {}},
                {"id": "s2", "type": "respond", "title": "answer", "instruction": "Answer."},
            ]})  # fmt: skip
        elif purpose == "replan":
            text = json.dumps({"action": "continue"})
        else:
            text = "One account: binance main."
        payload = "".join(f"data: {c}\n\n" for c in [*Reply.text(text, usage=(50, 5)).chunks,
                                                      "[DONE]"]).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_KeepAlive]]:
    _KeepAlive.connections, _KeepAlive.requests = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAlive)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    monkeypatch.setenv("AGENTKIT_OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
    try:
        yield _KeepAlive
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.real_model
def test_runs_at_once_share_one_connection_pool_per_endpoint(
    data_dir: Path, endpoint: type[_KeepAlive]
) -> None:
    accounts = [{"exchange": "binance", "account_name": "main", "api_key": "A", "secret_key": "S"}]
    ask = Scenario(
        id="accounts",
        language="en",
        agent="desk-001",
        state={"desk": {"exchange_configs": accounts}},
        turns=(Turn(user="which exchange accounts do I have?"),),
        expect=Expectations(tool_sequence=("get_exchange_configs",), status="completed"),
    )
    frame = run_eval(
        [ask], model="openai:m", repeat=12, concurrency=4, data_dir=data_dir, progress=False
    )
    assert frame["passed"].all(), frame["failures"].tolist()
    assert len(endpoint.requests) == 36 and (frame["model_calls"] == 3).all()
    # 12 runs x 3 calls on at most 4 connections at once: the pool kept them open
    assert len(endpoint.connections) <= 4
