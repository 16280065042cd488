"""``agentkit acp`` driven by jupyter-ai's own ACP client (issue 28, item 6).

``jupyter-ai-acp-client`` (0.3.3, as tried in JupyterLab) pins ``agent-client-protocol<0.12``,
so it cannot share this virtualenv: the test builds a virtualenv of its own with pip, once,
under ``~/.cache/agentkit/`` (``$AGENTKIT_JAI_VENV`` names another place), and runs
:mod:`tests._jai_driver` in it: ``JaiAcpClient`` — the class jupyter-ai's personas talk to
their agent through — starts ``agentkit acp`` as a real subprocess and goes through
initialize, session/new, a question, a permission request answered Allow (as the chat's
button does), session/load after a restart, and a startup failure.

It never skips: a virtualenv that cannot be built fails the test (PyPI must be reachable the
first time).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._acp_peer import AGENTKIT
from tests._processes import cached_venv
from tests.test_acp_server import DESK_SCRIPT, QUESTION, script, seed_desk

CLIENT = "jupyter-ai-acp-client==0.3.3"
DRIVER = Path(__file__).with_name("_jai_driver.py")


def client_venv() -> Path:
    """The virtualenv holding jupyter-ai-acp-client, built once (a lock serialises builds)."""
    place = os.environ.get("AGENTKIT_JAI_VENV", "jai-acp-client-0.3.3")
    python, problem = cached_venv(place, CLIENT, timeout=900)
    assert not problem, problem
    return python


def drive(python: Path, phase: str, data_dir: Path, agent: str, cwd: Path, *args: str) -> Any:
    command = [str(python), str(DRIVER), phase, str(AGENTKIT), str(data_dir), agent, str(cwd),
               *args]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"driver {phase} failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


# Several real subprocesses (each a Python that imports agentkit) run one after another: on a
# machine under load (a stressed .ci/run: load 16 on 2 cores) they took longer than the
# suite's per-test 300 s guard, which is for hangs, not for work. Each subprocess keeps its
# own 300 s guard (drive).
@pytest.mark.timeout(1200)
def test_jupyter_ais_own_client_drives_agentkit_acp(data_dir: Path, tmp_path: Path) -> None:
    python = client_venv()
    seed_desk(data_dir)
    model = script(tmp_path, "desk", DESK_SCRIPT)
    cwd = tmp_path / "notebooks"
    cwd.mkdir()

    new = drive(python, "new", data_dir, "desk-001", cwd, "-", "--model", model)
    assert new["loadSession"] is True
    assert new["first"]["stop"] == "end_turn" and QUESTION in new["first"]["text"]
    assert new["second"]["stop"] == "end_turn"
    assert "Trader Alpha is ready." in new["second"]["text"]
    assert [p["options"] for p in new["permissions"]] == [["allow", "reject"]]  # one consent
    assert new["exit"] == 0

    recap = {"id": "r1", "type": "respond", "title": "Recap", "instruction": "recap"}
    replies = {"plan": [{"goal": "recap", "steps": [recap]}], "respond": ["We created Alpha."]}
    restored = script(tmp_path, "restored", replies)
    loaded = drive(python, "load", data_dir, "desk-001", cwd, new["session"], "--model", restored,
                   "--no-replay")  # fmt: skip
    assert loaded["replayed"] == ""  # jupyter-ai keeps its own transcript: nothing replayed
    assert loaded["after_load"]["stop"] == "end_turn"
    assert "We created Alpha." in loaded["after_load"]["text"]
    assert loaded["after_load"]["meta"]["agentkit"]["turns"][0]["scenario"] == "C"
    assert loaded["exit"] == 0

    failed = drive(python, "fail", data_dir, "nobody", cwd, "-")
    assert "no agent 'nobody'" in failed["error"]  # shown in the chat, not "connection closed"
    assert failed["exit"] == 2
