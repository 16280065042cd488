"""The embedded model behind its process boundary: native crashes are errors, not deaths.

The worker process is killed with real signals mid-reply (SIGKILL as the out-of-memory killer
sends it, SIGILL as a CPU without the build's instructions raises it, SIGSEGV): the caller —
an in-process ``Agent``, ``agentkit serve``, the ``agentkit chat`` REPL — keeps running, the
turn ends with an error event that names the signal, and the next turn works on a fresh worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agentkit import Agent
from agentkit.errors import ModelError
from agentkit.events import AgentOutputEvent, ErrorEvent, ResultEvent, SessionEvent
from agentkit.models.base import ChatMessage, Completion, TextDelta
from agentkit.models.llama import LlamaModel, default_gguf_path
from agentkit.models.llama_process import close_workers, describe_exit
from agentkit.models.spec import create_model

from tests.fakes.live_api import ServeProcess, iter_events

#: a real backend (a model process, server or agent CLI) under test
pytestmark = pytest.mark.real_model

SCRIPT = Path(sys.executable).with_name("agentkit")
LONG_ASK = "Tell me a long story about a lighthouse keeper, in at least twelve sentences."


@pytest.fixture(autouse=True)
def _fresh_workers() -> Iterator[None]:
    close_workers()
    yield
    close_workers()


def children_named(parent: int, needle: str) -> list[int]:
    """Pids of *parent*'s child processes whose command line contains *needle*."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and needle in cmdline:
            found.append(int(entry.name))
    return found


def wait_for_worker(parent: int) -> int:
    """The pid of *parent*'s model worker, once it has one (bounded by the test's timeout:
    loading the model on a loaded machine takes its time)."""
    while not (pids := children_named(parent, "agentkit.models._llama_worker")):
        time.sleep(0.05)
    return pids[0]


def test_exit_descriptions_name_the_signal() -> None:
    assert describe_exit(-signal.SIGILL) == "SIGILL: illegal instruction"
    assert describe_exit(-signal.SIGSEGV) == "SIGSEGV: segmentation fault"
    assert describe_exit(-signal.SIGKILL).startswith("SIGKILL: killed (out of memory")
    assert describe_exit(3) == "exit status 3"


