"""A sweep's runs as a reader sees them: timelines, paired runs flips first with the first
divergence, and the self-contained HTML report (``agentkit report``)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from agentkit.errors import UsageError
from agentkit.eval import compare, load_transcripts, save_results
from agentkit.eval.notes import Note
from agentkit.eval.pairs import align, first_divergence, pair_runs, point_label, points
from agentkit.eval.report import render_report, side_by_side_html, transcript_html, write_report
from agentkit.eval.timeline import MISSING_TRANSCRIPT, timeline
from agentkit.eval.transcript import TRANSCRIPT_COLUMN

from ._report_sweep import (
    CHAT,
    CONSENT,
    FLIPS,
    RAW_SECRETS,
    SECRETS,
    SIMULATED,
    row_of,
    two_point_sweep,
)
from .conftest import run_cli, tree


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return two_point_sweep(tmp_path_factory.mktemp("sweep"))


def view_of(frame: pd.DataFrame, scenario: str, point: int = 1) -> object:
    return timeline(load_transcripts(frame)[row_of(frame, scenario, point)])


# -- timelines -------------------------------------------------------------------------------


def test_a_chat_run_reads_as_what_the_user_said_and_the_answers(sweep: pd.DataFrame) -> None:
    view = timeline(load_transcripts(sweep)[row_of(sweep, CHAT, 0)])
    record = sweep.iloc[row_of(sweep, CHAT, 0)]
    assert view.run == f"{CHAT}--p0" and not view.missing
    said = [e.text for e in view.entries() if e.kind == "user"]
    assert said[0] == "I want to organise a two-day hackathon for 40 students. Where do I start?"
    answers = [turn.answer for turn in view.turns]
    assert answers[-1] == record["answer"]
    assert len(view.turns) == record["turns"]
    assert any(e.kind == "restart" for e in view.entries())  # the scenario reopens the agent
    assert view.final_status == record["final_status"]


def test_a_consent_run_shows_the_plan_steps_the_request_and_its_decision(
    sweep: pd.DataFrame,
) -> None:
    view = timeline(load_transcripts(sweep)[row_of(sweep, CONSENT, 1)])
    kinds = [e.kind for e in view.entries()]
    assert {"plan", "step", "tool", "question", "consent", "answer"} <= set(kinds)
    consent = next(e for e in view.entries() if e.kind == "consent")
    assert consent.name == "create_trader" and consent.status.startswith("approved")
    assert '"name": "Alpha"' in consent.detail
    steps = [e for e in view.entries() if e.kind == "step"]
    assert all(step.status == "done" for step in steps)
    tool = next(e for e in view.entries() if e.kind == "tool" and e.name == "create_trader")
    assert tool.status == "ok" and '"id": "trader-1"' in tool.result
    # every entry from an event points back at it
    events = load_transcripts(sweep)[row_of(sweep, CONSENT, 1)]
    assert events is not None
    flat = events.events()
    for entry in view.entries():
        if entry.event is not None:
            assert flat[entry.event].type in {
                "tool_call",
                "plan",
                "replan",
                "step_start",
                "ask_user",
                "error",
                "result",
                "compression",
                "permission",
            }


def test_a_simulated_user_run_reads_as_the_simulated_users_messages(sweep: pd.DataFrame) -> None:
    transcript = load_transcripts(sweep)[row_of(sweep, SIMULATED, 1)]
    assert transcript is not None
    view = timeline(transcript)
    said = [e.text for e in view.entries() if e.kind == "user"]
    assert said == [turn.said for turn in transcript.turns]
    assert len(said) >= 2


def test_the_users_typed_secrets_never_show(sweep: pd.DataFrame) -> None:
    transcript = load_transcripts(sweep)[row_of(sweep, SECRETS, 1)]
    assert transcript is not None
    said = transcript.turns[0].said
    assert RAW_SECRETS[0] not in said and "api key ****" in said  # masked, as in the journal
    view = timeline(transcript)
    html = transcript_html(view)
    for secret in RAW_SECRETS:
        assert secret not in html
        assert all(secret not in (e.text + e.detail + e.result) for e in view.entries())
    assert "api key ****" in view.entries()[0].text


def test_a_row_without_a_transcript_says_so() -> None:
    view = timeline(None, run="old--p0")
    assert view.missing == MISSING_TRANSCRIPT and view.turns == ()
    assert "no transcript kept" in transcript_html(view)


def test_notes_show_beside_their_event_and_the_run(sweep: pd.DataFrame) -> None:
    view = timeline(load_transcripts(sweep)[row_of(sweep, CONSENT, 1)])
    consent = next(e for e in view.entries() if e.kind == "consent")
    assert consent.event is not None
    html = transcript_html(
        view,
        notes=[
            Note("finding", "unapproved_side_effect", "high", "ran <b>without</b>", consent.event),
            Note("judge", "helpful", "pass", "it did what was asked"),
            Note("label", "ana", "fail", "wrong trader"),
        ],
    )
    entry = re.search(rf'data-event="{consent.event}">(.*?)</div>\n</div>', html, re.S)
    assert entry is not None and "unapproved_side_effect" in entry.group(1)
    assert "ran &lt;b&gt;without&lt;/b&gt;" in html  # escaped
    assert "helpful: pass" in html and "it did what was asked" in html
    assert "ana: fail" in html and "wrong trader" in html


# -- pairs and divergence ---------------------------------------------------------------------


def test_two_points_pair_flips_first_with_the_comparisons_figures(sweep: pd.DataFrame) -> None:
    a, b = points(sweep, 0, 1)
    assert point_label(sweep, 0) == "planner.max_steps=2"
    paired = pair_runs(a, b)
    assert [pair.flip for pair in paired.pairs][:1] == ["fixed"]
    assert [pair.scenario for pair in paired.flips] == [FLIPS]
    assert all(pair.flip == "" for pair in paired.pairs[1:])
    assert len(paired.pairs) == len(a) == len(b)
    expected = compare(a, b).difference.iloc[0]
    figures = paired.comparison.difference.iloc[0]
    assert figures["p_value"] == expected["p_value"]
    assert (figures["ci_low"], figures["ci_high"]) == (expected["ci_low"], expected["ci_high"])
    assert "McNemar p = 1" in paired.headline() and "1 fixed" in paired.headline()
    # the rows named are the pair's rows in each table
    flip = paired.flips[0]
    assert (a.iloc[flip.row_a]["scenario"], b.iloc[flip.row_b]["scenario"]) == (FLIPS, FLIPS)
    assert not a.iloc[flip.row_a]["passed"] and b.iloc[flip.row_b]["passed"]


def test_the_first_divergence_is_where_the_refused_plan_parts_from_the_plan(
    sweep: pd.DataFrame,
) -> None:
    transcripts = load_transcripts(sweep)
    a = timeline(transcripts[row_of(sweep, FLIPS, 0)])
    b = timeline(transcripts[row_of(sweep, FLIPS, 1)])
    divergence = first_divergence(a, b)
    assert divergence is not None and divergence.turn == 1
    entry_a = a.turns[0].entries[divergence.index_a]
    entry_b = b.turns[0].entries[divergence.index_b]
    assert (entry_a.kind, entry_a.name) == ("error", "invalid_plan")
    assert entry_b.kind == "plan"
    # everything before it is the same (the live-state tools, whose results hold timestamps)
    before = [e.signature for e in a.turns[0].entries[: divergence.index_a]]
    assert before == [e.signature for e in b.turns[0].entries[: divergence.index_b]]
    assert before and any(sig.startswith("tool:") for sig in before)
    aligned = align(a, b)
    assert [row.number for row in aligned] == [1, 2, 3]
    assert [row.diverges_at is not None for row in aligned] == [True, False, False]
    html = side_by_side_html(a, b, labels=("max 2", "max 8"))
    assert html.count("ak-diverged") == 2 and "first divergence" in html


def test_the_same_run_twice_does_not_diverge(sweep: pd.DataFrame) -> None:
    transcripts = load_transcripts(sweep)
    a = timeline(transcripts[row_of(sweep, CONSENT, 0)])
    b = timeline(transcripts[row_of(sweep, CONSENT, 1)])
    assert first_divergence(a, b) is None
    assert "first divergence" not in side_by_side_html(a, b)


def test_points_refuse_an_unknown_point_or_the_same_one(sweep: pd.DataFrame) -> None:
    with pytest.raises(UsageError, match="no point 7"):
        points(sweep, 0, 7)
    with pytest.raises(UsageError, match="two different points"):
        points(sweep, 1, 1)


# -- the report --------------------------------------------------------------------------------


def test_the_report_is_one_file_that_fetches_nothing(sweep: pd.DataFrame, tmp_path: Path) -> None:
    page = write_report(sweep, tmp_path / "report.html", compare_points=(0, 1)).read_text()
    # nothing outside the page: no src/href to anything, a policy forbidding other sources
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?!#)""", page)
    assert "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page
    assert "<svg" in page  # the plot is inline
    for secret in RAW_SECRETS:
        assert secret not in page
    # every run has its row and its transcript; the flipped ones are marked
    assert page.count('<tbody class="ak-run"') == len(sweep)
    flipped = re.findall(r'data-flipped="1" data-scenario="([^"]+)"', page)
    assert flipped == [FLIPS, FLIPS]
    assert page.count('class="ak-transcript"') == len(sweep)
    assert page.count('class="ak-side-by-side"') == len(sweep) // 2  # one per pair
    assert "McNemar" in page and "planner.max_steps=2" in page
    assert "transcript left out" not in page


