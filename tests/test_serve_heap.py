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
from agentkit.api.server import GC_GEN0, GC_GEN0_ENV, WORKER_ENV

from tests.conftest import REPO

PROBE = """
import gc, json, sys
import uvicorn

def probe():
    return {"gen0": gc.get_threshold()[0], "frozen": gc.get_freeze_count()}
"""


def _run(script: str, env: dict[str, str] | None = None) -> dict[str, int]:
    done = _python(script, env)
    assert done.returncode == 0, done.stderr[-3000:]
    state: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return state


def _python(script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE) + textwrap.dedent(script)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**{k: v for k, v in os.environ.items() if k != GC_GEN0_ENV}, **(env or {})},
        timeout=120,
        check=False,
    )


def test_python_defaults_before_serving() -> None:
    """What the probe sees in a plain interpreter: the case below would fail without the
    settling (Python's young generation is collected every 700 allocations, nothing frozen)."""
    state = _run("print(json.dumps(probe()))")
    assert state["gen0"] != GC_GEN0 and state["frozen"] == 0


def _serving(root: Path) -> str:
    """A script that runs ``serve`` on *root* and probes instead of serving."""
    return f"""
        def run(self, sockets=None):
            print(json.dumps(probe()))
        uvicorn.Server.run = run
        from agentkit.api import serve
        serve({str(root)!r}, model="scripted", port=0)
        """


def test_serve_settles_the_heap_before_it_serves(tmp_path: Path) -> None:
    root = testing.data_root(tmp_path / "data", ["innovator-001"])
    state = _run(_serving(root))
    assert state["gen0"] == GC_GEN0
    assert state["frozen"] > 10_000  # the modules, schemas and app start-up made


def test_the_count_is_a_setting_and_zero_leaves_the_collector_alone(tmp_path: Path) -> None:
    root = testing.data_root(tmp_path / "data", ["innovator-001"])
    assert _run(_serving(root), {GC_GEN0_ENV: "5000"})["gen0"] == 5000
    untouched = _run(_serving(root), {GC_GEN0_ENV: "0"})
    assert untouched["gen0"] != GC_GEN0 and untouched["frozen"] == 0


def test_a_bad_count_is_refused_before_anything_listens(tmp_path: Path) -> None:
    root = testing.data_root(tmp_path / "data", ["innovator-001"])
    done = _python(_serving(root), {GC_GEN0_ENV: "lots"})
    assert done.returncode != 0
    assert "AGENTKIT_GC_GEN0 is a whole number" in done.stderr
    assert '"gen0"' not in done.stdout  # the serving loop never began


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
