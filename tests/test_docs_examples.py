"""Every Python and shell example in the README and the documentation site runs here.

A page's blocks run in order, as a reader would type them: the Python blocks share one
namespace (top-level ``await`` allowed), the shell blocks run with ``bash -e`` in the same
working directory, which holds a fresh copy of the sample agents as ``./data`` (so
``agentkit send innovator-001 …`` works as written). Nothing needs a model: the model is the
scripted one below (``$AGENTKIT_MODEL``, which wins over an agent's config.json), and real
model backends are blocked (:func:`agentkit.testing.block_model_requests`), so an example that
would reach one fails. A block marked as a command's sample output
(``<!-- output: COMMAND -->``) is compared with what that command prints
(:mod:`tests._docs_outputs`). Functions an example defines whose names start with ``test_`` are
called (with ``tmp_path`` when they ask for it), as pytest would.

A block that cannot run here (it starts JupyterLab, needs a real model or a remote server)
is marked on the line before its fence: ``<!-- example: skip REASON -->``; the marked blocks
are counted and each needs its reason. ``json`` blocks must parse.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

import pytest
from agentkit import testing

from ._docs_outputs import check_output, output_command

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PYTHON = {"python", "py", "pycon"}
SHELL = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
SKIP = re.compile(r"^\s*<!--\s*example:\s*skip\s+(?P<reason>\S.*?)\s*-->\s*$")

#: the examples' model: every purpose answered, planner turns end in one respond step
SCRIPT = {
    "chat": ["Hello from the scripted model."],
    "plan": [{"goal": "answer", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]}],
    "replan": [{"action": "finish", "reason": "done"}],
    "respond": ["Done."],
    "reason": ["Reasoned."],
    "summarize": [{}],
    "classify": ["other"],
}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    skip: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of *page* with their language and skip marker."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, indent = match["fence"], len(match["indent"])
        language = (match["info"].strip().split() or [""])[0].lower()
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][indent:])
            end += 1
        previous = lines[index - 1] if index else ""
        marker = SKIP.match(previous)
        found.append(
            Block(
                page,
                index + 1,
                language,
                "\n".join(body) + "\n",
                marker["reason"] if marker else None,
            )
        )
        index = end + 1
    return found


def runnable(block: Block) -> bool:
    return block.language in PYTHON | SHELL


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A reader's clone, as far as the examples need one: ./data with the sample agents."""
    work = tmp_path / "work"
    work.mkdir()
    testing.data_root(work / "data", source=ROOT / "data")
    shutil.copytree(ROOT / "data" / "scenarios", work / "data" / "scenarios")
    script = tmp_path / "examples-model.json"
    script.write_text(json.dumps(SCRIPT))
    monkeypatch.chdir(work)
    monkeypatch.setenv("AGENTKIT_DATA_DIR", str(work / "data"))
    monkeypatch.setenv("AGENTKIT_MODEL", f"scripted:{script}")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv(
        "PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    )
    return work


def _compile(block: Block) -> CodeType:
    return compile(
        block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )


def run_python(block: Block, namespace: dict[str, object], tmp_path: Path) -> None:
    before = set(namespace)
    code = _compile(block)
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, namespace))
    else:
        exec(code, namespace)
    for name in sorted(set(namespace) - before):
        function = namespace[name]
        if name.startswith("test_") and inspect.isfunction(function):
            wanted = inspect.signature(function).parameters
            arguments = {"tmp_path": tmp_path / name} if "tmp_path" in wanted else {}
            function(**arguments)


def run_shell(block: Block, cwd: Path) -> None:
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (
        f"{block.where} failed:\n{block.code}\n{done.stdout}\n{done.stderr}"
    )


PAGES_WITH_CODE = [
    page for page in PAGES if any(runnable(b) and b.skip is None for b in blocks(page))
]


def test_every_page_with_code_is_run() -> None:
    """The README and the tutorials are among the pages whose examples run."""
    names = {str(page.relative_to(ROOT)) for page in PAGES_WITH_CODE}
    assert {"README.md", "docs/tutorials/first-chat.md", "docs/how-to/testing.md"} <= names


# a page runs all its examples in one test: a sweep page runs several small sweeps, so the
# hang guard is longer than the suite's 300 s (a bound, not a speed check)
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_on_the_page_runs(page: Path, workdir: Path, tmp_path: Path) -> None:
    namespace: dict[str, object] = {"__name__": "__docs_example__"}
    ran = 0
    shell = ""  # the page's shell blocks so far: a sample output's command is among them
    with testing.block_model_requests():
        for block in blocks(page):
            if output_command(page, block.line) is not None:  # a sample output: is it current?
                check_output(page, block.line, block.code, shell, workdir)
                continue
            if block.skip is not None or not runnable(block):
                continue
            if block.language in PYTHON:
                run_python(block, namespace, tmp_path)
            else:
                run_shell(block, workdir)
                shell += block.code
            ran += 1
    assert ran > 0


def test_json_blocks_parse() -> None:
    for block in all_blocks():
        if block.language == "json" and block.skip is None:
            json.loads(block.code)


def test_marked_blocks_have_reasons_and_are_counted() -> None:
    """Prints the counts (``-s`` shows them); a marker needs a reason, and only code is marked."""
    every = all_blocks()
    code = [b for b in every if runnable(b)]
    marked = [b for b in code if b.skip is not None]
    assert all(b.skip for b in marked)
    assert not [b.where for b in every if b.skip is not None and not runnable(b)]
    print(f"docs examples: {len(code) - len(marked)} run, {len(marked)} marked not runnable")
    for block in marked:
        print(f"  {block.where}: {block.skip}")


def test_the_block_reader_sees_markers_languages_and_indented_fences(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```python\nx = 1\n```\n\n<!-- example: skip starts JupyterLab -->\n"
        "```bash\nmake lab\n```\n\n- item\n\n  ```sh\n  echo hi\n  ```\n\n```json\n{}\n```\n"
    )
    found = [(b.line, b.language, b.code, b.skip) for b in blocks(page)]
    assert found == [
        (3, "python", "x = 1\n", None),
        (8, "bash", "make lab\n", "starts JupyterLab"),
        (14, "sh", "echo hi\n", None),
        (18, "json", "{}\n", None),
    ]
