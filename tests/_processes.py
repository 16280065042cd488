"""Test processes: forked children (run a function, collect its exit status), servers
stopped with their children, whether a process itself listens on a port, and virtualenvs
built once for a peer that cannot share ours."""

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


def children(pid: int) -> list[int]:
    """The processes whose parent is *pid* (a server's workers), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def listening(pid: int, port: int) -> bool:
    """Does process *pid* hold a TCP socket listening on 127.0.0.1:*port* (or any address)?

    A readiness check that cannot be fooled: a connection or an HTTP answer on a port only
    says that *something* listens there (another test's server may have taken a port freed a
    moment before); this reads the listening sockets' inodes from /proc/net/tcp and looks for
    one of them among *pid*'s open files."""
    wanted = {f"0100007F:{port:04X}", f"00000000:{port:04X}"}
    inodes = set()
    with contextlib.suppress(OSError), open("/proc/net/tcp", encoding="ascii") as table:
        next(table)  # the header
        for line in table:
            fields = line.split()
            if fields[1] in wanted and fields[3] == "0A":  # state 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    fds = f"/proc/{pid}/fd"
    with contextlib.suppress(OSError):
        for fd in os.listdir(fds):
            with contextlib.suppress(OSError):
                if os.readlink(f"{fds}/{fd}") in inodes:
                    return True
    return False
