"""agentkit's traces in a real Arize Phoenix (issue 39, item 6).

Phoenix (``arize-phoenix`` 20.26.1, the version the issue was filed against) cannot share this
virtualenv (it pins its own OpenTelemetry and web stack), so the test builds a virtualenv of
its own with pip, once, under ``~/.cache/agentkit/`` (``$AGENTKIT_PHOENIX_VENV`` names another
place), and starts ``phoenix serve`` from it on loopback, offline, with a fresh working
directory. Then it follows the docs' recipe unchanged (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_RESOURCE_ATTRIBUTES=openinference.project.name=…``, content capture on): a chat turn,
a planner turn whose request holds two keys and asks for consent, the consent, and an eval of
two scenarios, each an ``agentkit`` process. It reads back what Phoenix stored through
Phoenix's own REST API (``/v1/projects/{project}/spans``) and checks what Phoenix made of it:
LLM spans with input and output messages, the agent spans' input and output, the agent,
chain, LLM and tool kinds, every span OK, and neither key anywhere.

When the virtualenv cannot be built (no registry), the test skips saying why, unless
``AGENTKIT_REQUIRE_PHOENIX`` is set (``.ci/run`` sets it), then it fails. With
``AGENTKIT_SCREENSHOT_DIR`` set (``make test-browser``) it also saves a screenshot of the
planner turn in Phoenix's trace view, taken with Debian's chromium through Playwright.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests._pictures import check_picture, normalise
from tests._processes import cached_venv, stop_group
from tests.test_browser import CHROMIUM, screenshot_dir

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

PHOENIX = "arize-phoenix==20.26.1"
AGENTKIT = Path(sys.executable).with_name("agentkit")
SCENARIOS = Path(__file__).resolve().parents[1] / "data" / "scenarios"
PROJECT = "agentkit-phoenix-test"
API_KEY, SECRET_KEY = "BNKEY5566", "BNSECRET7788"
REQUEST = f"Add my binance account 'main': api key {API_KEY}, secret {SECRET_KEY}"
#: where the traces page's picture comes from (docs/screenshots/pictures.json)
PICTURE = {
    "command": "agentkit send desk-001 --model scripted:desk_script.json REQUEST",
    "model": "scripted",
    "test": "tests/test_phoenix.py::test_agentkits_traces_read_in_phoenix",
}
DESK_SCRIPT = {
    "plan": [{
        "goal": "add the binance account",
        "steps": [
            {"id": "e1", "type": "tool", "title": "Connect the account",
             "tool_name": "create_exchange_config",
             "tool_args": {"exchange": "binance", "account_name": "main",
                           "api_key": API_KEY, "secret_key": SECRET_KEY}},
            {"id": "r1", "type": "respond", "title": "Confirm",
             "instruction": "Confirm without repeating the keys."},
        ],
    }],
    "replan": [{"action": "continue"}],
    "respond": ["Your binance account 'main' is saved."],
}  # fmt: skip


def phoenix_venv() -> Path:
    """The virtualenv holding Phoenix, built once; skips (or, with AGENTKIT_REQUIRE_PHOENIX
    set, fails) when it cannot be built."""
    place = os.environ.get("AGENTKIT_PHOENIX_VENV", "phoenix-20.26.1")
    python, problem = cached_venv(place, PHOENIX)
    if problem and os.environ.get("AGENTKIT_REQUIRE_PHOENIX"):
        pytest.fail(f"AGENTKIT_REQUIRE_PHOENIX is set but {problem}")
    if problem:
        pytest.skip(f"{problem}\n(set AGENTKIT_REQUIRE_PHOENIX=1 to fail instead)")
    return python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Phoenix:
    base: str
    log: Path
    process: subprocess.Popen[bytes]

    def pause(self) -> None:
        """Between two looks at a condition: a moment, cut short if Phoenix exits."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=0.25)
        if self.process.poll() is not None:
            pytest.fail(f"phoenix serve exited:\n{self.log.read_text()[-4000:]}")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.base}{path}", timeout=30) as response:
            return json.loads(response.read())

    def spans(self) -> list[dict[str, Any]]:
        """Every span Phoenix stored in the test's project (all pages)."""
        found: list[dict[str, Any]] = []
        cursor = ""
        while True:
            page = self.get(f"/v1/projects/{PROJECT}/spans?limit=1000{cursor}")
            found += page["data"]
            if not page.get("next_cursor"):
                return found
            cursor = f"&cursor={page['next_cursor']}"


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[Phoenix]:
    python = phoenix_venv()
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))},
        "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    }
    log = tmp_path / "phoenix.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [str(python.with_name("phoenix")), "serve"], env=env, stdout=output,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    server = Phoenix(f"http://127.0.0.1:{port}", log, process)
    try:
        while True:  # up when its health check answers (bounded by the test's timeout)
            try:
                with urllib.request.urlopen(f"{server.base}/healthz", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            server.pause()
        yield server
    finally:
        stop_group(process)


def agentkit(data_dir: Path, endpoint: str, *args: str) -> tuple[list[dict[str, Any]], str]:
    """An ``agentkit`` command exporting to *endpoint* as the docs' Phoenix recipe says: its
    JSON events (``--json``) and its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update({
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={PROJECT}",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    })  # fmt: skip
    done = subprocess.run(
        [str(AGENTKIT), "--data-dir", str(data_dir), *args], env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return events, done.stderr


def complete(spans: list[dict[str, Any]]) -> bool:
    """True once the eval's sweep span (the last span the last command exported; Phoenix
    inserts in arrival order) is stored, and every stored span's parent is too."""
    ids = {span["context"]["span_id"] for span in spans}
    names = {span["name"] for span in spans}
    return "invoke_workflow agentkit.eval" in names and all(
        span["parent_id"] is None or span["parent_id"] in ids for span in spans
    )