def test_a_long_prompt_and_a_structured_call_in_a_subprocess_on_a_portable_build() -> None:
    """≥300 prompt tokens reach the batched matmul kernels (where AMX code faulted); the
    build reports its CPU features, and AMX / AVX-512 are not among them."""
    code = """
import asyncio, json
from agentkit.models.base import ChatMessage
from agentkit.models.llama import LlamaModel

async def main():
    model = LlamaModel(max_tokens=24)
    filler = " ".join(f"Fact {i}: the harbour light is checked every evening." for i in range(40))
    long = await model.complete(
        [ChatMessage(role="system", content="You are terse."),
         ChatMessage(role="user", content=filler + " Summarise in one sentence.")],
        purpose="chat")
    schema = {"type": "object", "properties": {"answer": {"type": "integer"},
              "sure": {"type": "boolean"}}, "required": ["answer", "sure"],
              "additionalProperties": False}
    structured = await model.complete(
        [ChatMessage(role="user", content="Answer in JSON: what is 2+2?")],
        purpose="classify", schema=schema)
    print(json.dumps({"input_tokens": long.usage.input_tokens, "text": long.text,
                      "structured": structured.structured, "info": model.system_info()}))

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["input_tokens"] >= 300
    assert report["text"].strip()
    assert isinstance(report["structured"]["answer"], int)
    assert isinstance(report["structured"]["sure"], bool)
    info = report["info"]
    assert "AVX2 = 1" in info, info  # the portable baseline on x86-64
    assert "AMX" not in info and "AVX512" not in info, info


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGILL, signal.SIGSEGV])
def test_a_worker_killed_mid_reply_is_a_model_error_and_the_next_call_works(signum: int) -> None:
    model = LlamaModel(max_tokens=200)
    messages = [ChatMessage(role="user", content=LONG_ASK)]

    async def crash() -> tuple[int, list[str]]:
        pieces: list[str] = []
        victim = -1

        async def consume() -> None:
            nonlocal victim
            async for event in model.stream(messages, purpose="chat"):
                if isinstance(event, TextDelta):
                    pieces.append(event.text)
                    if victim < 0:
                        victim = model.worker.pid or -1
                        os.kill(victim, signum)

        with pytest.raises(ModelError) as caught:
            await consume()
        name = signal.Signals(signum).name
        assert f"the embedded model process died ({name}:" in str(caught.value)
        return victim, pieces

    victim, pieces = asyncio.run(crash())
    assert pieces  # it was mid-reply
    again = asyncio.run(model.complete(messages, purpose="chat"))
    assert again.text.strip()
    assert model.worker.pid not in (None, victim)


def test_a_truncated_gguf_and_a_text_file_are_model_errors(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.gguf"
    with default_gguf_path().open("rb") as source:
        truncated.write_bytes(source.read(2_000_000))
    text = tmp_path / "notes.gguf"
    text.write_text("these are my notes, not a model\n")
    messages = [ChatMessage(role="user", content="hi")]
    for path, expected in ((truncated, "cannot load"), (text, "not a GGUF file")):
        model = create_model(f"llama:{path}")
        assert isinstance(model, LlamaModel)
        with pytest.raises(ModelError, match=expected):
            asyncio.run(model.complete(messages, purpose="chat"))
    # the process is fine and the real model still answers
    final = asyncio.run(LlamaModel(max_tokens=8).complete(messages, purpose="chat"))
    assert isinstance(final, Completion)


def test_an_agent_turn_whose_worker_dies_fails_cleanly_and_the_next_is_scenario_c(
    data_dir: Path,
) -> None:
    agent = Agent.open("innovator-001", data_dir=data_dir, model=LlamaModel(max_tokens=200))

    async def turn(conversation: str | None, text: str, kill: int | None) -> list[object]:
        events: list[object] = []
        async for event in agent.send_message(conversation, text):
            events.append(event)
            if kill is not None and isinstance(event, AgentOutputEvent):
                assert isinstance(agent.model, LlamaModel)
                os.kill(agent.model.worker.pid or -1, kill)
                kill = None
        return events

    first = asyncio.run(turn(None, LONG_ASK, signal.SIGILL))
    errors = [e for e in first if isinstance(e, ErrorEvent)]
    result = first[-1]
    assert isinstance(result, ResultEvent) and result.status == "failed"
    assert errors and "the embedded model process died (SIGILL: illegal instruction)" in (
        errors[-1].message
    )
    conversation = result.conversation_id
    history = agent.load_conversation_history(conversation)
    assert history[0].role == "user" and history[0].content == LONG_ASK
    [meta] = [m for m in agent.list_conversations() if m.conversation_id == conversation]
    assert meta.status == "failed"

    second = asyncio.run(turn(conversation, "Say hello.", None))
    session = second[0]
    assert isinstance(session, SessionEvent) and session.scenario == "C"
    final = second[-1]
    assert isinstance(final, ResultEvent) and final.status == "completed" and final.text.strip()
    asyncio.run(agent.aclose())


def test_agentkit_serve_survives_a_worker_crash_and_keeps_serving(data_dir: Path) -> None:
    server = ServeProcess(data_dir, "--model", "llama")
    try:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            body = {"message": LONG_ASK}
            events = []
            crashed = False
            with client.stream("POST", "/api/agent/innovator-001/chat", json=body) as response:
                assert response.status_code == 200
                for event in iter_events(response):
                    events.append(event)
                    if event.event == "agent_output" and not crashed:  # once: on a loaded
                        # machine more pieces the worker sent before it died may follow
                        os.kill(wait_for_worker(server.process.pid), signal.SIGSEGV)
                        crashed = True
            kinds = [e.event for e in events]
            assert kinds[-1] == "result" and events[-1].data["status"] == "failed", kinds
            error = next(e for e in events if e.event == "error")
            assert "SIGSEGV" in error.data["message"]
            # the server is up and answers other requests
            assert client.get("/api/health").status_code == 200
            assert client.get("/api/agent/list").status_code == 200
            conversation = events[0].data["conversationId"]
            again = client.post(
                "/api/agent/innovator-001/chat",
                json={"message": "Say hello.", "conversationId": conversation},
            )
            assert again.status_code == 200
            assert '"scenario":"C"' in again.text.replace(" ", "")
            assert '"status":"completed"' in again.text.replace(" ", "")
            second_worker = wait_for_worker(server.process.pid)
    finally:
        code, stderr = server.stop()
    assert code in (0, -signal.SIGTERM), stderr  # uvicorn re-raises the signal once shut down
    wait_gone(second_worker)  # no orphan: the worker ends with its parent


def wait_gone(pid: int) -> None:
    """Block until *pid* exits (a pidfd turns readable then, zombie or reaped); the bound only
    keeps a broken build from hanging the run — it is not a speed check."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone and reaped
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        assert poller.poll(300_000), f"process {pid} outlived its parent"
    finally:
        os.close(fd)


