"""Planner-turn overhead against peers, fsyncs per turn, resume, loads, import time, the model.

Figures, not pass/fail (``make bench``; never a timed test). One run prints:

1. **per-turn overhead** of a full planner turn with a zero-latency scripted model (a plan call,
   a respond call, every write the turn makes: the messages committed through the journal, the
   ExecutionState saves, calls.jsonl) after 10 / 100 / 1k / 10k prior turns, side by side with
   LangGraph (``StateGraph`` + ``SqliteSaver``, the same fake replies, the same messages), the
   OpenAI Agents SDK's ``SQLiteSession`` driven as its ``Runner`` drives a session in one
   turn (``get_items()``, then ``add_items()`` of the turn's items) and a naive
   ``history.json`` rewrite (``bench_peers.py``). Compression is switched off
   (``compression.max_messages`` = 10⁶) so every system does the same work per turn. The
   same agentkit turn is also timed with ``os.fsync`` made a no-op: what is left is
   agentkit's own code, the rest is the disk;
2. **fsyncs per planner turn** (the same turn, no side-effecting tool, 100 prior turns):
   ``strace -f -c -e trace=fsync,fdatasync`` on a child process running N turns, minus a
   child running none (opening the agent and a warm-up turn), divided by N. Without
   ``strace`` (``apt-get install strace``) the figure is skipped with a note;
3. **scenario C resume**: a new ``Agent`` (a new process as far as agentkit can tell) on a
   conversation of 1k / 100k messages, to the end of its first chat turn (the context rebuilt
   from history); LangGraph's counterpart is a fresh connection + graph + one turn, the
   Agents SDK's a new ``SQLiteSession`` + one turn;
4. **the full load** of a 100k-message conversation (``FileConversationStore.messages`` on a
   new store, as a new process does) next to a plain ``json.load`` of its ``history.json``;
5. ``import agentkit`` (a fresh interpreter each time, interpreter start excluded) and the
   wall time of ``agentkit agents`` (a whole CLI process, interpreter start included);
6. the embedded model (SmolLM2-135M via llama-cpp, grammar-constrained JSON) answering the
   ``plan`` calls of real planner turns on desk-001 (stage timeouts scaled by 6, as
   desk-local-001 does; the other stages scripted so the run stays short): latency per plan
   and output tokens per second, from ``calls.jsonl``.

Conversations are built fast, not through 100 000 fsynced appends: the journal is written
directly with the store's own record encoder, the turn logs beside it, then
``FileConversationStore.recover()`` builds and checks the views (as ``bench_store.py`` does).
The per-turn figures are taken interleaved: all systems are set up for one history length,
each runs 5 untimed turns, then 5 turns in a row per round, the order rotated every round
(8 rounds up to 1k prior turns: 40 turns each; 3 at 10k: 15), so every system sees the same
stretches of a shared machine whose speed drifts, and the ratios of one run can be
compared. 5 resumes at 1k messages, 3 at 100k; 5 full loads. Medians are printed (other work
on the machine makes the figures noisy: the load average at the start and the end is printed
with them). Rows are appended to ``bench/results/planner.csv`` (``fsyncs_per_turn`` and
``load_avg_1min`` rows hold a count and a load in the ``median_ms`` column).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agentkit import Agent, ChatModel, ScriptedModel
from agentkit.events import ResultEvent
from agentkit.models.base import ModelEvent, ModelRequest
from agentkit.store import ConversationKey, FileConversationStore
from agentkit.store._journal import encode_frame
from agentkit.store._records import CreatedRecord, JournalRecord, MessageRecord, encode_record, fold
from agentkit.types import Message

import bench_peers

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "planner.csv"
TURN_SIZES = (10, 100, 1_000, 10_000)
TURN_ROUNDS = 8  # of TURN_BLOCK turns each; 3 at 10k prior turns (a LangGraph turn: ~1 s)
TURN_BLOCK = 5
RESUME_SIZES = (1_000, 100_000)
FULL_LOAD_MESSAGES = 100_000
FSYNC_PRIOR_TURNS = 100
FSYNC_TURNS = 20
CONVERSATION = "conv-bench"
_START = datetime(2026, 1, 1, tzinfo=UTC)

Row = tuple[str, str, int, list[float]]  # system, metric, size, samples (ms)


def _summary(samples: list[float]) -> tuple[float, float]:
    if len(samples) == 1:
        return samples[0], samples[0]
    return statistics.median(samples), statistics.quantiles(samples, n=10, method="inclusive")[-1]


def copy_agent(root: Path, agent_id: str, **config: object) -> None:
    """The sample agent under *root*, without conversations or desk, with *config* merged."""
    target = root / "agents" / agent_id
    shutil.copytree(
        REPO / "data" / "agents" / agent_id,
        target,
        ignore=shutil.ignore_patterns("conversations", ".*.lock", "desk.db*"),
    )
    path = target / "config.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for section, values in config.items():
        data[section] = {**data.get(section, {}), **values} if isinstance(values, dict) else values
    path.write_text(json.dumps(data), encoding="utf-8")


def build_conversation(root: Path, agent_id: str, messages: int) -> None:
    """A conversation of *messages* messages (bench_peers.conversation), written fast."""
    key = ConversationKey(agent_id, CONVERSATION)
    records: list[JournalRecord] = [
        CreatedRecord(
            seq=1, conversation_id=CONVERSATION, agent_id=agent_id, title="bench", at=_START
        )
    ]
    for index, (role, text) in enumerate(bench_peers.conversation(messages)):
        message = Message(
            role="user" if role == "user" else "assistant",
            content=text,
            message_id=f"msg-{index // 2:07d}",
            timestamp=_START + timedelta(seconds=index),
        )
        records.append(MessageRecord(seq=index + 2, message=message))
    directory = root / "agents" / agent_id / "conversations" / CONVERSATION
    directory.mkdir(parents=True)
    with open(directory / "journal.log", "wb") as journal:
        journal.writelines(encode_frame(encode_record(record)) for record in records)
        journal.flush()
        os.fsync(journal.fileno())
    views = fold(records)
    for message_id in views.turns:
        (directory / message_id).mkdir()
        (directory / message_id / "messages.log").write_text(
            views.turn_log(message_id), encoding="utf-8"
        )
    assert FileConversationStore(root).recover(agent_id) == [key]
    assert len(FileConversationStore(root).recent(key, 3)) == min(3, messages)


def timed(action: Callable[[], object], repeat: int) -> list[float]:
    return bench_peers.timed(action, repeat)


# -- agentkit ------------------------------------------------------------------------------


@contextlib.contextmanager
def agentkit_turn(
    scratch: Path, prior_turns: int, *, through_send: bool = False, fsync: bool = True
) -> Iterator[Callable[[], None]]:
    """One full planner turn (warmed up), driven as the evaluation runner and the HTTP API
    drive it: ``Agent.send_message`` consumed on the caller's event loop. *through_send*:
    through the synchronous helper ``Agent.send`` instead (scripts, notebooks), which adds
    the hop to the agent's own loop thread and back. Without *fsync*, ``os.fsync`` is a no-op
    during the turn: agentkit's own code without the disk (a plain turn's only fsyncs are its
    two journal commits; SQLite makes none)."""
    name = f"agentkit-{prior_turns}{'-send' if through_send else ''}{'' if fsync else '-nofsync'}"
    root = scratch / name
    copy_agent(root, "desk-001", compression={"max_messages": 1_000_000})
    build_conversation(root, "desk-001", 2 * prior_turns)
    script = {"plan": [json.loads(bench_peers.PLAN_REPLY)], "respond": [bench_peers.ANSWER]}
    loop = asyncio.new_event_loop()
    with Agent.open("desk-001", data_dir=root, model=ScriptedModel(script)) as agent:

        async def stream() -> ResultEvent:
            events = [e async for e in agent.send_message(CONVERSATION, bench_peers.REQUEST)]
            assert isinstance(events[-1], ResultEvent)
            return events[-1]

        def run() -> None:
            if through_send:
                result = agent.send(bench_peers.REQUEST, CONVERSATION).result
            else:
                result = loop.run_until_complete(stream())
            assert result.status == "completed", result.text
            assert result.text == bench_peers.ANSWER

        def turn() -> None:
            if fsync:
                run()
                return
            real = os.fsync, os.fdatasync
            os.fsync = os.fdatasync = lambda fd: None  # type: ignore[assignment]
            try:
                run()
            finally:
                os.fsync, os.fdatasync = real

        turn()  # warm-up (imports, schema compilation)
        yield turn
        assert len(agent.load_recent_messages(CONVERSATION, 5)) == 5
    loop.close()


def interleaved(
    systems: dict[str, contextlib.AbstractContextManager[Callable[[], None]]],
    rounds: int,
    block: int = TURN_BLOCK,
) -> dict[str, list[float]]:
    """Milliseconds per turn of each system, in *rounds* rounds of *block* turns in a row per
    system (the order rotated every round), after one untimed block each: every system sees
    the same stretches of a shared machine whose speed drifts, and runs warm as an evaluation
    sweep does."""
    samples: dict[str, list[float]] = {name: [] for name in systems}
    with contextlib.ExitStack() as stack:
        turns = [(name, stack.enter_context(setup)) for name, setup in systems.items()]
        for _, turn in turns:  # one untimed block each: caches and allocators warmed up
            timed(turn, block)
        for index in range(rounds):
            shift = index % len(turns)
            for name, turn in turns[shift:] + turns[:shift]:
                samples[name] += timed(turn, block)
    return samples


def agentkit_resume(scratch: Path, messages: int, repeat: int) -> list[float]:
    root = scratch / f"resume-{messages}"
    copy_agent(root, "innovator-001")
    build_conversation(root, "innovator-001", messages)
    model = ScriptedModel({"chat": ["Where we were: your plan, step two."]})

    def resume() -> None:
        agent = Agent.open("innovator-001", data_dir=root, model=model)
        try:
            result = agent.send("where were we?", CONVERSATION)
            assert result.session.scenario == "C"
            assert result.result.status == "completed"
        finally:
            agent.close()

    return timed(resume, repeat)


def import_time(repeat: int) -> list[float]:
    code = (
        "import time; t = time.perf_counter(); import agentkit; "
        "print((time.perf_counter() - t) * 1000)"
    )
    return [
        float(subprocess.check_output([sys.executable, "-c", code], text=True))
        for _ in range(repeat)
    ]


def cli_agents_time(scratch: Path, repeat: int) -> list[float]:
    """Wall milliseconds of ``agentkit agents`` (a new process each time) on the samples."""
    root = scratch / "cli"
    shutil.copytree(
        REPO / "data" / "agents",
        root / "agents",
        ignore=shutil.ignore_patterns("conversations", ".*.lock", "desk.db*"),
    )
    command = [str(Path(sys.executable).with_name("agentkit")), "--data-dir", str(root), "agents"]

    def run() -> None:
        subprocess.run(command, check=True, capture_output=True)

    return timed(run, repeat)


def interpreter_start(repeat: int) -> list[float]:
    """Wall milliseconds of ``python -c pass``: the floor under ``agentkit agents``."""
    return timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), repeat)


def full_load(
    scratch: Path, messages: int, repeat: int
) -> tuple[list[float], list[float], list[float]]:
    """Milliseconds to load every message: ``FileConversationStore.messages`` (a new store,
    as in a new process; its messages are validated when first read), the same with every
    message read (all validated), and a plain ``json.load`` of the same ``history.json``."""
    root = scratch / f"load-{messages}"
    copy_agent(root, "innovator-001")
    build_conversation(root, "innovator-001", messages)
    key = ConversationKey("innovator-001", CONVERSATION)
    history = root / "agents" / "innovator-001" / "conversations" / CONVERSATION / "history.json"

    def store_load() -> None:
        assert len(FileConversationStore(root).messages(key)) == messages

    def store_load_all() -> None:
        loaded = FileConversationStore(root).messages(key)
        assert sum(1 for message in loaded if message.content) == messages

    def json_load() -> None:
        with open(history, "rb") as handle:
            assert len(json.load(handle)) == messages

    store_load_all()  # warm-up (validators are built once per process)
    return timed(store_load, repeat), timed(store_load_all, repeat), timed(json_load, repeat)


def run_fsync_child(root: Path, turns: int) -> None:
    """The child of :func:`fsyncs_per_turn`: open desk-001, one warm-up turn, *turns* turns."""
    script = {"plan": [json.loads(bench_peers.PLAN_REPLY)], "respond": [bench_peers.ANSWER]}
    with Agent.open("desk-001", data_dir=root, model=ScriptedModel(script)) as agent:
        for _ in range(turns + 1):
            result = agent.send(bench_peers.REQUEST, CONVERSATION)
            assert result.result.status == "completed", result.text


def _strace_fsyncs(root: Path, turns: int, output: Path) -> int:
    """fsync + fdatasync calls of a child running *turns* turns (every thread and process)."""
    command = [
        "strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(output),
        sys.executable, str(Path(__file__).resolve()),
        "--fsync-child", str(root), "--fsync-child-turns", str(turns),
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    calls = 0
    for line in output.read_text().splitlines():
        fields = line.split()
        if fields and fields[-1] in ("fsync", "fdatasync"):
            calls += int(fields[3])
    return calls


def fsyncs_per_turn(scratch: Path, prior_turns: int, turns: int) -> float | None:
    """fsync/fdatasync calls per planner turn, or None (with a note) without strace."""
    if shutil.which("strace") is None:
        print("  fsyncs per turn: skipped — strace is not installed (apt-get install strace)")
        return None
    root = scratch / "fsync"
    copy_agent(root, "desk-001", compression={"max_messages": 1_000_000})
    build_conversation(root, "desk-001", 2 * prior_turns)
    try:
        _strace_fsyncs(root, 0, scratch / "strace-first.txt")  # creates the databases
        base = _strace_fsyncs(root, 0, scratch / "strace-0.txt")
        total = _strace_fsyncs(root, turns, scratch / f"strace-{turns}.txt")
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"  fsyncs per turn: skipped — strace could not run the child ({error})")
        return None
    return (total - base) / turns


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


class PlanByLlama(ChatModel):
    """The embedded model for ``plan`` calls, scripted replies for the other stages: the plan
    call is measured inside a real planner turn without spending minutes on replans."""

    native_tools = False

    def __init__(self) -> None:
        from agentkit.models.llama import LlamaModel

        self.llama = LlamaModel()
        self.spec = "llama (plan) + scripted"
        self.others = ScriptedModel(
            {"replan": [{"action": "finish", "reason": "measured"}], "respond": ["ok"]}
        )

    def request(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        model = self.llama if request.purpose == "plan" else self.others
        return model.request(request)

    async def aclose(self) -> None:
        await self.llama.aclose()


def llama_plans(scratch: Path, turns: int) -> tuple[list[float], float, int]:
    """Plan-call latencies (ms), output tokens/s over those calls, how many returned (a call
    that failed or timed out is traced without latency and is left out)."""
    root = scratch / "llama"
    # the seed's stage timeouts are for a hosted model: scale them as desk-local-001 does,
    # else the 135M model's plan call times out on two shared cores and nothing is measured
    copy_agent(root, "desk-001", planner={"stage_timeout_scale": 6})
    requests = ["list my traders", "which model configs do I have?", "show my preferences"]
    with Agent.open("desk-001", data_dir=root, model=PlanByLlama()) as agent:
        conversation = agent.create_conversation("bench").conversation_id
        for index in range(turns):
            agent.send(requests[index % len(requests)], conversation)
    calls = [
        json.loads(line)
        for path in root.glob(f"agents/desk-001/conversations/{conversation}/*/calls.jsonl")
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    plans = [c for c in calls if c["purpose"] == "plan" and c["latency_ms"] > 0]
    tokens = sum(call["output_tokens"] for call in plans)
    seconds = sum(call["latency_ms"] for call in plans) / 1000
    return [c["latency_ms"] for c in plans], tokens / seconds if seconds else 0.0, len(plans)


# -- the run -------------------------------------------------------------------------------


def _median(rows: list[Row], system: str, metric: str, size: int) -> float | None:
    for found in rows:
        if found[:3] == (system, metric, size) and found[3]:
            return _summary(found[3])[0]
    return None


def _cell(rows: list[Row], system: str, metric: str, size: int) -> str:
    value = _median(rows, system, metric, size)
    if value is None:
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _ratio(rows: list[Row], system: str, size: int) -> str:
    theirs, ours = _median(rows, system, "turn", size), _median(rows, "agentkit", "turn", size)
    return "-" if theirs is None or not ours else f"{theirs / ours:.1f}x"


def _installed(module: str, name: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        print(f"{name} is not installed (make bench installs it): its columns stay empty")
        return False
    return True


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0912, PLR0915
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", default=",".join(map(str, TURN_SIZES)))
    parser.add_argument("--resume", default=",".join(map(str, RESUME_SIZES)))
    parser.add_argument("--full-load", type=int, default=FULL_LOAD_MESSAGES, help="0 skips it")
    parser.add_argument("--llama-turns", type=int, default=2, help="0 skips the embedded model")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--fsync-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--fsync-child-turns", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fsync_child is not None:
        run_fsync_child(args.fsync_child, args.fsync_child_turns)
        return 0
    turn_sizes = [int(s) for s in args.turns.split(",") if s]
    resume_sizes = [int(s) for s in args.resume.split(",") if s]
    machine = f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}"
    print(f"agentkit planner benchmark — Python {platform.python_version()}, {machine}")
    load_start = _load()
    print(f"load average (1, 5, 15 min) at the start: {load_start}")
    langgraph = _installed("langgraph", "langgraph")
    openai_agents = _installed("agents", "openai-agents")
    rows: list[Row] = []
    started = time.perf_counter()
    llama: tuple[list[float], float, int] | None = None
    fsyncs: float | None = None
    with tempfile.TemporaryDirectory(prefix="agentkit-bench-") as folder:
        scratch = Path(folder)
        for size in turn_sizes:
            rounds = 3 if size >= 10_000 else TURN_ROUNDS
            systems: dict[str, contextlib.AbstractContextManager[Callable[[], None]]] = {
                "agentkit": agentkit_turn(scratch, size),
                "agentkit-no-fsync": agentkit_turn(scratch, size, fsync=False),
                "agentkit-send": agentkit_turn(scratch, size, through_send=True),
                "naive": bench_peers.naive_turn(scratch, size),
            }
            if langgraph:
                systems["langgraph"] = bench_peers.langgraph_turn(scratch, size)
            if openai_agents:
                systems["openai-agents"] = bench_peers.openai_agents_turn(scratch, size)
            for system, samples in interleaved(systems, rounds).items():
                rows.append((system, "turn", size, samples))
                median = _summary(samples)[0]
                print(
                    f"  turn   {size:>6} prior turns  {system:<17} "
                    f"median {median:9.2f} ms  (n={len(samples)})",
                    flush=True,
                )
        fsyncs = fsyncs_per_turn(scratch, FSYNC_PRIOR_TURNS, FSYNC_TURNS)
        if fsyncs is not None:
            rows.append(("agentkit", "fsyncs_per_turn", FSYNC_PRIOR_TURNS, [fsyncs]))
            print(f"  fsyncs per turn ({FSYNC_PRIOR_TURNS} prior turns): {fsyncs:.2f}", flush=True)
        for size in resume_sizes:
            repeat = 3 if size >= 100_000 else 5
            systems = [("agentkit", agentkit_resume)]
            if langgraph:
                systems.append(("langgraph", bench_peers.langgraph_resume))
            if openai_agents:
                systems.append(("openai-agents", bench_peers.openai_agents_resume))
            for system, measure in systems:
                samples = measure(scratch, size, repeat)
                rows.append((system, "resume", size, samples))
                median = _summary(samples)[0]
                print(
                    f"  resume {size:>6} messages     {system:<13} "
                    f"median {median:9.1f} ms  (n={repeat})",
                    flush=True,
                )
        if args.full_load > 0:
            store_samples, all_samples, json_samples = full_load(scratch, args.full_load, 5)
            rows.append(("agentkit", "full_load", args.full_load, store_samples))
            rows.append(("agentkit-read-all", "full_load", args.full_load, all_samples))
            rows.append(("json.load", "full_load", args.full_load, json_samples))
        rows.append(("agentkit", "import", 0, import_time(5)))
        rows.append(("agentkit", "cli_agents", 0, cli_agents_time(scratch, 5)))
        rows.append(("python", "interpreter_start", 0, interpreter_start(5)))
        if args.llama_turns > 0:
            llama = llama_plans(scratch, args.llama_turns)
            rows.append(("agentkit-llama", "plan_call", 0, llama[0]))
    load_end = _load()

    labels = {
        "agentkit": "agentkit planner (file store)",
        "agentkit-no-fsync": "  of which not the disk (no fsync)",
        "agentkit-send": "  through Agent.send (sync)",
        "langgraph": "langgraph + SqliteSaver",
        "openai-agents": "openai-agents SQLiteSession",
        "naive": "naive history.json rewrite",
    }
    print("\nper-turn overhead, zero-latency model (median ms)")
    print(f"{'prior turns':<32}" + "".join(f"{size:>10}" for size in turn_sizes))
    for system in ("agentkit", "agentkit-no-fsync", "agentkit-send", "langgraph",
                   "openai-agents", "naive"):  # fmt: skip
        cells = "".join(f"{_cell(rows, system, 'turn', size):>10}" for size in turn_sizes)
        print(f"{labels[system]:<32}{cells}")
    for system in ("langgraph", "openai-agents", "naive"):
        cells = "".join(f"{_ratio(rows, system, size):>10}" for size in turn_sizes)
        print(f"{'  ' + system + ' ÷ agentkit':<32}{cells}")
    if fsyncs is None:
        print("\nfsyncs per planner turn: not measured (strace is not installed)")
    else:
        print(
            f"\nfsyncs per planner turn (no side-effecting tool, {FSYNC_PRIOR_TURNS} prior "
            f"turns, strace over {FSYNC_TURNS} turns): {fsyncs:.2f}"
        )
    print("\nresume: first turn in a new process (median ms)")
    print(f"{'messages':<32}" + "".join(f"{size:>10}" for size in resume_sizes))
    resume_labels = {"agentkit": "agentkit chat, scenario C"} | {
        system: labels[system] for system in ("langgraph", "openai-agents")
    }
    for system, label in resume_labels.items():
        cells = "".join(f"{_cell(rows, system, 'resume', size):>10}" for size in resume_sizes)
        print(f"{label:<32}{cells}")
    if args.full_load > 0:
        ours = _cell(rows, "agentkit", "full_load", args.full_load)
        plain = _cell(rows, "json.load", "full_load", args.full_load)
        every = _cell(rows, "agentkit-read-all", "full_load", args.full_load)
        print(
            f"\nfull load of {args.full_load:,} messages (median of 5): "
            f"FileConversationStore.messages {ours} ms (and every message read: {every} ms), "
            f"json.load of history.json {plain} ms"
        )
    print(f"import agentkit: {_cell(rows, 'agentkit', 'import', 0)} ms (median of 5)")
    print(
        f"agentkit agents: {_cell(rows, 'agentkit', 'cli_agents', 0)} ms wall (median of 5; "
        f"python -c pass: {_cell(rows, 'python', 'interpreter_start', 0)} ms)"
    )
    if llama is not None:
        plans, rate, _ = llama
        per_plan = f"{statistics.median(plans):.0f} ms per plan" if plans else "no plan call"
        print(
            f"embedded model, planner plan call: {per_plan} (n={len(plans)}), "
            f"{rate:.1f} output tokens/s"
        )
    print(f"load average (1, 5, 15 min): {load_start} at the start, {load_end} at the end")
    print(f"total {time.perf_counter() - started:.0f} s")

    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    rows.append(("machine", "load_avg_1min", 0, [float(load_start.split(",")[0])]))
    rows.append(("machine", "load_avg_1min", 1, [float(load_end.split(",")[0])]))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    new_file = not args.results.exists()
    with open(args.results, "a", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        if new_file:
            writer.writerow(["timestamp", "system", "metric", "size", "median_ms", "p90_ms", "n"])
        for system, metric, size, samples in rows:
            median, p90 = _summary(samples) if samples else (float("nan"), float("nan"))
            writer.writerow(
                [stamp, system, metric, size, f"{median:.3f}", f"{p90:.3f}", len(samples)]
            )
        if llama is not None:
            writer.writerow(
                [stamp, "agentkit-llama", "tokens_per_s", 0, f"{llama[1]:.3f}", "", llama[2]]
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
