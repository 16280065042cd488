"""N replicas on one PostgreSQL: real ``agentkit serve --store postgresql://…`` processes.

What test_postgres_agents.py shows with in-process servers, here with separate processes on
two loopback ports (each its own pools, listener, session pool): a conversation continued on
the other replica is scenario C and its session event says why; a busy conversation is 409
from the other replica and its turns never interleave; a stream resumed on the other replica
after ``Last-Event-ID``; a cancel sent there; 20 clients on 20 conversations over both;
replicas killed with SIGKILL at random moments while a driver keeps sending turns (nothing
acknowledged is lost); a PostgreSQL restart under load (503 at once, never a hang, and the
replicas recover by themselves). Without a server: a live session that missed another
process's turns is not used (on either store), and a paused turn whose lock was taken over
cannot write its reply (stale epoch). The model is the kit's FunctionModel, by import path.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentkit import Agent, FunctionModel, testing

from tests._postgres import (  # noqa: F401
    PostgresServer,
    fresh_url,
    postgres_server,
    postgres_url,
)
from tests._processes import listening
from tests.conftest import REPO, SAMPLE_AGENTS, run_cli
from tests.fakes.gated_model import Gate
from tests.fakes.live_api import SseEvent, free_port, iter_events, parse_sse

pytest.importorskip("psycopg")

import psycopg
from agentkit.store import ConversationKey, StaleWriterError
from agentkit.store.postgres import PostgresConversationStore

pytestmark = pytest.mark.postgres

AGENT = "innovator-001"
CHAT = f"/api/agent/{AGENT}/chat"
CONVERSATIONS = f"/api/agent/{AGENT}/conversations"
MODEL = "function:replica_model:reply"
MODEL_MODULE = '''
"""The replicas' model: echoes the message; "hang" streams dots until cancelled."""

import asyncio


async def reply(request):
    text = request.prompt
    if text.startswith("hang"):
        while True:  # only a cancel ends it (however long the machine takes to send one)
            yield "."
            await asyncio.sleep(0.01)
    pause = 0.05 if text.startswith("slow") else 0.002
    for piece in ("echo", ": ", text):
        yield piece
        await asyncio.sleep(pause)
