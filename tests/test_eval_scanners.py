"""Transcript scanners: each built-in one finds its failure in a run built to have it (scripted
scenarios that do it, tests/fixtures/scanner_runs) and nothing in the shipped scenarios' clean
runs; ``agentkit scan`` prints findings per scanner and run and keeps them beside the table."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pytest
from agentkit import testing
from agentkit.errors import UsageError
from agentkit.eval import Transcript, load_results, load_transcripts, run_eval, save_results
from agentkit.eval.results import run_ids
from agentkit.eval.scanners import (
    BUILTIN_SCANNERS,
    FINDING_COLUMNS,
    Finding,
    ScanContext,
    agent_scan_context,
    findings_path,
    load_findings,
    resolve_scanners,
    scan,
    scan_results,
    with_finding_counts,
)

from .conftest import SAMPLE_AGENTS, run_cli, tree
from .test_eval_runs import SCENARIOS

# the module's fixtures run sweeps (every shipped scenario, the six built ones) inside whichever
# test first needs them on a worker: slow on a loaded 2-core box, never stuck
pytestmark = pytest.mark.timeout(900)

BUILT = Path(__file__).parent / "fixtures" / "scanner_runs"
#: the built scenario, the scanner that must flag it, and where (turn, event type)
EXPECTED = {
    "unapproved_write_en": ("unapproved_side_effect", 1, "tool_call"),
    "write_for_read_en": ("write_for_read", 1, "plan"),
    "false_success_en": ("false_success", 2, "result"),
    "secret_leak_en": ("secret_leak", 1, "plan"),
    "repeated_call_en": ("repeated_call", 1, "tool_call"),
    "unfaithful_answer_en": ("unfaithful_answer", 1, "result"),
    "repeated_question_en": ("repeated_question", 2, "ask_user"),
}
#: what the secret scenario's user asked the notes toolset to keep
WIFI = "hunter2-blue-42"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The built runs' results table and their data root (scripted: no model request)."""
    root = tmp_path_factory.mktemp("built")
    data = testing.data_root(root / "data", source=SAMPLE_AGENTS.parent)
    with testing.block_model_requests():
        frame = run_eval(BUILT, model="scripted", data_dir=data, progress=False)
    assert frame["passed"].all(), frame["failures"].tolist()
    return save_results(frame, root / "built.parquet"), data


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Every shipped scenario's clean run (scripted) and their data root."""
    root = tmp_path_factory.mktemp("shipped")
    data = testing.data_root(root / "data", source=SAMPLE_AGENTS.parent)
    with testing.block_model_requests():
        frame = run_eval(SCENARIOS, model="scripted", data_dir=data, progress=False)
    assert frame["passed"].all(), frame["failures"].tolist()
    return save_results(frame, root / "shipped.parquet"), data


def _notes_context(data: Path, transcript: Transcript) -> ScanContext:
    """The notes agent's context, and as its secret store what the run's notes keep (the
    notes toolset declares no secrets: that is the failure this run is built to show)."""
    base = agent_scan_context(data, "notes-001")
    assert transcript.final is not None
    notes = transcript.final.state["notes"]
    assert isinstance(notes, dict) and isinstance(notes["notes"], list)
    kept = [str(note["body"]) for note in notes["notes"] if isinstance(note, dict)]
    return ScanContext.of(base.side_effect_tools, kept)


def test_each_built_in_scanner_finds_its_failure_in_a_run_built_to_have_it(
    built: tuple[Path, Path],
) -> None:
    table, data = built
    frame = load_results(table)
    transcripts = {t.scenario: t for t in load_transcripts(frame) if t is not None}
    assert set(transcripts) == set(EXPECTED)
    for scenario, (scanner, turn, event_type) in EXPECTED.items():
        transcript = transcripts[scenario]
        found = scan(transcript, [scanner], _notes_context(data, transcript))
        assert found, f"{scanner} found nothing in {scenario}"
        first = found[0]
        assert (first.run, first.scanner, first.kind) == (transcript.run, scanner, scanner)
        assert (first.turn, first.event_type) == (turn, event_type), first
        event = transcript.events()[first.event]
        assert event.type == event_type  # the finding points at its event
        assert first.severity in ("warning", "error") and first.sentence
    leak = scan(
        transcripts["secret_leak_en"],
        ["secret_leak"],
        _notes_context(data, transcripts["secret_leak_en"]),
    )
    assert all(WIFI not in item.sentence for item in leak)  # the finding does not repeat it


def test_a_scanner_finds_nothing_where_its_failure_is_absent(built: tuple[Path, Path]) -> None:
    table, data = built
    transcripts = {t.scenario: t for t in load_transcripts(load_results(table)) if t is not None}
    # the question asked once is not a repeated question, one delete that failed and said
    # so is not a false success, and without the override a consent is asked first
    clean = transcripts["repeated_call_en"]
    context = _notes_context(data, clean)
    assert (
        scan(clean, ["repeated_question", "false_success", "unapproved_side_effect"], context) == []
    )
    # the secret scanner needs the store's values: without them it finds nothing
    assert scan(transcripts["secret_leak_en"], ["secret_leak"], ScanContext()) == []


