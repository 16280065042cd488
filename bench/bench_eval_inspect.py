"""A sweep's overhead against inspect_ai's, on the same loopback endpoint (figures, not
pass/fail).

1,000 one-call samples at 64 connections against ``bench_eval.py``'s loopback endpoint (one
answer per request after 0.3 s; a listen backlog of 512, wide enough for 64 connects; SSE
when the client streams, one JSON body when it does not), each system in a fresh process,
interleaved round by round, start-up subtracted (each process times only its evaluation,
after a small warm-up evaluation):

* **agentkit**: ``run_eval`` of one turn of ``innovator-001`` (the chat engine: one streamed
  call per turn) with ``repeat=1000, concurrency=64``; the runs' data roots on disk
  (``$TMPDIR`` on a disk folder) and in agentkit's default (a RAM-backed folder);
* **inspect_ai**: ``eval()`` of a task of 1,000 samples (``generate()``, ``includes()``
  scorer) with ``max_connections=64`` on its OpenAI-compatible provider
  (``openai-api/bench/bench``), its log written to a temporary folder on disk;
* **httpx**: a plain ``httpx.AsyncClient`` posting the 1,000 requests, 64 at once (the floor:
  what any client pays for HTTP on this machine).

Reported: wall time, the ideal (``1000 x 0.3 s / 64``) and the ratio; CPU per sample; and
agentkit's ratio over the ideal against inspect_ai's (the target: at most half).
inspect-ai is installed by ``make bench`` only (``INSPECT_PYTHON`` may name another
interpreter that has it).

    python bench/bench_eval_inspect.py                # 2 rounds
    python bench/bench_eval_inspect.py --samples 300  # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_eval import (  # the sibling bench's endpoint and helpers
    DEFAULT,
    DELAY,
    DISK,
    REQUEST,
    disk_dir,
    start_server,
    stop_server,
)

REPO = Path(__file__).resolve().parents[1]
CONNECTIONS = 64


def _cpu() -> float:
    return time.process_time()


# -- one system, in its own process -----------------------------------------------------------


def run_agentkit(samples: int) -> dict[str, Any]:
    from agentkit import testing
    from agentkit.eval import run_eval

    from bench_eval import scenario

    scratch = Path(tempfile.mkdtemp(prefix="bench-peer-"))
    root = testing.data_root(scratch / "data", ["innovator-001"])
    chosen = scenario("innovator-001")
    run_eval([chosen], model="openai:bench", repeat=4, concurrency=4, data_dir=root,
             progress=False)  # fmt: skip
    started, cpu = time.perf_counter(), _cpu()
    frame = run_eval([chosen], model="openai:bench", repeat=samples, concurrency=CONNECTIONS,
                     data_dir=root, progress=False)  # fmt: skip
    return {"wall_s": time.perf_counter() - started, "cpu_s": _cpu() - cpu,
            "passed": float(frame["passed"].mean()), "calls": float(frame["model_calls"].mean()),
            "retries": int(frame["transport_retries"].sum())}  # fmt: skip


def run_inspect(samples: int) -> dict[str, Any]:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    def task(count: int) -> Task:
        dataset = [Sample(input=REQUEST, target="binance") for _ in range(count)]
        return Task(dataset=dataset, solver=generate(), scorer=includes())

    with tempfile.TemporaryDirectory(dir=disk_dir()) as logs:
        options: dict[str, Any] = {
            "model": "openai-api/bench/bench", "max_connections": CONNECTIONS,
            "max_samples": CONNECTIONS, "display": "none", "log_dir": logs,
            "log_level": "warning",
        }  # fmt: skip
        eval(task(4), **options)  # warm-up: imports, the provider, the log writer
        started, cpu = time.perf_counter(), _cpu()
        [log] = eval(task(samples), **options)
        wall, used = time.perf_counter() - started, _cpu() - cpu
    scores = log.results.scores[0].metrics["accuracy"].value if log.results else 0.0
    return {"wall_s": wall, "cpu_s": used, "passed": float(scores), "calls": 1.0,
            "retries": 0, "status": log.status}  # fmt: skip


def run_httpx(samples: int, base_url: str) -> dict[str, Any]:
    import httpx

    body = {"model": "bench", "messages": [{"role": "user", "content": REQUEST}]}

    async def sweep() -> int:
        limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
        async with httpx.AsyncClient(limits=limits, timeout=60) as client:
            gate = asyncio.Semaphore(CONNECTIONS)

            async def one() -> bool:
                async with gate:
                    response = await client.post(f"{base_url}/chat/completions", json=body)
                    return "binance" in response.json()["choices"][0]["message"]["content"]

            await asyncio.gather(*(one() for _ in range(4)))
            started[0], started[1] = time.perf_counter(), _cpu()
            return sum(await asyncio.gather(*(one() for _ in range(samples))))

    started = [0.0, 0.0]
    passed = asyncio.run(sweep())
    return {"wall_s": time.perf_counter() - started[0], "cpu_s": _cpu() - started[1],
            "passed": passed / samples, "calls": 1.0, "retries": 0}  # fmt: skip


# -- the driver -------------------------------------------------------------------------------


def measure(system: str, samples: int, base_url: str, where: str = DEFAULT) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENTKIT_", "OPENAI_", "BENCH_"))}  # fmt: skip
    env |= {"AGENTKIT_OPENAI_BASE_URL": base_url, "AGENTKIT_ALLOW_MODEL_REQUESTS": "1",
            "BENCH_BASE_URL": base_url, "BENCH_API_KEY": "bench",
            "PYTHONPATH": os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])}  # fmt: skip
    env.pop("TMPDIR", None)
    if where == DISK:
        env["TMPDIR"] = disk_dir()
    python = (
        os.environ.get("INSPECT_PYTHON", sys.executable)
        if system == "inspect_ai"
        else (sys.executable)
    )
    argv = [python, __file__, "--one", system, str(samples), base_url]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{system} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one", nargs=3, metavar=("SYSTEM", "SAMPLES", "BASE_URL"))
    args = parser.parse_args()
    if args.one:
        system, samples, base_url = args.one
        count = int(samples)
        if system == "agentkit":
            figures = run_agentkit(count)
        elif system == "inspect_ai":
            figures = run_inspect(count)
        else:
            figures = run_httpx(count, base_url)
        print(json.dumps(figures))
        return
    server, base_url = start_server()
    ideal = args.samples * DELAY / CONNECTIONS
    systems = [("httpx", DEFAULT), ("inspect_ai", DISK), ("agentkit", DISK),
               ("agentkit", DEFAULT)]  # fmt: skip
    print(f"{args.samples} one-call samples, {CONNECTIONS} connections, {DELAY:g} s per answer: "
          f"ideal {ideal:.2f} s; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at the start; interleaved, {args.rounds} rounds")  # fmt: skip
    print(f"{'system':<34}{'round':>6}{'wall s':>9}{'ratio':>7}{'cpu ms/sample':>15}{'passed':>8}")
    ratios: dict[str, list[float]] = {}
    try:
        for round_ in range(1, args.rounds + 1):
            for system, where in systems:
                figures = measure(system, args.samples, base_url, where)
                label = system + (f", data {'on disk' if where == DISK else 'default'}"
                                  if system == "agentkit" else "")  # fmt: skip
                ratio = figures["wall_s"] / ideal
                ratios.setdefault(label, []).append(ratio)
                cpu = figures["cpu_s"] * 1000 / args.samples
                print(f"{label:<34}{round_:>6}{figures['wall_s']:>9.2f}{ratio:>7.2f}"
                      f"{cpu:>15.2f}{figures['passed']:>8.3f}", flush=True)  # fmt: skip
    finally:
        stop_server(server)
    print("\nmedian ratio over the ideal:")
    for label, values in ratios.items():
        print(f"  {label:<34}{statistics.median(values):.2f}x")
    theirs = statistics.median(ratios["inspect_ai"])
    for label in ("agentkit, data on disk", "agentkit, data default"):
        ours = statistics.median(ratios[label])
        print(
            f"{label} over the ideal / inspect_ai's: {(ours - 1) / max(theirs - 1, 1e-9):.2f} "
            f"(overhead beyond the ideal; target <= 0.5), {ours / theirs:.2f} (ratios)"
        )


if __name__ == "__main__":
    main()
