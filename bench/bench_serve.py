"""``agentkit serve`` under load: the file store in one process and in two worker processes
on one port (``--workers 2``), PostgreSQL with one and two replicas (issues 26 and 38).

Real ``agentkit serve`` processes on loopback ports over a scratch copy of the sample agents;
a real PostgreSQL (Debian's server, started in a temp dir as the tests do); 50 concurrent SSE
clients (httpx, asyncio, in this process), each on its own conversation, each sending its
next turn when the last one's stream ended. The model is a double from the kit: the
scripted model (``scripted:FILE``, the server's own cost: store writes, SSE framing), then a
function model that takes 100 ms per call (``function:…``, where concurrency rather than CPU
is the limit). With two replicas the clients are spread over both (client *i* on replica
*i* mod 2, its conversation's turns on that one: sticky, as a load balancer by conversation
would; correctness never needs it). With two workers on one port the kernel spreads the
connections, as it would for any client: not sticky.

PostgreSQL runs as the tests start it, but durable: ``fsync`` and ``full_page_writes`` on (the
tests turn them off), and ``synchronous_commit`` on as agentkit asks, so both stores pay for
their acknowledgements. Besides wall-clock figures, which a shared machine skews, each window
reports the CPU the setup spent per turn: the server processes' and PostgreSQL's (its
backends, from /proc), and the clients' (this process), a figure contention hardly moves.

Setups are interleaved within the run (ROUNDS rounds of every setup, WINDOW seconds each after
a warm-up), so a noisy neighbour hits them all alike; the figures are the medians over rounds
(turns/s; p50/p95 of the turn latency, to the end of its stream) and their ratios. Figures,
not pass/fail: ``python bench/bench_serve.py``; rows are appended to bench/results/serve.csv.

A short smoke of the file store alone (no PostgreSQL started), e.g. 5 clients for a window
of 2 s: ``BENCH_SERVE_STORES=files BENCH_SERVE_KINDS=scripted BENCH_SERVE_CLIENTS=5
BENCH_SERVE_ROUNDS=1 BENCH_SERVE_WINDOW=2 BENCH_SERVE_WARMUP=1 python bench/bench_serve.py``.
Before and after a change, on the same machine and in the same run (the figures the issue
asks for): ``git archive OLD agentkit | tar -x -C /tmp/before`` and
``BENCH_SERVE_BASELINE=/tmp/before BENCH_SERVE_STORES=files BENCH_SERVE_KINDS=scripted``; each
window's load average is printed and recorded beside it (``BENCH_SERVE_STRACE=0`` skips the
fsync count).
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests._postgres import PostgresServer, fresh_url, running_server  # noqa: E402
from tests._processes import children, listening  # noqa: E402
from tests.fakes.live_api import free_port  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "serve.csv"
AGENT = "innovator-001"
CLIENTS = int(os.environ.get("BENCH_SERVE_CLIENTS", "50"))
ROUNDS = int(os.environ.get("BENCH_SERVE_ROUNDS", "3"))
WINDOW = float(os.environ.get("BENCH_SERVE_WINDOW", "8"))
WARMUP = float(os.environ.get("BENCH_SERVE_WARMUP", "2"))  # longer on a loaded machine
#: which stores (files, postgres) and which models (scripted, slow100ms) are measured
STORES = os.environ.get("BENCH_SERVE_STORES", "files,postgres").split(",")
KINDS = os.environ.get("BENCH_SERVE_KINDS", "scripted,slow100ms").split(",")
#: worker processes of the second file setup (``agentkit serve --workers N``)
WORKERS = int(os.environ.get("BENCH_SERVE_WORKERS", "2"))
#: whether the file setups' fsyncs per turn are counted under strace first (when installed)
STRACE = os.environ.get("BENCH_SERVE_STRACE", "1") == "1"
#: another checkout's root (e.g. ``git worktree add /tmp/before <commit>``): its server is
#: measured too, interleaved with this one's, on the file store
BASELINE = os.environ.get("BENCH_SERVE_BASELINE", "")
SLOW_MODULE = """
import asyncio


