"""llama.cpp builds side by side: tokens/s, time to first token, and what a neighbour loses.

    python bench/bench_llama_build.py PYTHON [PYTHON …]
    python bench/bench_llama_build.py --neighbour [--cmd "ARGV"] LABEL=PYTHON[,VAR=VALUE…] …

Each PYTHON is an interpreter whose environment has llama-cpp-python installed (for example
.venv/bin/python, with the portable build of scripts/install-llama.sh, and a second venv with
pip's default native build). Each is run in turn, in a child process, on the shipped
SmolLM2-135M GGUF: a ~400-token prompt (prompt processing, the batched matmul kernels) and
128 generated tokens, five times after a warm-up, in three child processes per build
interleaved with the other builds'; the medians are printed and appended to
bench/results/llama_build.csv with the build's reported CPU features.

``--neighbour`` asks how good a neighbour each variant (an interpreter plus environment
variables; ``VAR=`` unsets one) is on shared cores. In each cell the model runs as agentkit's
worker loads it (``Llama(path, n_ctx=4096, seed=7)``: llama-cpp-python's default threads, one
for generation and every core for the prompt) and serves requests back to back — the same
~265-token prompt, 64 tokens, a 0.5 s pause — while a neighbour runs beside it: by default two
processes of a CPU-bound Python loop for 30 s (``--loops N``; two is the two cores' worth a
``pytest -n 2`` or ``agentkit serve`` with its clients would use; ``--loops 0``: the model
alone), or a command (``--cmd``, timed; its throughput is 1/wall). A cell with the neighbour
alone opens every round, and the order of the variants rotates round by round, so the rest of
the machine's load costs each alike. Reported per variant, medians over rounds: prompt-eval
and generation tokens/s (llama.cpp's own timings), the model process's CPU-ms per prompt token
and per generated token (every thread; a thread spinning at a barrier shows here), its CPU
while idle between requests, the cores it used, the whole requests it finished per minute, and
the neighbour's throughput as a ratio to its run alone in the same round, and what that comes
to per finished request (seconds of the neighbour's work at its speed alone); with the
1-minute load average. Rows go to bench/results/llama_neighbour.csv, every cell to
llama_neighbour_cells.jsonl.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "llama_build.csv"
NEIGHBOUR_RESULTS = Path(__file__).parent / "results" / "llama_neighbour.csv"
NEIGHBOUR_CELLS = NEIGHBOUR_RESULTS.with_name("llama_neighbour_cells.jsonl")
ROUNDS = 5
REPEATS = 3

CHILD = r"""
import json, sys, time
import llama_cpp
from llama_cpp import Llama

llama = Llama(model_path=sys.argv[1], n_ctx=2048, seed=7, verbose=False)
filler = " ".join(f"Fact {i}: the harbour light is checked every evening." for i in range(40))
prompt = filler + " Now write a long story about the harbour."
prompt_tokens = len(llama.tokenize(prompt.encode()))
rounds = []
for round_ in range(int(sys.argv[2]) + 1):
    llama.reset()
    start = time.perf_counter()
    first = None
    count = 0
    for chunk in llama.create_completion(prompt, max_tokens=128, temperature=0.0, stream=True,
                                         repeat_penalty=1.3):
        if first is None:
            first = time.perf_counter() - start
        count += 1
    total = time.perf_counter() - start
    if round_:  # the first round warms caches
        rounds.append({"first_token_s": first, "decode_tok_s": (count - 1) / (total - first),
                       "tokens": count})
info = llama_cpp.llama_print_system_info()
print(json.dumps({"rounds": rounds, "prompt_tokens": prompt_tokens,
                  "system_info": info.decode() if isinstance(info, bytes) else str(info)}))
