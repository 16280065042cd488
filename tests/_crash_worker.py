"""The writer the SIGKILL tests kill: appends turns to one conversation until it is killed.

Used two ways by tests/test_store_crash.py:

* imported (by file path) and run in a forked child: ``writer_loop(root, agent, conv, round, fd)``;
* run as a fresh interpreter: ``python tests/_crash_worker.py ROOT AGENT CONV ROUND`` (ACKs on
  stdout).

Protocol: after ``store.append`` *returned*, the writer writes ``ACK <role> <messageId>\\n`` to
*fd* in one ``os.write`` (atomic on a pipe). Everything it writes is a deterministic function of
``(round, turn)`` (see :func:`planned`), so the parent knows exactly which message was in flight
when the kill landed.

Each turn is: the user message (a new turn folder), an annotation of the turn, the assistant
reply (same message id, with a tool call every third turn), and every fourth turn a status
change. In every tenth round the second user message is large (70 KB), so a kill can land
inside one big ``write``.
"""

from __future__ import annotations

import os
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agentkit.store import ConversationKey, FileConversationStore
from agentkit.types import Message, ToolCallRecord

BIG_EVERY = 10
BIG_SIZE = 70_000
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def turn_id(round_no: int, turn: int) -> str:
    return f"r{round_no}-t{turn}"


def _content(round_no: int, turn: int, role: str) -> str:
    rng = random.Random(f"{round_no}/{turn}/{role}")
    big = role == "user" and turn == 1 and round_no % BIG_EVERY == 0
    size = BIG_SIZE if big else rng.randint(0, 400)
    filler = "".join(rng.choice('abc é✓\n"\\{}') for _ in range(min(size, 400)))
    filler = (filler * (size // max(len(filler), 1) + 1))[:size] if filler else ""
    return f"{role} {round_no}.{turn}: {filler}"


def turn_messages(round_no: int, turn: int) -> tuple[Message, Message]:
    """The user message and the assistant reply of one turn of the writer of *round_no*."""
    tid = turn_id(round_no, turn)
    at = _EPOCH + timedelta(seconds=round_no * 1000 + turn)
    user = Message(
        role="user", content=_content(round_no, turn, "user"), message_id=tid, timestamp=at
    )
    calls = (ToolCallRecord(id=f"call-{tid}", name="search", arguments={"q": tid}),)
    reply = Message(
        role="assistant",
        content=_content(round_no, turn, "assistant"),
        message_id=tid,
        timestamp=at + timedelta(milliseconds=500),
        tool_calls=calls if turn % 3 == 0 else (),
    )
    return user, reply


def planned(round_no: int, count: int) -> list[Message]:
    """The first *count* messages the writer of *round_no* appends, in order."""
    messages: list[Message] = []
    for turn in range((count + 1) // 2):
        messages.extend(turn_messages(round_no, turn))
    return messages[:count]


def writer_loop(root: str, agent: str, conv: str, round_no: int, fd: int) -> None:
    """Append turns until killed (or until 10 000 turns)."""
    store = FileConversationStore(root, lock_timeout=30)
    key = ConversationKey(agent, conv)
    for turn in range(10_000):
        user, reply = turn_messages(round_no, turn)
        store.append(key, user)
        os.write(fd, f"ACK user {user.message_id}\n".encode())
        store.annotate(key, user.message_id, "SCENARIO", f"round {round_no} turn {turn}")
        store.append(key, reply)
        os.write(fd, f"ACK assistant {reply.message_id}\n".encode())
        if turn % 4 == 3:
            store.set_status(key, "running" if turn % 8 == 3 else "idle")


def main(argv: list[str]) -> int:
    root, agent, conv, round_no = argv
    writer_loop(str(Path(root)), agent, conv, int(round_no), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
