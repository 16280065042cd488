"""The real wire format: a loopback OTLP/HTTP receiver (``http.server`` on 127.0.0.1) decodes
what agentkit's processes export with ``opentelemetry-proto``. The CLI sets the SDK up from
``OTEL_EXPORTER_OTLP_ENDPOINT`` (agentkit.telemetry.setup) and flushes before it exits; without
the variables, or with ``OTEL_SDK_DISABLED=true``, nothing is sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
pytest.importorskip("opentelemetry.proto")

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

AGENTKIT = Path(sys.executable).parent / "agentkit"


@dataclass
class Received:
    """What the receiver decoded: spans (with their resource's attributes) and metric names."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    metrics: set[str] = field(default_factory=set)
    paths: list[str] = field(default_factory=list)
    #: every request body, whatever its path (traces, metrics, logs)
    bodies: list[bytes] = field(default_factory=list)
    #: what the receiver answers to metrics (405: a traces-only viewer, like Phoenix)
    metrics_status: int = 200


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(item) for item in any_value.array_value.values)
    return getattr(any_value, kind) if kind else None


def _attributes(items: Any) -> dict[str, Any]:
    return {item.key: _value(item.value) for item in items}


@pytest.fixture
def receiver() -> Iterator[tuple[str, Received]]:
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received.paths.append(self.path)
            received.bodies.append(body)
            status = 200
            if self.path == "/v1/traces":
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource_spans in request.resource_spans:
                    resource = _attributes(resource_spans.resource.attributes)
                    for scope_spans in resource_spans.scope_spans:
                        for span in scope_spans.spans:
                            received.spans.append({
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_id": span.parent_span_id.hex() or None,
                                "kind": span.kind,
                                "attributes": _attributes(span.attributes),
                                "events": [e.name for e in span.events],
                                "event_attributes": [_attributes(e.attributes)
                                                     for e in span.events],
                                "status": span.status.code,
                                "scope": scope_spans.scope.name,
                                "resource": resource,
                            })  # fmt: skip
                reply = ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics" and received.metrics_status != 200:
                status, reply = received.metrics_status, b"Method Not Allowed"
            elif self.path == "/v1/metrics":
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                for resource_metrics in request.resource_metrics:
                    for scope in resource_metrics.scope_metrics:
                        received.metrics.update(metric.name for metric in scope.metrics)
                reply = b""
            else:
                reply = b""
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def otel_env(endpoint: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if endpoint is not None:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    env.update(extra)
    return env


#: a process that makes a turn's spans by hand under the CLI's setup
SCRIPT = """
from agentkit.telemetry import Telemetry
from agentkit.telemetry.setup import exporting

with exporting():
    tel = Telemetry(agent_id="innovator-001", agent_name="Innovator")
    trace = tel.turn(conversation_id="conv-1", message_id="msg-1", scenario="A",
                     provider="scripted", model="scripted:inline")
    call = trace.model_call(None, model="scripted", purpose="respond")
    call.usage(10, 3)
    call.end()
    tool = trace.tool_call(None, name="get_time", call_id="c1")
    tool.fail("ToolFailedError", "no clock")
    tool.end()
    trace.end(status="completed", input_tokens=10, output_tokens=3)
    print(trace.trace_id)
"""


def test_the_cli_setup_exports_spans_over_otlp_http(receiver: tuple[str, Received]) -> None:
    endpoint, received = receiver
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=otel_env(endpoint, OTEL_SERVICE_NAME="agentkit-test"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    trace_id = done.stdout.strip()
    by_name = {span["name"]: span for span in received.spans}
    assert set(by_name) == {"invoke_agent innovator-001", "chat scripted", "execute_tool get_time"}
    root = by_name["invoke_agent innovator-001"]
    assert all(span["trace_id"] == trace_id for span in received.spans)
    assert root["parent_id"] is None
    assert by_name["chat scripted"]["parent_id"] == root["span_id"]
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.conversation.id"] == "conv-1"
    assert root["attributes"]["agentkit.turn.status"] == "completed"
    assert by_name["chat scripted"]["kind"] == 3  # SPAN_KIND_CLIENT
    assert by_name["chat scripted"]["attributes"]["gen_ai.usage.input_tokens"] == 10
    assert by_name["execute_tool get_time"]["status"] == 2  # STATUS_CODE_ERROR
    assert root["scope"] == "agentkit"
    assert root["resource"]["service.name"] == "agentkit-test"
    assert {"gen_ai.client.token.usage", "gen_ai.client.operation.duration"} <= received.metrics


def test_the_default_service_name_is_agentkit(receiver: tuple[str, Received]) -> None:
    endpoint, received = receiver
    env = otel_env(None, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{endpoint}/v1/traces")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert received.spans
    assert {span["resource"]["service.name"] for span in received.spans} == {"agentkit"}
    assert "/v1/metrics" not in received.paths  # only the traces endpoint was named


@pytest.mark.parametrize("setting", [{}, {"OTEL_SDK_DISABLED": "true"}])
def test_nothing_is_sent_unless_asked(
    receiver: tuple[str, Received], setting: dict[str, str]
) -> None:
    endpoint, received = receiver
    env = otel_env(endpoint if setting else None, **setting)
    code = SCRIPT + "import sys\nprint(any(m.startswith('opentelemetry.sdk') for m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "False"  # the SDK was not even imported
    assert received.paths == []


def test_agentkit_send_exports_the_turn(
    receiver: tuple[str, Received], data_dir: Path, tmp_path: Path
) -> None:
    """``agentkit send`` with ``OTEL_EXPORTER_OTLP_ENDPOINT``: the turn's spans arrive."""
    endpoint, received = receiver
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["Hello from the scripted model."]), encoding="utf-8")
    env = otel_env(endpoint)
    done = subprocess.run(
        [str(AGENTKIT), "--data-dir", str(data_dir), "send", "innovator-001",
         "--model", f"scripted:{script}", "--json", "hi"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    result = next(event for event in events if event["type"] == "result")
    roots = [span for span in received.spans if span["name"] == "invoke_agent innovator-001"]
    assert len(roots) == 1
    root = roots[0]
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.agent.id"] == "innovator-001"
    assert root["attributes"]["gen_ai.conversation.id"] == result["conversationId"]
    assert root["attributes"]["gen_ai.provider.name"] == "scripted"
    assert root["attributes"]["agentkit.turn.status"] == "completed"
    calls = [span for span in received.spans if span["attributes"].get("gen_ai.operation.name")
             == "chat"]  # fmt: skip
    assert calls and all(span["trace_id"] == root["trace_id"] for span in calls)
    assert all(span["kind"] == 3 for span in calls)


def test_agentkit_send_without_the_variables_sends_nothing(
    receiver: tuple[str, Received], data_dir: Path, tmp_path: Path
) -> None:
    _endpoint, received = receiver
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["Hello."]), encoding="utf-8")
    done = subprocess.run(
        [str(AGENTKIT), "--data-dir", str(data_dir), "send", "innovator-001",
         "--model", f"scripted:{script}", "hi"],
        env=otel_env(None), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Hello." in done.stdout
    assert received.paths == []


def test_an_eval_sweep_in_worker_processes_is_one_trace(
    receiver: tuple[str, Received], data_dir: Path
) -> None:
    """``agentkit eval --workers 2``: the sweep's span from the parent process, each run's span
    from a worker process, parented through the task's traceparent."""
    pytest.importorskip("pandas")
    endpoint, received = receiver
    scenarios = Path(__file__).resolve().parents[1] / "data" / "scenarios"
    done = subprocess.run(
        [str(AGENTKIT), "--data-dir", str(data_dir), "eval",
         str(scenarios / "chat_sessions_en.yaml"), str(scenarios / "desk_status_command_en.yaml"),
         "--model", "scripted", "--workers", "2", "--no-progress"],
        env=otel_env(endpoint), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sweeps = [span for span in received.spans if span["name"] == "invoke_workflow agentkit.eval"]
    assert len(sweeps) == 1
    sweep = sweeps[0]
    runs = [span for span in received.spans if span["name"].startswith("eval_run ")]
    assert sorted(span["name"] for span in runs) == [
        "eval_run chat_sessions_en",
        "eval_run desk_status_command_en",
    ]
    for run in runs:
        assert run["trace_id"] == sweep["trace_id"]
        assert run["parent_id"] == sweep["span_id"]
        assert "gen_ai.evaluation.result" in run["events"]


#: two turns with a metrics export between them, under the CLI's setup
TWO_EXPORTS = """
from opentelemetry import metrics
from agentkit.telemetry import Telemetry
from agentkit.telemetry.setup import exporting

with exporting():
    tel = Telemetry(agent_id="innovator-001")
    for n in range(2):
        trace = tel.turn(conversation_id="conv-1", message_id=f"msg-{n}", provider="scripted")
        call = trace.model_call(None, model="scripted", purpose="respond")
        call.usage(10, 3)
        call.end()
        trace.end()
        metrics.get_meter_provider().force_flush()
"""


@pytest.mark.parametrize("status", [404, 405])
def test_a_traces_only_endpoint_turns_metrics_off_with_one_line(
    receiver: tuple[str, Received], status: int
) -> None:
    """A viewer that takes no metrics (Phoenix answers 405): one line on stderr, no metrics
    sent after that answer, every span exported."""
    endpoint, received = receiver
    received.metrics_status = status
    done = subprocess.run(
        [sys.executable, "-c", TWO_EXPORTS], env=otel_env(endpoint), capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [
        f"agentkit: {endpoint}/v1/metrics takes no metrics (HTTP {status}): metrics are off, "
        "traces are still exported"
    ]
    assert received.paths.count("/v1/metrics") == 1  # the second export was never sent
    assert (
        sorted(span["name"] for span in received.spans)
        == ["chat scripted"] * 2 + ["invoke_agent innovator-001"] * 2
    )


def test_keys_planned_as_secret_named_arguments_are_never_exported(
    receiver: tuple[str, Received], data_dir: Path
) -> None:
    """``agentkit eval`` of the secret-masking scenario with content capture on: the request
    holds two keys, the plan passes them as ``api_key`` / ``secret_key``, the user consents
    and the tool stores them. Nothing that reaches the wire holds either key — no span
    attribute, event, status or metric, whatever the path — while the contents are there,
    masked."""
    pytest.importorskip("pandas")
    endpoint, received = receiver
    scenario = Path(__file__).resolve().parents[1] / "data" / "scenarios"
    done = subprocess.run(
        [str(AGENTKIT), "--data-dir", str(data_dir), "eval",
         str(scenario / "desk_secret_masking_en.yaml"), "--model", "scripted", "--no-progress"],
        env=otel_env(endpoint, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true"),
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert received.bodies
    for body in received.bodies:
        assert b"BNKEY5566" not in body and b"BNSECRET7788" not in body
    plans = [span for span in received.spans
             if span["attributes"].get("agentkit.purpose") == "plan"]  # fmt: skip
    assert plans
    sent = json.loads(plans[0]["attributes"]["gen_ai.input.messages"])
    assert "api key ****, secret ****" in sent[-1]["parts"][0]["content"]
    roots = [span for span in received.spans if span["name"] == "invoke_agent desk-001"]
    assert len(roots) == 2 and all(root["status"] == 1 for root in roots)  # STATUS_CODE_OK
    assert "****" in roots[0]["attributes"]["input.value"]