def test_runs_past_the_limit_keep_their_rows_and_the_page_says_so(sweep: pd.DataFrame) -> None:
    page = render_report(sweep, limit=3)
    assert page.count('<tbody class="ak-run"') == len(sweep)
    assert page.count('class="ak-transcript"') == 3
    left = len(sweep) - 3
    assert "at most 3 runs" in page and f"{left} further runs" in page
    assert page.count("transcript left out") == left
    # the run that failed is among the three held
    first_failed = re.search(r'data-outcome="failed".*?</tbody>', page, re.S)
    assert first_failed is not None and "ak-transcript" in first_failed.group(0)


def test_a_table_without_transcripts_opens_and_says_what_is_missing(
    sweep: pd.DataFrame, tmp_path: Path
) -> None:
    older = sweep.drop(columns=[TRANSCRIPT_COLUMN])
    page = render_report(older, compare_points=(0, 1))
    assert page.count('<tbody class="ak-run"') == len(sweep)
    assert page.count("no transcript kept for this run") >= len(sweep)
    assert f"{len(sweep)} runs kept no transcript" in page
    path = save_results(older, tmp_path / "older.csv")
    done = run_cli("report", str(path), "--out", str(tmp_path / "older.html"))
    assert done.exit_code == 0, done.stderr
    assert "no transcript kept" in (tmp_path / "older.html").read_text()