"""


def gguf_path() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from agentkit.models.llama import default_gguf_path

    return str(default_gguf_path())


def run_child(python: str, model: str) -> dict[str, Any]:
    done = subprocess.run(
        [python, "-c", CHILD, model, str(ROUNDS)],
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},  # as agentkit's model worker runs
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def summarise(python: str, reports: list[dict[str, Any]]) -> dict[str, object]:
    report = reports[0]
    rounds = [r for each in reports for r in each["rounds"]]
    return {
        "python": python,
        "system_info": report["system_info"].strip(),
        "prompt_tokens": report["prompt_tokens"],
        "first_token_ms": round(1000 * statistics.median(r["first_token_s"] for r in rounds), 1),
        "decode_tok_s": round(statistics.median(r["decode_tok_s"] for r in rounds), 1),
    }


def main() -> None:
    if "--neighbour" in sys.argv[1:]:
        neighbour_main(sys.argv[1:])
        return
    pythons = sys.argv[1:] or [sys.executable]
    model = gguf_path()
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    # interleaved, so a noisy neighbour costs every build alike
    reports: dict[str, list[dict[str, Any]]] = {python: [] for python in pythons}
    for _ in range(REPEATS):
        for python in pythons:
            reports[python].append(run_child(python, model))
    rows = [{"run": stamp, **summarise(python, reports[python])} for python in pythons]
    for row in rows:
        print(
            f"{row['python']}: first token {row['first_token_ms']} ms "
            f"({row['prompt_tokens']}-token prompt), decode {row['decode_tok_s']} tok/s\n"
            f"    {row['system_info']}"
        )
    RESULTS.parent.mkdir(exist_ok=True)
    new = not RESULTS.exists()
    with RESULTS.open("a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        if new:
            writer.writeheader()
        writer.writerows(rows)


# -- the model as a neighbour -----------------------------------------------------------------

#: the model under load: requests back to back until a line arrives on stdin
SERVE = r"""
import json, resource, sys, threading, time
import llama_cpp
from llama_cpp import Llama

path, max_tokens, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
llama = Llama(model_path=path, n_ctx=4096, seed=7, verbose=False)  # as agentkit's worker
filler = " ".join(f"Fact {i}: the harbour light is checked every evening." for i in range(20))
prompt = filler + " Now write a long story about the harbour."
stop = threading.Event()
# CPU and wall seconds by phase: the prompt (to the first token), generation, the pause after
spent = {f"{kind}_{phase}": 0.0
         for kind in ("cpu", "wall") for phase in ("prompt", "decode", "idle")}

def clock():
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
    return usage.ru_utime + usage.ru_stime, time.perf_counter()

def charge(phase, since):
    cpu, wall = clock()
    spent[f"cpu_{phase}"] += cpu - since[0]
    spent[f"wall_{phase}"] += wall - since[1]
    return cpu, wall

def request(limit):
    if stop.is_set():
        return False
    llama.reset()  # no prefix reuse: every request evaluates the whole prompt
    mark, phase = clock(), "prompt"
    for _ in llama.create_completion(prompt, max_tokens=limit, temperature=0.0, stream=True,
                                     repeat_penalty=1.3):
        mark, phase = charge(phase, mark), "decode"
        if stop.is_set():  # seen between tokens: the prompt phase is always whole
            return False
    return True

request(8)  # warm-up: weights paged in
info = llama_cpp.llama_print_system_info()
for key in spent:
    spent[key] = 0.0
llama_cpp.llama_perf_context_reset(llama.ctx)
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
print("ready", flush=True)
start = clock()
completed = 0
while request(max_tokens):
    completed += 1
    mark = clock()
    stop.wait(pause)  # idle between turns: threads that spin while waiting show up here
    charge("idle", mark)
end = clock()
perf = llama_cpp.llama_perf_context(llama.ctx)  # llama.cpp's own timings, every decode
print(json.dumps({**spent, "cpu_s": end[0] - start[0], "wall_s": end[1] - start[1],
                  "completed": completed,
                  "prompt_tokens": perf.n_p_eval, "prompt_ms": perf.t_p_eval_ms,
                  "decode_tokens": perf.n_eval, "decode_ms": perf.t_eval_ms,
                  "system_info": info.decode() if isinstance(info, bytes) else str(info)}))
"""

#: the default neighbour: a CPU-bound Python loop, iterations per second over its window
LOOP = r"""
import sys, time
end = time.perf_counter() + float(sys.argv[1])
count = 0
while time.perf_counter() < end:
    for _ in range(10_000):
        pass
    count += 1
