"""Claude Code as a session model: one persistent ``claude -p`` process per conversation.

The CLI runs headless in stream-json mode (``--input-format stream-json --output-format
stream-json --verbose --include-partial-messages``). It keeps the conversation itself, so a
turn writes one ``{"type":"user",…}`` line to stdin and reads stdout lines until the one
``{"type":"result",…}`` line that ends the turn. Why it is built the way it is:

* **A turn ends exactly once.** ``send()`` yields text, thinking and tool-call events and then
  exactly one :class:`Completion`, or raises :class:`ModelError`; never both, never neither.
  ``result.is_error`` is an error, except the ``error_during_execution`` result that answers our
  own ``cancel()``: that turn completes with ``stop_reason="cancelled"``.
* **No orphans.** The CLI runs in its own process group (``start_new_session=True``) with no
  shell. Every exit path (``close()``, a dead process, a read timeout, an API error, a cancelled
  ``close()``) ends the same way: close stdin, wait, SIGTERM the group, wait, SIGKILL the group,
  reap. The CLI starts its Bash tools in sessions of their own, out of reach of the group
  signal, so the descendants seen in ``/proc`` (Linux) are signalled too, checked by start time
  against pid reuse. (SIGTERM lets the CLI stop its tools itself; a CLI killed by someone else
  leaves tool processes we can no longer find.) A failed session is torn down at once, so
  ``is_alive()`` is False afterwards.
* **No leaked secrets.** The child gets an explicit, minimal environment (:func:`cli_environment`):
  PATH, HOME, locale and terminal basics, proxies and CA bundles, ``ANTHROPIC_*`` and
  ``CLAUDE_*`` variables, and whatever the caller passes as ``env``. Nothing else.
* **Resume is checked before it is promised.** ``open(resume_id=…)`` starts ``--resume ID`` and
  completes the ``initialize`` control handshake. The CLI rejects an unknown session at startup
  (an error ``result`` and exit code 1), so a failed handshake means: tear it down, start a
  fresh process, ``resumed=False``. The caller then knows to re-inject context. Transcripts live
  under ``$HOME/.claude/projects/<cwd>/``, so resuming needs the same HOME and workdir.
* **The stream is untrusted text.** Lines that are not JSON objects are skipped, unknown line
  types ignored (the CLI adds new ones often), every line read has a timeout.

Tool calls are the CLI's own business: it runs (or denies) them itself. They are reported as
:class:`ToolCallRequest` events for the record; ``Completion.tool_calls`` stays empty so that
nobody runs them a second time. Permission prompts reach us only if the extra arguments ask for
them (``--permission-prompt-tool stdio``); they are denied and reported as
:class:`PermissionRequest`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentkit.errors import ModelError, UsageError
from agentkit.models._claude_stream import (
    as_object,
    assistant_events,
    parse_line,
    result_error,
    stream_events,
    usage_of,
)
from agentkit.models._process_tree import descendants, exited, kill_tree, killpg
from agentkit.models._requests import check_model_requests
from agentkit.models.base import (
    Completion,
    ModelEvent,
    PermissionRequest,
    Purpose,
    SessionBackend,
    SessionModel,
    TextDelta,
)

__all__ = ["ClaudeCliBackend", "ClaudeCliSession", "cli_environment", "find_claude_cli"]

SPEC = "claude-cli"
#: the variable that names the executable when the constructor does not
EXECUTABLE_ENV = "AGENTKIT_CLAUDE_CLI"

_PASSED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "TMPDIR",
        "TZ",
        "LANG",
        "LANGUAGE",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
    }
)
_PASSED_PREFIXES = ("LC_", "ANTHROPIC_", "CLAUDE_")
# Flags that already choose the session; then we do not add --session-id.
_SESSION_FLAGS = frozenset({"--session-id", "--resume", "-r", "--continue", "-c"})
_LINE_LIMIT = 64 * 1024 * 1024  # one stream-json line (tool results can be large)
_STDERR_LINES = 40
_RETRYABLE_STATUS = frozenset({408, 409, 429})


class _PipeClosedError(Exception):
    """stdin of the claude process is closed (it exited or is being closed)."""


def find_claude_cli(executable: str | None = None) -> str:
    """The ``claude`` executable: *executable*, else ``$AGENTKIT_CLAUDE_CLI``, else ``claude``
    on PATH, else the binary bundled in the ``claude-agent-sdk`` wheel (found without importing
    the SDK). Raises :class:`ModelError` when there is none."""
    for candidate in (executable, os.environ.get(EXECUTABLE_ENV)):
        if candidate:
            found = shutil.which(candidate)
            if found is None:
                raise ModelError(SPEC, f"the Claude Code executable {candidate!r} was not found")
            return found
    on_path = shutil.which("claude")
    if on_path is not None:
        return on_path
    bundled = _bundled_cli()
    if bundled is not None:
        return bundled
    raise ModelError(
        SPEC,
        "Claude Code was not found: set $AGENTKIT_CLAUDE_CLI, put `claude` on PATH, or "
        "`pip install claude-agent-sdk` (its wheel bundles the CLI)",
    )


def _bundled_cli() -> str | None:
    try:
        spec = importlib.util.find_spec("claude_agent_sdk")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    name = "claude.exe" if os.name == "nt" else "claude"
    for location in spec.submodule_search_locations:
        path = Path(location) / "_bundled" / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def cli_environment(
    extra: Mapping[str, str] | None = None, *, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The child's whole environment: the allow-listed part of *environ* (default
    ``os.environ``) plus *extra*. Everything else, secrets included, stays behind."""
    source = os.environ if environ is None else environ
    env = {
        name: value
        for name, value in source.items()
        if name in _PASSED_NAMES or name.startswith(_PASSED_PREFIXES)
    }
    env.update(extra or {})
    return env


