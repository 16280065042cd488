"""Evaluation sweeps against a remote-like endpoint: ``--concurrency`` (figures, not pass/fail).

1,000 runs of a 3-call scenario (desk-001: "which exchange accounts do I have?" — a plan with
one read step, the replan after it, the streamed answer) against a loopback OpenAI-compatible
server that answers every request after 300 ms (the SSE format of
``tests/fakes/openai_server.py``, HTTP/1.1 keep-alive, one thread per connection, in a process
of its own so that it does not compete with the sweep for the GIL). Each configuration runs as
``run_eval(..., model="openai:bench", repeat=RUNS, concurrency=N)`` in a fresh process:

* concurrency 1 on a sample of runs (the full 1,000 would take 15 minutes), extrapolated;
* concurrency 16 and 64 on all 1,000 runs, the runs' data roots on disk (the temp dir);
* concurrency 64 and ``--workers 2 --concurrency 32`` with the data roots on a RAM disk
  (``TMPDIR=/dev/shm``): a turn's durable writes (fsync, SQLite commits) block the one event
  loop, and on disk they, not the model's latency, set the pace.

Reported per configuration: wall time, the ideal ``runs x calls x 0.3 s / N`` and the ratio,
the sweep process's peak RSS (its worker processes' too, when there are any), and the share of
runs that passed. Where the time goes beyond the ideal is measured by the sweep process's CPU
time (``cpu_s``: everything the event loops do between the model's answers, worker processes
included) and the loopback server's (``server``), which shares the two cores. Figures are
appended to ``bench/results/eval.csv``.

    python bench/bench_eval.py                 # the full set (about 4 minutes)
    python bench/bench_eval.py --runs 200      # quicker
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import json
import os
import platform
import pstats
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "eval.csv"
DELAY = 0.3  # seconds before the server answers each request
CALLS = 3  # model calls per run: plan, replan, respond
REQUEST = "which exchange accounts do I have?"
ANSWER = "You have one exchange account: binance main."
PLAN = {
    "goal": "list the exchange accounts",
    "steps": [
        {"id": "s1", "type": "tool", "title": "accounts", "tool_name": "get_exchange_configs",
         "tool_args": {}},
        {"id": "s2", "type": "respond", "title": "answer", "instruction": "Answer."},
    ],
}  # fmt: skip


# -- the loopback server (its own process) --------------------------------------------------


def _sse(text: str, usage: tuple[int, int]) -> bytes:
    sys.path.insert(0, str(REPO))
    from tests.fakes.openai_server import Reply

    reply = Reply.text(text, usage=usage)
    payloads = [*reply.chunks, "[DONE]"]
    return "".join(f"data: {payload}\n\n" for payload in payloads).encode()


def _whole(text: str, usage: tuple[int, int]) -> bytes:
    """The same answer as one JSON body (a client that does not stream: inspect_ai)."""
    return json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "bench",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                  "total_tokens": sum(usage)},
    }).encode()  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints do
    bodies: ClassVar[dict[str, bytes]] = {}

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = json.loads(raw)
        schema = (request.get("response_format") or {}).get("json_schema") or {}
        name = schema.get("name", "") if schema.get("name") in self.bodies else "respond"
        streamed = bool(request.get("stream"))
        body = self.bodies[name if streamed else f"{name}.json"]
        time.sleep(DELAY)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if streamed else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the listen backlog: 64 clients connect at once


def serve() -> None:
    """Serve until stdin closes; print the base URL first."""
    answers = {
        "plan": (json.dumps(PLAN), (400, 60)),
        "replan": (json.dumps({"action": "continue"}), (450, 8)),
        "respond": (ANSWER, (300, 12)),
    }
    _Handler.bodies = {name: _sse(*answer) for name, answer in answers.items()}
    _Handler.bodies |= {f"{name}.json": _whole(*answer) for name, answer in answers.items()}
    server = _Server(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    sys.stdin.read()
    server.shutdown()


# -- one configuration (its own process) ----------------------------------------------------


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def scenario(agent: str = "desk-001") -> Any:
    """desk-001's accounts question (3 calls), or one streamed call with innovator-001."""
    from agentkit.eval import Expectations, Scenario, Turn

    accounts = [{"exchange": "binance", "account_name": "main", "api_key": "AK1",
                 "secret_key": "SK1"}]  # fmt: skip
    if agent != "desk-001":
        return Scenario(
            id="bench_one_call", language="en", agent=agent, turns=(Turn(user=REQUEST),),
            expect=Expectations(answer_contains=("binance",), max_model_calls=1),
        )  # fmt: skip
    return Scenario(
        id="bench_accounts",
        language="en",
        agent="desk-001",
        state={"desk": {"exchange_configs": accounts}},
        turns=(Turn(user=REQUEST),),
        expect=Expectations(
            tool_sequence=("get_exchange_configs",),
            status="completed",
            answer_contains=("binance",),
            max_model_calls=CALLS,
        ),
    )