@pytest.mark.timeout(1800)  # the first run builds Phoenix's virtualenv (minutes)
def test_agentkits_traces_read_in_phoenix(phoenix: Phoenix, data_dir: Path, tmp_path: Path) -> None:
    endpoint = phoenix.base
    # scripts beside the agents (a relative spec is read there): short model names in Phoenix
    agents = data_dir / "agents"
    (agents / "innovator-001" / "chat_script.json").write_text(
        json.dumps(["Hello from the scripted model."]), encoding="utf-8"
    )
    (agents / "desk-001" / "desk_script.json").write_text(json.dumps(DESK_SCRIPT), "utf-8")
    chat_script, desk_script = "chat_script.json", "desk_script.json"

    # a chat turn
    events, stderr = agentkit(data_dir, endpoint, "send", "innovator-001", "--model",
                              f"scripted:{chat_script}", "--json", "hi")  # fmt: skip
    chat = events[-1]
    # metrics: Phoenix answers 405; one line says so, no error per export
    assert stderr.count("takes no metrics (HTTP 405)") == 1, stderr
    assert "Failed to export" not in stderr
    # a planner turn asking for consent, and the consent
    events, _ = agentkit(data_dir, endpoint, "send", "desk-001", "--model",
                         f"scripted:{desk_script}", "--json", REQUEST)  # fmt: skip
    asked = events[-1]
    assert any(event["type"] == "ask_user" for event in events)
    events, _ = agentkit(data_dir, endpoint, "send", "desk-001", "-c", asked["conversationId"],
                         "--model", f"scripted:{desk_script}", "--json", "yes")  # fmt: skip
    consented = events[-1]
    assert consented["text"] == "Your binance account 'main' is saved."
    # an eval of two scenarios (the last command: its sweep span is the last span sent)
    agentkit(data_dir, endpoint, "eval", str(SCENARIOS / "desk_secret_masking_en.yaml"),
             str(SCENARIOS / "chat_sessions_en.yaml"), "--model", "scripted",
             "--no-progress")  # fmt: skip

    spans = phoenix.spans()
    while not complete(spans):  # Phoenix inserts what it received in order; bounded by timeout
        phoenix.pause()
        spans = phoenix.spans()

    by_trace: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_trace.setdefault(span["context"]["trace_id"], []).append(span)
    # the three turns sent by hand, each its own trace with its agent span at the root
    for result, request in ((chat, "hi"), (asked, REQUEST), (consented, "yes")):
        trace = by_trace[result["traceId"]]
        (root,) = [span for span in trace if span["parent_id"] is None]
        assert root["span_kind"] == "AGENT"
        if request != REQUEST:
            assert root["attributes"]["input.value"] == request
        assert root["attributes"]["output.value"]
    planner = by_trace[asked["traceId"]]
    (root,) = [span for span in planner if span["parent_id"] is None]
    assert root["attributes"]["input.value"].startswith("Add my binance account 'main': api key")
    assert root["attributes"]["session.id"] == asked["conversationId"]  # Phoenix's sessions
    (plan,) = [span for span in planner if span["name"] == "plan desk-001"]
    assert plan["span_kind"] == "CHAIN"
    assert plan["attributes"]["agentkit.plan.steps"] == 2
    assert plan["attributes"]["output.value"] == "add the binance account"

    # what Phoenix converted: LLM spans with input and output messages
    llm = [span for span in spans if span["span_kind"] == "LLM"]
    assert len(llm) >= 8
    for span in llm:
        attributes = span["attributes"]
        assert attributes["llm.input_messages.0.message.role"] == "system", span["name"]
        assert attributes["llm.input_messages.1.message.content"], span["name"]
        assert attributes["llm.output_messages.0.message.role"] == "assistant", span["name"]
        assert "llm.output_messages.0.message.content" in attributes, span["name"]
    (plan_call,) = [span for span in planner if span["span_kind"] == "LLM"]
    assert json.loads(plan_call["attributes"]["llm.output_messages.0.message.content"])[
        "steps"][0]["tool_args"]["api_key"] == "****"  # fmt: skip
    # the kinds, the eval's outcome as data, every span OK
    assert {span["span_kind"] for span in spans} >= {"AGENT", "CHAIN", "LLM", "TOOL"}
    runs = [span for span in spans if span["name"].startswith("eval_run ")]
    assert sorted(span["attributes"]["agentkit.eval.passed"] for span in runs) == [True, True]
    assert all(span["attributes"]["agentkit.eval.checks_failed"] == 0 for span in runs)
    assert {span["status_code"] for span in spans} == {"OK"}
    # no secret anywhere in what Phoenix stored
    stored = json.dumps(spans)
    assert API_KEY not in stored and SECRET_KEY not in stored

    # the traces page's picture: taken where a browser runs, then recorded or compared as the
    # trace it shows (its spans, the selected model call's answer; tests/_pictures.py)
    if CHROMIUM.exists() or os.environ.get("AGENTKIT_REQUIRE_BROWSER"):
        shots = screenshot_dir(tmp_path / "screenshots")
        screenshot(phoenix, asked["traceId"], plan_call, shots / "phoenix_planner_turn.png")
        shown = sorted({f"{span['span_kind']} {span['name']}" for span in planner})
        answer = plan_call["attributes"]["llm.output_messages.0.message.content"]
        lines = normalise("\n".join([*shown, f"selected: {answer}"]))
        check_picture(shots, "phoenix_planner_turn", lines, PICTURE)


def screenshot(phoenix: Phoenix, trace_id: str, selected: dict[str, Any], path: Path) -> None:
    """The planner turn in Phoenix's trace view, its plan call selected (chat cards)."""
    from playwright.sync_api import sync_playwright

    project = next(p for p in phoenix.get("/v1/projects")["data"] if p["name"] == PROJECT)
    url = (f"{phoenix.base}/projects/{project['id']}/traces/{trace_id}"
           f"?selectedSpanNodeId={selected['id']}")  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            page.set_default_timeout(180_000)
            page.goto(url)
            page.get_by_text("chat scripted:", exact=False).first.wait_for()
            page.get_by_text("Output", exact=True).first.wait_for()
            page.screenshot(path=str(path))
        finally:
            browser.close()
