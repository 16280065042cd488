"""Re-scoring without the scenario files: each run's transcript keeps its scenario.

``agentkit score`` on a table whose scenario files are gone scores each run by the scenario
its transcript kept; ``--scenarios`` overrides it (an edited expectation counts); a table
written before transcripts kept their scenario, with no files to go by, is one line naming
``--scenarios``. ``load_transcripts`` takes a table or its path, and says what it takes when
given anything else.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pandas")

from agentkit.errors import UsageError
from agentkit.eval import load_results, run_eval, save_results
from agentkit.eval.scenario import Scenario
from agentkit.eval.transcript import load_transcripts

from .conftest import run_cli
from .test_eval_runs import SCENARIOS

NAME = "desk_status_command_en"


@pytest.fixture
def stored(data_dir: Path, tmp_path: Path) -> Path:
    """A table of one run, whose scenario file is then gone."""
    source = tmp_path / "scenarios"
    source.mkdir()
    shutil.copy(SCENARIOS / f"{NAME}.yaml", source)
    frame = run_eval([source], model="scripted", data_dir=data_dir, progress=False)
    assert frame["passed"].all()
    table = save_results(frame, tmp_path / "runs.parquet")
    shutil.rmtree(source)
    shutil.rmtree(data_dir / "scenarios", ignore_errors=True)
    return table


def test_a_table_is_rescored_by_the_scenarios_its_transcripts_kept(
    stored: Path, data_dir: Path, tmp_path: Path
) -> None:
    (transcript,) = load_transcripts(stored)  # a path will do
    assert transcript is not None and transcript.v == 2
    kept = Scenario.model_validate(transcript.scenario_spec)
    assert kept.id == NAME and kept.expect == Scenario.model_validate(kept.model_dump()).expect

    out = tmp_path / "again.parquet"
    done = run_cli("--data-dir", str(data_dir), "score", str(stored), "--out", str(out))
    assert done.exit_code == 0, done.stderr
    assert "re-scored 1 runs: 1 passed, 0 changed verdict" in done.stdout
    assert load_results(out)["passed"].tolist() == [True]

    # --scenarios overrides: an edited expectation counts
    edited = tmp_path / "edited" / f"{NAME}.yaml"
    edited.parent.mkdir()
    text = (SCENARIOS / f"{NAME}.yaml").read_text("utf-8")
    text = text.replace("answer_contains: [", "answer_contains: [a phrase the answer never says, ")
    edited.write_text(text, "utf-8")
    out = tmp_path / "edited.parquet"
    done = run_cli("--data-dir", str(data_dir), "score", str(stored), "--out", str(out),
                   "--scenarios", str(edited))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    assert "1 changed verdict" in done.stdout
    assert load_results(out)["passed"].tolist() == [False]


def test_without_a_kept_scenario_or_its_file_the_error_names_scenarios(
    stored: Path, data_dir: Path, tmp_path: Path
) -> None:
    frame = load_results(stored)
    cell = json.loads(frame.loc[0, "transcript"])
    del cell["scenario_spec"]  # a table written before transcripts kept their scenario
    cell["v"] = 1
    frame.loc[0, "transcript"] = json.dumps(cell)
    old = save_results(frame, tmp_path / "old.parquet")
    out = tmp_path / "out.parquet"
    done = run_cli("--data-dir", str(data_dir), "score", str(old), "--out", str(out))
    assert done.exit_code == 2 and not out.exists()
    assert f"no scenario {NAME!r}" in done.stderr and "--scenarios" in done.stderr
    missing = tmp_path / "nowhere"
    done = run_cli("--data-dir", str(data_dir), "score", str(old), "--out", str(out),
                   "--scenarios", str(missing))  # fmt: skip
    assert done.exit_code == 2 and "--scenarios" in done.stderr and str(missing) in done.stderr
    done = run_cli("--data-dir", str(data_dir), "score", str(old), "--out", str(out),
                   "--scenarios", str(SCENARIOS / f"{NAME}.yaml"))  # fmt: skip
    assert done.exit_code == 0, done.stderr


def test_load_transcripts_takes_a_table_or_a_path_and_says_so_otherwise(
    stored: Path, tmp_path: Path
) -> None:
    frame = load_results(stored)
    assert load_transcripts(frame) == load_transcripts(stored) == load_transcripts(str(stored))
    assert load_transcripts(frame["transcript"]) == load_transcripts(frame)
    with pytest.raises(UsageError, match="no results file at"):
        load_transcripts(str(tmp_path / "results.parquet"))
    for wrong in (42, b"bytes", {"transcript": []}):
        with pytest.raises(UsageError, match="takes a results table"):
            load_transcripts(wrong)  # type: ignore[arg-type]
