"""The run browser and the side-by-side view over a real sweep (scripted model): what they
show for a chat run, a planner run with a consent and a simulated-user run, their filters,
and a table written before transcripts were kept."""

from __future__ import annotations

import pandas as pd
import pytest
from agentkit.eval import load_transcripts
from agentkit.eval.notes import Note
from agentkit.eval.pairs import points
from agentkit.eval.timeline import timeline
from agentkit.eval.transcript import TRANSCRIPT_COLUMN
from agentkit.telemetry import Telemetry
from lab.run_browser import ANY, RunBrowser, RunFilters, filter_rows, run_spans
from lab.side_by_side import SideBySide

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


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return two_point_sweep(tmp_path_factory.mktemp("sweep"))


def test_the_browser_shows_a_chat_a_consent_and_a_simulated_users_run(
    sweep: pd.DataFrame,
) -> None:
    browser = RunBrowser(sweep)
    assert browser.rows == list(range(len(sweep)))  # no filter: every run
    assert len(browser.picker.options) == len(sweep)
    assert browser.selected == 0  # the first run is shown

    chat = row_of(sweep, CHAT, 1)
    browser.picker.value = chat  # what a pick in the list does
    assert browser.selected == chat and browser.view is not None
    assert browser.view.run == f"{CHAT}--p1"
    html = browser.transcript.value
    assert "I want to organise a two-day hackathon" in html
    assert str(sweep.iloc[chat]["answer"]) in html
    assert "the agent was opened afresh" in html  # the scenario's restart

    consent = row_of(sweep, CONSENT, 1)
    browser.select(consent)
    assert browser.picker.value == consent
    html = browser.transcript.value
    assert 'class="ak-entry ak-consent"' in html and "create_trader" in html
    assert "approved" in html and 'class="ak-entry ak-step"' in html and ">done<" in html
    assert "ak-plan" in html and "ak-tool" in html

    simulated = row_of(sweep, SIMULATED, 1)
    browser.select(simulated)
    transcript = load_transcripts(sweep)[simulated]
    assert transcript is not None
    for turn in transcript.turns:
        assert turn.said.split()[0] in browser.transcript.value

    browser.select(row_of(sweep, SECRETS, 1))
    for secret in RAW_SECRETS:
        assert secret not in browser.transcript.value
    assert "api key ****" in browser.transcript.value


def test_the_filters_narrow_the_table_and_the_picker(sweep: pd.DataFrame) -> None:
    browser = RunBrowser(sweep)
    browser.outcome_choice.value = "failed"
    failed = [i for i in range(len(sweep)) if not sweep.iloc[i]["passed"]]
    assert browser.rows == failed == [row_of(sweep, FLIPS, 0)]
    assert [value for _, value in browser.picker.options] == failed
    assert browser.selected == failed[0]  # the shown run follows the filter
    assert "invalid_plan" in browser.transcript.value
    assert "agentkit-run-rows" in browser.table.value and FLIPS in browser.table.value

    browser.outcome_choice.value = ANY
    browser.point_choice.value = "1"
    browser.tag_choice.value = "consent"
    expected = [
        i
        for i, record in enumerate(sweep.to_dict("records"))
        if record["point"] == 1 and "consent" in str(record["tags"]).split(",")
    ]
    assert browser.rows == expected and len(expected) >= 2
    browser.scenario_choice.value = CHAT
    assert browser.rows == [] and browser.selected is None
    assert "No run matches" in browser.table.value
    assert browser.transcript.value == "<i>No run selected.</i>"


def test_findings_and_labels_filter_and_show_beside_the_run(sweep: pd.DataFrame) -> None:
    consent = row_of(sweep, CONSENT, 1)
    view = timeline(load_transcripts(sweep)[consent])
    asked = next(e for e in view.entries() if e.kind == "consent")
    notes = {
        consent: [
            Note("finding", "repeated_question", "low", "asked twice", asked.event),
            Note("label", "ana", "fail", "not what I wanted"),
            Note("judge", "helpful", "judge_error", "the grader answered garbage"),
        ],
        row_of(sweep, CHAT, 1): [Note("label", "ana", "pass")],
    }
    browser = RunBrowser(sweep, notes=notes)
    assert "repeated_question" in browser.finding_choice.options
    browser.finding_choice.value = "repeated_question"
    assert browser.rows == [consent]
    html = browser.transcript.value
    assert "asked twice" in html and "not what I wanted" in html
    assert "helpful: judge_error" in html
    browser.finding_choice.value = ANY
    browser.label_choice.value = "pass"
    assert browser.rows == [row_of(sweep, CHAT, 1)]
    browser.label_choice.value = "(unlabelled)"
    assert len(browser.rows) == len(sweep) - 2
    assert filter_rows(sweep, RunFilters(finding="(none)"), notes) == [
        i for i in range(len(sweep)) if i != consent
    ]


