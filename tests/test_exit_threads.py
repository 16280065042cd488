"""No thread dies noisily at process exit (issue 28, item 7).

``agentkit send`` on the embedded model, after a timed-out plan, printed ``Exception in thread
llama-replies: … RuntimeError: Event loop is closed``: the generation the timeout walked away
from finished after ``asyncio.run`` had closed its loop, and the reply thread handed it to that
loop. The drivers below run in a real subprocess with ``threading.excepthook`` (and
``sys.unraisablehook``) reporting every uncaught exception on stderr with a marker; the test
fails on any.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.real_model

HOOKS = """
import sys, threading
def _hook(args):
    print(f"UNCAUGHT-THREAD-EXCEPTION {args.thread.name if args.thread else '?'}: "
          f"{args.exc_type.__name__}: {args.exc_value}", file=sys.stderr, flush=True)
threading.excepthook = _hook
def _unraisable(args):
    print(f"UNRAISABLE {args.exc_type.__name__}: {args.exc_value}", file=sys.stderr, flush=True)
sys.unraisablehook = _unraisable
"""

#: a generation abandoned mid-stream (what a stage timeout does), then the loop closes while
#: the worker is still answering; the process waits for the late reply before it exits
ABANDONED = """
import asyncio, time
from agentkit.models.base import ChatMessage, TextDelta
from agentkit.models.llama import LlamaModel

model = LlamaModel(max_tokens=200)

async def walk_away() -> None:
    messages = [ChatMessage(role="user", content="Write a long story about a lighthouse.")]
    stream = model.stream(messages, purpose="chat")
    async for event in stream:
        if isinstance(event, TextDelta):
            break  # the consumer goes away; the worker is asked to stop
    await stream.aclose()

for _ in range(2):  # two loops, as two CLI stages would use
    asyncio.run(walk_away())
time.sleep(1.5)  # the late terminal reply arrives with no loop to take it
print("DRIVER-DONE", flush=True)
"""


def _run(body: str) -> subprocess.CompletedProcess[str]:
    script = HOOKS + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )


def test_an_abandoned_generation_leaves_no_thread_exception_at_exit() -> None:
    done = _run(ABANDONED)
    assert done.returncode == 0, done.stderr
    assert "DRIVER-DONE" in done.stdout
    assert "UNCAUGHT-THREAD-EXCEPTION" not in done.stderr, done.stderr
    assert "UNRAISABLE" not in done.stderr, done.stderr
    assert "Event loop is closed" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
