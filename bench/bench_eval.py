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
import csv
import json
import os
import platform
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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints do
    bodies: ClassVar[dict[str, bytes]] = {}

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = json.loads(raw)
        schema = (request.get("response_format") or {}).get("json_schema") or {}
        body = self.bodies.get(schema.get("name", ""), self.bodies["respond"])
        time.sleep(DELAY)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
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
    _Handler.bodies = {
        "plan": _sse(json.dumps(PLAN), (400, 60)),
        "replan": _sse(json.dumps({"action": "continue"}), (450, 8)),
        "respond": _sse(ANSWER, (300, 12)),
    }
    server = _Server(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    sys.stdin.read()
    server.shutdown()


# -- one configuration (its own process) ----------------------------------------------------


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one(runs: int, concurrency: int, workers: int) -> None:
    """Run the sweep once; print its figures as JSON."""
    from agentkit import testing
    from agentkit.eval import Expectations, Scenario, Turn, run_eval

    root = testing.data_root(Path(tempfile.mkdtemp(prefix="bench-eval-")) / "data", ["desk-001"])
    accounts = [{"exchange": "binance", "account_name": "main", "api_key": "AK1",
                 "secret_key": "SK1"}]  # fmt: skip
    scenario = Scenario(
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
    run_eval([scenario], model="openai:bench", data_dir=root, progress=False)  # imports, warm-up
    started, cpu = time.perf_counter(), time.process_time() + _children_cpu()
    frame = run_eval(
        [scenario],
        model="openai:bench",
        repeat=runs,
        concurrency=concurrency,
        workers=workers,
        data_dir=root,
        progress=False,
    )
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
    }))  # fmt: skip


# -- the driver -----------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    """A process's CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(
    base_url: str, runs: int, concurrency: int, workers: int, scratch: str
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTKIT_", "OPENAI_"))}
    env |= {"AGENTKIT_OPENAI_BASE_URL": base_url, "AGENTKIT_ALLOW_MODEL_REQUESTS": "1"}
    if scratch:
        env["TMPDIR"] = scratch  # where the runs' data roots are made
    argv = [sys.executable, __file__, "--one", str(runs), str(concurrency), str(workers)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the sweep failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=24, help="runs at concurrency 1")
    parser.add_argument("--one", nargs=3, type=int, metavar=("RUNS", "N", "WORKERS"))
    parser.add_argument("--serve", action="store_true")
    parser.add_argument(
        "--only", type=int, nargs=2, metavar=("N", "WORKERS"), help="one configuration only"
    )
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.one:
        one(*args.one)
        return
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert server.stdout is not None
    assert server.stdin is not None
    base_url = server.stdout.readline().strip()
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else ""
    configurations = [
        (min(args.sample, args.runs), 1, 1, ""),
        (args.runs, 16, 1, ""),
        (args.runs, 64, 1, ""),
        (args.runs, 64, 1, shm),
        (args.runs, 32, 2, shm),
    ]
    if args.only:
        configurations = [(args.runs, *args.only, os.environ.get("TMPDIR", ""))]
    rows = []
    print(f"{args.runs} runs x {CALLS} calls, {DELAY:g} s per call, {os.cpu_count()} cores")
    print(f"{'configuration':<40}{'runs':>6}{'wall s':>9}{'ideal s':>9}{'ratio':>7}"
          f"{'cpu s':>8}{'server':>8}{'rss MB':>8}{'workers MB':>11}{'passed':>8}")  # fmt: skip
    try:
        for runs, concurrency, workers, scratch in configurations:
            before = _cpu_seconds(server.pid)
            figures = _measure(base_url, runs, concurrency, workers, scratch)
            figures["server_cpu_s"] = _cpu_seconds(server.pid) - before
            going = concurrency * workers
            ideal = runs * CALLS * DELAY / going
            scale = args.runs / runs  # the sample's figures, for the whole sweep
            label = f"concurrency {concurrency}" + (f" x {workers} workers" if workers > 1 else "")
            label += f", runs in {scratch}" if scratch else ", runs on disk"
            wall = figures["wall_s"] * scale
            row = {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "host": platform.node(),
                "cores": os.cpu_count(),
                "configuration": label + (f" (sample of {runs})" if runs < args.runs else ""),
                "runs": args.runs,
                "wall_s": round(wall, 2),
                "ideal_s": round(ideal * scale, 2),
                "ratio": round(wall / (ideal * scale), 3),
                "cpu_s": round(figures["cpu_s"] * scale, 2),
                "server_cpu_s": round(figures["server_cpu_s"] * scale, 2),
                "rss_mb": round(figures["rss_mb"], 1),
                "worker_rss_mb": round(figures["worker_rss_mb"], 1),
                "passed": round(figures["passed"], 3),
                "calls": figures["calls"],
            }
            rows.append(row)
            print(f"{row['configuration']:<40}{runs:>6}{row['wall_s']:>9}{row['ideal_s']:>9}"
                  f"{row['ratio']:>7}{row['cpu_s']:>8}{row['server_cpu_s']:>8}{row['rss_mb']:>8}"
                  f"{row['worker_rss_mb']:>11}{row['passed']:>8}", flush=True)  # fmt: skip
            if figures["errors"]:
                print("   errors:", figures["errors"])
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    new = not RESULTS.exists()
    with RESULTS.open("a", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        if new:
            writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
