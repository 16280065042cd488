"""Ending a backend's process tree: its process group, and descendants that left it.

A backend process (an agent CLI, an MCP server) may start helpers that start their own process
groups. Closing it must leave nothing behind: the group is signalled, and so is every live
descendant seen before (matched by start time, so a recycled pid is never signalled).
Linux-first: without ``/proc`` only the process group is reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

__all__ = ["descendants", "exited", "kill_tree", "killpg", "proc_stat"]


async def exited(process: asyncio.subprocess.Process, timeout: float) -> bool:
    try:
        await asyncio.wait_for(process.wait(), timeout)
    except TimeoutError:
        return False
    return True


def killpg(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def proc_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, from ``/proc/PID/stat``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # fields from the 3rd (state) on
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every live descendant of *root* as pid -> start time (empty without ``/proc``)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    try:
        entries = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return {}
    for pid in entries:
        stat = proc_stat(pid)
        if stat is not None:
            children.setdefault(stat[0], []).append(pid)
            starts[pid] = stat[1]
    found: dict[int, int] = {}
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        if pid not in found:
            found[pid] = starts[pid]
            pending.extend(children.get(pid, []))
    return found


def kill_tree(tree: dict[int, int], sig: signal.Signals) -> None:
    """Signal the processes in *tree* that are still the ones we saw (same start time)."""
    for pid, start in tree.items():
        stat = proc_stat(pid)
        if stat is not None and stat[1] == start:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
