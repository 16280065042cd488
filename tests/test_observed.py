"""Answers told from what the tools returned (``planner.answers: observed``) and the
``unfaithful_answer`` scanner that flags answers that contradict or invent beyond them.
(Doubles from the library's test kit; the embedded model at the end.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentkit.eval.scanners import ScanContext, unfaithful_answer
from agentkit.eval.transcript import Transcript, UserTurn
from agentkit.events import AgentOutputEvent, ResultEvent, ToolCallEvent, ToolResultEvent
from agentkit.planning.observed import render_result

from .test_gate import Notes, notes, proposing, run
from .test_planner import of

__all__ = ["notes"]

NOTES = {
    "notes": [
        {"id": 1, "title": "dentist", "body": "Tuesday 9:00", "tags": ["health"]},
        {"id": 2, "title": "groceries", "body": "milk", "tags": []},
    ]
}


@pytest.mark.parametrize(
    ("result", "code", "expected"),
    [
        (NOTES, "en", ["2 notes:", "- dentist (id: 1, body: Tuesday 9:00)", "- groceries"]),
        (NOTES, "zh", ["notes 共 2 条:", "- dentist"]),
        ({"traders": []}, "en", ["No traders found."]),
        ({"traders": []}, "zh", ["没有找到 traders。"]),
        ([1, 2, 3], "en", ["3 count:", "- 1", "- 3"]),
        ({"id": 7, "title": "todo", "owner": {"name": "Ann"}}, "en", ["todo (id: 7)"]),
        ({"error": "no note 9"}, "en", ["count did not work: no note 9"]),
    ],
)
def test_results_are_told_as_lists_counts_records_and_none(
    result: Any, code: str, expected: list[str]
) -> None:
    told = render_result("count", json.dumps(result), True, code)
    for part in expected:
        assert part in told, told


def test_a_turn_that_ran_tools_is_answered_from_their_results(notes: Notes) -> None:
    model = proposing("add_note", {"title": "groceries"})
    run(notes.turn("Add a note titled groceries", model, answers="observed"))
    events = run(notes.turn("yes", model, answers="observed"))
    said = "".join(e.text for e in of(events, AgentOutputEvent))
    assert said == "Done: add_note.\nok: true"
    purposes = [r.purpose for r in model.requests]
    assert purposes.count("replan") == 0  # no model call after the decision


def test_without_observed_answers_the_model_writes_the_answer(notes: Notes) -> None:
    model = proposing("add_note", {"title": "groceries"})
    run(notes.turn("Add a note titled groceries", model))
    events = run(notes.turn("yes", model))
    assert of(events, ResultEvent)[0].text == "Done."  # the model's own words


def test_the_small_model_preset_answers_from_observations() -> None:
    from agentkit.config import PlannerConfig

    config = PlannerConfig.model_validate({"preset": "small_model"})
    assert (config.tool_choice, config.argument_values, config.answers) == (
        "router",
        "said",
        "observed",
    )
    assert PlannerConfig.model_validate({"preset": "small_model", "answers": "model"}).answers == (
        "model"
    )


# -- the scanner ---------------------------------------------------------------------------------


def _run(said: str, output: Any, answer: str) -> Transcript:
    events = [
        ToolCallEvent(id="act_1", name="list_notes", arguments={}),
        ToolResultEvent(id="act_1", name="list_notes", output=json.dumps(output), ok=True),
        ResultEvent(conversation_id="c", message_id="m", status="completed", text=answer),
    ]
    return Transcript(run="r", scenario="s", turns=[UserTurn(number=1, said=said, events=events)])


@pytest.mark.parametrize(
    ("output", "answer", "found"),
    [
        (NOTES, "You have no notes yet.", "but a tool returned them"),
        (NOTES, "Your notes: dentist, groceries and Paris.", "the name 'Paris'"),
        (NOTES, "You have 5 notes.", "the number 5"),
        ({"notes": []}, "Hello [Your Name], nothing here.", "placeholder"),
        ({"notes": []}, "你好 [你的名字]", "placeholder"),
    ],
)
def test_the_scanner_finds_what_contradicts_or_invents(
    output: Any, answer: str, found: str
) -> None:
    findings = unfaithful_answer(_run("list my notes", output, answer), ScanContext())
    assert findings and found in findings[0].sentence, findings


@pytest.mark.parametrize(
    ("output", "answer"),
    [
        (NOTES, "2 notes:\n- dentist (id: 1, body: Tuesday 9:00)\n- groceries (id: 2)"),
        ({"notes": []}, "No notes found."),
        ({"traders": [], "models": [{"id": 1}]}, "One model (gpt-4o) and no traders yet."),
        ({"notes": []}, "没有找到 notes。"),
    ],
)
def test_the_scanner_leaves_faithful_answers_alone(output: Any, answer: str) -> None:
    assert unfaithful_answer(_run("list my notes", output, answer), ScanContext()) == []


def test_the_scanner_is_built_in() -> None:
    from agentkit.eval.scanners import BUILTIN_SCANNERS

    assert BUILTIN_SCANNERS["unfaithful_answer"] is unfaithful_answer


# -- on the embedded model ----------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]


def _send(root: Path, agent: str, text: str, conversation: str | None = None) -> tuple[str, str]:
    """``agentkit send`` on the embedded model: ``(answer, conversation id)``."""
    import os
    import subprocess
    import sys

    command = [str(Path(sys.executable).parent / "agentkit"), "send", agent, text]
    if conversation:
        command[3:3] = ["-c", conversation]
    env = {**os.environ, "AGENTKIT_DATA_DIR": str(root)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=True, env=env)
    lines = (done.stdout + done.stderr).strip().splitlines()
    conv = next(line.split()[1] for line in lines if line.startswith("conversation: "))
    return done.stdout, conv


@pytest.mark.real_model
def test_the_embedded_model_names_the_saved_notes_and_says_none_for_no_traders(
    tmp_path: Path,
) -> None:
    import shutil

    for agent in ("notes-001", "desk-001"):
        shutil.copytree(
            REPO / "data" / "agents" / agent,
            tmp_path / "agents" / agent,
            ignore=shutil.ignore_patterns("conversations", "workspace"),
        )
    workspace = tmp_path / "agents" / "notes-001" / "workspace"
    workspace.mkdir()
    saved = [
        {"id": 1, "title": "dentist", "body": "", "tags": [], "priority": "normal",
         "created_at": "2026-12-01T09:00:00+00:00"},
        {"id": 2, "title": "groceries", "body": "", "tags": [], "priority": "normal",
         "created_at": "2026-12-01T09:00:00+00:00"},
    ]  # fmt: skip
    (workspace / "notes.json").write_text(json.dumps(saved), encoding="utf-8")
    said, _ = _send(tmp_path, "notes-001", "list my notes")
    assert "dentist" in said and "groceries" in said, said
    said, _ = _send(tmp_path, "desk-001", "list my traders")
    assert "no traders" in said.casefold(), said
    assert "[" not in said and "{" not in said, said
