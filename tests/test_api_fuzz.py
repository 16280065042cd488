"""schemathesis against the live API's own /openapi.json: no 5xx, and every response conforms.

A bounded, seeded run is part of the normal suite. ``make fuzz`` runs the same test with a
time budget ($AGENTKIT_FUZZ_SECONDS) and no seed, and prints the counts. The server is a real
uvicorn with a bearer token (the fuzzer sends it) and the scripted model, so chat turns run
end to end; the schemathesis CLI runs as a subprocess and writes its JSON report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentkit import ScriptedModel
from agentkit.api import create_app

from tests.fakes.live_api import live_server

TOKEN = "fuzz-token-0123456789"
SCRIPT: dict[str, list[Any]] = {
    "chat": ["Hello from the script"],
    "plan": [
        {"goal": "answer", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]},
    ],
    "replan": [{"action": "finish", "reason": "done"}],
    "respond": ["Done."],
    "reason": ["Reasoned."],
    "summarize": [{}],
    "classify": ["other"],
}


def test_schemathesis_finds_no_server_error_and_no_conformance_failure(
    data_dir: Path, tmp_path: Path
) -> None:
    seconds = os.environ.get("AGENTKIT_FUZZ_SECONDS")
    budget = ["--max-time", seconds] if seconds else ["--max-examples", "4", "--seed", "1"]
    report = tmp_path / "schemathesis.json"

    def build(port: int) -> Any:
        return create_app(data_dir, model=ScriptedModel(SCRIPT), token=TOKEN, port=port)

    with live_server(build) as base:
        run = subprocess.run(
            [
                str(Path(sys.executable).with_name("schemathesis")),
                "run",
                f"{base}/openapi.json",
                "--header",
                f"Authorization: Bearer {TOKEN}",
                "--checks",
                "all",
                "--workers",
                "1",
                "--report",
                "json",
                "--report-json-path",
                str(report),
                *budget,
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
        )
    assert report.is_file(), run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads(report.read_text())
    cases = summary["test_cases"]
    print(
        f"schemathesis: {summary['operations']['tested']} operations, "
        f"{cases['generated']} test cases, {cases['with_failures']} with failures, "
        f"{len(summary['failures'])} unique failures, {len(summary['errors'])} errors, "
        f"{summary['running_time']:.1f}s"
    )
    assert summary["operations"]["tested"] == summary["operations"]["total"] == 10  # + fork
    assert cases["generated"] > 100
    assert summary["failures"] == [] and summary["errors"] == [], run.stdout[-6000:]
    assert run.returncode == 0, run.stdout[-6000:]
    conversations = data_dir / "agents" / "innovator-001" / "conversations"
    assert any(conversations.iterdir())  # the fuzzer really reached the chat and create routes
