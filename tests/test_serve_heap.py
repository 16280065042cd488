"""A server process settles its heap before it serves (agentkit.api.server.settle_heap):
start-up's objects frozen, the youngest generation collected every GC_GEN0 allocations.

Each case runs in a fresh interpreter (the collector's settings are the process's): ``serve``
and a ``--workers`` worker's app factory, with uvicorn's serving loop replaced by a probe that
reports the collector's state at the moment serving would begin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from agentkit import testing
from agentkit.api.server import GC_GEN0, WORKER_ENV

from tests.conftest import REPO

PROBE = """
import gc, json, sys
import uvicorn

def probe():
    return {"gen0": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}
"""


def _run(script: str, env: dict[str, str] | None = None) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE) + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **(env or {})},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    state: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return state


def test_python_defaults_before_serving(tmp_path: Path) -> None:
    """What the probe sees in a plain interpreter: the case below would fail without the
    settling (Python's young generation is collected every 700 allocations, nothing frozen)."""
    state = _run("print(json.dumps(probe()))")
    assert state["gen0"] != GC_GEN0 and state["frozen"] == 0


def test_serve_settles_the_heap_before_it_serves(tmp_path: Path) -> None:
    root = testing.data_root(tmp_path / "data", ["innovator-001"])
    state = _run(
        f"""
        def run(self, sockets=None):
            print(json.dumps(probe()))
        uvicorn.Server.run = run
        from agentkit.api import serve
        serve({str(root)!r}, model="scripted", port=0)
        """
    )
    assert state["gen0"] == GC_GEN0
    assert state["frozen"] > 10_000  # the modules, schemas and app start-up made


def test_a_worker_settles_its_heap_when_its_app_is_built(tmp_path: Path) -> None:
    root = testing.data_root(tmp_path / "data", ["innovator-001"])
    settings = {
        "data_dir": str(root),
        "model": "scripted",
        "token": None,
        "host": "127.0.0.1",
        "port": 0,
        "allowed_hosts": None,
        "cors_origins": [],
        "store": None,
        "workers": 2,
    }
    state = _run(
        """
        from agentkit.api.server import worker_app
        worker_app()
        print(json.dumps(probe()))
        """,
        {WORKER_ENV: json.dumps(settings)},
    )
    assert state["gen0"] == GC_GEN0 and state["frozen"] > 10_000