def test_agentkit_report_writes_the_comparison_of_two_tables(
    sweep: pd.DataFrame, tmp_path: Path
) -> None:
    a, b = points(sweep, 0, 1)
    first = save_results(a, tmp_path / "a.parquet")
    second = save_results(b, tmp_path / "b.parquet")
    out = tmp_path / "out" / "report.html"
    done = run_cli("report", str(first), "--compare", str(second), "--out", str(out))
    assert done.exit_code == 0, done.stderr
    assert f"wrote {out}" in done.stdout
    page = out.read_text()
    assert str(first) in page and str(second) in page
    assert re.findall(r'data-flipped="1" data-scenario="([^"]+)"', page) == [FLIPS, FLIPS]
    assert page.count('class="ak-pair" data-flip="fixed"') == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "{tmp}/r.txt"], "--out takes an .html file"),
        (["--out", "{tmp}/r.html", "--points", "0"], "--points takes two point numbers"),
        (["--out", "{tmp}/r.html", "--points", "0,9"], "no point 9"),
        (
            ["--out", "{tmp}/r.html", "--points", "0,1", "--compare", "{table}"],
            "not both",
        ),
        (["--out", "{tmp}/r.html", "--limit", "-1"], "not -1"),
    ],
)
def test_agentkit_report_refuses_bad_input_in_one_line_writing_nothing(
    sweep: pd.DataFrame, tmp_path: Path, args: list[str], message: str
) -> None:
    table = save_results(sweep, tmp_path / "in" / "r.parquet")
    out = tmp_path / "out"
    out.mkdir()
    before = tree(out)
    filled = [arg.format(tmp=out, table=table) for arg in args]
    done = run_cli("report", str(table), *filled)
    assert done.exit_code == 2 and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert tree(out) == before


def test_agentkit_report_names_a_missing_table(tmp_path: Path) -> None:
    done = run_cli("report", str(tmp_path / "nope.parquet"), "--out", str(tmp_path / "r.html"))
    assert done.exit_code == 2 and "no results file" in done.stderr
    assert not (tmp_path / "r.html").exists()


def test_judges_findings_and_labels_kept_with_the_table_show_in_the_report(
    sweep: pd.DataFrame, tmp_path: Path
) -> None:
    from agentkit.eval import Judgement
    from agentkit.eval.judges.table import JUDGEMENTS_COLUMN, judgements_json
    from agentkit.eval.labels import add_label
    from agentkit.eval.notes import notes_beside
    from agentkit.eval.scanners import Finding, save_findings

    consent = row_of(sweep, CONSENT, 1)
    judged = sweep.copy()
    judged[JUDGEMENTS_COLUMN] = judgements_json([])
    judged.loc[consent, JUDGEMENTS_COLUMN] = judgements_json(
        [Judgement(judge="helpful", outcome="fail", score=0.0, reason="2 of 3 graders: fail")]
    )
    path = save_results(judged, tmp_path / "runs.parquet")
    view = timeline(load_transcripts(judged)[consent])
    asked = next(e for e in view.entries() if e.kind == "consent")
    assert asked.event is not None
    run = f"{CONSENT}--p1"
    finding = Finding(
        run=run,
        scanner="repeated_question",
        kind="repeated_question",
        severity="warning",
        turn=1,
        event=asked.event,
        event_type="ask_user",
        sentence="the same question <twice>",
    )
    save_findings(pd.DataFrame([finding.model_dump(exclude={"v"})]), path)
    add_label(path, run, "fail", note="wrong trader name", who="ana")

    notes = notes_beside(judged, path)
    assert sorted(note.kind for note in notes[consent]) == ["finding", "judge", "label"]
    assert set(notes) == {consent}

    out = tmp_path / "report.html"
    done = run_cli("report", str(path), "--out", str(out))
    assert done.exit_code == 0, done.stderr
    page = out.read_text()
    start = page.index(f'data-run="{run}"')
    shown = page[start : page.index("</details>", start)]
    assert "helpful: fail" in shown and "2 of 3 graders: fail" in shown
    assert "ana: fail" in shown and "wrong trader name" in shown
    # the finding sits in its event's entry, escaped
    entry = shown[shown.index(f'data-event="{asked.event}"') :]
    entry = entry[: entry.index('class="ak-entry', 10)]
    assert "repeated_question: warning" in entry
    assert "the same question &lt;twice&gt;" in entry
