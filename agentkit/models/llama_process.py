"""The embedded model behind a process boundary: one worker process per loaded GGUF.

Why a process: llama.cpp is native code. A wheel built for another CPU dies with SIGILL, a
malformed file can segfault the loader, a large context can be killed for memory. In-process,
each of these ends the Jupyter kernel, the HTTP server with every conversation it serves, or
the test run. Here they end :mod:`agentkit.models._llama_worker`, and the request in flight
fails with a :class:`~agentkit.errors.ModelError` that names the signal; the next request
starts a fresh worker. A process also gives a real cancel (kill, when a generation does not
stop between tokens) and lets every session of a server share one loaded model.

Invariants:

- One request at a time per worker (one ``Llama`` is not re-entrant); callers queue on a
  lock that is released when the request's last message arrives or the worker dies — never
  by the caller walking away.
- A request always ends with exactly one terminal item for its sink: a ``done`` payload, a
  counted list, or a :class:`ModelError`.
- Threads, not an event loop, own the pipes, so a worker serves callers on any event loop
  (a notebook's, a server's, the ``asyncio.run`` of each CLI command).
- Workers run in their own session (a Ctrl-C in the terminal is the parent's) and exit when
  their stdin closes, so none outlives the process that started it.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from agentkit.errors import ModelError

__all__ = ["LlamaWorker", "close_workers", "describe_exit", "shared_worker"]

#: seconds a cancelled generation may take to stop by itself before its worker is killed
CANCEL_GRACE = 3.0
_STARTUP_TIMEOUT = 120.0

Sink = Callable[[object], None]
_log = logging.getLogger("agentkit.models.llama")


def describe_exit(returncode: int) -> str:
    """``-4`` → ``SIGILL: illegal instruction``; ``3`` → ``exit status 3``."""
    if returncode < 0:
        try:
            number = signal.Signals(-returncode)
        except ValueError:
            return f"signal {-returncode}"
        meaning = (signal.strsignal(number) or "").lower()
        if number == signal.SIGKILL:
            meaning = "killed (out of memory, or by another process)"
        return f"{number.name}: {meaning}" if meaning else number.name
    return f"exit status {returncode}"


@dataclass(frozen=True)
class _Key:
    path: str
    n_ctx: int
    seed: int


class LlamaWorker:
    """A handle on the worker process for one GGUF file (started on first use)."""

    def __init__(self, path: Path, *, n_ctx: int, seed: int, backend: str) -> None:
        self.path = path
        self.n_ctx = n_ctx
        self.seed = seed
        self.backend = backend
        self.system_info = ""
        self._turn = threading.Lock()  # held from a request's write to its terminal item
        self._state = threading.Lock()  # guards the fields below
        self._process: subprocess.Popen[str] | None = None
        self._sinks: dict[int, Sink] = {}
        self._next_id = 0
        self._stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._threads: list[threading.Thread] = []

    @property
    def pid(self) -> int | None:
        """The live worker's pid (``None`` before first use or after it died)."""
        with self._state:
            return self._process.pid if self._process is not None else None

    # -- requests ------------------------------------------------------------------------

    def begin(self, request: dict[str, Any], sink: Sink) -> int:
        """Send *request*; its replies go to *sink*. Blocks while another request runs."""
        self._turn.acquire()
        try:
            process = self._ensure_started()
            with self._state:
                self._next_id += 1
                request_id = self._next_id
                self._sinks[request_id] = sink
            assert process.stdin is not None
            process.stdin.write(json.dumps({**request, "id": request_id}) + "\n")
            process.stdin.flush()
        except BrokenPipeError:
            # It died between start and write. Whoever pops the sink first (here, or the
            # reader thread at end of stream) fails it and unlocks: exactly once.
            with self._state:
                orphan = self._sinks.pop(request_id, None)
            if orphan is not None:
                orphan(ModelError(self.backend, "the embedded model process died"))
                self._turn.release()
            return -1
        except BaseException:
            self._turn.release()
            raise
        return request_id

    def call(self, request: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
        """A request with one reply, waited for on this thread."""
        box: list[object] = []
        arrived = threading.Event()

        def sink(item: object) -> None:
            box.append(item)
            arrived.set()

        self.begin(request, sink)
        if not arrived.wait(timeout):
            self.kill()
            arrived.wait(10)
        item = box[0] if box else ModelError(self.backend, "the model worker did not answer")
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, dict)
        return item

    def cancel(self, request_id: int) -> None:
        """Ask a running request to stop; kill the worker if it has not within the grace."""
        with self._state:
            process = self._process
            if process is None or request_id not in self._sinks:
                return
        try:
            assert process.stdin is not None
            process.stdin.write(json.dumps({"op": "cancel", "id": request_id}) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            return

        def kill_if_still_running() -> None:
            with self._state:
                running = self._process is process and request_id in self._sinks
            if running:
                self._kill(process)

        timer = threading.Timer(CANCEL_GRACE, kill_if_still_running)
        timer.daemon = True
        timer.start()

    def kill(self) -> None:
        """Kill the worker now (the request in flight fails; the next one starts afresh)."""
        with self._state:
            process = self._process
        if process is not None:
            self._kill(process)

    def close(self) -> None:
        """Stop the worker: close its stdin, give it a moment, then kill it."""
        with self._state:
            process = self._process
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=2)
        except (subprocess.TimeoutExpired, OSError, ValueError):
            self._kill(process)
            process.wait()
        for thread in self._threads:
            thread.join(timeout=5)  # they close the pipes they read at end of stream

    # -- the process -----------------------------------------------------------------------

    def _ensure_started(self) -> subprocess.Popen[str]:
        with self._state:
            if self._process is not None and self._process.poll() is None:
                return self._process
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentkit.models._llama_worker",
                "--model",
                str(self.path),
                "--n-ctx",
                str(self.n_ctx),
                "--seed",
                str(self.seed),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_worker_environment(),
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            start_new_session=True,
            close_fds=True,
        )
        assert process.stdout is not None
        assert process.stderr is not None
        self._stderr.clear()
        drain = threading.Thread(
            target=self._drain_stderr, args=(process.stderr,), name="llama-stderr", daemon=True
        )
        drain.start()
        try:
            ready = self._handshake(process)
        except ModelError:
            process.stdout.close()
            if process.stdin is not None:
                process.stdin.close()
            drain.join(timeout=5)
            raise
        self.system_info = str(ready.get("system_info", ""))
        reader = threading.Thread(
            target=self._read, args=(process,), name="llama-replies", daemon=True
        )
        with self._state:
            self._process = process
            self._threads = [drain, reader]
        reader.start()
        return process

    def _handshake(self, process: subprocess.Popen[str]) -> dict[str, Any]:
        assert process.stdout is not None
        timer = threading.Timer(_STARTUP_TIMEOUT, lambda: self._kill(process))
        timer.daemon = True
        timer.start()
        try:
            line = process.stdout.readline()
        finally:
            timer.cancel()
        message = _parse(line)
        if message is not None and message.get("ready"):
            return message
        returncode = process.wait()
        if message is not None and "fatal" in message:
            raise ModelError(self.backend, str(message["fatal"]))
        raise ModelError(
            self.backend,
            f"the embedded model process died while loading ({describe_exit(returncode)})"
            + self._stderr_tail(),
        )

    def _read(self, process: subprocess.Popen[str]) -> None:
        """Dispatch replies to their sinks until the worker's stdout closes."""
        assert process.stdout is not None
        for line in process.stdout:
            message = _parse(line)
            if message is None or not isinstance(message.get("id"), int):
                continue
            request_id: int = message["id"]
            terminal = "delta" not in message
            with self._state:
                sink = self._sinks.pop(request_id, None) if terminal else None
                if not terminal:
                    sink = self._sinks.get(request_id)
            if sink is None:
                continue
            item = (
                ModelError(self.backend, str(message["error"])) if "error" in message else message
            )
            _deliver(sink, item)
            if terminal:
                self._turn.release()
        process.stdout.close()
        if process.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                process.stdin.close()
        returncode = process.wait()
        problem = ModelError(
            self.backend,
            f"the embedded model process died ({describe_exit(returncode)})" + self._stderr_tail(),
        )
        with self._state:
            orphans = list(self._sinks.values())
            self._sinks.clear()
            if self._process is process:
                self._process = None
        for sink in orphans:
            _deliver(sink, problem)
        if orphans:
            self._turn.release()

    def _drain_stderr(self, stream: IO[str]) -> None:
        with stream:
            for line in stream:
                if line.strip():
                    self._stderr.append(line.rstrip())

    def _stderr_tail(self) -> str:
        lines = [line for line in list(self._stderr)[-3:] if line]
        return f"; it said: {' | '.join(lines)}" if lines else ""

    @staticmethod
    def _kill(process: subprocess.Popen[str]) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _deliver(sink: Sink, item: object) -> None:
    """Hand *item* to its sink; a sink that fails (its caller is gone) never ends the reader
    thread, which must go on releasing the turn lock for the next request."""
    try:
        sink(item)
    except Exception as error:  # the caller's problem, not the worker's
        _log.debug("a model reply was dropped: %s", error)


