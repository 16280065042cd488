"""No secret in any artifact of a sweep: keys the user types, and keys passed as
secret-named arguments, are nowhere in what a sweep leaves behind.

A run's user types an exchange's keys; the scripted planner passes them to a
side-effecting tool as ``api_key`` / ``secret_key``; the user approves with an edited key (a
third secret, passed only as a secret-named argument). Then every byte of the results table
(parquet, read cell by cell, and CSV), the labels export, the findings, the HTML report,
every file of the kept run folder (but the desk's own database) with every row of its
``system_config`` database, and every exported span (contents captured) is searched: no key.
``secret_leak`` reads the table's own columns too: a table whose transcript column holds a
typed key (as tables did before it was masked) is a finding.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("pandas")

from agentkit.eval import load_results, run_eval, save_results
from agentkit.eval.labels import add_label
from agentkit.eval.scanners import scan_results
from agentkit.eval.scanners.findings import ScanContext
from agentkit.eval.scenario import Scenario
from agentkit.eval.transcript import load_transcripts
from agentkit.telemetry._spans import CAPTURE_ENV
from agentkit_desk.toolset import SECRET_PATTERNS

from tests._otel import OtelCapture, capture
from tests.conftest import run_cli

API_KEY, SECRET_KEY, EDITED_KEY = "HOLDK-7f3a9c21d0", "HOLDS-b81d44e0aa", "HOLDE-5d2c90e1f7"
KEYS = (API_KEY, SECRET_KEY, EDITED_KEY)
TYPED = f"add my binance account 'main', api key {API_KEY}, secret {SECRET_KEY}"
ARGS = {"exchange": "binance", "account_name": "main", "api_key": API_KEY, "secret_key": SECRET_KEY}
SCENARIO = {
    "id": "desk_typed_keys_en",
    "title": "Keys typed by the user",
    "language": "en",
    "agent": "desk-001",
    "turns": [
        {
            "user": TYPED,
            "script": {
                "plan": [
                    {
                        "goal": TYPED,
                        "steps": [
                            {
                                "id": "e1",
                                "type": "tool",
                                "title": f"add binance with {API_KEY}",
                                "tool_name": "create_exchange_config",
                                "tool_args": ARGS,
                            },
                            {"id": "r1", "type": "respond", "instruction": "Confirm."},
                        ],
                    }
                ]
            },
            "expect": {"consent_for": ["create_exchange_config"]},
        },
        {
            "approve": {"args": {**ARGS, "api_key": EDITED_KEY}},
            "script": {
                "replan": [{"action": "continue"}],
                "respond": [f"Saved with key {EDITED_KEY} and secret {SECRET_KEY}."],
            },
        },
    ],
    "expect": {"tool_sequence": ["create_exchange_config"], "status": "completed"},
}


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> OtelCapture:
    monkeypatch.setenv(CAPTURE_ENV, "true")
    return capture()


def _found(text: str) -> list[str]:
    return [key for key in KEYS if key in text]


def _files(root: Path) -> dict[str, list[str]]:
    """Every file under *root* holding a key (SQLite databases searched row by row; the
    desk's own database, the domain's storage, is where keys belong)."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.startswith("desk.db"):
            continue
        data = path.read_bytes()
        if data.startswith(b"SQLite format 3"):
            hits = _rows(path)
        else:
            hits = _found(data.decode("utf-8", errors="replace"))
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


def _rows(database: Path) -> list[str]:
    hits: list[str] = []
    with sqlite3.connect(database) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in db.execute(f"SELECT * FROM {table}"):
                hits += _found(json.dumps(row, default=str, ensure_ascii=False))
    return sorted(set(hits))


def _table_text(path: Path) -> str:
    """Every cell of a stored table (a parquet file is compressed: read, not grepped)."""
    frame = load_results(path)
    return json.dumps(frame.astype(str).to_dict("records"), ensure_ascii=False)


