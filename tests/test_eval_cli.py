"""``agentkit eval``: a summary on stdout, a table in a file, one-line errors with exit 2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from .conftest import REPO, run_cli

SCENARIOS = str(REPO / "data" / "scenarios")


def test_eval_prints_a_summary_and_writes_the_table(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    result = run_cli(
        "--data-dir", str(data_dir), "eval", SCENARIOS, "--model", "scripted",
        "--tag", "compression", "--grid", "compression.token_threshold=300,2000",
        "--set", "compression.keep_recent=4", "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    header = lines[0].split()
    assert header[:5] == [
        "compression.keep_recent", "compression.token_threshold", "runs", "passed", "pass_rate"
    ]  # fmt: skip
    assert lines[1].split()[:5] == ["4", "300", "3", "3", "1"]
    assert lines[2].split()[:5] == ["4", "2000", "3", "0", "0"]
    assert "failed runs (3 of 6):" in result.stdout
    failed = "memory_pinned_facts_en [compression.keep_recent=4, compression.token_threshold=2000]"
    assert f"{failed}: run: compressed FAILED" in result.stdout
    assert f"wrote {out} (6 rows" in result.stdout
    assert "6/6" in result.stderr  # the progress bar
    frame = pd.read_parquet(out)
    assert len(frame) == 6 and set(frame["compression.keep_recent"]) == {4}
    assert frame.groupby("compression.token_threshold")["passed"].mean().to_dict() == {
        300: 1.0,
        2000: 0.0,
    }


def test_eval_writes_csv_too(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    result = run_cli(
        "--data-dir", str(data_dir), "eval", SCENARIOS, "--model", "scripted",
        "--tag", "commands", "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "all 2 runs passed" in result.stdout and result.stderr == ""
    assert pd.read_csv(out)["passed"].tolist() == [True, True]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grid", "compression.tokens=1,2"], "unknown config key 'compression.tokens'"),
        (["--set", "planner.strategy=fastest"], "planner.strategy=fastest"),
        (["--set", "keep_recent"], "--set needs key=value"),
        (["--out", "r.xlsx"], "a .parquet or .csv file"),
        (["--executor", "spark://h:1"], "--executor must be 'local' or 'dask://HOST:PORT'"),
        (["--executor", "dask://nohost"], "needs HOST:PORT"),
        (["--tag", "nothing-has-this"], "no scenario carries any of the tags"),
        (["--model", "gpt-5"], "unknown backend 'gpt-5'"),
        (["--turn-timeout", "0"], "must be positive"),
    ],
    ids=[
        "unknown-key",
        "bad-value",
        "set-without-value",
        "bad-output-suffix",
        "unknown-executor",
        "dask-without-port",
        "unknown-tag",
        "unknown-model",
        "zero-timeout",
    ],
)
def test_bad_eval_input_is_one_line_and_exit_2_before_any_run(
    data_dir: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    args = [str(out / a) if a.endswith(".xlsx") else a for a in args]
    model = [] if "--model" in args else ["--model", "scripted"]
    tag = [] if "--tag" in args else ["--tag", "commands"]
    result = run_cli(
        "--data-dir", str(data_dir), "eval", SCENARIOS, *model, *tag, "--no-progress", *args
    )
    assert result.exit_code == 2, result
    assert result.stderr.startswith("agentkit: error: ") and message in result.stderr
    assert result.stdout == ""  # nothing ran
    assert not list(out.iterdir())


def test_missing_scenarios_are_an_error(data_dir: Path, tmp_path: Path) -> None:
    result = run_cli("--data-dir", str(data_dir), "eval", str(tmp_path / "nothing.yaml"))
    assert result.exit_code == 2
    assert "no scenario file or folder" in result.stderr
