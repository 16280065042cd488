"""Every sample output in the tutorials is what its command prints (checked when
``tests/test_docs_examples.py`` runs the page, :mod:`tests._docs_outputs`); a stale one fails.
Here: the comparison itself, the markers, and the counts the pages state."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agentkit.eval import load_scenarios

from ._docs_outputs import MEASURED, check_output, marker_before, mismatch, output_command
from .test_docs_examples import SHELL, blocks

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))

TABLE = """\
 point  runs  passed  latency_ms
     0     5       5        29.7
     1     5       2        27.8

failed runs (3 of 10):
  a: FAILED
  b: FAILED
  c: FAILED
deltas:
  tokens       mean +597.800
  latency_ms   mean -1.932  median -2.480
wrote r.parquet (10 rows, 73 columns)
"""


def test_the_same_output_matches_with_other_timings_and_spacing() -> None:
    assert mismatch(TABLE, TABLE) is None
    later = TABLE.replace("29.7", "31.02").replace("-1.932  median -2.480", "+4.1 median +9")
    assert mismatch(TABLE, later.replace("  runs", "   runs")) is None


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("     5       2", "     5       3", "line 3 of the block"),  # a figure
        ("(10 rows, 73 columns)", "(10 rows, 74 columns)", "wrote r.parquet"),
        ("+597.800", "+12.000", "tokens"),  # only the timings vary
        ("  c: FAILED\n", "", "deltas:"),  # a line fewer
        ("wrote r.parquet", "one more line\nwrote r.parquet", "one more line"),
    ],
)
def test_a_stale_output_is_a_mismatch_saying_where(old: str, new: str, said: str) -> None:
    assert old in TABLE
    problem = mismatch(TABLE, TABLE.replace(old, new, 1))
    assert problem is not None and said in problem, problem


def test_an_ellipsis_line_stands_for_any_lines() -> None:
    shown = TABLE.replace("  b: FAILED\n  c: FAILED\n", "  …\n")
    assert mismatch(shown, TABLE) is None
    assert mismatch(TABLE.partition("failed runs")[0] + "…\n", TABLE) is None  # the rest elided
    assert mismatch(shown.replace("a: FAILED", "z: FAILED"), TABLE) is not None


def test_a_stale_block_on_a_page_fails_with_what_the_command_prints(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\nprintf 'runs 5\\nlatency_ms 3.1\\n'\n```\n\n"
        "<!-- output: printf 'runs 5\\nlatency_ms 3.1\\n' -->\n```\nruns 4\nlatency_ms 9\n```\n",
        encoding="utf-8",
    )
    shell, output = blocks(page)
    command = output_command(page, output.line)
    assert command == "printf 'runs 5\\nlatency_ms 3.1\\n'"
    with pytest.raises(AssertionError, match="is stale") as stale:
        check_output(page, output.line, output.code, shell.code, tmp_path)
    assert "runs 5" in str(stale.value)  # what to paste over the block
    check_output(page, output.line, "runs 5\nlatency_ms 0.2\n", shell.code, tmp_path)
    # the command must be one the page shows above its output
    with pytest.raises(AssertionError, match="no shell block above it shows"):
        check_output(page, output.line, output.code, "echo other\n", tmp_path)


def test_every_bare_block_of_the_tutorials_is_a_checked_output_or_says_where_it_was_measured() -> (
    None
):
    outputs = 0
    for page in TUTORIALS:
        shell = ""
        for block in blocks(page):
            if block.language in SHELL and block.skip is None:
                shell += block.code
            if block.language not in ("", "text", "console"):
                continue
            command = output_command(page, block.line)
            if command is None:
                assert MEASURED.match(marker_before(page, block.line)), (
                    f"{block.where}: a block without a language is a sample output "
                    "(<!-- output: COMMAND -->) or measured figures (<!-- measured: WHERE -->)"
                )
                continue
            flat = " ".join(shell.replace("\\\n", " ").split())
            assert " ".join(command.split()) in flat, f"{block.where}: {command!r} is not run above"
            outputs += 1
    assert outputs >= 2


def test_the_scenario_counts_the_pages_state_are_the_shipped_ones() -> None:
    scenarios = load_scenarios(ROOT / "data" / "scenarios")
    chinese = sum(1 for scenario in scenarios if scenario.language == "zh")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    said: list[str] = []
    checked = 0
    for page in pages:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for match in re.finditer(
            r"(?:all|the) (\d+) (?:shipped )?scenarios(?: \((\d+) in Chinese)?", text, re.I
        ):
            checked += 1
            if int(match[1]) != len(scenarios) or (match[2] and int(match[2]) != chinese):
                said.append(f"{page.relative_to(ROOT)}: {match[0]!r}")
    assert checked >= 3
    assert not said, f"{len(scenarios)} scenarios ship ({chinese} in Chinese):\n" + "\n".join(said)
