"""Benchmark of FileConversationStore at 100 … 100 000 messages (figures, not pass/fail).

For each size it builds a conversation fast (the journal written directly, then ``recover()``
builds the views, instead of 100 000 fsynced appends), then measures:

* ``append``        one fsynced ``store.append`` (median / p90 over 50 appends);
* ``recent20``      ``store.recent(key, 20)``: the last 20 messages, read backwards;
* ``messages``      ``store.messages(key)``: the whole history, every record validated;
* ``recover``       rebuilding every view from the journal (``meta.json`` missing), once;
* ``naive_rewrite`` for comparison, what an append costs when the whole ``history.json`` is
  rewritten (``json.dump`` of the list + fsync), as the seed's layout invites;
* ``naive_load``    for comparison, ``json.load`` of ``history.json``;
* ``turn``          the store's part of one planner turn (:func:`store_turn`: the lease, the
  question with ``running`` durably, the reads a turn makes, three notes, a trace of two
  lines, the answer with its status and checkpoint durably): two fsyncs;
* ``turn_cpu``      the same turn with ``os.fsync`` made a no-op: the store's own code and
  the other system calls, which is what the code can change (fsync before acknowledging
  stays: the durability points are the same two).

Run ``python bench/bench_store.py`` (``make bench``); ``--sizes 100,1000`` for a quick run;
``--profile`` prints where ``turn_cpu``'s time goes (cProfile, top frames by own time).
Prints a table and appends rows ``timestamp,size,metric,median_ms,p90_ms`` to
``bench/results/store.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agentkit.store import ConversationKey, FileConversationStore, TurnCheckpoint
from agentkit.store._journal import encode_frame
from agentkit.store._records import CreatedRecord, JournalRecord, MessageRecord, encode_record, fold
from agentkit.types import Message, ToolCallRecord, utc_now

RESULTS = Path(__file__).resolve().parent / "results" / "store.csv"
SIZES = (100, 1_000, 10_000, 100_000)
KEY = ConversationKey("bench-agent", "conv-bench")
_START = datetime(2026, 1, 1, tzinfo=UTC)
_WORDS = (
    "plan",
    "tool",
    "search",
    "result",
    "answer",
    "the",
    "a",
    "of",
    "to",
    "Lyon",
    "train",
    "hotel",
    "museum",
    "é",
    "✓",
)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _message(index: int, rng: random.Random) -> Message:
    """Turn ``index // 2``: a user message, then the assistant reply sharing its id."""
    turn = f"msg-{index // 2:07d}"
    at = _START + timedelta(seconds=index)
    if index % 2 == 0:
        return Message(role="user", content=_text(rng, 20), message_id=turn, timestamp=at)
    calls = (ToolCallRecord(id=f"c{index}", name="search", arguments={"q": "x"}),)
    return Message(
        role="assistant",
        content=_text(rng, 60),
        message_id=turn,
        timestamp=at,
        tool_calls=calls if index % 6 == 1 else (),
    )


def build(root: Path, size: int) -> float:
    """Write a journal of *size* messages and its turn logs; time ``recover()`` doing the rest."""
    rng = random.Random(size)
    records: list[JournalRecord] = [
        CreatedRecord(
            seq=1,
            conversation_id=KEY.conversation_id,
            agent_id=KEY.agent_id,
            title=f"{size} messages",
            at=_START,
        )
    ]
    records += [MessageRecord(seq=i + 2, message=_message(i, rng)) for i in range(size)]
    directory = root / "agents" / KEY.agent_id / "conversations" / KEY.conversation_id
    directory.mkdir(parents=True)
    with open(directory / "journal.log", "wb") as journal:
        journal.writelines(encode_frame(encode_record(record)) for record in records)
        journal.flush()
        os.fsync(journal.fileno())
    # The turn logs too, so that recover() compares them instead of writing 50 000 files
    # one fsync at a time (it still reads every one of them).
    views = fold(records)
    for message_id in views.turns:
        (directory / message_id).mkdir()
        log = directory / message_id / "messages.log"
        log.write_text(views.turn_log(message_id), encoding="utf-8")
    started = time.perf_counter()
    assert FileConversationStore(root).recover() == [KEY]
    return (time.perf_counter() - started) * 1000


def _times(action: Callable[[], object], repeat: int) -> list[float]:
    found = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        found.append((time.perf_counter() - started) * 1000)
    return found


def _summary(samples: list[float]) -> tuple[float, float]:
    if len(samples) == 1:
        return samples[0], samples[0]
    return statistics.median(samples), statistics.quantiles(samples, n=10, method="inclusive")[-1]


