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
