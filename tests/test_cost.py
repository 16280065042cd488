"""Cost in money: ``cost_usd`` from each run's input, output and cached tokens at the model's
price (genai-prices), an empty cost with a ``cost_note`` for a model it does not price, the
totals in the summary and ``compare``, and ``--max-cost`` stopping a run like the other
budgets.

The model is an OpenAI-compatible endpoint on loopback (a real socket, SSE as OpenAI streams
it) that reports usage with ``prompt_tokens_details.cached_tokens``, as OpenAI does.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from agentkit.eval import Expectations, Scenario, Turn, compare, price_usage, run_eval, summarize
from agentkit.types import Usage
from genai_prices import Usage as PricedUsage
from genai_prices import calc_price

from .conftest import run_cli
from .fakes.openai_server import chunk
from .test_eval_runs import SCENARIOS

pytestmark = pytest.mark.real_model

PLAN = {"goal": "answer", "steps": [
    {"id": "s1", "type": "tool", "title": "accounts", "tool_name": "get_exchange_configs",
     "tool_args": {}},
    {"id": "s2", "type": "respond", "title": "answer", "instruction": "Answer."},
]}  # fmt: skip
ACCOUNTS = [{"exchange": "binance", "account_name": "main", "api_key": "A", "secret_key": "S"}]
#: what every call reports: prompt tokens (of which cached), completion tokens
PROMPT, CACHED, COMPLETION = 50_000, 40_000, 500


class _Priced(BaseHTTPRequestHandler):
    """Answers by purpose (plan, replan, the streamed answer) with a usage chunk."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        purpose = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        text = {"plan": json.dumps(PLAN), "replan": json.dumps({"action": "continue"})}.get(
            purpose, "One account: binance main."
        )
        usage = {
            "prompt_tokens": PROMPT,
            "completion_tokens": COMPLETION,
            "prompt_tokens_details": {"cached_tokens": CACHED},
        }
        chunks = [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": text}),
            chunk(finish="stop"),
            json.dumps({"id": "c", "choices": [], "usage": usage}),
            "[DONE]",
        ]
        payload = "".join(f"data: {item}\n\n" for item in chunks).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Priced)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}/v1"
    monkeypatch.setenv("AGENTKIT_OPENAI_BASE_URL", base)
    try:
        yield base
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def accounts() -> Scenario:
    return Scenario(
        id="accounts",
        language="en",
        agent="desk-001",
        state={"desk": {"exchange_configs": ACCOUNTS}},
        turns=(Turn(user="which exchange accounts do I have?"),),
        expect=Expectations(tool_sequence=("get_exchange_configs",), status="completed"),
    )


def expected_cost(calls: int, model: str = "gpt-4o-mini") -> float:
    priced = calc_price(
        PricedUsage(
            input_tokens=PROMPT * calls,
            cache_read_tokens=CACHED * calls,
            output_tokens=COMPLETION * calls,
        ),
        model,
    )
    return float(priced.total_price)


def test_a_priced_model_costs_its_tokens_with_the_cached_ones_at_their_price(
    data_dir: Path, endpoint: str
) -> None:
    frame = run_eval([accounts()], model="openai:gpt-4o-mini", repeat=2, data_dir=data_dir,
                     progress=False)  # fmt: skip
    assert frame["passed"].all(), frame["failures"].tolist()
    first = frame.iloc[0]
    assert int(first["model_calls"]) == 3
    assert int(first["input_tokens"]) == 3 * PROMPT and int(first["cached_tokens"]) == 3 * CACHED
    assert float(first["cost_usd"]) == pytest.approx(expected_cost(3))
    assert first["cost_note"] == ""
    # the cached tokens are priced below the others: the same tokens uncached cost more
    uncached = price_usage("openai:gpt-4o-mini", Usage(input_tokens=3 * PROMPT,
                                                       output_tokens=3 * COMPLETION))  # fmt: skip
    assert uncached.cost_usd is not None and uncached.cost_usd > float(first["cost_usd"]) > 0
    summary = summarize(frame)
    assert float(summary["cost_usd"].iloc[0]) == pytest.approx(2 * expected_cost(3))
    text = compare(frame, frame).report()
    assert "cost over the pairs (genai-prices):" in text
    assert f"A ${2 * expected_cost(3):.4g}" in text


def test_a_model_genai_prices_does_not_know_leaves_the_cost_empty_with_a_note(
    data_dir: Path, endpoint: str
) -> None:
    frame = run_eval([accounts()], model="openai:my-own-finetune-7b", data_dir=data_dir,
                     progress=False)  # fmt: skip
    record = frame.iloc[0]
    assert record["passed"] and int(record["input_tokens"]) == 3 * PROMPT
    assert pd.isna(record["cost_usd"])
    assert record["cost_note"] == "not priced: genai-prices has no price for 'my-own-finetune-7b'"
    assert "cost_usd" not in summarize(frame).columns


def test_local_models_are_not_priced() -> None:
    cost = price_usage("scripted", Usage(input_tokens=10, output_tokens=10))
    assert cost.cost_usd is None and cost.note == "not priced: scripted is not a priced API model"


def test_max_cost_stops_a_run_like_the_other_budgets(data_dir: Path, endpoint: str) -> None:
    per_call = expected_cost(1)
    frame = run_eval([accounts()], model="openai:gpt-4o-mini", max_cost=1.5 * per_call,
                     data_dir=data_dir, progress=False)  # fmt: skip
    record = frame.iloc[0]
    assert record["outcome"] == "budget" and not record["passed"]
    assert str(record["budget_reason"]).startswith("max_cost: $")
    # the call that crossed the limit completed; the next one was never sent (the turn was
    # cancelled at its safe point): two calls' tokens, priced
    assert int(record["input_tokens"]) == 2 * PROMPT and record["result_status"] == "cancelled"
    assert float(record["cost_usd"]) == pytest.approx(expected_cost(2))
    unlimited = run_eval([accounts()], model="openai:gpt-4o-mini", max_cost=10 * per_call,
                         data_dir=data_dir, progress=False)  # fmt: skip
    assert unlimited["outcome"].tolist() == ["passed"]


def test_max_cost_on_a_model_without_a_price_is_refused_before_any_run(data_dir: Path) -> None:
    path = SCENARIOS / "desk_create_trader_en.yaml"
    result = run_cli("--data-dir", str(data_dir), "eval", str(path), "--model", "scripted",
                     "--max-cost", "0.5", "--no-progress")  # fmt: skip
    assert result.exit_code == 2
    assert "--max-cost cannot be kept on 'scripted'" in result.stderr
