"""``agentkit eval bfcl:…`` on the command line, and the model-alone baseline (prompt mode)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from agentkit import testing
from agentkit.cli import app
from agentkit.eval.bfcl import CATEGORIES, PINNED, load_suite
from agentkit.eval.bfcl import _package as package
from agentkit.eval.bfcl.catalog import load_items
from agentkit.eval.bfcl.prompt_mode import run_prompt_mode
from agentkit.eval.bfcl.toolset import find_item
from agentkit.testing import FunctionModel
from typer.testing import CliRunner

from tests._bfcl_oracle import PromptOracle

REPO = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).with_name("agentkit")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return testing.data_root(tmp_path / "data", ["bfcl-001"])


def agentkit(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "--data-dir", str(root), *args],
        capture_output=True, text=True, check=False, timeout=240, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},  # the oracle model lives in tests/
    )  # fmt: skip


def test_an_unknown_category_lists_the_categories(root: Path) -> None:
    done = agentkit(root, "eval", "bfcl:simple_pyton", "--model", "scripted")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1  # one line
    assert "unknown BFCL category 'simple_pyton'" in done.stderr
    assert all(category in done.stderr for category in CATEGORIES)


def test_bfcl_eval_missing_is_one_line_naming_the_install(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def version(name: str) -> str:
        if name == "bfcl-eval":
            raise importlib.metadata.PackageNotFoundError(name)
        return importlib.metadata.version(name)

    monkeypatch.setattr(package, "_LOADED", [])
    monkeypatch.setattr(package.importlib.metadata, "version", version)
    load_items.cache_clear()
    try:
        result = CliRunner().invoke(
            app, ["--data-dir", str(root), "eval", "bfcl:simple_python", "--limit", "1"]
        )
    finally:
        load_items.cache_clear()
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "bfcl-eval is not installed" in lines[0]
    assert f"pip install --no-deps 'bfcl-eval=={PINNED}'" in lines[0]


def test_the_makefile_installs_the_pinned_release() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert f"BFCL_EVAL := {PINNED}\n" in makefile
    assert "pip install --quiet --no-deps 'bfcl-eval==$(BFCL_EVAL)'" in makefile
    assert importlib.metadata.version("bfcl-eval") == PINNED


def test_a_sample_through_the_cli_with_the_prompt_mode_baseline(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "bfcl.csv"
    done = agentkit(
        root, "eval", "bfcl:simple_python,irrelevance", "--limit", "2", "--seed", "4",
        "--model", "function:tests._bfcl_oracle:reply", "--set", "planner.strategy=tool_loop",
        "--set", "planner.tool_choice=model", "--set", "planner.argument_values=free",
        "--prompt-mode", "--no-progress", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out)
    assert len(table) == 8  # 4 items, agentkit and the model alone
    assert {"bfcl_category", "bfcl_id", "bfcl_valid", "bfcl_error_type"} <= set(table.columns)
    agentkit_rows = table[table["bfcl_mode"] == "agentkit"]
    assert agentkit_rows["bfcl_valid"].all()
    prompt_rows = table[table["bfcl_mode"] == "prompt"]
    assert sorted(prompt_rows["bfcl_id"]) == sorted(agentkit_rows["bfcl_id"])
    # the oracle says "Done." without tools: no call decodes (irrelevance passes, AST fails)
    simple = prompt_rows[prompt_rows["bfcl_category"] == "simple_python"]
    assert not simple["bfcl_valid"].any()
    decoder = {"ast_decoder:decoder_failed", "ast_decoder:decoder_wrong_output_format"}
    assert set(simple["bfcl_error_type"]) <= decoder
    assert (
        "bfcl_mode=agentkit, planner.strategy=tool_loop, planner.tool_choice=model, "
        "planner.argument_values=free: simple_python 100.0% (2/2); "
        "irrelevance 100.0% (2/2)" in done.stdout
    )
    assert "bfcl_mode=prompt: simple_python 0.0% (0/2); irrelevance 100.0% (2/2)" in done.stdout


@pytest.mark.parametrize("category", ["simple_python", "parallel", "multi_turn_base"])
def test_prompt_mode_scores_the_gold_text_and_marks_prose(category: str) -> None:
    items = [find_item(s.bfcl.item) for s in load_suite(f"bfcl:{category}", limit=2, seed=1)]
    rows = [run_prompt_mode([item], FunctionModel(PromptOracle(item)))[0] for item in items]
    assert [row["bfcl_valid"] for row in rows] == [True, True], [r["bfcl_error"] for r in rows]
    assert all(row["bfcl_mode"] == "prompt" and row["model_calls"] >= 1 for row in rows)
    prose = run_prompt_mode(items[:1], FunctionModel(lambda _: "The answer is 42, I think."))
    assert not prose[0]["bfcl_valid"] and prose[0]["bfcl_error_type"]


def test_bfcl_001_ships_the_setting_the_tutorial_writes_out() -> None:
    """bfcl-001's planner is the best measured setting (tool_loop, the router with WordLlama's
    floors, said values), and the tutorial's command that writes every setting out names
    exactly those values: no setting is given only in prose."""
    import json
    import re

    planner = json.loads((REPO / "data/agents/bfcl-001/config.json").read_text("utf-8"))["planner"]
    best = {
        "strategy": "tool_loop",
        "tool_choice": "router",
        "argument_values": "said",
        "router_embedder": "wordllama",
        "router_min_similarity": 0.2,
        "router_settle_similarity": 0.4,
    }
    assert {key: planner.get(key) for key in best} == best
    page = (REPO / "docs/tutorials/bfcl.md").read_text("utf-8")
    written = " ".join(page.replace("\\\n", " ").split())
    sets = dict(re.findall(r"--set planner\.(\w+)=(\S+)", written))
    assert sets == {key: str(value) for key, value in best.items()}
    assert (
        "agentkit eval bfcl:simple_python,multiple,irrelevance --limit 50 --seed 0 --out" in written
    )