def test_the_shipped_scenarios_clean_runs_have_no_findings(shipped: tuple[Path, Path]) -> None:
    table, data = shipped
    frame = load_results(table)
    contexts = {agent: agent_scan_context(data, agent) for agent in frame["agent"].unique()}
    assert contexts["desk-001"].side_effect_tools >= {"create_trader", "delete_trader"}
    assert contexts["desk-001"].secret_patterns  # the desk's key formats
    findings = scan_results(frame, context=lambda _t, row: contexts[str(row["agent"])])
    assert list(findings.columns) == list(FINDING_COLUMNS)
    assert findings.empty, findings.to_dict("records")
    # the keys the desk user typed are masked in the table (none left to find there) …
    masking = next(
        t
        for t in load_transcripts(frame)
        if t is not None and t.scenario == "desk_secret_masking_en"
    )
    assert "BNKEY5566" not in masking.turns[0].said
    assert contexts["desk-001"].secrets_of(masking) == list(contexts["desk-001"].secrets)
    # … and the secret scanner does look: typed as they were, they are its secrets
    typed = masking.turns[0].model_copy(
        update={"said": "Add my binance account 'main': api key BNKEY5566, secret BNSECRET7788"}
    )
    raw = masking.model_copy(update={"turns": [typed, *masking.turns[1:]]})
    assert {"BNKEY5566", "BNSECRET7788"} <= set(contexts["desk-001"].secrets_of(raw))


def test_findings_count_in_the_results_table(built: tuple[Path, Path]) -> None:
    table, data = built
    frame = load_results(table)
    findings = scan_results(
        frame, context=lambda transcript, _row: _notes_context(data, transcript)
    )
    counted = with_finding_counts(frame, findings)
    by_run = dict(zip(run_ids(counted), counted["findings"], strict=True))
    assert by_run["repeated_call_en--p0"] == 1
    assert by_run["secret_leak_en--p0"] == int((findings["run"] == "secret_leak_en--p0").sum()) > 1
    assert sum(by_run.values()) == len(findings)


def long_answers(transcript: Transcript, context: ScanContext) -> Iterable[Finding]:
    """A user scanner (named ``tests.test_eval_scanners:long_answers``): answers over 30
    characters."""
    for number, event in enumerate(transcript.events()):
        if event.type == "result" and len(event.text) > 30:
            yield Finding(kind="long_answer", severity="info", event=number, sentence="long")


def not_findings(transcript: Transcript, context: ScanContext) -> list[str]:
    return ["oops"]


def test_scan_prints_findings_per_scanner_and_run_and_keeps_them_beside_the_table(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    table, data = built
    copy = tmp_path / "runs.parquet"
    copy.write_bytes(table.read_bytes())
    result = run_cli(
        "--data-dir",
        str(data),
        "scan",
        str(copy),
        "--scanner",
        "repeated_call",
        "--scanner",
        "unapproved_side_effect",
        "--scanner",
        "tests.test_eval_scanners:long_answers",
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "repeated_call: 1 finding(s) in 1 run(s)"
    assert lines[1] == "  repeated_call_en--p0"
    assert "search_notes was called 3 times in a row" in lines[2]
    assert "unapproved_side_effect: 2 finding(s) in 2 run(s)" in lines
    assert any(line.startswith("tests.test_eval_scanners:long_answers: ") for line in lines)
    findings = load_findings(copy)
    assert findings_path(copy) == tmp_path / "runs.findings.parquet"
    assert set(findings["scanner"]) == {
        "repeated_call",
        "unapproved_side_effect",
        "tests.test_eval_scanners:long_answers",
    }
    counted = load_results(copy)
    assert int(counted["findings"].sum()) == len(findings)
    assert list(counted.columns[:-1]) == list(load_results(table).columns)  # one column more


def test_scan_refuses_bad_input_in_one_line_and_writes_nothing(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    table, data = built
    frame = load_results(table)
    bare = save_results(frame.drop(columns=["transcript"]), tmp_path / "bare.csv")
    copy = tmp_path / "runs.parquet"
    copy.write_bytes(table.read_bytes())
    before = tree(tmp_path), copy.read_bytes()
    for args, says in [
        (["scan", str(bare)], "no transcript column"),
        (["scan", str(copy), "--scanner", "nope"], "no scanner named 'nope'"),
        (["scan", str(copy), "--scanner", "tests.test_eval_scanners:missing"], "has no"),
        (
            ["scan", str(copy), "--scanner", "tests.test_eval_scanners:not_findings"],
            "not a Finding",
        ),
        (["scan", str(tmp_path / "absent.parquet")], "no results file"),
    ]:
        result = run_cli("--data-dir", str(data), *args)
        assert result.exit_code == 2, (args, result.stdout, result.stderr)
        assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
        assert (tree(tmp_path), copy.read_bytes()) == before  # nothing written
    with pytest.raises(UsageError, match="no transcript column"):
        scan_results(pd.read_csv(bare))


def test_every_built_in_scanner_is_named_and_resolvable() -> None:
    assert list(resolve_scanners()) == list(BUILTIN_SCANNERS)
    assert set(BUILTIN_SCANNERS) == {scanner for scanner, _, _ in EXPECTED.values()}


def test_scan_without_the_agent_in_the_data_root_says_so_and_still_scans(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    table, _data = built
    copy = tmp_path / "runs.csv"
    save_results(load_results(table), copy)
    empty = tmp_path / "empty-root"
    empty.mkdir()
    result = run_cli("--data-dir", str(empty), "scan", str(copy))
    assert result.exit_code == 0, result.stderr
    assert "no agent 'notes-001' under" in result.stderr
    assert "false_success: 1 finding(s) in 1 run(s)" in result.stdout
    assert "secret_leak: no findings" in result.stdout  # no secret store to compare with
    assert tree(empty) == set()  # nothing written in the data root
    assert load_findings(copy)["run"].nunique() >= 2
