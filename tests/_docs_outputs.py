"""Sample outputs in the docs are what their command prints.

A block that shows a command's output says so on the line before its fence::

    <!-- output: agentkit compare a.parquet b.parquet --out ab.json -->
    ```
    A = a.parquet
    …
    ```

The command must be written out in a shell block earlier on the same page (the reader sees the
command beside its output). ``tests/test_docs_examples.py`` runs the page's blocks in order
and, at such a block, runs its command again in the same working directory and compares what
it printed on stdout with the block (:func:`mismatch`): whitespace runs count as one space; a
line that is only ``…`` stands for any number of lines; the columns and rows named in
:data:`VARIES` (wall-clock timings, never the same twice) are compared by name only. Any other
difference fails the test with the command's whole output, to paste over the stale block.

A command that is to fail (a gate failing a change) says with what status:
``<!-- output: agentkit eval … --baseline main (exit 1) -->``.

A block of figures measured elsewhere (a benchmark's table) says where instead:
``<!-- measured: bench/bench_eval.py (make bench) -->``. In the tutorials every block without a
language is one or the other (a test checks).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

#: what differs on every run: a table column or a ``name …`` line with this name is compared
#: by its name alone
VARIES = frozenset({"latency_ms", "wall_ms"})
OUTPUT = re.compile(
    r"^\s*<!--\s*output:\s*(?P<command>\S.*?)\s*(?:\(exit (?P<status>\d+)\)\s*)?-->\s*$"
)
MEASURED = re.compile(r"^\s*<!--\s*measured:\s*(?P<where>\S.*?)\s*-->\s*$")
ELLIPSIS = "…"


def marker_before(page: Path, line: int) -> str:
    """The line before the fence that opens on 1-based *line* ("" at the top)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    return lines[line - 2] if line >= 2 else ""


def output_command(page: Path, line: int) -> str | None:
    """The command whose output the block at *line* shows, when it is marked as one."""
    match = OUTPUT.match(marker_before(page, line))
    return match["command"] if match else None


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _same(shown: str, actual: str, wild: set[int]) -> bool:
    a, b = shown.split(), actual.split()
    if a and a[0] in VARIES:  # ``latency_ms  mean …``: the name is what is shown
        return bool(b) and b[0] == a[0]
    if len(a) != len(b):
        return False
    return all(i in wild or x == y for i, (x, y) in enumerate(zip(a, b, strict=True)))


def mismatch(shown: str, actual: str) -> str | None:
    """None when *actual* (a command's stdout) is what the block *shown* shows; else the first
    line that differs, said."""
    want, got = _lines(shown), _lines(actual)
    i = j = 0
    wild: set[int] = set()
    while i < len(want):
        line = want[i]
        if line.strip() == ELLIPSIS:
            if i + 1 == len(want):
                return None  # the rest is elided
            following = want[i + 1]
            while j < len(got) and not _same(following, got[j], wild):
                j += 1
            i += 1
            continue
        if j >= len(got):
            return f"the block shows more than the command printed, from: {line!r}"
        if not line.strip():
            wild = set()  # a blank line ends a table
        else:
            tokens = line.split()
            if VARIES & set(tokens) and tokens[0] not in VARIES:  # a table's header
                wild = {k for k, token in enumerate(tokens) if token in VARIES}
        if not _same(line, got[j], wild):
            return f"line {i + 1} of the block: {line!r}\n  the command printed: {got[j]!r}"
        i += 1
        j += 1
    if j < len(got):
        return f"the command printed more than the block shows, from: {got[j]!r}"
    return None


def output_status(page: Path, line: int) -> int:
    """The exit status the command of the block at *line* ends with (``(exit N)`` in its
    marker: a gate that fails a change; 0 when it says none)."""
    match = OUTPUT.match(marker_before(page, line))
    return int(match["status"]) if match and match["status"] else 0


def run_for_output(command: str, cwd: Path, status: int = 0) -> str:
    """The stdout of *command* run by bash in *cwd* (it must end with *status*)."""
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == status, (
        f"{command} ended with {done.returncode}, not {status}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def check_output(page: Path, line: int, shown: str, earlier: str, cwd: Path) -> None:
    """Run the command the block at *page*:*line* shows the output of (it must appear in
    *earlier*, the page's shell blocks before it) and compare its stdout with *shown*."""
    command = output_command(page, line)
    assert command is not None
    where = f"{page.name}:{line}"
    flat = " ".join(earlier.replace("\\\n", " ").split())
    assert " ".join(command.split()) in flat, (
        f"{where}: the output of {command!r}, a command no shell block above it shows"
    )
    actual = run_for_output(command, cwd, output_status(page, line))
    problem = mismatch(shown, actual)
    assert problem is None, (
        f"{where}: the sample output of `{command}` is stale: {problem}\n"
        f"--- what it prints now (paste it over the block, eliding with … if you like):\n{actual}"
    )