'''


def echo(text: str) -> str:
    return f"echo: {text}"


def wait_for(condition: Any) -> None:
    """Poll until *condition* holds; bounded by the suite's per-test timeout, never by a clock
    in the test."""
    while not condition():
        time.sleep(0.01)


class Replica:
    """``agentkit serve --store URL`` in its own process, on its own port (kept across a
    restart); its log in a file (a pipe nobody reads would fill up and stall it)."""

    def __init__(self, root: Path, url: str, models: Path, name: str) -> None:
        self.root, self.url, self.models, self.name = root, url, models, name
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log = root.parent / f"{name}.log"
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        agentkit = str(Path(sys.executable).with_name("agentkit"))
        path = os.pathsep.join(filter(None, [str(self.models), os.environ.get("PYTHONPATH")]))
        command = [agentkit, "--data-dir", str(self.root), "serve", "--port", str(self.port),
                   "--store", self.url, "--model", MODEL]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTKIT_")}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command,
                env={**env, "PYTHONPATH": path},
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=REPO,
            )
        self.starts += 1
        wait_for(self.healthy)

    def healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"replica {self.name} exited:\n{self.log.read_text()[-3000:]}")
        if not listening(self.process.pid, self.port):  # not ours yet, whoever answers there
            return False
        try:
            return httpx.get(f"{self.base_url}/api/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        """kill -9: no shutdown, no goodbye to PostgreSQL."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class Pair:
    """Two replicas on one schema, shared by this module's tests (each on conversations of
    its own): starting two servers costs seconds."""

    replicas: list[Replica]
    data_dir: Path
    url: str


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory,
    postgres_server: PostgresServer,  # noqa: F811
) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp("replicas")
    data_dir = testing.data_root(base / "data", source=SAMPLE_AGENTS.parent)
    folder = base / "models"
    folder.mkdir()
    (folder / "replica_model.py").write_text(textwrap.dedent(MODEL_MODULE), encoding="utf-8")
    url = fresh_url(postgres_server)
    started: list[Replica] = []
    try:
        for name in ("a", "b"):
            started.append(Replica(data_dir, url, folder, name))
        yield Pair(started, data_dir, url)
    finally:
        for replica in started:
            replica.stop()


@pytest.fixture
def replicas(pair: Pair) -> list[Replica]:
    for replica in pair.replicas:  # (a test may have left one killed)
        if replica.process is None or replica.process.poll() is not None:
            replica.start()
    return pair.replicas


def client(replica: Replica, timeout: float = 60) -> httpx.Client:
    return httpx.Client(base_url=replica.base_url, timeout=timeout)


def create(http: httpx.Client, title: str = "t") -> str:
    response = http.post(CONVERSATIONS, json={"title": title})
    assert response.status_code == 201, response.text
    return str(response.json()["conversationId"])


def turn(http: httpx.Client, conversation: str, text: str) -> list[SseEvent]:
    response = http.post(CHAT, json={"message": text, "conversationId": conversation})
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def history(http: httpx.Client, conversation: str) -> list[dict[str, Any]]:
    response = http.get(f"{CONVERSATIONS}/{conversation}")
    assert response.status_code == 200, response.text
    return list(response.json()["messages"])


def contents(http: httpx.Client, conversation: str) -> list[str]:
    return [m["content"] for m in history(http, conversation)]


def verify_clean(data_dir: Path, url: str) -> str:
    verified = run_cli("--data-dir", str(data_dir), "verify", "--store", url)
    assert verified.exit_code == 0, verified.stdout + verified.stderr
    assert ", 0 problems" in verified.stdout
    return verified.stdout


# ------------------------------------------------------------------ live sessions


@pytest.mark.parametrize("store", ["files", "postgres"])
def test_a_live_session_that_missed_turns_made_by_another_process_is_not_used(
    data_dir: Path, store: str, request: pytest.FixtureRequest
) -> None:
    """Two processes' agents (each its own session pool) on one store, without a server in
    front: the live session of the first missed the second's turn, so its next turn is C.
    (The file store too: ``agentkit chat`` and ``agentkit serve`` on one data root.)"""
    spec = request.getfixturevalue("postgres_url") if store == "postgres" else None
    model = FunctionModel(lambda request: echo(request.prompt))
    with (
        Agent.open(AGENT, data_dir=data_dir, store=spec, model=model) as here,
        Agent.open(AGENT, data_dir=data_dir, store=spec, model=model) as there,
    ):
        first = here.send("one")
        conversation = first.conversation_id
        assert first.session.scenario == "A"
        assert here.send("two", conversation).session.scenario == "B"  # nothing elsewhere
        elsewhere = there.send("three", conversation)
        assert elsewhere.session.scenario == "C"  # no live session in that process
        assert "missed" not in elsewhere.session.injected
        back = here.send("four", conversation)
        assert back.session.scenario == "C"
        assert back.session.injected == (
            "system prompt + summary of the last 6 messages"
            " (the live session here missed 2 messages written elsewhere)"
        )
        # the restored session was told the turn it missed
        assert "three" in model.requests[-1].system
        assert here.send("five", conversation).session.scenario == "B"
        log = here.store.turn_log(ConversationKey(AGENT, conversation), back.result.message_id)
        assert "missed 2 messages written elsewhere" in log


def test_twenty_clients_on_twenty_conversations_spread_over_two_replicas(
    replicas: list[Replica], pair: Pair
) -> None:
    """Each client creates its conversation on one replica and goes back and forth: the first
    turn on the other replica is C (no live session there), the next one back is C as well
    (the live session there missed a turn), the one after is B; histories exact."""
    a, b = replicas
    clients = 20
    start = threading.Barrier(clients)
    outcome: dict[int, Any] = {}

    def run(index: int) -> None:
        home, away = (a, b) if index % 2 == 0 else (b, a)
        with client(home) as here, client(away) as there:
            start.wait(60)
            conversation = create(here, f"client {index}")
            sessions = []
            for number, http in enumerate((here, there, here, here), 1):
                events = turn(http, conversation, f"client {index} turn {number}")
                assert events[-1].event == "result", events
                assert events[-1].data["status"] == "completed"
                assert events[-1].data["text"] == echo(f"client {index} turn {number}")
                sessions.append(events[0].data)
            outcome[index] = (conversation, sessions, contents(there, conversation))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcome) == list(range(clients)), "a client failed (see its traceback above)"
    for index, (_conversation, sessions, texts) in outcome.items():
        assert [s["scenario"] for s in sessions] == ["A", "C", "C", "B"]
        assert "missed" not in sessions[1]["injected"]
        assert "missed 2 messages written elsewhere" in sessions[2]["injected"]
        expected = []
        for number in range(1, 5):
            expected += [f"client {index} turn {number}", echo(f"client {index} turn {number}")]
        assert texts == expected
    assert len({conversation for conversation, _, _ in outcome.values()}) == clients
    verify_clean(pair.data_dir, pair.url)


# ------------------------------------------------------------------ one writer, any replica


def test_one_turn_at_a_time_on_a_conversation_from_both_replicas(
    replicas: list[Replica],
) -> None:
    """Turns on one conversation sent to both replicas at the same moment: each round one
    or both run, never both at once (a 409 otherwise, with nothing written), and the
    history is whole turns, question then answer, never interleaved."""
    a, b = replicas
    with client(a) as ca, client(b) as cb:
        conversation = create(ca)
        accepted: list[str] = []
        refused = 0
        for round_ in range(12):
            go = threading.Barrier(2)
            answers: dict[str, httpx.Response] = {}

            def send(
                name: str,
                http: httpx.Client,
                round_: int = round_,
                go: threading.Barrier = go,
                answers: dict[str, httpx.Response] = answers,
            ) -> None:
                go.wait(30)
                text = f"slow {round_} via {name}"
                answers[text] = http.post(
                    CHAT, json={"message": text, "conversationId": conversation}
                )

            threads = [
                threading.Thread(target=send, args=("a", ca)),
                threading.Thread(target=send, args=("b", cb)),
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for text, response in sorted(answers.items()):
                if response.status_code == 409:
                    assert response.json()["error"]["code"] == "conversation_busy"
                    refused += 1
                    continue
                assert response.status_code == 200, response.text
                assert parse_sse(response.text)[-1].data["status"] == "completed"
                accepted.append(text)
            assert any(r.status_code == 200 for r in answers.values())
        assert refused > 0  # the rounds did overlap (each turn streams for 150 ms)
        messages = history(cb, conversation)
        assert len(messages) == 2 * len(accepted)
        for question, answer in zip(messages[::2], messages[1::2], strict=True):
            assert (question["role"], answer["role"]) == ("user", "assistant")
            assert question["messageId"] == answer["messageId"]
            assert answer["content"] == echo(question["content"])
        assert sorted(m["content"] for m in messages[::2]) == sorted(accepted)


def test_a_turn_on_one_replica_is_refused_followed_and_cancelled_from_the_other(
    replicas: list[Replica],
) -> None:
    """A turn streams on A; B refuses a second turn (409), resumes the turn's stream after a
    ``Last-Event-ID`` (the same ids and events as A's own stream) and cancels it."""
    a, b = replicas
    with client(a) as ca, client(b) as cb:
        conversation = create(ca)
        streamed: list[SseEvent] = []
        opened = threading.Event()

        def run() -> None:
            body = {"message": "hang on", "conversationId": conversation}
            with ca.stream("POST", CHAT, json=body) as response:
                assert response.status_code == 200
                for event in iter_events(response):
                    streamed.append(event)
                    if len(streamed) >= 4:
                        opened.set()

        thread = threading.Thread(target=run)
        thread.start()
        try:
            assert opened.wait(60)
            message_id = streamed[0].data["messageId"]
            busy = cb.post(CHAT, json={"message": "meanwhile", "conversationId": conversation})
            assert busy.status_code == 409, busy.text
            assert busy.json()["error"]["code"] == "conversation_busy"
            path = f"{CONVERSATIONS}/{conversation}/turns/{message_id}/events"
            followed: list[SseEvent] = []
            with cb.stream("GET", path, headers={"Last-Event-ID": f"{message_id}:2"}) as response:
                assert response.status_code == 200
                for event in iter_events(response):
                    followed.append(event)
                    if len(followed) == 3:  # the turn is live: B tails it, then stops it
                        cancel = cb.post(f"{CONVERSATIONS}/{conversation}/cancel").json()
                        assert cancel["cancelled"] is True, cancel
                        assert "another replica" in cancel["message"]
        finally:
            thread.join(60)
        assert not thread.is_alive()
        assert followed[0].id == f"{message_id}:3"
        assert [int(e.id.rsplit(":", 1)[1]) for e in followed] == list(range(3, 3 + len(followed)))
        assert followed[-1].event == "result"
        assert followed[-1].data["status"] == "cancelled"
        by_id = {e.id: (e.event, e.data) for e in streamed}
        assert all(by_id[e.id] == (e.event, e.data) for e in followed)  # the same events
        assert streamed[-1].id == followed[-1].id
        texts = contents(cb, conversation)
        assert texts[0] == "hang on" and set(texts[1]) == {"."}  # the partial reply, kept
        assert "meanwhile" not in texts


# ------------------------------------------------------------------ kill -9, at random


@dataclass
class Ledger:
    """What the driver sent and what the replicas acknowledged, per conversation."""

    sent: dict[str, list[str]] = field(default_factory=dict)
    #: user messages acknowledged (their session event came): text → messageId
    acked: dict[str, dict[str, str]] = field(default_factory=dict)
    #: turns acknowledged whole (their result came, completed): messageId → reply
    completed: dict[str, str] = field(default_factory=dict)
    guard: threading.Lock = field(default_factory=threading.Lock)

    @property
    def acknowledged(self) -> int:
        with self.guard:
            return sum(len(texts) for texts in self.acked.values())


def drive(http: httpx.Client, conversation: str, text: str, ledger: Ledger) -> str:
    """Send one turn; record what was acknowledged; how it ended (completed, busy, lost…)."""
    with ledger.guard:
        ledger.sent.setdefault(conversation, []).append(text)
    body = {"message": text, "conversationId": conversation}
    try:
        with http.stream("POST", CHAT, json=body) as response:
            if response.status_code != 200:
                response.read()
                return str(response.status_code)
            for event in iter_events(response):
                if event.event == "session":
                    with ledger.guard:
                        ledger.acked.setdefault(conversation, {})[text] = event.data["messageId"]
                elif event.event == "result" and event.data["status"] == "completed":
                    with ledger.guard:
                        ledger.completed[event.data["messageId"]] = event.data["text"]
                    return "completed"
            return "ended"
    except httpx.TransportError:  # the replica died under the request, or is down
        return "lost"


def test_replicas_killed_at_random_moments_lose_nothing_acknowledged(
    replicas: list[Replica], pair: Pair
) -> None:
    """Six clients keep sending turns to both replicas, each on its own two conversations,
    while a seeded killer sends SIGKILL to a replica at random moments and restarts it. Over
    ≥ 200 acknowledged turns: every acknowledged message is stored once, in order, every
    acknowledged reply too, nothing is stored that was not sent, verify is clean."""
    rng = random.Random(26)
    ledger = Ledger()
    target = 200
    with client(replicas[0]) as setup:
        conversations = [create(setup, f"chaos {i}") for i in range(12)]
    stop = threading.Event()
    outcomes: list[str] = []

    def worker(index: int) -> None:
        mine = conversations[index::6]
        choose = random.Random(rng.random())
        https = [client(r, timeout=30) for r in replicas]
        try:
            number = 0
            while not stop.is_set():
                number += 1
                conversation = mine[number % len(mine)]
                http = choose.choice(https)
                outcome = drive(http, conversation, f"w{index} n{number}", ledger)
                outcomes.append(outcome)
                if outcome == "lost":  # that replica is down: do not spin
                    time.sleep(0.05)
        finally:
            for http in https:
                http.close()

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for thread in workers:
        thread.start()
    kills = 0
    try:
        while ledger.acknowledged < target or kills < 6:
            time.sleep(rng.uniform(0.05, 0.6))  # a random moment (the seed fixes the sequence)
            victim = rng.choice(replicas)
            victim.kill()
            kills += 1
            victim.start()
    finally:
        stop.set()
        for thread in workers:
            thread.join(120)
    assert not any(thread.is_alive() for thread in workers)
    assert ledger.acknowledged >= target
    assert "lost" in outcomes and "completed" in outcomes  # kills did land mid-request

    with client(replicas[1]) as http:  # one more turn each: finds interrupted turns unowned
        for conversation in conversations:
            assert drive(http, conversation, "after", ledger) == "completed"
        with PostgresConversationStore(pair.url) as store:
            for conversation in conversations:
                messages = list(store.messages(ConversationKey(AGENT, conversation)))
                questions = [m for m in messages if m.role == "user"]
                texts = [m.content for m in questions]
                assert len(texts) == len(set(texts)), "a message was stored twice"
                sent = ledger.sent[conversation]
                assert set(texts) <= set(sent), "a message was stored that was never sent"
                assert texts == sorted(texts, key=sent.index)  # in the order sent
                ids = {m.content: m.message_id for m in questions}
                for text, message_id in ledger.acked.get(conversation, {}).items():
                    assert ids.get(text) == message_id, f"acknowledged {text!r} was lost"
                answers = {m.message_id: m.content for m in messages if m.role == "assistant"}
                for message_id in ids.values():
                    if message_id in ledger.completed:
                        assert answers[message_id] == ledger.completed[message_id]
                meta = store.meta(ConversationKey(AGENT, conversation))
                assert meta.status == "completed"
                assert meta.stats.message_count == len(messages)
    verify_clean(pair.data_dir, pair.url)


# ------------------------------------------------------------------ a stale writer, end to end


def _lock_holders(url: str) -> list[int]:
    """The backends holding an advisory lock (the writer locks) now."""
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
        ).fetchall()
    return [int(pid) for (pid,) in rows]


def test_a_paused_turn_whose_lock_was_taken_cannot_write_its_reply(
    data_dir: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    """A turn is paused in its model call; its lock's session is ended (a network cut);
    another process takes the conversation and runs a turn; the paused turn goes on and its
    reply is refused (stale epoch): only the other's turn follows its question."""
    gate = Gate()
    with (
        Agent.open(AGENT, data_dir=data_dir, store=postgres_url, model=gate.model) as paused,
        Agent.open(
            AGENT,
            data_dir=data_dir,
            store=postgres_url,
            model=FunctionModel(lambda request: echo(request.prompt)),
        ) as other,
    ):
        conversation = paused.create_conversation("stale").conversation_id
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append(paused.send("the paused turn", conversation))
            except Exception as error:
                outcome.append(error)

        thread = threading.Thread(target=run)
        thread.start()
        try:
            assert gate.parked.wait(30)
            (holder,) = _lock_holders(postgres_url)
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (holder,))
            wait_for(lambda: holder not in _lock_holders(postgres_url))
            took = other.send("the other process's turn", conversation)
            assert took.result.status == "completed"
            assert took.session.scenario == "C"
        finally:
            gate.open_gate()
            thread.join(60)
        assert not thread.is_alive()
        (ended,) = outcome
        assert isinstance(ended, StaleWriterError), ended  # the reply's write, refused
        assert ended.conversation_id == conversation
        assert ended.current > ended.epoch
        texts = [m.content for m in other.load_conversation_history(conversation)]
        assert texts == [
            "the paused turn",
            "the other process's turn",
            echo("the other process's turn"),
        ]
        assert gate.reply not in texts
        assert other.store.verify().ok


# ------------------------------------------------------------------ PostgreSQL restarts


def test_a_postgres_restart_under_load_fails_fast_and_the_replicas_recover(
    replicas: list[Replica],
    pair: Pair,
    postgres_server: PostgresServer,  # noqa: F811
) -> None:
    """Clients keep sending turns to both replicas while PostgreSQL restarts (immediate
    mode: every session cut), then while it is down for a moment. A request that meets the
    gap gets 503 store_unavailable (or, for a turn already streaming, an error event naming
    the store), none hangs (the clients' timeout would fail it), and both replicas serve turns
    again by themselves, without a restart of their own."""
    with client(replicas[0]) as setup:
        conversations = [create(setup, f"restart {i}") for i in range(4)]
    stop = threading.Event()
    seen: list[tuple[int, str]] = []
    by_replica = [0, 0]  # completed turns, per replica
    errors: list[BaseException] = []
    messages: list[str] = []  # what an unexpected error response said
    starts = [r.starts for r in replicas]

    def worker(index: int) -> None:
        http = client(replicas[index % 2], timeout=30)  # a hang fails the test here
        try:
            number = 0
            while not stop.is_set():
                number += 1
                body = {"message": f"w{index} n{number}", "conversationId": conversations[index]}
                response = http.post(CHAT, json=body)
                if response.status_code == 200:
                    last = parse_sse(response.text)[-1]
                    code = last.data.get("code", last.data.get("status", ""))
                    seen.append((200, str(code)))
                    by_replica[index % 2] += code == "completed"
                else:
                    error_body = response.json()["error"]
                    seen.append((response.status_code, error_body["code"]))
                    if error_body["code"] != "store_unavailable":  # said in the failure
                        messages.append(error_body.get("message", ""))
        except BaseException as error:
            errors.append(error)
        finally:
            http.close()

    def completed() -> int:
        return sum(1 for _, code in seen if code == "completed")

    def failed() -> int:
        return sum(1 for _, code in seen if code != "completed")

    log = str(postgres_server.data.parent / "server.log")  # its output (not this process's)
    workers = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in workers:
        thread.start()
    try:
        wait_for(lambda: completed() >= 20)
        before = completed()
        postgres_server.ctl("restart", "-m", "immediate", "-o", postgres_server.options, "-l", log)
        wait_for(lambda: completed() >= before + 40)  # served again, by themselves
        down = failed()
        postgres_server.ctl("stop", "-m", "immediate")
        try:
            wait_for(lambda: failed() >= down + 8)  # refused while it is down
        finally:
            postgres_server.start()
        again = list(by_replica)  # served again by both, by themselves
        wait_for(lambda: all(n >= b + 20 for n, b in zip(by_replica, again, strict=True)))
    finally:
        stop.set()
        for thread in workers:
            thread.join(60)
    assert errors == []
    assert all(r.process is not None and r.process.poll() is None for r in replicas)
    assert [r.starts for r in replicas] == starts  # never restarted
    failures = [(status, code) for status, code in seen if code != "completed"]
    for status, code in failures:  # each one says it was the store (and to retry)
        assert (status, code) in {(503, "store_unavailable"), (200, "store_unavailable")}, (
            messages,
            seen,
        )
    assert (503, "store_unavailable") in failures
    with client(replicas[0]) as ca, client(replicas[1]) as cb:
        for conversation in conversations:  # every conversation usable from both
            for http in (ca, cb):
                while True:  # a pool still reconnecting says 503 (bounded by the test timeout)
                    body = {"message": "after the restart", "conversationId": conversation}
                    response = http.post(CHAT, json=body)
                    if response.status_code != 503:
                        break
                    time.sleep(0.1)
                assert response.status_code == 200, response.text
                assert parse_sse(response.text)[-1].data["status"] == "completed"
    verify_clean(pair.data_dir, pair.url)