def test_a_runs_spans_open_in_a_trace_view_when_they_were_kept(sweep: pd.DataFrame) -> None:
    telemetry = Telemetry()
    sweep_trace = telemetry.trace("invoke_workflow agentkit.eval")
    run = sweep_trace.span("eval_run chat")
    sweep_trace.span("invoke_agent innovator-001", parent=run).end()
    run.end()
    sweep_trace.span("eval_run another").end()
    sweep_trace.end()
    spans = telemetry.recorded(sweep_trace.trace_id) or []
    assert len(spans) == 4
    mine = run_spans(spans, sweep_trace.trace_id, run.span_id)
    assert [s.name for s in mine] == ["eval_run chat", "invoke_agent innovator-001"]

    table = sweep.copy()
    chat = row_of(table, CHAT, 1)
    table.loc[chat, "trace_id"] = sweep_trace.trace_id
    table.loc[chat, "span_id"] = run.span_id
    browser = RunBrowser(table, spans=spans)
    browser.select(chat)
    assert not browser.spans_button.disabled and "2 spans" in browser.spans_note.value
    browser.spans_button.click()
    (trace_view,) = browser.trace.children
    assert [s.name for s in trace_view.spans] == ["eval_run chat", "invoke_agent innovator-001"]
    browser.select(row_of(table, CONSENT, 1))
    assert browser.spans_button.disabled and "spans not kept" in browser.spans_note.value
    assert browser.trace.children == ()


def test_side_by_side_lists_the_flip_first_and_marks_where_the_runs_part(
    sweep: pd.DataFrame,
) -> None:
    view = SideBySide.from_points(sweep, 0, 1)
    assert view.labels == ("planner.max_steps=2", "planner.max_steps=8")
    assert "McNemar p = 1" in view.headline.value and "1 fixed" in view.headline.value
    first_label, _ = view.picker.options[0]
    assert first_label.startswith("✓ fixed") and FLIPS in first_label
    assert len(view.picker.options) == len(sweep) // 2
    # the flip is shown first, its divergence marked at turn 1
    assert view.pair is not None and view.pair.flip == "fixed"
    assert view.divergence is not None and view.divergence.turn == 1
    html = view.transcripts.value
    assert html.count("ak-diverged") == 2 and "first divergence" in html
    assert "planner.max_steps=2" in html and "planner.max_steps=8" in html

    view.flips_only.value = True
    assert [label for label, _ in view.picker.options] == [first_label]

    view.flips_only.value = False
    for number, pair in enumerate(view.shown):
        if pair.scenario in (CHAT, CONSENT, SIMULATED):
            view.picker.value = number
            assert view.pair == pair and view.divergence is None
            assert view.views is not None
            a, b = view.views
            assert len(a.turns) == len(b.turns) >= 2
            assert "first divergence" not in view.transcripts.value
            assert view.transcripts.value.count("ak-turn-no") >= len(a.turns)


def test_a_table_without_transcripts_still_opens_and_says_what_is_missing(
    sweep: pd.DataFrame,
) -> None:
    older = sweep.drop(columns=[TRANSCRIPT_COLUMN])
    browser = RunBrowser(older)
    assert len(browser.rows) == len(older)
    assert "no transcript column" in browser.notice.value
    browser.select(row_of(older, CONSENT, 1))
    assert "no transcript kept for this run" in browser.transcript.value
    a, b = points(older, 0, 1)
    view = SideBySide(a, b)
    assert "kept no transcript" in view.notice.value
    assert len(view.picker.options) == len(older) // 2
    assert "no transcript kept" in view.transcripts.value and view.divergence is None
