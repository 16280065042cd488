"""Forked test children: run a function in a child process and collect its exit status."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from collections.abc import Callable
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