def _worker_environment() -> dict[str, str]:
    """The parent's environment, with OpenMP's waiting threads sleeping instead of spinning
    (unless the user chose; only the worker's environment changes). On shared cores a thread
    spinning at one of the prompt's barriers starves the sibling it waits for: on two busy
    cores the prompt was read 2-3x faster for a third of the CPU per token than with OpenMP's
    default or with ggml's own thread pool (``GGML_OPENMP=OFF``, whose barriers always spin),
    and was no slower on quiet ones (``bench/bench_llama_build.py --neighbour``)."""
    return {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}


def _parse(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


_shared: dict[_Key, LlamaWorker] = {}
_shared_lock = threading.Lock()


def shared_worker(path: Path, *, n_ctx: int, seed: int, backend: str) -> LlamaWorker:
    """The process-wide worker for this GGUF and context size: loaded once, shared."""
    key = _Key(str(path.resolve()), n_ctx, seed)
    with _shared_lock:
        worker = _shared.get(key)
        if worker is None:
            worker = _shared[key] = LlamaWorker(path, n_ctx=n_ctx, seed=seed, backend=backend)
        return worker


def close_workers() -> None:
    """Stop every shared worker (at interpreter exit; tests that want a clean slate)."""
    with _shared_lock:
        workers = list(_shared.values())
        _shared.clear()
    for worker in workers:
        worker.close()


atexit.register(close_workers)