def one(runs: int, concurrency: int, workers: int, agent: str = "desk-001") -> None:
    """Run the sweep once; print its figures as JSON (``$BENCH_PROFILE``: a cProfile of the
    sweep, CPU time, written there)."""
    from agentkit import testing
    from agentkit.eval import run_eval

    root = testing.data_root(Path(tempfile.mkdtemp(prefix="bench-eval-")) / "data", [agent])
    chosen = scenario(agent)
    run_eval([chosen], model="openai:bench", data_dir=root, progress=False)  # imports, warm-up
    profile = os.environ.get("BENCH_PROFILE")
    profiler = cProfile.Profile(time.process_time) if profile else None
    started, cpu = time.perf_counter(), time.process_time() + _children_cpu()
    if profiler is not None:
        profiler.enable()
    frame = run_eval(
        [chosen],
        model="openai:bench",
        repeat=runs,
        concurrency=concurrency,
        workers=workers,
        data_dir=root,
        progress=False,
    )
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    wall = time.perf_counter() - started
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({
        "wall_s": wall,
        "cpu_s": time.process_time() + _children_cpu() - cpu,
        "rss_mb": own / 1024,
        "worker_rss_mb": children / 1024,
        "passed": float(frame["passed"].mean()),
        "errors": sorted(set(frame["error"]) - {""})[:3]
        + sorted(set(frame["failures"]) - {""})[:3]
        + sorted(set(frame["errors"]) - {""})[:3],
        "calls": float(frame["model_calls"].mean()),
        "retries": int(frame["transport_retries"].sum()),
    }))  # fmt: skip


# -- where the CPU goes ---------------------------------------------------------------------

_AREAS = (
    ("sqlite3", "sqlite3"), ("socket", "sockets"), ("select", "sockets"), ("posix", "os calls"),
    ("io.open", "os calls"), ("pydantic", "pydantic"), ("json", "json"),
)  # fmt: skip


def _area(filename: str, function: str) -> str:
    """Which part of the code a profiled frame belongs to."""
    if filename == "~":  # a built-in: by what it is a method of
        return next((area for key, area in _AREAS if key in function), "builtins")
    path = filename.replace("\\", "/")
    if "/agentkit/" in path:
        parts = path.rsplit("/agentkit/", 1)[1].split("/")
        return "agentkit/" + (parts[0].removesuffix(".py") if len(parts) > 1 else parts[0])
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/")[0].removesuffix(".py")
    stem = path.rsplit("/lib/python", 1)[-1].split("/")
    return stem[1].removesuffix(".py") if len(stem) > 1 else path


