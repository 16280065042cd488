"""LabelView: one run's transcript with Pass/Fail (or a score) and a note; a click keeps the
label beside the results and moves to the next unlabelled run. judge_rates: a judge's pass
rate per variant next to its agreement with the labels."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from agentkit.eval import RunState, Transcript, UserTurn, load_results, run_eval, save_results
from agentkit.eval.agreement import agreement
from agentkit.eval.labels import load_labels
from agentkit.events import ResultEvent, ToolCallEvent, ToolResultEvent
from agentkit.memory import TaskState
from lab.label_view import LabelView, next_unlabelled, transcript_html
from lab.sweep_view import judge_rates

from .test_eval_runs import SCENARIOS

CHOSEN = [SCENARIOS / "notes_add_note_en.yaml", SCENARIOS / "notes_search_en.yaml"]


@pytest.fixture
def results(data_dir: Path, tmp_path: Path) -> Path:
    frame = run_eval(CHOSEN, model="scripted", data_dir=data_dir, progress=False)
    return save_results(frame, tmp_path / "runs.parquet")


def test_the_view_labels_the_run_on_screen_and_moves_to_the_next_unlabelled(
    results: Path,
) -> None:
    view = LabelView(results, who="ann")
    assert view.run == "notes_add_note_en--p0"
    assert not view.pass_button.disabled and not view.fail_button.disabled
    assert "0 of 2 runs labelled" in view.header.value
    assert "Note down that I need to buy milk tomorrow" in view.body.value
    assert "[consent]" in view.body.value and "add_note" in view.body.value
    view.note.value = "asked before saving"
    view.pass_button.click()
    labels = load_labels(results)
    assert labels["notes_add_note_en--p0"].label == "pass"
    assert labels["notes_add_note_en--p0"].note == "asked before saving"
    assert labels["notes_add_note_en--p0"].who == "ann"
    assert view.run == "notes_search_en--p0" and view.note.value == ""
    assert "1 of 2 runs labelled" in view.header.value
    view.skip_button.click()  # the only unlabelled run: it stays
    assert view.run == "notes_search_en--p0"
    view.fail_button.click()
    assert load_labels(results)["notes_search_en--p0"].label == "fail"
    assert view.run is None and "nothing left to label" in view.header.value
    # nothing left: every button and the note are off, and a click changes nothing
    assert all(control.disabled for control in (*view.controls(), view.note))
    before = (results.parent / f"{results.stem}.labels.jsonl").read_text(encoding="utf-8")
    view.pass_button.click()
    assert (results.parent / f"{results.stem}.labels.jsonl").read_text("utf-8") == before
    # a view opened later starts where the labels stop, its buttons off too
    later = LabelView(results)
    assert later.run is None and later.pass_button.disabled and later.skip_button.disabled
    # shown a run again (a label to change), the buttons are back on
    later.show("notes_search_en--p0")
    assert not any(control.disabled for control in (*later.controls(), later.note))


def test_a_scale_labels_with_a_score(results: Path) -> None:
    view = LabelView(results, scale=5)
    assert view.score.max == 5
    view.score.value = 4
    view.score_button.click()
    assert load_labels(results)["notes_add_note_en--p0"].label == 4.0


def test_transcript_html_escapes_and_shows_failed_tools() -> None:
    transcript = Transcript(
        run="x--p0",
        scenario="x",
        turns=[
            UserTurn(
                number=1,
                said="<script>alert(1)</script>",
                events=[
                    ToolCallEvent(id="c1", name="delete_note", arguments={"note_id": 7}),
                    ToolResultEvent(id="c1", name="delete_note", output="no note 7", ok=False),
                    ResultEvent(conversation_id="c", message_id="m", status="completed", text="ok"),
                ],
            )
        ],
        final=RunState(status="completed", task_state=TaskState()),
    )
    html = transcript_html(transcript)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "delete_note FAILED: no note 7" in html
    assert "final status: completed" in html
    assert "no transcript" in transcript_html(None)


def test_next_unlabelled_wraps_round() -> None:
    assert next_unlabelled(["a", "b", "c"], {}, after="c") == "a"
    assert next_unlabelled(["a", "b", "c"], {}, after=None) == "a"


def test_judge_rates_show_the_agreement_next_to_the_judges_pass_rate(results: Path) -> None:
    table = load_results(results).assign(judge_tone=["pass", "judge_error"])
    few = agreement({"notes_add_note_en--p0": "pass"}, {"notes_add_note_en--p0": "pass"})
    rates = judge_rates(table, "tone", few)
    assert rates[["judge", "runs", "passed"]].to_dict("records") == [
        {"judge": "tone", "runs": 1, "passed": 1}
    ]
    assert math.isnan(rates["kappa"].iloc[0]) and "too few" in rates["trust"].iloc[0]