def test_a_sweep_with_typed_keys_leaves_no_key_in_any_artifact(
    data_dir: Path, tmp_path: Path, otel: OtelCapture
) -> None:
    keep = tmp_path / "runs"
    frame = run_eval(
        [Scenario.model_validate(SCENARIO)],
        model="scripted",
        keep_dir=keep,
        data_dir=data_dir,
        progress=False,
    )
    assert frame["passed"].all(), frame[["failures", "error"]].to_dict("records")
    (transcript,) = load_transcripts(frame)
    assert transcript is not None
    said = transcript.turns[0].said
    assert said.startswith("add my binance account 'main', api key ****") and "9c21d0" not in said
    assert (
        transcript.turns[1].args is not None and transcript.turns[1].args["api_key"] == "****e1f7"
    )
    assert transcript.scenario_spec is not None  # masked as the rest

    table = tmp_path / "results.parquet"
    save_results(frame, table)
    csv = save_results(frame, tmp_path / "results.csv")
    add_label(table, str(transcript.run), "pass", note="looked right")
    labelled = tmp_path / "labelled.csv"
    assert run_cli("labels", str(table), "--out", str(labelled)).exit_code == 0
    scanned = run_cli("--data-dir", str(data_dir), "scan", str(table))
    assert scanned.exit_code == 0, scanned.stderr
    report = tmp_path / "report.html"
    made = run_cli("report", str(table), "--out", str(report))
    assert made.exit_code == 0, made.stderr
    findings = sorted(tmp_path.glob("results.findings.*"))
    assert findings, sorted(p.name for p in tmp_path.iterdir())

    leaks = {
        "table": _found(_table_text(table)),
        "table bytes": _found(table.read_bytes().decode("utf-8", errors="replace")),
        "csv": _found(csv.read_text(encoding="utf-8")),
        "labels export": _found(labelled.read_text(encoding="utf-8")),
        "findings": [k for f in findings for k in _found(_table_text(f))],
        "report": _found(report.read_text(encoding="utf-8")),
        "kept folders": _files(keep),
        "spans": _found(_spans_text(otel)),
    }
    assert not any(leaks.values()), leaks
    # the keys did reach the domain's own storage (the approved, edited call ran)
    assert EDITED_KEY in {*_rows_raw(next(keep.rglob("desk.db")))}
    assert otel.spans() and any(s.name.startswith("invoke_agent") for s in otel.spans())


def _spans_text(otel: OtelCapture) -> str:
    """Every exported span's name, attributes, events and status, as one text."""
    spans = [
        {
            "name": span.name,
            "attributes": dict(span.attributes or {}),
            "events": [dict(event.attributes or {}) for event in span.events],
            "status": span.status.description,
        }
        for span in otel.spans()
    ]
    return json.dumps(spans, default=str, ensure_ascii=False)


def _rows_raw(database: Path) -> list[str]:
    with sqlite3.connect(database) as db:
        return [str(v) for row in db.execute("SELECT * FROM exchange_configs") for v in row]


def test_secret_leak_reads_the_tables_own_columns(data_dir: Path, tmp_path: Path) -> None:
    frame = run_eval(
        [Scenario.model_validate(SCENARIO)], model="scripted", data_dir=data_dir, progress=False
    )
    context = ScanContext.of(secret_patterns=SECRET_PATTERNS)
    assert scan_results(frame, ["secret_leak"], context).empty  # masked: nothing leaks
    # a table written before the typed words were masked: the key in the transcript column
    old = frame.copy()
    cell = json.loads(old.loc[0, "transcript"])
    cell["turns"][0]["said"] = TYPED
    old.loc[0, "transcript"] = json.dumps(cell)
    old.loc[0, "answer"] = f"the key is {API_KEY}"
    found = scan_results(old, ["secret_leak"], context)
    sentences = " ".join(found["sentence"])
    assert "results table's 'transcript' column" in sentences
    assert "results table's 'answer' column" in sentences
    assert API_KEY not in sentences