def profile_report(path: str, runs: int, top: int = 15) -> str:
    """The CPU profile at *path*: the share of each area, then the top frames by own time."""
    stats = pstats.Stats(path)
    table: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in table.values()) or 1.0
    areas: dict[str, float] = {}
    for (filename, _, function), entry in table.items():
        area = _area(filename, function)
        areas[area] = areas.get(area, 0.0) + entry[2]
    lines = [f"CPU profile (cProfile, CPU clock; its overhead inflates Python frames): "
             f"{total:.2f} s for {runs} runs", "  by area (own time):"]  # fmt: skip
    for area, seconds in sorted(areas.items(), key=lambda item: -item[1])[:top]:
        lines.append(f"    {seconds / total:6.1%}  {seconds * 1000 / runs:6.2f} ms/run  {area}")
    lines.append("  top frames (own time):")
    ranked = sorted(table.items(), key=lambda item: -item[1][2])[:top]
    for (filename, line, function), entry in ranked:
        where = f"{_area(filename, function)}:{line}" if filename != "~" else "~"
        lines.append(
            f"    {entry[2] / total:6.1%}  {entry[1]:>8} calls  {function[:60]}  ({where})"
        )
    return "\n".join(lines)


# -- the driver -----------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: where a configuration's data roots go: on disk (``$TMPDIR`` on a disk folder) or agentkit's
#: default (``$TMPDIR`` unset: a RAM-backed folder, /dev/shm, when there is one)
DISK, DEFAULT = "disk", "default"


def disk_dir() -> str:
    """A temporary folder on disk (not tmpfs), for the "on disk" configurations."""
    for candidate in (os.environ.get("TMPDIR") or "", "/var/tmp", "/tmp", str(REPO / "bench")):
        if candidate and os.access(candidate, os.W_OK) and not _on_tmpfs(candidate):
            return candidate
    return tempfile.gettempdir()


def _on_tmpfs(path: str) -> bool:
    mounts = Path("/proc/mounts").read_text().splitlines() if Path("/proc/mounts").exists() else []
    best, kind = "", ""
    for line in mounts:
        parts = line.split()
        inside = len(parts) > 2 and Path(path).resolve().as_posix().startswith(parts[1])
        if inside and len(parts[1]) > len(best):
            best, kind = parts[1], parts[2]
    return kind in ("tmpfs", "ramfs")


def measure(
    base_url: str, runs: int, concurrency: int, workers: int, where: str, *,
    agent: str = "desk-001", profile: str = "",
) -> dict[str, Any]:  # fmt: skip
    """One configuration in a fresh process (niced: the machine is shared)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTKIT_", "OPENAI_"))}
    env |= {"AGENTKIT_OPENAI_BASE_URL": base_url, "AGENTKIT_ALLOW_MODEL_REQUESTS": "1"}
    env.pop("TMPDIR", None)
    if where == DISK:
        env["TMPDIR"] = disk_dir()  # where the runs' data roots are made
    if profile:
        env["BENCH_PROFILE"] = profile
    argv = [sys.executable, __file__, "--one", str(runs), str(concurrency), str(workers), agent]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the sweep failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def start_server() -> tuple[subprocess.Popen[str], str]:
    """The loopback endpoint in a process of its own; its base URL."""
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def stop_server(server: subprocess.Popen[str]) -> None:
    assert server.stdin is not None
    server.stdin.close()
    server.wait(timeout=10)


def _row(
    figures: dict[str, Any], total: int, runs: int, concurrency: int, *, workers: int, where: str
) -> dict[str, Any]:
    """A configuration's row of the results (*runs* of *total*: a sample is scaled up)."""
    ideal = runs * CALLS * DELAY / (concurrency * workers)
    scale = total / runs
    label = f"concurrency {concurrency}" + (f" x {workers} workers" if workers > 1 else "")
    label += ", runs on disk" if where == DISK else f", runs in {_default_dir()}"
    wall = figures["wall_s"] * scale
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "load": round(os.getloadavg()[0], 1),
        "configuration": label + (f" (sample of {runs})" if runs < total else ""),
        "runs": total,
        "wall_s": round(wall, 2),
        "ideal_s": round(ideal * scale, 2),
        "ratio": round(wall / (ideal * scale), 3),
        "cpu_s": round(figures["cpu_s"] * scale, 2),
        "cpu_ms_per_run": round(figures["cpu_s"] * 1000 / runs, 2),
        "server_cpu_s": round(figures["server_cpu_s"] * scale, 2),
        "rss_mb": round(figures["rss_mb"], 1),
        "worker_rss_mb": round(figures["worker_rss_mb"], 1),
        "passed": round(figures["passed"], 3),
        "calls": figures["calls"],
        "transport_retries": figures["retries"],
    }


