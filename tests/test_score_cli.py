"""``agentkit score``: a stored table re-scored from its transcripts, with no agent model called;
judges asked again only where what they see changed; bad input is one line, exit 2, nothing
written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
from agentkit.eval import load_judgements, load_results, run_eval, save_results
from agentkit.eval.expectations import EXPECTATION_KINDS
from agentkit.testing import ModelRequest, model_requests_allowed

from .conftest import run_cli, tree
from .test_eval_runs import SCENARIOS

#: the system prompts the grader was sent, one per call (the CLI runs in this process)
ASKED: list[str] = []
VERDICTS = ["passed", "outcome", *(f"exp_{kind}" for kind in EXPECTATION_KINDS), "checks",
            "checks_failed", "failures", "error"]  # fmt: skip


def grader(request: ModelRequest) -> str:
    """A judge model: fails a rubric that asks for a desk name, passes any other."""
    system = request.messages[0].content
    ASKED.append(system)
    if "names the desk" in system:
        return '{"verdict": "fail", "reason": "no desk named"}'
    return '{"verdict": "pass", "reason": "the status is there"}'


def test_score_reproduces_the_stored_verdicts_with_agent_models_blocked(
    data_dir: Path, tmp_path: Path
) -> None:
    stored = run_eval(SCENARIOS, model="scripted", data_dir=data_dir, progress=False)
    # the runs' model is now a real backend: re-running any of them would have to ask it, and
    # here any request to it raises ModelRequestsBlockedError (real model requests are blocked)
    stored["model"] = "llama"
    assert not model_requests_allowed()
    runs = save_results(stored, tmp_path / "runs.parquet")
    before = tree(data_dir)
    # (the judged scenarios' judges graded with the scripted model: said, their verdicts are
    # reused, not asked of the runs' model)
    result = run_cli("--data-dir", str(data_dir), "score", str(runs), "--out",
                     str(tmp_path / "new.parquet"), "--scenarios", str(SCENARIOS),
                     "--judge-model", "scripted")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert f"re-scored {len(stored)} runs" in result.stdout and "0 changed verdict" in result.stdout
    assert "judge calls: 0 asked, 3 reused" in result.stdout
    again = load_results(tmp_path / "new.parquet")
    original = load_results(runs)
    pd.testing.assert_frame_equal(again[VERDICTS], original[VERDICTS])
    pd.testing.assert_frame_equal(again, original)  # and every other column, as stored
    assert tree(data_dir) == before  # nothing ran: no data root, no conversation

    # an edited expectation takes effect: the same transcripts, checked against it
    edited = tmp_path / "scenarios"
    shutil.copytree(SCENARIOS, edited, ignore=shutil.ignore_patterns("compression", "first_tool"))
    status = edited / "desk_status_command_en.yaml"
    text = status.read_text("utf-8")
    status.write_text(
        text.replace("[Execution state, spot only]", "[Execution state, options desk]")
    )
    result = run_cli("--data-dir", str(data_dir), "score", str(runs), "--expectations", "--out",
                     str(tmp_path / "edited.csv"), "--scenarios", str(edited))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "1 changed verdict" in result.stdout
    rescored = load_results(tmp_path / "edited.csv").set_index("scenario")
    row = rescored.loc["desk_status_command_en"]
    assert (bool(row["passed"]), row["outcome"], bool(row["exp_answer_contains"])) == (
        False, "failed", False)  # fmt: skip
    assert "run: answer_contains FAILED (missing ['options desk']" in row["failures"]
    assert int(row["checks"]) == int(original.set_index("scenario").loc[
        "desk_status_command_en", "checks"])  # fmt: skip
    assert rescored.drop(index="desk_status_command_en")["passed"].all()


def _judged_scenario(folder: Path, rubric_b: str) -> Path:
    """desk_status_command_en with two judges (A: a status rubric, B: *rubric_b*)."""
    folder.mkdir(exist_ok=True)
    text = (SCENARIOS / "desk_status_command_en.yaml").read_text("utf-8")
    judges = (
        "  judges:\n"
        "    - name: status\n      rubric: The answer gives the status.\n"
        "      sees: [answer, final_state]\n"
        f"    - name: desk\n      rubric: {rubric_b}\n"
    )
    path = folder / "desk_status_command_en.yaml"
    path.write_text(text + judges, encoding="utf-8")
    return path


def test_a_changed_rubric_asks_only_the_judge_whose_input_changed(
    data_dir: Path, tmp_path: Path
) -> None:
    spec = "function:tests.test_score_cli:grader"
    first = _judged_scenario(tmp_path / "v1", "The answer is polite.")
    ASKED.clear()
    runs = tmp_path / "runs.parquet"
    made = run_cli("--data-dir", str(data_dir), "eval", str(first), "--model", "scripted",
                   "--judge-model", spec, "--out", str(runs), "--no-progress")  # fmt: skip
    assert made.exit_code == 0, made.stderr
    assert len(ASKED) == 2
    stored = load_results(runs)
    assert (stored["judge_status"].iloc[0], stored["judge_desk"].iloc[0]) == ("pass", "pass")
    score = ("--data-dir", str(data_dir), "score", str(runs), "--judge-model", spec)

    ASKED.clear()  # the same scenario: every judge's input is unchanged, nobody is asked
    result = run_cli(*score, "--out", str(tmp_path / "same.parquet"), "--scenarios", str(first))
    assert result.exit_code == 0, result.stderr
    assert ASKED == [] and "0 asked, 2 reused" in result.stdout
    same = load_results(tmp_path / "same.parquet")
    assert load_judgements(same) == load_judgements(stored)

    ASKED.clear()  # judge B's rubric changed: only B is asked again
    second = _judged_scenario(tmp_path / "v2", "The answer names the desk.")
    result = run_cli(*score, "--out", str(tmp_path / "b.parquet"), "--scenarios", str(second))
    assert result.exit_code == 0, result.stderr
    assert len(ASKED) == 1 and "names the desk" in ASKED[0]
    assert "1 asked, 1 reused" in result.stdout and "1 changed verdict" in result.stdout
    changed = load_results(tmp_path / "b.parquet").to_dict("records")[0]
    assert (changed["judge_status"], changed["judge_desk"]) == ("pass", "fail")
    assert changed["passed"] is False or changed["passed"] == 0
    assert "run: judge desk FAILED" in changed["failures"]

    # --judge picks one judge; a file of judges applies to every run
    extra = tmp_path / "judges.yaml"
    extra.write_text("- name: short\n  rubric: The answer is short.\n", encoding="utf-8")
    ASKED.clear()
    result = run_cli(*score, "--judge", str(extra), "--out", str(tmp_path / "c.parquet"),
                     "--scenarios", str(first))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert len(ASKED) == 1 and "The answer is short." in ASKED[0]
    table = load_results(tmp_path / "c.parquet")
    assert [j.judge for j in load_judgements(table)[0]] == ["status", "desk", "short"]


def test_scan_runs_the_scanners_over_the_stored_transcripts(data_dir: Path, tmp_path: Path) -> None:
    names = ["desk_status_command_en", "desk_create_trader_en"]
    stored = run_eval([SCENARIOS / f"{n}.yaml" for n in names], model="scripted",
                      data_dir=data_dir, progress=False)  # fmt: skip
    runs = save_results(stored, tmp_path / "runs.parquet")
    scanned_path = tmp_path / "scanned.parquet"
    result = run_cli("--data-dir", str(data_dir), "score", str(runs), "--scan", "all",
                     "--out", str(scanned_path), "--scenarios", str(SCENARIOS))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "scanned.findings.parquet").is_file()
    scanned = load_results(tmp_path / "scanned.parquet")
    assert scanned["findings"].tolist() == [0, 0]  # the shipped scenarios' runs are clean
    assert scanned["passed"].tolist() == stored["passed"].tolist()


def test_bad_input_is_one_line_exit_2_and_nothing_written(data_dir: Path, tmp_path: Path) -> None:
    stored = run_eval([SCENARIOS / "desk_status_command_en.yaml"], model="scripted",
                      data_dir=data_dir, progress=False)  # fmt: skip
    runs = save_results(stored, tmp_path / "runs.parquet")
    bare = save_results(stored.drop(columns=["transcript"]), tmp_path / "bare.csv")
    empty = tmp_path / "empty.yaml"
    empty.write_text("- name: blank\n  rubric: '  '\n", encoding="utf-8")
    out = tmp_path / "out.parquet"
    base = ("--data-dir", str(data_dir), "score")
    cases = {
        "no transcript column": (str(bare), "--out", str(out)),
        "rubric": (str(runs), "--judge", str(empty), "--out", str(out)),
        "no judge 'nobody'": (str(runs), "--judge", "nobody", "--out", str(out)),
        "a new table": (str(runs), "--out", str(runs)),
        "no scenario 'desk_status_command_en'": (
            str(runs), "--out", str(out), "--scenarios", str(SCENARIOS / "notes_search_en.yaml"),
        ),
    }  # fmt: skip
    before = tree(tmp_path)
    for expected, args in cases.items():
        given = () if "--scenarios" in args else ("--scenarios", str(SCENARIOS))
        result = run_cli(*base, *args, *given)
        assert result.exit_code == 2, (expected, result.stdout, result.stderr)
        assert expected in result.stderr, (expected, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stdout == ""
        assert tree(tmp_path) == before  # nothing written