async def reply(request):
    await asyncio.sleep(0.1)  # a model call of 100 ms
    return "A slow reply of a few words."
"""


class Replica:
    """One ``agentkit serve`` (its log in a file); with *workers* > 1, that many processes
    on its port (``--workers``)."""

    def __init__(
        self,
        data_dir: Path,
        model: str,
        store: str | None,
        env: dict[str, str],
        *,
        code: str | None = None,
        workers: int = 1,
    ):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        agentkit = str(Path(sys.executable).with_name("agentkit"))
        command = [agentkit, "--data-dir", str(data_dir), "serve", "--port", str(self.port),
                   "--model", model, *(["--store", store] if store else []),
                   *(["--workers", str(workers)] if workers > 1 else [])]  # fmt: skip
        self.log = (data_dir.parent / f"serve-{self.port}.log").open("ab")
        environment = {**os.environ, **env}
        if code is not None:  # another checkout's agentkit (the baseline), first on the path
            path = [code, env.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))]
            environment["PYTHONPATH"] = os.pathsep.join(filter(None, path))
        self.process = subprocess.Popen(
            command, env=environment, stdout=subprocess.DEVNULL, stderr=self.log
        )
        deadline = time.monotonic() + 300  # a loaded machine takes its time to import
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"agentkit serve exited ({self.log.name})")
            try:
                if httpx.get(f"{self.base_url}/api/health", timeout=2).status_code == 200 and (
                    workers == 1
                    or sum(listening(pid, self.port) for pid in children(self.process.pid))
                    >= workers
                ):
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.process.kill()
                raise RuntimeError("agentkit serve did not start")
            time.sleep(0.1)

    def pids(self) -> list[int]:
        """The server's processes: the one started, and its workers."""
        own = self.process.pid
        return [own, *children(own)] if self.workers > 1 else [own]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process *pid* so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu(server: PostgresServer | None) -> float:
    """CPU of the postmaster's children (the backends, the WAL writer…) alive now."""
    if server is None:
        return 0.0
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == postmaster:
                total += (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    return total


@dataclass
class Setup:
    name: str
    replicas: list[Replica]
    conversations: list[str] = field(default_factory=list)
    turns_per_s: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    p95: list[float] = field(default_factory=list)
    #: CPU ms per turn: the agentkit serve processes, PostgreSQL, the clients
    server_cpu: list[float] = field(default_factory=list)
    postgres_cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)
    postgres: PostgresServer | None = None
    errors: int = 0
    #: the machine's 1-minute load average as each window began (others' work included)
    load: list[float] = field(default_factory=list)
    #: clients → fsync calls per turn by file kind (strace)
    fsyncs: dict[int, dict[str, float]] = field(default_factory=dict)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def one_turn(client: httpx.AsyncClient, conversation: str, text: str) -> bool:
    body = {"message": text, "conversationId": conversation}
    async with client.stream("POST", f"/api/agent/{AGENT}/chat", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            return False
        result, last_event = None, ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                last_event = line[7:]
            elif line.startswith("data: ") and last_event == "result":
                result = json.loads(line[6:])
        return result is not None and result.get("status") == "completed"


class Attached:
    """A tool attached to the server processes for the measured window (strace, py-spy)."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGINT)  # both write what they have, and detach
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


async def run_window(
    setup: Setup, clients_n: int = CLIENTS, attached: Attached | None = None
) -> int:
    """*clients_n* clients, each on its conversation, for WARMUP + WINDOW seconds; what the
    WINDOW measured (*attached* runs during it: the window is no figure then, only its
    turns are counted); the turns it counted."""
    latencies: list[float] = []
    counted = 0
    errors = 0
    start = time.perf_counter()
    begin, end = start + WARMUP, start + WARMUP + WINDOW
    clients = [
        httpx.AsyncClient(
            base_url=setup.replicas[i % len(setup.replicas)].base_url,
            timeout=120,
            limits=httpx.Limits(max_connections=2),
        )
        for i in range(clients_n)
    ]

    async def client_loop(index: int) -> None:
        nonlocal counted, errors
        number = 0
        while (now := time.perf_counter()) < end:
            number += 1
            ok = await one_turn(clients[index], setup.conversations[index], f"turn {number}")
            done = time.perf_counter()
            if begin <= done <= end:  # the turns the window saw end (however long they took)
                if ok:
                    counted += 1
                    latencies.append((done - now) * 1000)
                else:
                    errors += 1

    async def cpu_window() -> tuple[float, float, float]:
        await asyncio.sleep(max(0.0, begin - time.perf_counter()))
        if attached is not None:
            attached.start()
        before = (
            sum(cpu_seconds(pid) for r in setup.replicas for pid in r.pids()),
            postgres_cpu(setup.postgres),
            time.process_time(),
        )
        await asyncio.sleep(max(0.0, end - time.perf_counter()))
        if attached is not None:
            await asyncio.to_thread(attached.stop)
        return (
            sum(cpu_seconds(pid) for r in setup.replicas for pid in r.pids()) - before[0],
            postgres_cpu(setup.postgres) - before[1],
            time.process_time() - before[2],
        )

    load = os.getloadavg()[0]
    window = asyncio.create_task(cpu_window())
    try:
        await asyncio.gather(*(client_loop(i) for i in range(clients_n)))
        measured = await window
    finally:
        for client in clients:
            await client.aclose()
    if attached is not None:  # strace or py-spy stopped the server: no figure
        return counted
    turns = max(counted, 1)
    setup.load.append(load)
    setup.server_cpu.append(measured[0] * 1000 / turns)
    setup.postgres_cpu.append(measured[1] * 1000 / turns)
    setup.client_cpu.append(measured[2] * 1000 / turns)
    setup.turns_per_s.append(counted / WINDOW)
    setup.p50.append(percentile(latencies, 0.5) if latencies else float("nan"))
    setup.p95.append(percentile(latencies, 0.95) if latencies else float("nan"))
    setup.errors += errors
    return counted


def prepare(setup: Setup) -> None:
    for index in range(CLIENTS):
        replica = setup.replicas[index % len(setup.replicas)]
        response = httpx.post(
            f"{replica.base_url}/api/agent/{AGENT}/conversations",
            json={"title": f"bench {index}"},
            timeout=30,
        )
        response.raise_for_status()
        setup.conversations.append(response.json()["conversationId"])


def scratch_agents(base: Path, name: str) -> Path:
    data_dir = base / name / "data"
    shutil.copytree(
        ROOT / "data" / "agents",
        data_dir / "agents",
        ignore=shutil.ignore_patterns("conversations", ".*.lock", "*.db*"),
    )
    return data_dir


def count_fsyncs(kind: str, setups: list[Setup]) -> None:
    """The file setups' fsyncs per turn at 1 and at CLIENTS clients (:func:`fsyncs_per_turn`)."""
    for setup in [s for s in setups if s.name.startswith("file")]:
        for clients_n in (1, CLIENTS):
            counts = fsyncs_per_turn(setup, clients_n)
            if not counts["turns"]:
                print(f"  [{kind}] {setup.name:<22} {clients_n:3d} clients: n/a (no "
                      "turn completed under strace)", flush=True)  # fmt: skip
                continue
            setup.fsyncs[clients_n] = counts
            print(
                f"  [{kind}] {setup.name:<22} {clients_n:3d} clients: fsyncs per turn "
                f"journal {counts['journal']:.2f}  sqlite {counts['sqlite']:.3f}  "
                f"other {counts['other']:.2f}  ({counts['turns']:.0f} turns, strace)",
                flush=True,
            )


FILE_ONE = "file, 1 process"
FILE_WORKERS = f"file, {WORKERS} workers"
PG_ONE, PG_TWO, BASELINE_NAME = "postgres, 1 replica", "postgres, 2 replicas", "file, baseline"


def bench(
    kind: str, model: str, env: dict[str, str], base: Path, server: PostgresServer | None
) -> list[Setup]:
    setups = []
    if "files" in STORES:
        file_dir = scratch_agents(base, f"{kind}-file")
        workers_dir = scratch_agents(base, f"{kind}-file-workers")
        setups += [
            Setup(FILE_ONE, [Replica(file_dir, model, None, env)]),
            Setup(FILE_WORKERS, [Replica(workers_dir, model, None, env, workers=WORKERS)]),
        ]
    if server is not None:
        pg_dir = scratch_agents(base, f"{kind}-pg")
        one_url, two_url = fresh_url(server), fresh_url(server)
        setups += [
            Setup(PG_ONE, [Replica(pg_dir, model, one_url, env)], postgres=server),
            Setup(
                PG_TWO, [Replica(pg_dir, model, two_url, env) for _ in range(2)], postgres=server
            ),
        ]
    if BASELINE:  # the same server from another checkout (before a change), interleaved
        old_dir = scratch_agents(base, f"{kind}-baseline")
        setups.append(Setup(BASELINE_NAME, [Replica(old_dir, model, None, env, code=BASELINE)]))
    try:
        for setup in setups:
            prepare(setup)
        if kind == "scripted" and STRACE and shutil.which("strace"):
            count_fsyncs(kind, setups)
        if kind == "scripted":
            print(f"  [{kind}] profile of {setups[0].name}, {CLIENTS} clients:")
            for line in profile(setups[0]):
                print(f"    {line}", flush=True)
        for round_ in range(ROUNDS):
            order = setups if round_ % 2 == 0 else setups[::-1]  # interleaved, both ways
            for setup in order:
                asyncio.run(run_window(setup))
                print(
                    f"  [{kind}] round {round_ + 1} {setup.name:<22} "
                    f"{setup.turns_per_s[-1]:7.1f} turns/s  p50 {setup.p50[-1]:6.1f} ms  "
                    f"p95 {setup.p95[-1]:6.1f} ms  CPU/turn: serve {setup.server_cpu[-1]:5.1f} "
                    f"pg {setup.postgres_cpu[-1]:5.1f} clients {setup.client_cpu[-1]:5.1f} ms  "
                    f"load {setup.load[-1]:4.1f}",
                    flush=True,
                )
    finally:
        for setup in setups:
            for replica in setup.replicas:
                replica.stop()
    return setups


def fsyncs_per_turn(setup: Setup, clients_n: int) -> dict[str, float]:
    """One window with *clients_n* clients under ``strace -f -p`` (attached: every system
    call of the server stops for the tracer, so the window's throughput is no figure, only
    the calls per turn are), each fsync sorted by the file it flushed: the conversation
    journals, the SQLite config database (WAL), anything else. On a loaded machine a window
    of 50 traced clients may complete no turn at all: then it says so (n/a)."""
    out = Path(tempfile.mkstemp(suffix=".strace")[1])
    attach = [arg for pid in setup.replicas[0].pids() for arg in ("-p", str(pid))]
    command = ["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync",
               "-o", str(out), *attach]  # fmt: skip
    turns = asyncio.run(run_window(setup, clients_n, Attached(command)))
    kinds = {"journal": 0, "sqlite": 0, "other": 0}
    for line in out.read_text().splitlines():
        if "fsync(" not in line and "fdatasync(" not in line:
            continue
        if "journal.log" in line:
            kinds["journal"] += 1
        elif ".db" in line:
            kinds["sqlite"] += 1
        else:
            kinds["other"] += 1
    out.unlink()
    per_turn = {kind: count / max(turns, 1) for kind, count in kinds.items()}
    per_turn["turns"] = float(turns)
    return per_turn


def profile(setup: Setup) -> list[str]:
    """Where the server's event loop spends a window of 50 clients (py-spy, when installed:
    ``make bench`` installs it): the top frames of its main thread, self and inclusive."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return ["(py-spy is not installed: no profile)"]
    out = Path(tempfile.mkstemp(suffix=".spy")[1])
    pid = setup.replicas[0].process.pid
    command = [spy, "record", "-p", str(pid), "-r", "200", "-f", "raw", "-o", str(out),
               "--idle", "-d", str(int(WINDOW) + 5)]  # fmt: skip
    asyncio.run(run_window(setup, CLIENTS, Attached(command)))
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not count.isdigit() or "Thread._bootstrap" in frames[0]:  # the main thread only
            continue
        total += int(count)
        own[frames[-1]] = own.get(frames[-1], 0) + int(count)
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + int(count)
    out.unlink()
    if not total:
        return ["(no samples)"]
    lines = ["busy main thread by area (self samples; idle = waiting in select):"]
    busy = {frame: count for frame, count in own.items() if not _idle(frame)}
    areas: dict[str, int] = {}
    for frame, count in busy.items():
        areas[_area(frame)] = areas.get(_area(frame), 0) + count
    all_busy = sum(busy.values()) or 1
    lines.append(f"  idle {100 * (total - sum(busy.values())) / total:5.1f}% of the window")
    for area, count in sorted(areas.items(), key=lambda item: -item[1])[:14]:
        lines.append(f"  {100 * count / all_busy:5.1f}%  {area}")
    lines.append("self (main thread, idle included: select = waiting for work):")
    for frame, count in sorted(own.items(), key=lambda item: -item[1])[:15]:
        lines.append(f"  {100 * count / total:5.1f}%  {frame}")
    lines.append("inclusive (agentkit frames):")
    ours = [(f, c) for f, c in inclusive.items() if "agentkit/" in f]
    for frame, count in sorted(ours, key=lambda item: -item[1])[:20]:
        lines.append(f"  {100 * count / total:5.1f}%  {frame}")
    return lines


def _idle(frame: str) -> bool:
    return frame.startswith(("select (", "poll (", "epoll ("))


#: where a py-spy frame ("function (path:line)") belongs, first match wins
_AREAS = (
    ("agentkit/store", "agentkit store (journal, views, turn events)"),
    ("agentkit/api", "agentkit api (routes, SSE, recorder, guard)"),
    ("agentkit/calls", "agentkit tracer (calls.jsonl, spans)"),
    ("agentkit/telemetry", "agentkit tracer (calls.jsonl, spans)"),
    ("agentkit/", "agentkit other (agent, chat turn, events, tools)"),
    ("starlette/", "HTTP framework (starlette, uvicorn, h11/httptools)"),
    ("uvicorn/", "HTTP framework (starlette, uvicorn, h11/httptools)"),
    ("h11/", "HTTP framework (starlette, uvicorn, h11/httptools)"),
    ("httptools", "HTTP framework (starlette, uvicorn, h11/httptools)"),
    ("sse_starlette", "HTTP framework (starlette, uvicorn, h11/httptools)"),
    ("fastapi/", "HTTP framework (starlette, uvicorn, h11/httptools)"),
    ("anyio/", "anyio"),
    ("asyncio/", "asyncio (tasks, events, transports)"),
    ("pydantic", "pydantic"),
    ("json/", "json"),
    ("sqlite3", "sqlite3"),
)


def _area(frame: str) -> str:
    where = frame[frame.rfind("(") + 1 :]
    return next((area for key, area in _AREAS if key in where), "other (stdlib, C calls)")


def durable(server: PostgresServer) -> PostgresServer:
    """The tests' server restarted with fsync and full_page_writes on (their -c options are
    turned off there), on the same port and data directory."""
    options = server.options.replace("-c fsync=off", "-c fsync=on").replace(
        "-c full_page_writes=off", "-c full_page_writes=on"
    )
    server.ctl("stop", "-m", "fast")
    again = PostgresServer(server.bindir, server.data, server.port, server.user, server.run_as,
                           options)  # fmt: skip
    again.start()
    return again


def main() -> None:
    rows: list[tuple[str, float]] = []
    print(
        f"agentkit serve: {CLIENTS} SSE clients, {ROUNDS} interleaved rounds of {WINDOW:.0f} s "
        f"per setup, {os.cpu_count()} CPUs (shared with whatever else runs)"
    )
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(tempfile.TemporaryDirectory())
        server = None
        if "postgres" in STORES:
            server = durable(stack.enter_context(running_server()))
        base = Path(scratch)
        script = base / "script.json"
        script.write_text(json.dumps({"chat": ["A scripted reply of a few words."]}))
        models = base / "models"
        models.mkdir()
        (models / "bench_slow_model.py").write_text(SLOW_MODULE)
        path = os.pathsep.join(filter(None, [str(models), os.environ.get("PYTHONPATH")]))
        models_of = {
            "scripted": (f"scripted:{script}", {}),
            "slow100ms": ("function:bench_slow_model:reply", {"PYTHONPATH": path}),
        }
        runs = {kind: bench(kind, *models_of[kind], base, server) for kind in KINDS}
    print("\nmedians over rounds")
    for kind, setups in runs.items():
        for setup in setups:
            slug = f"{kind}_{setup.name.replace(', ', '_').replace(' ', '_')}"
            tps = statistics.median(setup.turns_per_s)
            p50, p95 = statistics.median(setup.p50), statistics.median(setup.p95)
            cpu = [statistics.median(v) for v in (setup.server_cpu, setup.postgres_cpu)]
            clients = statistics.median(setup.client_cpu)
            load = statistics.median(setup.load)
            print(
                f"  {kind:<10} {setup.name:<22} {tps:7.1f} turns/s  p50 {p50:6.1f} ms  "
                f"p95 {p95:6.1f} ms  errors {setup.errors}  CPU/turn serve {cpu[0]:.1f} "
                f"+ pg {cpu[1]:.1f} ms (clients {clients:.1f} ms)  load {load:.1f}"
            )
            rows += [(f"{slug}_load_average", load)]
            rows += [(f"{slug}_serve_cpu_ms_per_turn", cpu[0])]
            rows += [(f"{slug}_pg_cpu_ms_per_turn", cpu[1])]
            rows += [(f"{slug}_turns_per_s", tps), (f"{slug}_p50_ms", p50)]
            rows += [(f"{slug}_p95_ms", p95), (f"{slug}_errors", float(setup.errors))]
        for setup in setups:
            slug = f"{kind}_{setup.name.replace(', ', '_').replace(' ', '_')}"
            for clients_n, counts in setup.fsyncs.items():
                for what in ("journal", "sqlite", "other"):
                    rows += [(f"{slug}_{clients_n}_clients_{what}_fsyncs_per_turn", counts[what])]
        tps = {setup.name: statistics.median(setup.turns_per_s) for setup in setups}
        cpu_of = {setup.name: statistics.median(setup.server_cpu) for setup in setups}
        if FILE_ONE in cpu_of and cpu_of.get(BASELINE_NAME):
            ratio = cpu_of[FILE_ONE] / cpu_of[BASELINE_NAME]
            shown = "file, server CPU per turn, this code / baseline"
            print(f"  {kind:<10} ratio: {shown} = {ratio:.2f}")
            rows += [(f"{kind}_file_cpu_over_baseline", ratio)]
        ratios = [  # (row, shown, numerator, denominator)
            ("file_over_baseline", "file, this code / baseline", FILE_ONE, BASELINE_NAME),
            ("file_workers_over_file", f"file, {WORKERS} workers / 1 process", FILE_WORKERS,
             FILE_ONE),
            ("pg1_over_file", "postgres 1 replica / file", PG_ONE, FILE_ONE),
            ("pg2_over_pg1", "postgres 2 replicas / 1 replica", PG_TWO, PG_ONE),
        ]  # fmt: skip
        for row, shown, over, under in ratios:
            if over in tps and under in tps and tps[under] > 0:
                print(f"  {kind:<10} ratio: {shown} = {tps[over] / tps[under]:.2f}")
                rows += [(f"{kind}_{row}", tps[over] / tps[under])]
    RESULTS.parent.mkdir(exist_ok=True)
    new = not RESULTS.exists()
    with RESULTS.open("a", newline="") as handle:
        writer = csv.writer(handle)
        if new:
            writer.writerow(["timestamp", "metric", "value"])
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name, value in rows:
            writer.writerow([stamp, name, f"{value:.3f}"])


if __name__ == "__main__":
    main()