def _save(rows: list[dict[str, Any]]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    new = not RESULTS.exists()
    if not new:
        with RESULTS.open(encoding="utf-8") as file:
            header = file.readline().strip().split(",")
        if header != list(rows[0]):  # the columns changed: a new file beside the old one
            RESULTS.rename(RESULTS.with_suffix(f".{datetime.now(UTC):%Y%m%d%H%M%S}.csv"))
            new = True
    with RESULTS.open("a", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        if new:
            writer.writeheader()
        writer.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=24, help="runs at concurrency 1")
    parser.add_argument("--rounds", type=int, default=2, help="disk/RAM pairs, interleaved")
    parser.add_argument("--profile-runs", type=int, default=300, help="0: no profile")
    parser.add_argument("--one", nargs=4, metavar=("RUNS", "N", "WORKERS", "AGENT"))
    parser.add_argument("--serve", action="store_true")
    parser.add_argument(
        "--only", type=int, nargs=2, metavar=("N", "WORKERS"), help="one configuration only"
    )
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.one:
        runs, concurrency, workers, agent = args.one
        one(int(runs), int(concurrency), int(workers), agent)
        return
    server, base_url = start_server()
    configurations = [(min(args.sample, args.runs), 1, 1, DEFAULT), (args.runs, 16, 1, DEFAULT)]
    configurations += [(args.runs, 64, 1, where) for _ in range(args.rounds)
                       for where in (DISK, DEFAULT)]  # fmt: skip
    configurations.append((args.runs, 32, 2, DEFAULT))
    if args.only:
        configurations = [(args.runs, *args.only, DISK), (args.runs, *args.only, DEFAULT)]
    rows = []
    load = os.getloadavg()[0]
    print(f"{args.runs} runs x {CALLS} calls, {DELAY:g} s per call, {os.cpu_count()} cores, "
          f"load average {load:.1f} at the start; disk: TMPDIR={disk_dir()}, default: "
          f"agentkit's choice ({_default_dir()})")  # fmt: skip
    print(f"{'configuration':<44}{'runs':>6}{'wall s':>9}{'ideal s':>9}{'ratio':>7}{'cpu s':>8}"
          f"{'ms/run':>8}{'server':>8}{'rss MB':>8}{'passed':>8}{'retries':>8}")  # fmt: skip
    try:
        for runs, concurrency, workers, where in configurations:
            before = _cpu_seconds(server.pid)
            figures = measure(base_url, runs, concurrency, workers, where)
            figures["server_cpu_s"] = _cpu_seconds(server.pid) - before
            row = _row(figures, args.runs, runs, concurrency, workers=workers, where=where)
            rows.append(row)
            print(f"{row['configuration']:<44}{runs:>6}{row['wall_s']:>9}{row['ideal_s']:>9}"
                  f"{row['ratio']:>7}{row['cpu_s']:>8}{row['cpu_ms_per_run']:>8}"
                  f"{row['server_cpu_s']:>8}{row['rss_mb']:>8}{row['passed']:>8}"
                  f"{row['transport_retries']:>8}", flush=True)  # fmt: skip
            if figures["errors"]:
                print("   errors:", figures["errors"])
        if args.profile_runs:
            for where in (DEFAULT, DISK):
                with tempfile.TemporaryDirectory() as scratch:
                    path = str(Path(scratch) / "sweep.prof")
                    measure(base_url, args.profile_runs, 64, 1, where, profile=path)
                    print(f"\nconcurrency 64, runs {'on disk' if where == DISK else 'default'}: "
                          + profile_report(path, args.profile_runs))  # fmt: skip
    finally:
        stop_server(server)
    _save(rows)


def _default_dir() -> str:
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    code = "from agentkit.eval.world import scratch_dir; print(scratch_dir() or '')"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env | {"PYTHONPATH": str(REPO)}, capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    return done.stdout.strip() or tempfile.gettempdir()


if __name__ == "__main__":
    main()
