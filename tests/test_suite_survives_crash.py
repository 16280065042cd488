"""`make test` survives a test that crashes its process: that test fails, the run goes on.

The suite runs with the Makefile's ``PYTEST_FLAGS`` (pytest-xdist workers); this runs a
small suite whose first test dies of SIGSEGV — as a native fault in a C extension would —
with those same flags, and checks the other tests still ran and the summary line came out.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CRASHING_SUITE = """
import os, signal

def test_a_native_fault():
    os.kill(os.getpid(), signal.SIGSEGV)

def test_after_the_fault():
    open("ran-after-the-fault", "w").close()  # the outer test looks for it
"""

OTHER_FILE = """
def test_in_another_file():
    open("ran-in-another-file", "w").close()
"""


def makefile_pytest_flags() -> list[str]:
    text = (REPO / "Makefile").read_text()
    found = re.search(r"^PYTEST_FLAGS\s*:?=\s*(.*)$", text, re.MULTILINE)
    assert found, "the Makefile defines PYTEST_FLAGS"
    assert "$(PYTEST_FLAGS)" in text.split("\npytest:", 1)[1].split("\n\n", 1)[0]
    return shlex.split(found.group(1))


def test_a_segfaulting_test_fails_alone_and_the_run_reports_its_summary(tmp_path: Path) -> None:
    (tmp_path / "test_crash.py").write_text(CRASHING_SUITE)
    (tmp_path / "test_other.py").write_text(OTHER_FILE)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *makefile_pytest_flags(),
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "-W",
            "ignore",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    out = done.stdout
    assert done.returncode == 1, out  # failures, not an interrupted run (2) or a crash
    assert re.search(r"=+ 1 failed, 2 passed.* =+\s*$", out), out
    assert "test_a_native_fault" in out and "crashed" in out, out
    # the tests after the crash really ran (in a replaced worker), in its file and the other
    assert (tmp_path / "ran-after-the-fault").is_file()
    assert (tmp_path / "ran-in-another-file").is_file()
