"""Human labels: kept beside the results (surviving --resume, exported with the table), set
from the CLI and from the notebook widget; a label for an unknown run is refused in one line,
exit 2, nothing written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from agentkit.errors import UsageError
from agentkit.eval import load_results
from agentkit.eval.labels import (
    LABEL_COLUMNS,
    Label,
    add_label,
    labels_path,
    load_labels,
    parse_label,
    with_labels,
)
from agentkit.eval.results import run_ids

from .conftest import run_cli, tree
from .test_eval_runs import SCENARIOS

FIRST = SCENARIOS / "notes_add_note_en.yaml"
SECOND = SCENARIOS / "notes_search_en.yaml"


@pytest.fixture
def results(data_dir: Path, tmp_path: Path) -> Path:
    """A one-run results table written by ``agentkit eval`` (scripted)."""
    table = tmp_path / "out" / "runs.parquet"
    done = run_cli(
        "--data-dir", str(data_dir), "eval", str(FIRST), "--model", "scripted",
        "--out", str(table), "--no-progress",
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    return table


def test_label_from_the_cli_is_kept_beside_the_results_and_listed(results: Path) -> None:
    run = run_ids(load_results(results))[0]
    assert run == "notes_add_note_en--p0"
    done = run_cli(
        "label", str(results), run, "fail", "--note", "saved before asking", "--who", "ann"
    )
    assert done.exit_code == 0, done.stderr
    assert done.stdout.strip() == f"labelled {run} fail (in {labels_path(results)})"
    assert labels_path(results) == results.parent / "runs.labels.jsonl"
    (line,) = labels_path(results).read_text(encoding="utf-8").splitlines()
    kept = Label.model_validate_json(line)
    assert (kept.v, kept.run, kept.label, kept.note, kept.who) == (
        1, run, "fail", "saved before asking", "ann"
    )  # fmt: skip
    # labelling again: the last label is the run's
    assert run_cli("label", str(results), run, "pass", "--who", "bob").exit_code == 0
    assert load_labels(results)[run].label == "pass"
    assert load_labels(results)[run].who == "bob"
    listed = run_cli("labels", str(results))
    assert listed.exit_code == 0
    assert listed.stdout.splitlines()[0].startswith(f"{run}  pass  bob ")
    assert "1 of 1 runs labelled" in listed.stdout
    as_json = json.loads(run_cli("labels", str(results), "--json").stdout)
    assert [item["label"] for item in as_json["labels"]] == ["pass"]
    assert as_json["unlabelled"] == []


def test_a_score_is_a_label_too(results: Path) -> None:
    run = run_ids(load_results(results))[0]
    made = add_label(results, run, "4", note="mostly right", who="ann")
    assert made.label == 4.0 and made.verdict == "4"
    assert load_labels(results)[run] == made
    assert parse_label("PASS") == "pass" and parse_label("2.5") == 2.5


def test_labels_survive_resume_and_are_exported_with_the_table(
    results: Path, data_dir: Path, tmp_path: Path
) -> None:
    run = run_ids(load_results(results))[0]
    add_label(results, run, "pass", note="asked first", who="ann",
              when=datetime(2026, 12, 3, 14, 0, tzinfo=UTC))  # fmt: skip
    resumed = run_cli(
        "--data-dir", str(data_dir), "eval", str(FIRST), str(SECOND), "--model", "scripted",
        "--out", str(results), "--resume", "--no-progress",
    )  # fmt: skip
    assert resumed.exit_code == 0, resumed.stderr
    table = load_results(results)
    assert run_ids(table) == [run, "notes_search_en--p0"]
    labels = load_labels(results)
    assert list(labels) == [run] and labels[run].note == "asked first"
    # exported with the table: its label columns
    export = tmp_path / "export.csv"
    done = run_cli("labels", str(results), "--out", str(export))
    assert done.exit_code == 0, done.stderr
    exported = load_results(export)
    assert list(exported.columns[-len(LABEL_COLUMNS) :]) == list(LABEL_COLUMNS)
    assert exported["label"].fillna("").tolist() == ["pass", ""]
    assert exported["label_when"].iloc[0] == "2026-12-03T14:00:00+00:00"
    assert list(with_labels(table, labels)["label_note"]) == ["asked first", ""]
    assert "next unlabelled: notes_search_en--p0" in run_cli("labels", str(results)).stdout


def test_a_label_for_an_unknown_run_is_one_line_exit_2_and_nothing_written(
    results: Path,
) -> None:
    before = tree(results.parent)
    for args, says in [
        (["label", str(results), "nope--p0", "pass"], "no run 'nope--p0' in"),
        (["label", str(results), "notes_add_note_en--p0", "maybe"], "a label is pass, fail"),
        (["label", str(results), "notes_add_note_en--p0", "nan"], "finite"),
        (["label", str(results.parent / "absent.parquet"), "x--p0", "pass"], "no results file"),
        (["labels", str(results), "--out", str(results.parent / "x.txt")], ".parquet or .csv"),
    ]:
        done = run_cli(*args)
        assert done.exit_code == 2, (args, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
        assert tree(results.parent) == before  # nothing written
    with pytest.raises(UsageError, match="no run"):
        add_label(results, "notes_add_note_en--p9", "pass")
    assert not labels_path(results).exists()


def test_a_damaged_labels_file_is_named_with_its_line(results: Path) -> None:
    run = run_ids(load_results(results))[0]
    add_label(results, run, "pass")
    with labels_path(results).open("a", encoding="utf-8") as file:
        file.write('{"v": 1, "run": "x"}\n')
    done = run_cli("labels", str(results))
    assert done.exit_code == 2
    assert f"{labels_path(results)}:2: not a label" in done.stderr


def test_labels_follow_a_copy_of_the_table(results: Path, tmp_path: Path) -> None:
    from agentkit.eval.labels import copy_labels

    new = tmp_path / "rescored" / "new.parquet"
    assert copy_labels(results, new) is None  # no labels yet: nothing written
    assert not (tmp_path / "rescored").exists()
    run = run_ids(load_results(results))[0]
    add_label(results, run, "fail", note="n")
    assert copy_labels(results, new) == labels_path(new)
    assert load_labels(new) == load_labels(results)


def test_score_carries_the_labels_to_its_new_table(
    results: Path, data_dir: Path, tmp_path: Path
) -> None:
    run = run_ids(load_results(results))[0]
    add_label(results, run, "fail", note="kept across the re-score", who="ann")
    new = tmp_path / "new.parquet"
    done = run_cli("--data-dir", str(data_dir), "score", str(results), "--expectations",
                   "--scenarios", str(FIRST), "--out", str(new))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert f"wrote {labels_path(new)} (the labels of {results})" in done.stdout
    assert load_labels(new) == load_labels(results)
