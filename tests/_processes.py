"""Test processes: forked children (run a function, collect its exit status), servers
stopped with their children, and virtualenvs built once for a peer that cannot share ours."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def fork_call(target: Callable[..., Any], *args: Any) -> int:
    """Run ``target(*args)`` in a forked child; it exits 0 when target returns, 1 if it raised."""
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 1
        try:
            target(*args)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os._exit(code)
    return pid


def wait_exit(pid: int) -> int:
    """The child's exit code, or minus the signal that killed it."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def stop_group(process: subprocess.Popen[Any], grace: float = 30) -> None:
    """Stop a server started with ``start_new_session=True``, its children with it: SIGTERM
    to its process group, SIGKILL after *grace* seconds."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def cached_venv(name: str, requirement: str, *, timeout: float = 1500) -> tuple[Path, str]:
    """A virtualenv holding *requirement*, built once with pip under ``~/.cache/agentkit/
    {name}`` (an environment variable named by the caller may move it: pass the path as
    *name*), a lock serialising builds: its python, and "" — or why it could not be built."""
    venv = Path(name) if os.sep in name else Path.home() / ".cache" / "agentkit" / name
    python = venv / "bin" / "python"
    ready = venv / ".agentkit-ready"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with (venv.parent / f"{venv.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.is_file():
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", "--clear", str(venv)], check=True)
            done = subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", requirement],
                capture_output=True, text=True, timeout=timeout, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                return python, f"pip install {requirement} failed:\n{done.stderr[-3000:]}"
            ready.write_text(requirement, encoding="utf-8")
    return python, ""