class ClaudeCliBackend(SessionBackend):
    """Opens one :class:`ClaudeCliSession` (one ``claude`` process) per conversation.

    *argv* are extra CLI arguments (``claude-cli:--model sonnet`` gives ``["--model",
    "sonnet"]``); *read_timeout* bounds the wait for each output line during a turn (tool loops
    can be long), *start_timeout* the startup handshake; *env* adds variables to the minimal
    environment the child gets.
    """

    spec = SPEC
    real_requests = True

    def __init__(
        self,
        argv: Sequence[str] = (),
        *,
        executable: str | None = None,
        read_timeout: float = 600.0,
        start_timeout: float = 60.0,
        close_timeout: float = 5.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.executable = find_claude_cli(executable)
        self.read_timeout = read_timeout
        self.start_timeout = start_timeout
        self.close_timeout = close_timeout
        self.env = dict(env or {})
        if self.argv:
            self.spec = f"{SPEC}:{shlex.join(self.argv)}"

    def command(self, system_prompt: str, *, resume_id: str | None = None) -> list[str]:
        """The argv of one session process (no shell ever sees it)."""
        args = [
            self.executable,
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
        ]
        if system_prompt:
            args += ["--append-system-prompt", system_prompt]
        if resume_id is not None:
            args += ["--resume", resume_id]
        elif not any(arg.partition("=")[0] in _SESSION_FLAGS for arg in self.argv):
            args += ["--session-id", str(uuid.uuid4())]
        return args + self.argv

    async def open(
        self,
        *,
        system_prompt: str,
        workdir: Path,
        resume_id: str | None = None,
    ) -> ClaudeCliSession:
        check_model_requests(self.spec)  # before the CLI process starts
        if resume_id is not None:
            resumed = await self._start(system_prompt, workdir, resume_id)
            if resumed.is_alive():
                resumed.resumed = True
                resumed.session_id = resume_id
                return resumed
        session = await self._start(system_prompt, workdir, None)
        if not session.is_alive():
            detail = session.failure_detail()
            raise ModelError(self.spec, f"the claude process did not start{detail}")
        return session

    async def _start(
        self, system_prompt: str, workdir: Path, resume_id: str | None
    ) -> ClaudeCliSession:
        """Spawn and handshake; a session that failed its handshake comes back closed."""
        argv = self.command(system_prompt, resume_id=resume_id)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=workdir,
                env=cli_environment(self.env),
                start_new_session=True,
                limit=_LINE_LIMIT,
            )
        except OSError as error:
            raise ModelError(self.spec, f"cannot start {argv[0]}: {error}") from None
        session = ClaudeCliSession(
            process,
            spec=self.spec,
            read_timeout=self.read_timeout,
            close_timeout=self.close_timeout,
        )
        if "--session-id" in argv and resume_id is None:
            session.session_id = argv[argv.index("--session-id") + 1]
        try:
            started = await session.handshake(self.start_timeout)
        except BaseException:
            await session.close()
            raise
        if not started:
            await session.close()
        return session