def _naive_rewrite(path: Path, entries: list[dict[str, object]]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(entries, handle, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())


def store_turn(store: FileConversationStore, index: int) -> None:
    """What a planner turn asks of the store (see the module docstring)."""
    question = Message.user(f"question {index} " * 10)
    turn = question.message_id
    with store.hold(KEY, timeout=0):
        store.append(KEY, question, status="running")
        store.recent(KEY, 42)
        store.records(KEY)
        store.last_checkpoint(KEY)
        for label in ("SESSION", "PLAN", "STEP"):
            store.annotate(KEY, turn, label, "some text " * 8)
        sink = store.open_call_records(KEY, turn)
        sink.append('{"purpose":"plan","ms":1.0}')
        sink.append('{"purpose":"answer","ms":1.0}')
        sink.close()
        checkpoint = TurnCheckpoint(
            message_id=turn,
            messages=0,
            status="idle",
            at=utc_now(),
            execution_state={"goal": "g", "steps": [{"id": "s1"}]},
            execution_state_version=index + 1,
        )
        answer = Message.assistant("answer " * 20, message_id=turn)
        store.append(KEY, answer, status="completed", checkpoint=checkpoint)


def _without_fsync(action: Callable[[], object]) -> Callable[[], object]:
    def bare() -> object:
        real = os.fsync
        os.fsync = lambda fd: None
        try:
            return action()
        finally:
            os.fsync = real

    return bare


def measure(size: int, scratch: Path) -> list[tuple[str, float, float, int]]:
    root = scratch / f"size-{size}"
    rows: list[tuple[str, float, float, int]] = []
    recover_ms = build(root, size)
    rows.append(("recover", recover_ms, recover_ms, 1))
    store = FileConversationStore(root)
    slow = 5 if size >= 100_000 else 10 if size >= 10_000 else 20

    rng = random.Random(-size)
    fresh = iter([_message(size + i, rng) for i in range(50)])
    samples = _times(lambda: store.append(KEY, next(fresh)), 50)
    rows.append(("append", *_summary(samples), len(samples)))

    turns = iter(range(10**6))
    samples = _times(lambda: store_turn(store, next(turns)), 50)
    rows.append(("turn", *_summary(samples), len(samples)))
    samples = _times(_without_fsync(lambda: store_turn(store, next(turns))), 100)
    rows.append(("turn_cpu", *_summary(samples), len(samples)))

    assert len(store.recent(KEY, 20)) == 20
    samples = _times(lambda: store.recent(KEY, 20), 50)
    rows.append(("recent20", *_summary(samples), len(samples)))

    assert len(store.messages(KEY)) == size + 50 + 2 * 150
    samples = _times(lambda: store.messages(KEY), slow)
    rows.append(("messages", *_summary(samples), len(samples)))

    history = root / "agents" / KEY.agent_id / "conversations" / KEY.conversation_id
    history /= "history.json"
    samples = _times(lambda: json.loads(history.read_bytes()), slow)
    rows.append(("naive_load", *_summary(samples), len(samples)))

    entries = json.loads(history.read_bytes())
    naive = scratch / f"naive-{size}.json"
    samples = _times(lambda: _naive_rewrite(naive, entries), 50 if size < 10_000 else slow)
    rows.append(("naive_rewrite", *_summary(samples), len(samples)))
    return rows


def profile_turn(turns: int = 1000) -> int:
    """cProfile of :func:`store_turn` without fsync, after 100 turns: the top frames."""
    import cProfile
    import pstats

    with tempfile.TemporaryDirectory(prefix="agentkit-bench-") as folder:
        store = FileConversationStore(folder)
        store.create(KEY, "profile")
        for index in range(100):
            store_turn(store, index)
        profiler = cProfile.Profile()
        run = _without_fsync(lambda: [store_turn(store, i) for i in range(100, 100 + turns)])
        profiler.enable()
        run()
        profiler.disable()
    stats = pstats.Stats(profiler)
    calls = sum(row[1] for row in stats.stats.values())  # type: ignore[attr-defined]
    print(f"{turns} store turns (no fsync): {calls / turns:.0f} Python calls per turn")
    stats.sort_stats("tottime").print_stats(20)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated sizes")
    parser.add_argument("--results", type=Path, default=RESULTS, help="CSV file to append to")
    parser.add_argument("--profile", action="store_true", help="where turn_cpu's time goes")
    args = parser.parse_args(argv)
    if args.profile:
        return profile_turn()
    sizes = [int(s) for s in args.sizes.split(",")]
    machine = f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}"
    print(f"agentkit store benchmark — Python {platform.python_version()}, {machine}")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    table: list[tuple[int, str, float, float, int]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="agentkit-bench-") as folder:
        for size in sizes:
            for metric, median, p90, runs in measure(size, Path(folder)):
                table.append((size, metric, median, p90, runs))
                figures = f"median {median:10.3f} ms   p90 {p90:10.3f} ms   (n={runs})"
                print(f"  {size:>7} {metric:<14} {figures}", flush=True)

    print(f"\n{'metric':<14}" + "".join(f"{s:>12}" for s in sizes) + "   (median ms)")
    for metric in dict.fromkeys(row[1] for row in table):
        cells = {row[0]: row[2] for row in table if row[1] == metric}
        print(f"{metric:<14}" + "".join(f"{cells[s]:>12.3f}" for s in sizes))
    print(f"total {time.perf_counter() - started:.0f} s")

    args.results.parent.mkdir(parents=True, exist_ok=True)
    new_file = not args.results.exists()
    with open(args.results, "a", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        if new_file:
            writer.writerow(["timestamp", "size", "metric", "median_ms", "p90_ms"])
        for size, metric, median, p90, _ in table:
            writer.writerow([stamp, size, metric, f"{median:.3f}", f"{p90:.3f}"])
    print(f"appended {len(table)} rows to {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