print(count * 10_000 / float(sys.argv[1]))
"""


def parse_variant(text: str) -> tuple[str, str, dict[str, str]]:
    """``omp-passive=.venv/bin/python,OMP_WAIT_POLICY=PASSIVE`` → label, python, changes."""
    label, _, rest = text.partition("=")
    python, *pairs = rest.split(",")
    if not label or not python:
        raise SystemExit(f"a variant is LABEL=PYTHON[,VAR=VALUE…], not {text!r}")
    return label, python, dict(pair.partition("=")[::2] for pair in pairs)


def variant_environment(changes: dict[str, str]) -> dict[str, str]:
    # OpenMP's knobs are the variant's alone: none leaks in from the shell running the bench
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    for name, value in changes.items():
        if value:
            env[name] = value
        else:
            env.pop(name, None)
    return env


def run_neighbour(command: list[str] | None, loops: int, seconds: float) -> float:
    """The neighbour's throughput: loop iterations/s (summed), or 1/wall-seconds of *command*
    (``loops=0``: none, *seconds* of the model alone)."""
    if command is not None:
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, timeout=3600)
        return 1 / (time.perf_counter() - started)
    if not loops:  # no neighbour: the model alone (beside whatever else the machine runs)
        time.sleep(seconds)
        return 0.0
    children = [
        subprocess.Popen(
            [sys.executable, "-c", LOOP, str(seconds)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(loops)
    ]
    return sum(float(child.communicate()[0]) for child in children)


def neighbour_cell(
    python: str | None,
    *,
    env: dict[str, str],
    model: str,
    command: list[str] | None,
    loops: int,
    seconds: float,
) -> dict[str, Any]:
    """One cell: the model (unless *python* is None) serving while the neighbour runs."""
    load = os.getloadavg()[0]
    if python is None:
        return {"load": load, "neighbour": run_neighbour(command, loops, seconds)}
    server = subprocess.Popen(
        [python, "-c", SERVE, model, "64", "0.5"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    if server.stdout.readline().strip() != "ready":
        raise SystemExit(f"{python}: the model did not load")
    try:
        rate = run_neighbour(command, loops, seconds)
    finally:
        server.stdin.write("stop\n")
        server.stdin.flush()
    report: dict[str, Any] = json.loads(server.stdout.read().strip().splitlines()[-1])
    server.wait(timeout=120)
    return {"load": load, "neighbour": rate, **report}


def cell_summary(run: dict[str, Any]) -> str:
    def rate(tokens: int, ms: float) -> str:
        return f"{1000 * tokens / ms:.1f}" if ms else "-"

    return (
        f"load {run['load']:.2f}, {run['completed']} requests, prompt "
        f"{rate(run['prompt_tokens'], run['prompt_ms'])} tok/s, decode "
        f"{rate(run['decode_tokens'], run['decode_ms'])} tok/s, model {run['cpu_s']:.1f} CPU-s "
        f"in {run['wall_s']:.1f} s (idle {run['cpu_idle']:.2f} in {run['wall_idle']:.1f}), "
        f"neighbour {run['neighbour']:.4g}"
    )


def neighbour_row(
    *,
    stamp: str,
    label: str,
    python: str,
    changes: dict[str, str],
    neighbour: str,
    runs: list[dict[str, Any]],
    alone: list[dict[str, Any]],
) -> dict[str, object]:
    """A variant's medians over rounds; its neighbour's throughput against the same round's
    neighbour alone."""

    def median(values: list[float], digits: int) -> float | str:
        return round(statistics.median(values), digits) if values else ""

    served = [run for run in runs if "cpu_s" in run]
    timed = [run for run in served if run["decode_ms"] and run["wall_idle"]]
    row: dict[str, object] = {
        "run": stamp,
        "variant": label,
        "python": python,
        "env": " ".join(f"{name}={value}" for name, value in changes.items()),
        "openmp": int("OPENMP = 1" in served[0]["system_info"]) if served else "",
        "neighbour": neighbour,
        "rounds": len(runs),
        "load_1min": median([run["load"] for run in runs], 2),
        "requests": sum(run["completed"] for run in served),
        "prompt_tok_s": median([1000 * r["prompt_tokens"] / r["prompt_ms"] for r in served], 1),
        "decode_tok_s": median([1000 * r["decode_tokens"] / r["decode_ms"] for r in timed], 1),
        "cpu_ms_per_prompt_token": median(
            [1000 * r["cpu_prompt"] / r["prompt_tokens"] for r in served], 2
        ),
        "cpu_ms_per_decode_token": median(
            [1000 * r["cpu_decode"] / r["decode_tokens"] for r in timed], 2
        ),
        "idle_cores": median([r["cpu_idle"] / r["wall_idle"] for r in timed], 3),
        "model_cores": median([r["cpu_s"] / r["wall_s"] for r in served], 2),
        "neighbour_rate": median([run["neighbour"] for run in runs], 4),
        "neighbour_ratio": median(
            [
                run["neighbour"] / base["neighbour"]
                for run, base in zip(runs, alone, strict=True)
                if base["neighbour"]
            ],
            3,
        ),
        # the model's own throughput beside the neighbour: whole requests only
        "requests_per_min": median([60 * r["completed"] / r["wall_s"] for r in served], 2),
    }
    row["neighbour_s_lost_per_request"] = lost_per_request(row)
    return row


def lost_per_request(row: dict[str, object]) -> float | str:
    """Seconds of the neighbour's work (at its speed alone) lost per request the model
    finished: a variant that does more in the same time is charged per unit of its work."""
    ratio, rate = row["neighbour_ratio"], row["requests_per_min"]
    if not isinstance(ratio, float) or not isinstance(rate, float) or not rate:
        return ""
    return round(60 * (1 - ratio) / rate, 2)


def write_neighbour_results(
    stamp: str, rows: list[dict[str, object]], cells: dict[str, list[dict[str, Any]]]
) -> None:
    NEIGHBOUR_RESULTS.parent.mkdir(exist_ok=True)
    with NEIGHBOUR_CELLS.open("a") as file:  # every cell, for a second look at the medians
        for label, runs in cells.items():
            for round_, run in enumerate(runs):
                cell = {k: v for k, v in run.items() if k != "system_info"}
                file.write(json.dumps({"run": stamp, "variant": label, "round": round_, **cell}))
                file.write("\n")
    new = not NEIGHBOUR_RESULTS.exists()
    with NEIGHBOUR_RESULTS.open("a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        if new:
            writer.writeheader()
        writer.writerows(rows)


def neighbour_main(argv: list[str]) -> None:
    args = [a for a in argv if a != "--neighbour"]
    command: list[str] | None = None
    loops, seconds, rounds = 2, 30.0, 5
    variants: list[tuple[str, str, dict[str, str]]] = []
    while args:
        arg = args.pop(0)
        if arg == "--cmd":
            command = shlex.split(args.pop(0))
        elif arg == "--loops":
            loops = int(args.pop(0))
        elif arg == "--seconds":
            seconds = float(args.pop(0))
        elif arg == "--rounds":
            rounds = int(args.pop(0))
        else:
            variants.append(parse_variant(arg))
    if not variants:
        raise SystemExit(__doc__)
    model = gguf_path()
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    setting: dict[str, Any] = {
        "model": model,
        "command": command,
        "loops": loops,
        "seconds": seconds,
    }
    cells: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in variants}
    alone: list[dict[str, Any]] = []
    for round_ in range(rounds):
        alone.append(neighbour_cell(None, env={}, **setting))
        shift = round_ % len(variants)
        for label, python, changes in variants[shift:] + variants[:shift]:
            env = variant_environment(changes)
            cells[label].append(neighbour_cell(python, env=env, **setting))
            print(
                f"round {round_ + 1}/{rounds} {label}: {cell_summary(cells[label][-1])}, "
                f"alone {alone[-1]['neighbour']:.4g}",
                file=sys.stderr,
                flush=True,
            )
    neighbour = (
        " ".join(command)
        if command
        else f"{loops} python loop(s) x {seconds:g} s"
        if loops
        else f"none: the model alone, {seconds:g} s"
    )
    common: dict[str, Any] = {"stamp": stamp, "neighbour": neighbour, "alone": alone}
    rows = [neighbour_row(label="alone", python="", changes={}, runs=alone, **common)]
    rows += [
        neighbour_row(label=label, python=python, changes=changes, runs=cells[label], **common)
        for label, python, changes in variants
    ]
    print(f"neighbour: {neighbour}; {rounds} rounds, interleaved; medians over rounds")
    for row in rows:
        print(
            f"  {row['variant']:<12} load {row['load_1min']:<5} "
            f"prompt {row['prompt_tok_s']!s:>6} tok/s {row['cpu_ms_per_prompt_token']!s:>5} "
            f"CPU-ms/tok  decode {row['decode_tok_s']!s:>5} tok/s "
            f"{row['cpu_ms_per_decode_token']!s:>5} CPU-ms/tok  idle {row['idle_cores']!s:>5} "
            f"cores  model {row['model_cores']!s:>4} cores "
            f"{row['requests_per_min']!s:>5} requests/min  neighbour x{row['neighbour_ratio']}"
            + (
                f" ({row['neighbour_s_lost_per_request']} s of its work lost per request)"
                if row["neighbour_s_lost_per_request"] != ""
                else ""
            )
        )
    write_neighbour_results(stamp, rows, {"alone": alone, **cells})


if __name__ == "__main__":
    main()