class ClaudeCliSession(SessionModel):
    """One live ``claude`` process holding one conversation. One turn at a time."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        *,
        spec: str = SPEC,
        read_timeout: float = 600.0,
        close_timeout: float = 5.0,
    ) -> None:
        self.spec = spec
        self.session_id = None
        self.resumed = False
        self.pid = process.pid
        self._process = process
        self._read_timeout = read_timeout
        self._close_timeout = close_timeout
        self._stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self._stderr_task = asyncio.create_task(self._read_stderr())
        self._requests = 0
        self._turn_token: object | None = None  # set while a turn waits for its result line
        self._cancel_requested = False
        self._unfinished_turns = 0  # turns abandoned before their result line
        self._closing: asyncio.Task[None] | None = None

    # --- public surface ----------------------------------------------------------------------

    def is_alive(self) -> bool:
        return self._closing is None and self._process.returncode is None

    def send(self, text: str, *, purpose: Purpose = "chat") -> AsyncGenerator[ModelEvent, None]:
        """Send one user message and stream the reply (the CLI holds the earlier turns).

        The turn is over at its :class:`Completion`; a stream dropped before that should be
        closed (``aclose()``): its turn is interrupted and its output skipped."""
        if self._turn_token is not None:
            raise UsageError("a turn is already in progress on this claude-cli session")
        return self._turn(text)

    async def cancel(self) -> None:
        """Interrupt the turn in progress; it then completes with ``stop_reason="cancelled"``."""
        if self._turn_token is None or not self.is_alive():
            return
        self._cancel_requested = True
        with contextlib.suppress(OSError, _PipeClosedError):
            self._write({"type": "control_request", **self._control("interrupt")})
            await self._drain_stdin()

    async def close(self) -> None:
        """Close stdin, wait, SIGTERM the group, wait, SIGKILL, reap. Idempotent."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._terminate())
        try:
            await asyncio.shield(self._closing)
        except asyncio.CancelledError:
            killpg(self.pid, signal.SIGKILL)
            raise

    # --- startup -----------------------------------------------------------------------------

    async def handshake(self, timeout: float) -> bool:
        """Send ``initialize`` and wait for its answer; False if the CLI exits or errs first."""
        request = self._control("initialize")
        try:
            self._write({"type": "control_request", **request})
            await self._drain_stdin()
            async with asyncio.timeout(timeout):
                while True:
                    line = await self._process_stdout().readline()
                    if not line:
                        return False
                    message = parse_line(line)
                    if message is None:
                        continue
                    kind = message.get("type")
                    if kind == "result":
                        self._stderr.append(str(message.get("result") or ""))
                        return False
                    if kind == "control_response":
                        response = as_object(message.get("response"))
                        if response.get("request_id") == request["request_id"]:
                            return response.get("subtype") == "success"
        except (TimeoutError, OSError, ValueError, _PipeClosedError):
            return False

    def failure_detail(self) -> str:
        """The tail of stderr (and the exit code) for an error message."""
        parts = [line for line in self._stderr if line.strip()]
        code = self._process.returncode
        prefix = f" (exit code {code})" if code is not None else ""
        return f"{prefix}: {' | '.join(parts[-5:])}" if parts else prefix

    # --- one turn ----------------------------------------------------------------------------

    async def _turn(self, text: str) -> AsyncGenerator[ModelEvent, None]:
        if self._turn_token is not None:
            raise UsageError("a turn is already in progress on this claude-cli session")
        if not self.is_alive():
            raise ModelError(self.spec, "the claude process is not running", retryable=True)
        token = self._turn_token = object()
        self._cancel_requested = False
        sent = finished = False
        try:
            await self._skip_unfinished_turns()
            sent = True
            self._write(
                {
                    "type": "user",
                    "message": {"role": "user", "content": text},
                    "parent_tool_use_id": None,
                    "session_id": "",
                }
            )
            await self._drain_stdin()
            streamed: set[str] = set()  # message ids whose text arrived as stream events
            reply: list[str] = []
            while True:
                message = await self._read_message()
                kind = message.get("type")
                if kind == "result":
                    finished = True
                    completion = await self._completion(message, "".join(reply))
                    self._turn_token = None  # the next send() may start at once
                    yield completion
                    return
                for event in await self._events(message, streamed):
                    if isinstance(event, TextDelta):
                        reply.append(event.text)
                    yield event
        except (OSError, _PipeClosedError) as error:
            finished = True
            detail = await self._fail()
            raise ModelError(
                self.spec, f"lost the claude process ({error}){detail}", retryable=True
            ) from None
        finally:
            if self._turn_token is token:
                self._turn_token = None
            if sent and not finished and self.is_alive():
                # The caller walked away mid-turn: stop it and skip its output next time.
                self._unfinished_turns += 1
                with contextlib.suppress(OSError, _PipeClosedError):
                    self._write({"type": "control_request", **self._control("interrupt")})

    async def _skip_unfinished_turns(self) -> None:
        while self._unfinished_turns:
            message = await self._read_message()
            if message.get("type") == "result":
                self._unfinished_turns -= 1

    async def _read_message(self) -> dict[str, Any]:
        """The next JSON-object line; a timeout or EOF tears the session down."""
        stdout = self._process_stdout()
        while True:
            try:
                line = await asyncio.wait_for(stdout.readline(), self._read_timeout)
            except TimeoutError:
                await self._fail()
                raise ModelError(
                    self.spec,
                    f"no output from claude for {self._read_timeout:g}s; the process was killed",
                    retryable=True,
                ) from None
            except ValueError as error:  # a line longer than the limit
                await self._fail()
                raise ModelError(self.spec, f"unreadable output from claude: {error}") from None
            if not line:
                detail = await self._fail()
                raise ModelError(self.spec, f"the claude process exited{detail}", retryable=True)
            message = parse_line(line)
            if message is not None:
                return message

    async def _events(self, message: dict[str, Any], streamed: set[str]) -> list[ModelEvent]:
        kind = message.get("type")
        if message.get("session_id") and kind in ("system", "assistant", "result"):
            self.session_id = str(message["session_id"])
        if kind == "control_request":
            return await self._answer_control_request(message)
        if message.get("parent_tool_use_id") is not None:
            return []  # a sub-agent's traffic, not this conversation's reply
        if kind == "stream_event":
            return stream_events(message, streamed)
        if kind == "assistant" and not message.get("is_api_error_message"):
            return assistant_events(as_object(message.get("message")), streamed)
        return []

    async def _completion(self, message: dict[str, Any], streamed_text: str) -> Completion:
        usage = usage_of(as_object(message.get("usage")))
        if not message.get("is_error"):
            result = message.get("result")
            return Completion(
                text=result if isinstance(result, str) else streamed_text,
                usage=usage,
                stop_reason=str(message.get("stop_reason") or "stop"),
            )
        if self._cancel_requested and message.get("subtype") == "error_during_execution":
            return Completion(text=streamed_text, usage=usage, stop_reason="cancelled")
        status = message.get("api_error_status")
        status_code = status if isinstance(status, int) else None
        problem = result_error(message)
        if status_code is not None or message.get("terminal_reason") == "api_error":
            # The CLI exits after an API error; do it now so is_alive() says so at once.
            await self.close()
            retryable = (
                status_code is None or status_code in _RETRYABLE_STATUS or (status_code >= 500)
            )
            raise ModelError(self.spec, problem, status_code=status_code, retryable=retryable)
        raise ModelError(self.spec, problem)

    async def _answer_control_request(self, message: dict[str, Any]) -> list[ModelEvent]:
        request = as_object(message.get("request"))
        request_id = message.get("request_id")
        events: list[ModelEvent] = []
        if request.get("subtype") == "can_use_tool":
            tool = str(request.get("tool_name") or "tool")
            response: dict[str, Any] = {
                "subtype": "success",
                "request_id": request_id,
                "response": {"behavior": "deny", "message": "agentkit does not grant tools"},
            }
            events.append(
                PermissionRequest(
                    tool_call_id=str(request.get("tool_use_id") or ""),
                    title=str(request.get("title") or tool),
                    options=("allow", "deny"),
                    decision="deny",
                )
            )
        else:
            response = {
                "subtype": "error",
                "request_id": request_id,
                "error": f"agentkit does not handle {request.get('subtype')!r} requests",
            }
        self._write({"type": "control_response", "response": response})
        await self._drain_stdin()
        return events

    # --- process plumbing --------------------------------------------------------------------

    def _control(self, subtype: str) -> dict[str, Any]:
        self._requests += 1
        request: dict[str, Any] = {"subtype": subtype}
        if subtype == "initialize":
            request["hooks"] = None
        return {"request_id": f"req_{self._requests}_{uuid.uuid4().hex[:8]}", "request": request}

    def _write(self, payload: dict[str, Any]) -> None:
        stdin = self._process.stdin
        if stdin is None or stdin.is_closing():
            raise _PipeClosedError("stdin is closed")
        stdin.write((json.dumps(payload) + "\n").encode())

    async def _drain_stdin(self) -> None:
        stdin = self._process.stdin
        if stdin is not None:
            await stdin.drain()

    def _process_stdout(self) -> asyncio.StreamReader:
        stdout = self._process.stdout
        if stdout is None:  # pragma: no cover - always piped
            raise RuntimeError("stdout is not piped")
        return stdout

    async def _read_stderr(self) -> None:
        stderr = self._process.stderr
        if stderr is None:  # pragma: no cover - always piped
            return
        with contextlib.suppress(ValueError):
            async for line in stderr:
                self._stderr.append(line.decode("utf-8", "replace").rstrip())

    async def _fail(self) -> str:
        """Tear the session down after a failure; returns the detail for the error."""
        await self.close()
        return self.failure_detail()

    async def _terminate(self) -> None:
        process = self._process
        tree = descendants(self.pid) if process.returncode is None else {}
        try:
            if process.stdin is not None and not process.stdin.is_closing():
                process.stdin.close()
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if await exited(process, self._close_timeout):
                    break
                tree.update(descendants(self.pid))
                killpg(self.pid, sig)
                kill_tree(tree, sig)
            # whatever the CLI left behind, in its group or in sessions of their own
            killpg(self.pid, signal.SIGKILL)
            kill_tree(tree, signal.SIGKILL)
            await exited(process, self._close_timeout)  # pipes drained: transport closed
            with contextlib.suppress(TimeoutError, OSError, ValueError):
                await asyncio.wait_for(self._stderr_task, self._close_timeout)
        except BaseException:
            killpg(self.pid, signal.SIGKILL)
            kill_tree(tree, signal.SIGKILL)
            raise
        finally:
            if not self._stderr_task.done():
                self._stderr_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._stderr_task