def test_agentkit_chat_repl_stays_up_when_the_worker_dies(data_dir: Path) -> None:
    repl = subprocess.Popen(
        [str(SCRIPT), "--data-dir", str(data_dir), "chat", "innovator-001", "--model", "llama"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert repl.stdin is not None and repl.stdout is not None and repl.stderr is not None
    out: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [out.put(c) for c in iter(lambda: repl.stdout.read(1), "")],
                     daemon=True).start()  # fmt: skip
    try:
        repl.stdin.write(LONG_ASK + "\n")
        repl.stdin.flush()
        out.get(timeout=300)  # the reply has started streaming
        os.kill(wait_for_worker(repl.pid), signal.SIGKILL)
        repl.stdin.write("Say hello.\n")
        repl.stdin.close()
        code = repl.wait(timeout=300)
    finally:
        if repl.poll() is None:
            repl.kill()
    stderr = repl.stderr.read()
    repl.stderr.close()
    repl.stdout.close()
    assert "the embedded model process died (SIGKILL" in stderr, stderr
    assert code == 0, stderr
    # the second message was answered in the same conversation (one conversation left)
    folder = data_dir / "agents" / "innovator-001" / "conversations"
    conversations = [path for path in folder.iterdir() if not path.name.startswith(".")]
    assert len(conversations) == 1
    history = json.loads((conversations[0] / "history.json").read_text())
    assert [m["role"] for m in history][-2:] == ["user", "assistant"]
    assert history[-2]["content"] == "Say hello." and history[-1]["content"].strip()


def test_a_worker_whose_parent_is_gone_stops_its_generation_and_exits() -> None:
    """End of stdin (the parent closed the pipe, or was killed) cancels the generation under
    way at its next token: a killed bench or server leaves no worker computing for no one."""
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentkit.models._llama_worker",
            "--model",
            str(default_gguf_path()),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert worker.stdin is not None and worker.stdout is not None
    try:
        assert json.loads(worker.stdout.readline()).get("ready") is True
        request = {
            "op": "generate",
            "id": 1,
            "messages": [{"role": "user", "content": LONG_ASK}],
            "max_tokens": 2000,
            "temperature": 0.0,
            "repeat_penalty": 1.1,
            "seed": 7,
        }
        worker.stdin.write(json.dumps(request) + "\n")
        worker.stdin.flush()
        first = json.loads(worker.stdout.readline())
        assert "delta" in first, first  # the generation is under way
        worker.stdin.close()  # the parent is gone
        done = [json.loads(line) for line in worker.stdout if '"done"' in line]
        assert [message["done"]["stop_reason"] for message in done] == ["cancelled"]
        assert done[0]["done"]["output_tokens"] < 2000
        assert worker.wait(timeout=120) == 0  # a hang guard, not a deadline
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        worker.stdout.close()
        if not worker.stdin.closed:
            worker.stdin.close()
